//! Resource usage from the OS.

/// A `getrusage(RUSAGE_SELF)` snapshot.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// Peak resident set, bytes.
    pub max_rss_bytes: u64,
    /// Minor faults so far.
    pub minflt: u64,
    /// Major faults so far.
    pub majflt: u64,
}

/// Resource usage of this process.
pub fn usage() -> Usage {
    // SAFETY: getrusage writes a plain struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0;
    if !ok {
        return Usage::default();
    }
    Usage {
        // Linux reports ru_maxrss in KiB.
        max_rss_bytes: ru.ru_maxrss as u64 * 1024,
        minflt: ru.ru_minflt as u64,
        majflt: ru.ru_majflt as u64,
    }
}

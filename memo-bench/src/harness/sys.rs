//! Resource usage from the OS: the process's, and the calling thread's CPU time.

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

/// CPU time this thread has run so far, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`): time
/// waiting for a CPU or blocked is not counted, so it moves less with the machine's load
/// than wall time does. 0 where the clock cannot be read.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Resets the process's peak resident set (`VmHWM`, and with it `getrusage`'s
/// `ru_maxrss`) to its current resident set, so that a later [`usage`] reports the peak
/// since now. `false` where the OS does not allow it (Linux before 4.0, other systems,
/// or `/proc` not writable): the peak then stays the whole process's.
pub fn reset_peak_rss() -> bool {
    cfg!(target_os = "linux") && std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's CPU clock counts work, not sleep.
    #[test]
    fn thread_cpu_time_counts_work_not_sleep() {
        let t0 = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let slept = thread_cpu_ns() - t0;
        let t1 = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() - t1 < 20_000_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        assert!(slept < 20_000_000, "{slept} ns of CPU while asleep");
        assert!(t0 > 0);
    }

    /// A freed quarter-gigabyte stays in the peak until it is reset; after the reset the
    /// peak is what is resident now.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_peak_resets_to_what_is_resident() {
        const BIG: usize = 256 << 20;
        let mut v = vec![0u8; BIG];
        for page in v.chunks_mut(4096) {
            page[0] = 1; // each page resident
        }
        std::hint::black_box(&v);
        drop(v);
        let before = usage().max_rss_bytes;
        assert!(before >= BIG as u64, "peak {before}");
        assert!(reset_peak_rss(), "/proc/self/clear_refs takes 5");
        let after = usage().max_rss_bytes;
        assert!(
            after + (BIG as u64) / 2 < before,
            "peak {after} after reset, {before} before"
        );
    }
}

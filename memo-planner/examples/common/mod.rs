//! What the planning examples and memo-alloc's examples share (memo-alloc's include this
//! file by its path).

/// A field of /proc/self/status, in KiB (0 when it cannot be read).
pub fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

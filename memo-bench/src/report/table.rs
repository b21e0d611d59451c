//! The aligned text table printed on stdout.

use std::fmt::Write;

use super::Report;

/// Formats the report as an aligned table, one block per (workload, threads, compute).
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let header = format!(
        "{:<32} {:>3} {:<14} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>6} {:>8} {:>7} {:>7}",
        "workload",
        "thr",
        "allocator",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "pass/s",
        "RSS MB",
        "flt/pass",
        "slab%",
        "misses",
        "p50/memo",
        "p99/memo"
    );
    let _ = writeln!(s, "{header}");
    let _ = writeln!(s, "{}", "-".repeat(header.len()));
    let mut last = None;
    for c in &r.cells {
        let key = (c.workload.clone(), c.threads, c.compute.to_bits());
        if last.as_ref().is_some_and(|l| l != &key) {
            let _ = writeln!(s);
        }
        last = Some(key);
        let wl = if c.compute == 1.0 {
            c.workload.clone()
        } else {
            format!("{} c{}", c.workload, c.compute)
        };
        let slab = c
            .slab_share
            .map_or("-".to_string(), |v| format!("{:.1}", 100.0 * v));
        let misses = c
            .misses_by_reason
            .as_ref()
            .map_or("-".to_string(), |m| m.values().sum::<u64>().to_string());
        let ratio = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
        let _ = writeln!(
            s,
            "{:<32} {:>3} {:<14} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>8.1} {:>8.1} {:>8.1} {:>6} {:>8} {:>7} {:>7}",
            wl,
            c.threads,
            c.allocator,
            c.p50_us / 1e3,
            c.p90_us / 1e3,
            c.p99_us / 1e3,
            c.max_us / 1e3,
            c.passes_per_sec,
            c.peak_rss_bytes as f64 / (1 << 20) as f64,
            c.minflt_per_pass,
            slab,
            misses,
            ratio(c.p50_vs_memo),
            ratio(c.p99_vs_memo),
        );
    }
    s
}

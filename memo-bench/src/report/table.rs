//! The aligned text table printed on stdout.

use std::fmt::Write;

use super::{Cell, Report};
use crate::stats::Verdict;

/// What the RSS and memo columns mean (printed under the header).
pub const LEGEND: &str = "RSS MiB = peak resident size of the cell's process (warm-up, \
profiling and planning included); meas MiB = its peak during the measured passes. \
memo cells: slab%pt = slab hits / allocations on the pass threads \
(memo-alloc); slab%all = slab hits / allocations during passes on any thread; allocs/pass \
= allocations during a pass, all threads; helper% = of which on other threads than the pass's. \
cpu ms = median CPU time of the pass's thread per pass; p50 95% = the interval of p50/memo \
(repetitions resampled); v = memo's verdicts on p50 (wall), on cpu ms and on p99 (wall): + \
ahead (memo faster), = level (the interval spans 1), - behind";

/// Bytes as a number of MiB, for the table's one-decimal columns (`memo_planner::text::mib`
/// formats with two decimals and separators, for text).
fn to_mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// memo's verdicts on a cell, wall p50, thread CPU p50, then wall p99: `+` ahead, `=`
/// level, `-` behind (`-` alone for memo's own cell).
fn verdicts(c: &Cell) -> String {
    let sign = |v: Verdict| match v {
        Verdict::Ahead => '+',
        Verdict::Level => '=',
        Verdict::Behind => '-',
    };
    match c.vs_memo {
        None => "-".to_string(),
        Some(v) => {
            let cpu = v.cpu_p50.map_or(' ', |r| sign(r.verdict));
            format!("{}{cpu}{}", sign(v.p50.verdict), sign(v.p99.verdict))
        }
    }
}

/// Formats the report as an aligned table, one block per (workload, threads, compute).
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let header = format!(
        "{:<32} {:>3} {:<14} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>10} {:>7} {:>8} {:>8} {:>9} {:>11} {:>3}",
        "workload",
        "thr",
        "allocator",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "pass/s",
        "RSS MiB",
        "meas MiB",
        "flt/pass",
        "slab%pt",
        "slab%all",
        "allocs/pass",
        "helper%",
        "p50/memo",
        "p99/memo",
        "cpu ms",
        "p50 95%",
        "v"
    );
    let _ = writeln!(s, "{header}");
    let _ = writeln!(s, "{}", "-".repeat(header.len()));
    let _ = writeln!(s, "{LEGEND}");
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
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}", 100.0 * v));
        let during = c
            .pass_thread_allocations_per_pass
            .zip(c.helper_allocations_per_pass)
            .map(|(p, h)| (p + h, h));
        let allocs = during.map_or("-".to_string(), |(n, _)| format!("{n:.0}"));
        let helper = pct(during.map(|(n, h)| if n > 0.0 { h / n } else { 0.0 }));
        let ratio = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
        let _ = writeln!(
            s,
            "{:<32} {:>3} {:<14} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>8.1} {:>8.1} {:>8} {:>8.1} {:>7} {:>8} {:>10} {:>7} {:>8} {:>8} {:>9} {:>11} {:>3}",
            wl,
            c.threads,
            c.allocator,
            c.p50_us / 1e3,
            c.p90_us / 1e3,
            c.p99_us / 1e3,
            c.max_us / 1e3,
            c.passes_per_sec,
            to_mib(c.peak_rss_bytes),
            c.measured_peak_rss_bytes
                .map_or("-".to_string(), |b| format!("{:.1}", to_mib(b))),
            c.minflt_per_pass,
            pct(c.slab_share_pass_thread),
            pct(c.slab_share_all_threads),
            allocs,
            helper,
            ratio(c.p50_vs_memo),
            ratio(c.p99_vs_memo),
            c.cpu_p50_us
                .map_or("-".to_string(), |v| format!("{:.3}", v / 1e3)),
            c.vs_memo
                .map_or("-".to_string(), |v| format!("{:.2}-{:.2}", v.p50.lo, v.p50.hi)),
            verdicts(c),
        );
    }
    s
}

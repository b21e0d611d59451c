//! The service benchmark's table (with memo's ratios to jemalloc) and its plot.

use std::fmt::Write;

use super::bench::{ServiceCell, ServiceReport};
use crate::report::plot::{self, LinePlot, Series};

/// The aligned table, then one line per client count comparing memo with jemalloc.
pub fn table(r: &ServiceReport) -> String {
    let s = &r.setup;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "service: BERT-base encoder over HTTP (tokio + axum), buckets {:?}, {} tokio workers, \
         {:.0} s warm-up + {:.0} s measured per cell, median of {} repetitions, {} CPUs",
        s.buckets, s.workers, s.warmup_s, s.duration_s, s.reps, r.cpus
    );
    let _ = writeln!(
        out,
        "{:<15} {:>7} {:>9} {:>9} {:>9} {:>12} {:>10} {:>7}",
        "allocator", "clients", "req/s", "p50 ms", "p99 ms", "peak RSS MiB", "slab share", "errors"
    );
    for c in &r.cells {
        let share = c.slab_share.map_or("-".to_string(), |v| format!("{v:.3}"));
        let _ = writeln!(
            out,
            "{:<15} {:>7} {:>9.1} {:>9.2} {:>9.2} {:>12.1} {:>10} {:>7}",
            c.allocator,
            c.clients,
            c.requests_per_sec,
            c.p50_us as f64 / 1e3,
            c.p99_us as f64 / 1e3,
            c.peak_rss_bytes as f64 / (1 << 20) as f64,
            share,
            c.errors
        );
    }
    for m in r.cells.iter().filter(|c| c.allocator == "memo") {
        let Some(j) = find(r, "jemalloc", m.clients) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{} clients: jemalloc/memo p50 {:.2}, p99 {:.2}, req/s memo/jemalloc {:.2}; peak RSS memo/jemalloc {:.2}",
            m.clients,
            ratio(j.p50_us as f64, m.p50_us as f64),
            ratio(j.p99_us as f64, m.p99_us as f64),
            ratio(m.requests_per_sec, j.requests_per_sec),
            ratio(m.peak_rss_bytes as f64, j.peak_rss_bytes as f64),
        );
    }
    let _ = writeln!(
        out,
        "answers agree across allocators: {}",
        if r.checksums_agree { "yes" } else { "NO" }
    );
    out
}

fn find<'a>(r: &'a ServiceReport, allocator: &str, clients: usize) -> Option<&'a ServiceCell> {
    r.cells
        .iter()
        .find(|c| c.allocator == allocator && c.clients == clients)
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// Request latency (p50 solid, p99 dashed, milliseconds) against concurrent clients, one
/// colour per allocator, as SVG.
pub fn plot(r: &ServiceReport) -> String {
    let mut clients: Vec<usize> = r.cells.iter().map(|c| c.clients).collect();
    clients.sort_unstable();
    clients.dedup();
    let x = |n: usize| clients.iter().position(|&v| v == n).unwrap_or(0);
    let ms = |us: u64| us as f64 / 1e3;
    let mut series: Vec<Series> = Vec::new();
    for c in &r.cells {
        if series.iter().any(|s| s.name == c.allocator) {
            continue;
        }
        let mut cells: Vec<&ServiceCell> = r
            .cells
            .iter()
            .filter(|o| o.allocator == c.allocator)
            .collect();
        cells.sort_by_key(|c| c.clients);
        series.push(Series {
            name: c.allocator.clone(),
            p50: cells.iter().map(|c| (x(c.clients), ms(c.p50_us))).collect(),
            p99: cells.iter().map(|c| (x(c.clients), ms(c.p99_us))).collect(),
        });
    }
    plot::render(&LinePlot {
        title: "service: request latency, ms (p50 solid, p99 dashed)".into(),
        x_labels: clients.iter().map(usize::to_string).collect(),
        x_desc: "concurrent clients".into(),
        y_desc: "ms".into(),
        y_max: r.cells.iter().map(|c| ms(c.p99_us)).fold(1.0, f64::max) * 1.1,
        y_decimals: 1,
        reference: None,
        markers: false,
        series,
    })
}

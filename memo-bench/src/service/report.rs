//! The service benchmark's table (with memo's ratios to jemalloc) and its plot.

use std::fmt::Write;

use super::bench::{ServiceCell, ServiceReport};
use crate::report::svg::{self, color};

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
/// colour per allocator.
pub fn plot(r: &ServiceReport) -> String {
    let (w, h) = (640.0, 400.0);
    let (ml, mr, mt, mb) = (60.0, 150.0, 40.0, 50.0);
    let mut clients: Vec<usize> = r.cells.iter().map(|c| c.clients).collect();
    clients.sort_unstable();
    clients.dedup();
    let ymax = r
        .cells
        .iter()
        .map(|c| c.p99_us as f64 / 1e3)
        .fold(1.0, f64::max)
        * 1.1;
    let x = |n: usize| {
        let i = clients.iter().position(|&v| v == n).unwrap_or(0) as f64;
        ml + (w - ml - mr) * i / (clients.len().max(2) - 1) as f64
    };
    let y = |v: f64| mt + (h - mt - mb) * (1.0 - v / ymax);
    let mut s = String::new();
    svg::open(
        &mut s,
        (w, h),
        "service: request latency, ms (p50 solid, p99 dashed)",
    );
    for i in 0..=5 {
        let v = ymax * i as f64 / 5.0;
        svg::grid_line(&mut s, (ml, w - mr), y(v), &format!("{v:.1}"));
    }
    for &n in &clients {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{n}</text>"#,
            x(n),
            h - mb + 18.0
        );
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">concurrent clients</text>"#,
        ml + (w - ml - mr) / 2.0,
        h - 10.0
    );
    let mut names: Vec<&str> = Vec::new();
    for c in &r.cells {
        if !names.contains(&c.allocator.as_str()) {
            names.push(&c.allocator);
        }
    }
    for (li, name) in names.iter().enumerate() {
        let col = color(name);
        let mut series: Vec<&ServiceCell> =
            r.cells.iter().filter(|c| c.allocator == *name).collect();
        series.sort_by_key(|c| c.clients);
        for (dash, us) in [
            ("", (|c: &ServiceCell| c.p50_us) as fn(&ServiceCell) -> u64),
            ("6,4", |c: &ServiceCell| c.p99_us),
        ] {
            let pts: Vec<String> = series
                .iter()
                .map(|c| format!("{:.1},{:.1}", x(c.clients), y(us(c) as f64 / 1e3)))
                .collect();
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{col}" stroke-width="2" stroke-dasharray="{dash}" points="{}"/>"#,
                pts.join(" ")
            );
        }
        svg::legend_entry(&mut s, (w - mr + 10.0, mt + 18.0 * li as f64), col, name);
    }
    s.push_str("</svg>\n");
    s
}

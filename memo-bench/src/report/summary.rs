//! The summary printed under the table: geometric means of the ratios by threads, memo's
//! verdicts counted per allocator, memo against `static` (the limit of a planned
//! allocator), how tight the intervals were, and the run's checks.

use std::fmt::Write;

use super::compare::VsMemo;
use super::{Cell, Report};
use crate::stats::{Interval, Verdict};

/// The geometric mean of positive ratios.
pub fn geometric_mean(rs: &[f64]) -> f64 {
    (rs.iter().map(|r| r.ln()).sum::<f64>() / rs.len() as f64).exp()
}

/// The `q`-quantile of `v` (nearest rank; `v` reordered), 0 when empty.
fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The whole summary.
pub fn render(rep: &Report) -> String {
    let mut s = geometric_means(rep);
    s += &verdicts(rep);
    s += &limit(rep);
    s += &tightness(rep);
    let _ = writeln!(
        s,
        "checksums agree across allocators: {}; jemalloc-tuned oversize_threshold verified: {}; load average {:.1} on {} CPUs; {:.0} s",
        if rep.checksums_agree { "yes" } else { "NO" },
        match rep.jemalloc_tuned_verified {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "n/a",
        },
        rep.load_average.unwrap_or(0.0),
        rep.cpus,
        rep.wall_s
    );
    s
}

/// The allocators in the order they first appear, and the thread counts, sorted.
fn names_and_threads(rep: &Report) -> (Vec<&str>, Vec<usize>) {
    let mut names: Vec<&str> = Vec::new();
    for c in &rep.cells {
        if !names.contains(&c.allocator.as_str()) {
            names.push(&c.allocator);
        }
    }
    let mut threads: Vec<usize> = rep.cells.iter().map(|c| c.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    (names, threads)
}

fn geometric_means(rep: &Report) -> String {
    let mut s = String::new();
    let (names, threads) = names_and_threads(rep);
    let _ = writeln!(
        s,
        "geometric mean of p50 / memo's p50 (>1: memomalloc faster), by threads:"
    );
    for name in names {
        let _ = write!(s, "  {name:<14}");
        for &t in &threads {
            let rs: Vec<f64> = rep
                .cells
                .iter()
                .filter(|c| c.allocator == name && c.threads == t)
                .filter_map(|c| c.p50_vs_memo)
                .collect();
            if !rs.is_empty() {
                let _ = write!(s, "  x{t}: {:.2}", geometric_mean(&rs));
            }
        }
        let _ = writeln!(s);
    }
    s
}

/// memo's verdicts per allocator: cells ahead/level/behind for each ratio.
fn verdicts(rep: &Report) -> String {
    let mut s = String::new();
    if rep.verdicts.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "memo's verdicts, cells ahead/level/behind (95% intervals over {} repetition{}; ahead: memo faster, level: the interval spans 1):",
        rep.reps,
        if rep.reps == 1 { ", within one process only" } else { "s" }
    );
    let stats = VsMemo::STATISTICS;
    let _ = write!(s, "  {:<14}", "vs");
    for st in stats {
        let _ = write!(s, " {st:>10}");
    }
    let _ = writeln!(s);
    let mut allocators: Vec<&str> = Vec::new();
    for v in &rep.verdicts {
        if !allocators.contains(&v.allocator.as_str()) {
            allocators.push(&v.allocator);
        }
    }
    for a in allocators {
        let _ = write!(s, "  {a:<14}");
        for st in stats {
            let cell = rep
                .verdicts
                .iter()
                .find(|v| v.allocator == a && v.statistic == st)
                .map_or("-".to_string(), |v| {
                    format!("{}/{}/{}", v.ahead, v.level, v.behind)
                });
            let _ = write!(s, " {cell:>10}");
        }
        let _ = writeln!(s);
    }
    s
}

/// memo / static where static applies: the geometric mean by threads, how many cells
/// are above 1.05 with their interval, and static behind memo (a harness fault).
fn limit(rep: &Report) -> String {
    let mut s = String::new();
    let cells: Vec<(&Cell, Interval)> = rep
        .cells
        .iter()
        .filter_map(|c| Some((c, c.memo_over_static_p50?)))
        .collect();
    if cells.is_empty() {
        return s;
    }
    let (_, threads) = names_and_threads(rep);
    let _ = write!(
        s,
        "memo's p50 / static's p50 (1.00: memo at the limit of a planned allocator):"
    );
    for &t in &threads {
        let rs: Vec<f64> = cells
            .iter()
            .filter(|(c, _)| c.threads == t)
            .map(|(_, i)| i.ratio)
            .collect();
        if !rs.is_empty() {
            let _ = write!(s, "  x{t}: {:.2}", geometric_mean(&rs));
        }
    }
    let _ = writeln!(s);
    let above = cells.iter().filter(|(_, i)| i.lo > 1.05).count();
    // static / memo above 1 with its whole interval: static, the limit, behind memo.
    let faults: Vec<String> = cells
        .iter()
        .filter(|(_, i)| static_behind_memo(i))
        .map(|(c, i)| {
            format!(
                "{} x{} {:.3} [{:.3}, {:.3}]",
                c.workload, c.threads, i.ratio, i.lo, i.hi
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "  memo / static above 1.05 outside its interval in {above} of {} cells; static behind memo outside its interval in {}{}",
        cells.len(),
        faults.len(),
        if faults.is_empty() {
            String::new()
        } else {
            format!(" (a fault of the harness, or the 2.5% a 95% interval leaves on each side): {}", faults.join("; "))
        }
    );
    s
}

/// Whether `memo_over_static` (memo's p50 / static's, with its interval) shows static
/// slower than memo: the interval of static / memo lies above 1, memo's verdict "ahead".
pub fn static_behind_memo(memo_over_static: &Interval) -> bool {
    Verdict::of(&memo_over_static.reciprocal()) == Verdict::Ahead
}

/// The relative half-widths of the p50 intervals (wall and CPU): what a run of this many
/// repetitions can tell apart.
fn tightness(rep: &Report) -> String {
    let mut wall: Vec<f64> = Vec::new();
    let mut cpu: Vec<f64> = Vec::new();
    for v in rep.cells.iter().filter_map(|c| c.vs_memo.as_ref()) {
        wall.push(v.p50.interval().relative_half_width());
        if let Some(c) = v.cpu_p50 {
            cpu.push(c.interval().relative_half_width());
        }
    }
    if wall.is_empty() {
        return String::new();
    }
    let pct = |v: &mut Vec<f64>, q| 100.0 * quantile(v, q);
    format!(
        "p50 interval half-widths: wall median {:.1}%, 90th percentile {:.1}%; thread CPU median {:.1}%, 90th percentile {:.1}%\n",
        pct(&mut wall, 0.5),
        pct(&mut wall, 0.9),
        pct(&mut cpu, 0.5),
        pct(&mut cpu, 0.9)
    )
}

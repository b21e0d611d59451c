//! The ratio plot of one workload: pass latency of each allocator over memomalloc's
//! against threads (like Figure 4.1 of the MemoMalloc thesis).

use super::plot::{self, LinePlot, Series};
use super::Cell;

/// Ratios above this are drawn at it.
const RATIO_CAP: f64 = 20.0;

/// A plot of `p50(allocator) / p50(memo)` (solid) and the p99 ratio (dashed) against
/// threads for the cells of one workload, as SVG. `cpus` marks where threads oversubscribe.
pub fn ratio_plot(workload: &str, cells: &[&Cell], cpus: usize) -> String {
    let mut threads: Vec<usize> = cells.iter().map(|c| c.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let ratios = cells
        .iter()
        .flat_map(|c| [c.p50_vs_memo, c.p99_vs_memo])
        .flatten();
    let x = |t: usize| threads.iter().position(|&v| v == t).unwrap_or(0);
    let mut series: Vec<Series> = Vec::new();
    for c in cells {
        let i = match series.iter().position(|s| s.name == c.allocator) {
            Some(i) => i,
            None => {
                series.push(Series {
                    name: c.allocator.clone(),
                    ..Series::default()
                });
                series.len() - 1
            }
        };
        if let Some(v) = c.p50_vs_memo {
            series[i].p50.push((x(c.threads), v));
        }
        if let Some(v) = c.p99_vs_memo {
            series[i].p99.push((x(c.threads), v));
        }
    }
    for s in &mut series {
        s.p50.sort_by_key(|p| p.0);
        s.p99.sort_by_key(|p| p.0);
    }
    plot::render(&LinePlot {
        title: format!("{workload}: pass latency / memomalloc's (p50 solid, p99 dashed)"),
        x_labels: threads
            .iter()
            .map(|&t| format!("{t}{}", if t > cpus { "*" } else { "" }))
            .collect(),
        x_desc: format!("threads (* = more than the {cpus} CPUs)"),
        y_desc: "ratio (>1: memomalloc faster)".into(),
        y_max: ratios.fold(1.5f64, f64::max).min(RATIO_CAP) * 1.1,
        y_decimals: 2,
        reference: Some(1.0),
        markers: true,
        series,
    })
}

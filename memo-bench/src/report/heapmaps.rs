//! Heap maps of each workload's plan, from the trace its first memo cell wrote.
//!
//! A map is drawn from the planner's portfolio (its heuristics and iterated greedy) without
//! the final exact search: the search may spend its whole node budget on a trace of
//! thousands of buffers to gain a fraction of a per cent of the slab, which a picture does
//! not show, and the run would wait for it after its last cell.

use std::path::{Path, PathBuf};

use memo_planner::offsets::best::{self, BestOptions};
use memo_planner::{render_svg, HeapmapOptions};

/// Renders `<out>/heapmap-<stem>.svg` for every `*.1.trace.json` in `trace_dir`; returns
/// the files written.
pub fn render_all(trace_dir: &Path, out: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(trace_dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".1.trace.json"))
        .collect();
    paths.sort();
    let mut written = Vec::new();
    for p in paths {
        let trace = match memo_alloc::files::read_trace(&p) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("memo-bench: heap map skipped: {e}");
                continue;
            }
        };
        let (problem, _) = trace.to_problem();
        let plan = best::portfolio(&problem, &BestOptions::default());
        let opts = HeapmapOptions {
            title: format!(
                "{}: {} planned buffers, slab {:.1} MiB",
                trace.key,
                problem.len(),
                plan.height(&problem) as f64 / (1 << 20) as f64
            ),
            ..HeapmapOptions::default()
        };
        let svg = render_svg(&problem, &plan, &opts);
        let file = out.join(format!(
            "heapmap-{}.svg",
            memo_alloc::files::file_stem(&trace.key)
        ));
        if std::fs::write(&file, svg).is_ok() {
            written.push(file);
        }
    }
    written
}

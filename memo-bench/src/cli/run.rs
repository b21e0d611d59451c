//! The benchmark's run in the parent process (the table, the summary, the report
//! directory) and `list`.

use std::path::Path;
use std::time::Instant;

use super::selection::{schedule, workloads, RunArgs, Selection};
use crate::harness::parent;
use crate::report::{self, heapmaps, ratio_plot::ratio_plot, summary, table, Format};
use crate::runner::Workload;
use crate::stats::Bootstrap;
use crate::workloads::Spec;

/// `list`: the selected workloads with their ops, allocations and bytes per pass.
pub fn list(sel: &Selection) -> i32 {
    let ws = match workloads(sel) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("memo-bench: {e}");
            return 2;
        }
    };
    println!(
        "{:<36} {:>6} {:>12} {:>12} {:>12}",
        "workload", "ops", "allocs/pass", "MB/pass", "peak MB"
    );
    for w in ws {
        let spec = match Spec::parse(&w) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("memo-bench: {e}");
                return 2;
            }
        };
        match Workload::build(&spec) {
            Ok(wl) => {
                let (n, b) = wl.allocation_profile();
                let (ops, peak) = wl.ops_and_peak();
                println!(
                    "{:<36} {:>6} {:>12} {:>12.1} {:>12.1}",
                    w,
                    ops,
                    n,
                    b as f64 / 1e6,
                    peak as f64 / 1e6
                );
            }
            Err(e) => eprintln!("{w}: {e}"),
        }
    }
    0
}

/// The benchmark: runs every cell in child processes, prints the table (or JSON) and
/// writes the report directory. `Ok(false)` when checksums disagree or jemalloc-tuned did
/// not get its configuration.
pub fn run_parent(args: &RunArgs) -> Result<bool, String> {
    let t0 = Instant::now();
    let sched = schedule(args)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.format == Format::Text {
        let max_t = sched.groups.iter().map(|g| g.threads).max().unwrap_or(1);
        println!(
            "memo-bench: {} cells ({} points x {} allocators x {} repetitions) on {cpus} CPUs{}",
            sched.groups.len() * sched.allocators.len() * sched.reps,
            sched.groups.len(),
            sched.allocators.len(),
            sched.reps,
            if max_t > cpus {
                format!("; thread counts above {cpus} are oversubscribed")
            } else {
                String::new()
            }
        );
    }
    if let Some(d) = &sched.trace_dir {
        let _ = std::fs::remove_dir_all(d);
    }
    let runs = parent::run(&sched)?;
    let boot = Bootstrap {
        seed: sched.seed,
        ..Bootstrap::default()
    };
    let mut rep = report::aggregate(&sched.groups, &sched.allocators, &runs, &boot);
    rep.wall_s = t0.elapsed().as_secs_f64();
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?
        ),
        Format::Text => {
            print!("{}", table::render(&rep));
            println!();
            print!("{}", summary::render(&rep));
        }
    }
    if !args.no_report {
        write_report(&args.report_dir, &rep, sched.trace_dir.as_deref())?;
        if args.format == Format::Text {
            println!("report: {}", args.report_dir.display());
        }
    }
    if !rep.checksums_agree {
        eprintln!(
            "memo-bench: CHECKSUMS DISAGREE: {}",
            rep.checksum_mismatches.join("; ")
        );
    }
    if rep.jemalloc_tuned_verified == Some(false) {
        eprintln!("memo-bench: jemalloc-tuned did not get oversize_threshold 1 MiB");
    }
    Ok(rep.checksums_agree && rep.jemalloc_tuned_verified != Some(false))
}

/// Writes `report.json`, `table.txt`, one ratio plot per (workload, compute) and the heap
/// maps of the traces in `trace_dir` into `dir`.
fn write_report(dir: &Path, rep: &report::Report, trace_dir: Option<&Path>) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = serde_json::to_string_pretty(rep).map_err(|e| e.to_string())?;
    let w = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{}: {e}", dir.display()))
    };
    w("report.json", &json)?;
    w(
        "table.txt",
        &(table::render(rep) + "\n" + &summary::render(rep)),
    )?;
    let mut workloads: Vec<(String, u64)> = Vec::new();
    for c in &rep.cells {
        let k = (c.workload.clone(), c.compute.to_bits());
        if !workloads.contains(&k) {
            workloads.push(k);
        }
    }
    for (wl, c) in workloads {
        let cells: Vec<&report::Cell> = rep
            .cells
            .iter()
            .filter(|x| x.workload == wl && x.compute.to_bits() == c && x.allocator != "memo")
            .collect();
        let compute = f64::from_bits(c);
        let title = if compute == 1.0 {
            wl.clone()
        } else {
            format!("{wl} c{compute}")
        };
        let name = format!("ratio-{}.svg", memo_alloc::files::file_stem(&title));
        w(&name, &ratio_plot(&title, &cells, rep.cpus))?;
    }
    if let Some(t) = trace_dir {
        heapmaps::render_all(t, dir);
    }
    Ok(())
}

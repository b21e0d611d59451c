//! The subcommands.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use memo_planner::format::problem_to_csv;
use memo_planner::heapmap::{render_svg, HeapmapOptions};
use memo_planner::offsets::{best, exact};
use memo_planner::text::{bytes_and_mib, mib, thousands};
use memo_planner::{
    offsets_lower_bound, shared_objects_lower_bound, validate_offsets, validate_shared, OffsetPlan,
    OffsetStrategy, Problem, SharedObjectStrategy, SharedObjectsPlan,
};
use serde_json::{json, Map, Value};

use crate::input;
use crate::table::Table;
use crate::Format;

/// Rows of the buffer table printed by `plan` in text form.
const TEXT_ROWS: usize = 20;

/// A plan of either family, validated.
struct Planned {
    strategy: &'static str,
    shared: Option<SharedObjectsPlan>,
    offsets: OffsetPlan,
    total: u64,
    lower_bound: u64,
    /// The best lower bound known (`exact` raises it by proofs of infeasibility).
    proven_lower_bound: u64,
    /// Whether `total` is proven optimal.
    optimal: bool,
    /// Search nodes, for `exact`.
    nodes: Option<u64>,
    millis: f64,
}

/// The flags of `memo plan` that only `exact` takes.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactFlags {
    /// Decide this capacity instead of minimising.
    pub capacity: Option<u64>,
    /// Wall-clock safety net, in seconds.
    pub time_limit: Option<f64>,
}

impl ExactFlags {
    fn options(&self) -> Result<exact::ExactOptions, String> {
        let mut o = exact::ExactOptions::default();
        if let Some(secs) = self.time_limit {
            let d = Duration::try_from_secs_f64(secs)
                .map_err(|_| format!("--time-limit {secs}: not a number of seconds"))?;
            o.time_cap = Some(d);
        }
        Ok(o)
    }

    fn start_options(&self, o: &exact::ExactOptions) -> best::BestOptions {
        best::BestOptions {
            time_cap: o.time_cap.or(best::BestOptions::default().time_cap),
            ..best::BestOptions::default()
        }
    }
}

/// `exact`: the portfolio's plan, then the search; the outcome says whether it is optimal.
fn run_exact(problem: &Problem, flags: ExactFlags) -> Result<Planned, String> {
    let options = flags.options()?;
    let t = Instant::now();
    let start = best::portfolio(problem, &flags.start_options(&options));
    let out = exact::search(problem, &start, &options);
    let millis = t.elapsed().as_secs_f64() * 1e3;
    let total = validate_offsets(problem, &out.plan)
        .map_err(|e| format!("internal error: exact made an invalid plan: {e}"))?;
    Ok(Planned {
        strategy: OffsetStrategy::Exact.name(),
        shared: None,
        offsets: out.plan,
        total,
        lower_bound: offsets_lower_bound(problem),
        proven_lower_bound: out.lower_bound,
        optimal: out.optimal,
        nodes: Some(out.nodes),
        millis,
    })
}

fn run(problem: &Problem, strategy: Option<&str>, shared: bool) -> Result<Planned, String> {
    run_with(problem, strategy, shared, ExactFlags::default())
}

fn run_with(
    problem: &Problem,
    strategy: Option<&str>,
    shared: bool,
    flags: ExactFlags,
) -> Result<Planned, String> {
    if shared {
        let s: SharedObjectStrategy = strategy
            .unwrap_or("greedy-by-size-improved")
            .parse()
            .map_err(|e| format!("{e}"))?;
        let t = Instant::now();
        let plan = s.plan(problem);
        let millis = t.elapsed().as_secs_f64() * 1e3;
        let total = validate_shared(problem, &plan)
            .map_err(|e| format!("internal error: {s} made an invalid plan: {e}"))?;
        let offsets = plan.to_offset_plan(problem);
        validate_offsets(problem, &offsets)
            .map_err(|e| format!("internal error: laid-out objects overlap: {e}"))?;
        let lower_bound = shared_objects_lower_bound(problem);
        Ok(Planned {
            strategy: s.name(),
            shared: Some(plan),
            offsets,
            total,
            lower_bound,
            proven_lower_bound: lower_bound,
            optimal: total <= lower_bound,
            nodes: None,
            millis,
        })
    } else {
        let s: OffsetStrategy = strategy
            .unwrap_or("best")
            .parse()
            .map_err(|e| format!("{e}"))?;
        if s == OffsetStrategy::Exact {
            return run_exact(problem, flags);
        }
        let t = Instant::now();
        let offsets = s.plan(problem);
        let millis = t.elapsed().as_secs_f64() * 1e3;
        let total = validate_offsets(problem, &offsets)
            .map_err(|e| format!("internal error: {s} made an invalid plan: {e}"))?;
        let lower_bound = offsets_lower_bound(problem);
        Ok(Planned {
            strategy: s.name(),
            shared: None,
            offsets,
            total,
            lower_bound,
            proven_lower_bound: lower_bound,
            optimal: total <= lower_bound,
            nodes: None,
            millis,
        })
    }
}

/// Writes `text` to `output`, or to standard output.
pub(crate) fn emit(output: Option<&Path>, text: &str) -> Result<(), String> {
    match output {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))
        }
        None => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`memo ... | head`) is not an error worth a message.
            let _ = out.write_all(text.as_bytes());
            Ok(())
        }
    }
}

fn ratio(total: u64, bound: u64) -> f64 {
    if bound == 0 {
        1.0
    } else {
        total as f64 / bound as f64
    }
}

/// `memo plan`.
pub fn plan(
    path: &Path,
    strategy: Option<&str>,
    shared: bool,
    flags: ExactFlags,
    format: Format,
    output: Option<&Path>,
) -> Result<(), String> {
    if (flags.capacity.is_some() || flags.time_limit.is_some())
        && (shared || strategy != Some(OffsetStrategy::Exact.name()))
    {
        return Err("--capacity and --time-limit apply to --strategy exact only".into());
    }
    let input = input::read(path)?;
    let problem = &input.problem;
    if let Some(capacity) = flags.capacity {
        return decide(path, problem, capacity, flags, format, output);
    }
    let p = run_with(problem, strategy, shared, flags)?;
    let family = if shared { "shared_objects" } else { "offsets" };
    let text = match format {
        Format::Json => {
            let mut doc = Map::new();
            doc.insert("strategy".into(), json!(p.strategy));
            doc.insert("family".into(), json!(family));
            doc.insert("buffers".into(), json!(problem.len()));
            doc.insert("total".into(), json!(p.total));
            doc.insert("lower_bound".into(), json!(p.lower_bound));
            doc.insert("proven_lower_bound".into(), json!(p.proven_lower_bound));
            doc.insert("optimal".into(), json!(p.optimal));
            if let Some(nodes) = p.nodes {
                doc.insert("nodes".into(), json!(nodes));
            }
            doc.insert("millis".into(), json!(p.millis));
            doc.insert("offsets".into(), json!(p.offsets.offsets));
            if let Some(s) = &p.shared {
                doc.insert("objects".into(), json!(s.object_ids));
                doc.insert("object_sizes".into(), json!(s.object_sizes));
            }
            let mut t =
                serde_json::to_string_pretty(&Value::Object(doc)).map_err(|e| e.to_string())?;
            t.push('\n');
            t
        }
        Format::Csv => problem_to_csv(problem, Some(&p.offsets)),
        Format::Text => {
            let mut t = String::new();
            let naive = problem.buffers().iter().map(|b| b.size).sum::<u64>();
            t.push_str(&format!("input        {}\n", path.display()));
            t.push_str(&format!(
                "strategy     {} ({})\n",
                p.strategy,
                family.replace('_', " ")
            ));
            t.push_str(&format!(
                "buffers      {}\n",
                thousands(problem.len() as u64)
            ));
            t.push_str(&format!("total        {}\n", bytes_and_mib(p.total)));
            t.push_str(&format!(
                "lower bound  {}   ratio {:.4}\n",
                bytes_and_mib(p.lower_bound),
                ratio(p.total, p.lower_bound)
            ));
            t.push_str(&format!(
                "optimal      {}{}\n",
                if p.optimal {
                    "yes (proven)"
                } else {
                    "not proven"
                },
                if p.proven_lower_bound > p.lower_bound {
                    format!(
                        "   proven lower bound {}",
                        bytes_and_mib(p.proven_lower_bound)
                    )
                } else {
                    String::new()
                }
            ));
            t.push_str(&format!(
                "naive        {}   saved {:.1}%\n",
                bytes_and_mib(naive),
                100.0 * (1.0 - ratio(p.total, naive.max(1)))
            ));
            if let Some(s) = &p.shared {
                t.push_str(&format!(
                    "objects      {}\n",
                    thousands(s.num_objects() as u64)
                ));
            }
            t.push_str(&format!("time         {:.2} ms\n\n", p.millis));
            let mut table = if shared {
                Table::new(
                    &["id", "lower", "upper", "size", "object", "offset"],
                    &[false, true, true, true, true, true],
                )
            } else {
                Table::new(
                    &["id", "lower", "upper", "size", "offset"],
                    &[false, true, true, true, true],
                )
            };
            for (i, b) in problem.buffers().iter().enumerate().take(TEXT_ROWS) {
                let mut row = vec![
                    b.id.clone(),
                    b.lower.to_string(),
                    b.upper.to_string(),
                    thousands(b.size),
                ];
                if let Some(s) = &p.shared {
                    row.push(s.object_ids[i].to_string());
                }
                row.push(thousands(p.offsets.offsets[i]));
                table.row(row);
            }
            t.push_str(&table.render());
            if problem.len() > TEXT_ROWS {
                t.push_str(&format!(
                    "... {} more buffers (--format csv or json lists them all)\n",
                    thousands((problem.len() - TEXT_ROWS) as u64)
                ));
            }
            t
        }
    };
    emit(output, &text)
}

/// `memo plan --strategy exact --capacity N`: a plan of height at most N, a proof that
/// none exists, or "unknown" when the budget runs out first.
fn decide(
    path: &Path,
    problem: &Problem,
    capacity: u64,
    flags: ExactFlags,
    format: Format,
    output: Option<&Path>,
) -> Result<(), String> {
    let options = flags.options()?;
    let t = Instant::now();
    let start = best::portfolio(problem, &flags.start_options(&options));
    let decision = if start.height(problem) <= capacity {
        exact::Decision::Feasible(start)
    } else {
        exact::decide(problem, capacity, &options)
    };
    let millis = t.elapsed().as_secs_f64() * 1e3;
    let (status, plan) = match decision {
        exact::Decision::Feasible(plan) => ("feasible", Some(plan)),
        exact::Decision::Infeasible => ("infeasible", None),
        exact::Decision::Unknown => ("unknown", None),
    };
    let total = match &plan {
        Some(plan) => Some(
            validate_offsets(problem, plan)
                .map_err(|e| format!("internal error: exact made an invalid plan: {e}"))?,
        ),
        None => None,
    };
    let text = match format {
        Format::Json => {
            let mut doc = Map::new();
            doc.insert("strategy".into(), json!(OffsetStrategy::Exact.name()));
            doc.insert("family".into(), json!("offsets"));
            doc.insert("buffers".into(), json!(problem.len()));
            doc.insert("capacity".into(), json!(capacity));
            doc.insert("status".into(), json!(status));
            doc.insert("lower_bound".into(), json!(offsets_lower_bound(problem)));
            doc.insert("millis".into(), json!(millis));
            if let (Some(total), Some(plan)) = (total, &plan) {
                doc.insert("total".into(), json!(total));
                doc.insert("offsets".into(), json!(plan.offsets));
            }
            let mut t =
                serde_json::to_string_pretty(&Value::Object(doc)).map_err(|e| e.to_string())?;
            t.push('\n');
            t
        }
        Format::Csv => match &plan {
            Some(plan) => problem_to_csv(problem, Some(plan)),
            None => return Err(format!("no plan at capacity {capacity}: {status}")),
        },
        Format::Text => {
            let mut t = String::new();
            t.push_str(&format!("input        {}\n", path.display()));
            t.push_str(&format!(
                "strategy     exact (decision at capacity {})\n",
                bytes_and_mib(capacity)
            ));
            t.push_str(&format!(
                "buffers      {}\n",
                thousands(problem.len() as u64)
            ));
            t.push_str(&format!("status       {status}\n"));
            if let Some(total) = total {
                t.push_str(&format!("total        {}\n", bytes_and_mib(total)));
            }
            t.push_str(&format!("time         {millis:.2} ms\n"));
            t
        }
    };
    emit(output, &text)
}

/// `memo compare`.
pub fn compare(path: &Path, format: Format, output: Option<&Path>) -> Result<(), String> {
    let input = input::read(path)?;
    let problem = &input.problem;
    let lb_offsets = offsets_lower_bound(problem);
    let lb_shared = shared_objects_lower_bound(problem);
    let naive: u64 = problem.buffers().iter().map(|b| b.size).sum();
    let mut offsets = Vec::new();
    for s in OffsetStrategy::ALL {
        offsets.push(run(problem, Some(s.name()), false)?);
    }
    let mut shared = Vec::new();
    for s in SharedObjectStrategy::ALL {
        shared.push(run(problem, Some(s.name()), true)?);
    }
    let text = match format {
        Format::Json => {
            let family = |plans: &[Planned]| {
                let mut m = Map::new();
                for p in plans {
                    m.insert(
                        p.strategy.into(),
                        json!({"total": p.total, "millis": p.millis}),
                    );
                }
                Value::Object(m)
            };
            let doc = json!({
                "input": path.display().to_string(),
                "buffers": problem.len(),
                "naive": naive,
                "lower_bound": {"offsets": lb_offsets, "shared_objects": lb_shared},
                "offsets": family(&offsets),
                "shared_objects": family(&shared),
            });
            let mut t = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
            t.push('\n');
            t
        }
        Format::Csv => return Err("compare prints text or json".into()),
        Format::Text => {
            let mut t = String::new();
            t.push_str(&format!(
                "input        {} ({} buffers)\n",
                path.display(),
                thousands(problem.len() as u64)
            ));
            t.push_str(&format!("naive        {}\n", bytes_and_mib(naive)));
            t.push_str(&format!(
                "lower bound  offsets {}\n",
                bytes_and_mib(lb_offsets)
            ));
            t.push_str(&format!(
                "             shared objects {}\n\n",
                bytes_and_mib(lb_shared)
            ));
            let mut table = Table::new(
                &[
                    "family",
                    "strategy",
                    "total (bytes)",
                    "MiB",
                    "/ bound",
                    "ms",
                ],
                &[false, false, true, true, true, true],
            );
            for (family, plans, bound) in [
                ("offsets", &offsets, lb_offsets),
                ("shared objects", &shared, lb_shared),
            ] {
                for p in plans.iter() {
                    table.row(vec![
                        family.into(),
                        p.strategy.into(),
                        thousands(p.total),
                        mib(p.total),
                        format!("{:.4}", ratio(p.total, bound)),
                        format!("{:.2}", p.millis),
                    ]);
                }
            }
            t.push_str(&table.render());
            t
        }
    };
    emit(output, &text)
}

/// `memo heapmap`.
pub fn heapmap(
    path: &Path,
    strategy: Option<&str>,
    shared: bool,
    output: &Path,
    width: u32,
    height: u32,
) -> Result<(), String> {
    let input = input::read(path)?;
    let p = run(&input.problem, strategy, shared)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let title = if input.groups.is_some() {
        format!(
            "{name}: {} plan of the recorded pass, coloured by op ({} buffers)",
            p.strategy,
            thousands(input.problem.len() as u64)
        )
    } else {
        format!(
            "{name}: {} ({} buffers)",
            p.strategy,
            thousands(input.problem.len() as u64)
        )
    };
    let options = HeapmapOptions {
        title,
        width,
        height,
        groups: input.groups,
        ..HeapmapOptions::default()
    };
    let svg = render_svg(&input.problem, &p.offsets, &options);
    std::fs::write(output, svg).map_err(|e| format!("{}: cannot write: {e}", output.display()))
}

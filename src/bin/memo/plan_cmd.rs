//! `memo plan`: one problem, one strategy; and `exact`'s decision at a capacity.

use std::path::Path;
use std::time::Instant;

use memo_planner::format::problem_to_csv;
use memo_planner::offsets::{best, exact};
use memo_planner::text::{bytes_and_mib, thousands};
use memo_planner::{offsets_lower_bound, validate_offsets, OffsetPlan, OffsetStrategy, Problem};
use serde_json::{json, Map, Value};

use crate::args::PlanFormat;
use crate::failure::Failure;
use crate::input;
use crate::output::{emit, pretty_json};
use crate::planning::{invalid_plan, ratio, run_with, ExactFlags, Planned, Strategy};
use crate::table::Table;

/// Rows of the buffer table printed by `plan` in text form.
const TEXT_ROWS: usize = 20;

/// `memo plan`: `strategy`'s plan of the problem at `path`, or with `flags.capacity`
/// `exact`'s decision at that capacity. `flags` go with `exact` only (the caller checks).
pub fn plan(
    path: &Path,
    strategy: Strategy,
    flags: ExactFlags,
    format: PlanFormat,
    output: Option<&Path>,
) -> Result<(), Failure> {
    let input = input::read(path)?;
    let problem = &input.problem;
    if let Some(capacity) = flags.capacity {
        return decide(path, problem, capacity, flags, format, output);
    }
    let p = run_with(problem, strategy, flags)?;
    let text = match format {
        PlanFormat::Json => plan_json(problem, &p)?,
        PlanFormat::Csv => problem_to_csv(problem, Some(&p.offsets)),
        PlanFormat::Text => plan_text(path, problem, &p),
    };
    emit(output, &text)
}

/// The family's name in JSON (`offsets`, `shared_objects`).
fn family(p: &Planned) -> &'static str {
    if p.shared.is_some() {
        "shared_objects"
    } else {
        "offsets"
    }
}

/// `plan --format json`: the figures, then every buffer's offset (and object).
fn plan_json(problem: &Problem, p: &Planned) -> Result<String, Failure> {
    let mut doc = Map::new();
    doc.insert("strategy".into(), json!(p.strategy));
    doc.insert("family".into(), json!(family(p)));
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
    pretty_json(&Value::Object(doc))
}

/// `plan` as text: the summary, then the first [`TEXT_ROWS`] buffers.
fn plan_text(path: &Path, problem: &Problem, p: &Planned) -> String {
    let mut t = plan_summary(path, problem, p);
    t.push_str(&buffer_table(problem, p).render());
    if problem.len() > TEXT_ROWS {
        t.push_str(&format!(
            "... {} more buffers (--format csv or json lists them all)\n",
            thousands((problem.len() - TEXT_ROWS) as u64)
        ));
    }
    t
}

/// The lines above `plan`'s buffer table: the plan against the bound and no reuse.
fn plan_summary(path: &Path, problem: &Problem, p: &Planned) -> String {
    let mut t = String::new();
    let naive = problem.buffers().iter().map(|b| b.size).sum::<u64>();
    t.push_str(&format!("input        {}\n", path.display()));
    t.push_str(&format!(
        "strategy     {} ({})\n",
        p.strategy,
        family(p).replace('_', " ")
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
    let proven = if p.proven_lower_bound > p.lower_bound {
        format!(
            "   proven lower bound {}",
            bytes_and_mib(p.proven_lower_bound)
        )
    } else {
        String::new()
    };
    let optimal = if p.optimal {
        "yes (proven)"
    } else {
        "not proven"
    };
    t.push_str(&format!("optimal      {optimal}{proven}\n"));
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
    t
}

/// The first [`TEXT_ROWS`] buffers with their offsets (and objects).
fn buffer_table(problem: &Problem, p: &Planned) -> Table {
    let mut table = if p.shared.is_some() {
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
    table
}

/// What `exact` decided at a capacity.
struct Decided {
    capacity: u64,
    /// `feasible`, `infeasible` or `unknown`.
    status: &'static str,
    /// The plan and its height, when feasible.
    plan: Option<(OffsetPlan, u64)>,
    millis: f64,
}

/// `memo plan --strategy exact --capacity N`: a plan of height at most N, a proof that
/// none exists, or "unknown" when the budget runs out first. Without a plan the result
/// failed ([`Failure::Failed`]), in every format; text and JSON still say why.
fn decide(
    path: &Path,
    problem: &Problem,
    capacity: u64,
    flags: ExactFlags,
    format: PlanFormat,
    output: Option<&Path>,
) -> Result<(), Failure> {
    let d = run_decision(problem, capacity, flags)?;
    let text = match (format, &d.plan) {
        (PlanFormat::Json, _) => Some(decision_json(problem, &d)?),
        (PlanFormat::Csv, Some((plan, _))) => Some(problem_to_csv(problem, Some(plan))),
        (PlanFormat::Csv, None) => None,
        (PlanFormat::Text, _) => Some(decision_text(path, problem, &d)),
    };
    if let Some(text) = text {
        emit(output, &text)?;
    }
    match d.plan {
        Some(_) => Ok(()),
        None => Err(Failure::Failed(format!(
            "no plan at capacity {capacity}: {}",
            d.status
        ))),
    }
}

/// The portfolio's plan when it fits, else `exact`'s decision; a plan found is validated.
fn run_decision(problem: &Problem, capacity: u64, flags: ExactFlags) -> Result<Decided, Failure> {
    let options = flags.options();
    let t = Instant::now();
    let start = best::portfolio(problem, &flags.start_options(&options));
    let decision = if start.height(problem) <= capacity {
        exact::Decision::Feasible(start)
    } else {
        exact::decide(problem, capacity, &options)
    };
    let millis = t.elapsed().as_secs_f64() * 1e3;
    let (status, plan) = match decision {
        exact::Decision::Feasible(plan) => {
            let total = validate_offsets(problem, &plan).map_err(|e| invalid_plan("exact", e))?;
            ("feasible", Some((plan, total)))
        }
        exact::Decision::Infeasible => ("infeasible", None),
        exact::Decision::Unknown => ("unknown", None),
    };
    Ok(Decided {
        capacity,
        status,
        plan,
        millis,
    })
}

/// The decision as JSON; `total` and `offsets` when feasible.
fn decision_json(problem: &Problem, d: &Decided) -> Result<String, Failure> {
    let mut doc = Map::new();
    doc.insert("strategy".into(), json!(OffsetStrategy::Exact.name()));
    doc.insert("family".into(), json!("offsets"));
    doc.insert("buffers".into(), json!(problem.len()));
    doc.insert("capacity".into(), json!(d.capacity));
    doc.insert("status".into(), json!(d.status));
    doc.insert("lower_bound".into(), json!(offsets_lower_bound(problem)));
    doc.insert("millis".into(), json!(d.millis));
    if let Some((plan, total)) = &d.plan {
        doc.insert("total".into(), json!(total));
        doc.insert("offsets".into(), json!(plan.offsets));
    }
    pretty_json(&Value::Object(doc))
}

/// The decision as text.
fn decision_text(path: &Path, problem: &Problem, d: &Decided) -> String {
    let mut t = String::new();
    t.push_str(&format!("input        {}\n", path.display()));
    t.push_str(&format!(
        "strategy     exact (decision at capacity {})\n",
        bytes_and_mib(d.capacity)
    ));
    t.push_str(&format!(
        "buffers      {}\n",
        thousands(problem.len() as u64)
    ));
    t.push_str(&format!("status       {}\n", d.status));
    if let Some((_, total)) = &d.plan {
        t.push_str(&format!("total        {}\n", bytes_and_mib(*total)));
    }
    t.push_str(&format!("time         {:.2} ms\n", d.millis));
    t
}

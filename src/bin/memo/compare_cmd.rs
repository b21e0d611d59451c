//! `memo compare`: every strategy of both families against the lower bounds.

use std::path::Path;

use memo_planner::text::{bytes_and_mib, mib, thousands};
use memo_planner::{
    offsets_lower_bound, shared_objects_lower_bound, OffsetStrategy, Problem, SharedObjectStrategy,
};
use serde_json::{json, Map, Value};

use crate::args::ReportFormat;
use crate::failure::Failure;
use crate::input;
use crate::output::{emit, pretty_json};
use crate::planning::{ratio, run, Planned, Strategy};
use crate::table::Table;

/// The plans of every strategy, with the bounds they are compared to.
struct Comparison {
    buffers: usize,
    /// The buffers' sizes summed (no reuse).
    naive: u64,
    lb_offsets: u64,
    lb_shared: u64,
    offsets: Vec<Planned>,
    shared: Vec<Planned>,
}

/// `memo compare`.
pub fn compare(path: &Path, format: ReportFormat, output: Option<&Path>) -> Result<(), Failure> {
    let input = input::read(path)?;
    let c = run_all(&input.problem)?;
    let text = match format {
        ReportFormat::Json => compare_json(path, &c)?,
        ReportFormat::Text => compare_text(path, &c),
    };
    emit(output, &text)
}

/// Runs every strategy of both families, in [`OffsetStrategy::ALL`] and
/// [`SharedObjectStrategy::ALL`] order.
fn run_all(problem: &Problem) -> Result<Comparison, Failure> {
    let mut offsets = Vec::new();
    for s in OffsetStrategy::ALL {
        offsets.push(run(problem, Strategy::Offsets(s))?);
    }
    let mut shared = Vec::new();
    for s in SharedObjectStrategy::ALL {
        shared.push(run(problem, Strategy::Shared(s))?);
    }
    Ok(Comparison {
        buffers: problem.len(),
        naive: problem.buffers().iter().map(|b| b.size).sum(),
        lb_offsets: offsets_lower_bound(problem),
        lb_shared: shared_objects_lower_bound(problem),
        offsets,
        shared,
    })
}

/// The comparison as JSON: each family's totals and times by strategy name.
fn compare_json(path: &Path, c: &Comparison) -> Result<String, Failure> {
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
        "buffers": c.buffers,
        "naive": c.naive,
        "lower_bound": {"offsets": c.lb_offsets, "shared_objects": c.lb_shared},
        "offsets": family(&c.offsets),
        "shared_objects": family(&c.shared),
    });
    pretty_json(&doc)
}

/// The comparison as text: the bounds, then one table row per strategy.
fn compare_text(path: &Path, c: &Comparison) -> String {
    let mut t = String::new();
    t.push_str(&format!(
        "input        {} ({} buffers)\n",
        path.display(),
        thousands(c.buffers as u64)
    ));
    t.push_str(&format!("naive        {}\n", bytes_and_mib(c.naive)));
    t.push_str(&format!(
        "lower bound  offsets {}\n",
        bytes_and_mib(c.lb_offsets)
    ));
    t.push_str(&format!(
        "             shared objects {}\n\n",
        bytes_and_mib(c.lb_shared)
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
        ("offsets", &c.offsets, c.lb_offsets),
        ("shared objects", &c.shared, c.lb_shared),
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

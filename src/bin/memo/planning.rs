//! Running one strategy of either family on a problem, timed and validated.

use std::time::{Duration, Instant};

use memo_planner::offsets::{best, exact};
use memo_planner::{
    offsets_lower_bound, shared_objects_lower_bound, validate_offsets, validate_shared, OffsetPlan,
    OffsetStrategy, Problem, SharedObjectStrategy, SharedObjectsPlan,
};

/// A plan of either family, validated.
pub struct Planned {
    /// The strategy's contract name.
    pub strategy: &'static str,
    /// The shared-objects plan, for that family.
    pub shared: Option<SharedObjectsPlan>,
    /// The plan as offsets (shared objects laid out end to end).
    pub offsets: OffsetPlan,
    /// The plan's total (height, or the objects' sizes summed).
    pub total: u64,
    /// The family's lower bound.
    pub lower_bound: u64,
    /// The best lower bound known (`exact` raises it by proofs of infeasibility).
    pub proven_lower_bound: u64,
    /// Whether `total` is proven optimal.
    pub optimal: bool,
    /// Search nodes, for `exact`.
    pub nodes: Option<u64>,
    /// Wall-clock time of the strategy, in milliseconds.
    pub millis: f64,
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
    /// The search's options.
    pub fn options(&self) -> Result<exact::ExactOptions, String> {
        let mut o = exact::ExactOptions::default();
        if let Some(secs) = self.time_limit {
            let d = Duration::try_from_secs_f64(secs)
                .map_err(|_| format!("--time-limit {secs}: not a number of seconds"))?;
            o.time_cap = Some(d);
        }
        Ok(o)
    }

    /// The options of the portfolio whose plan the search starts from.
    pub fn start_options(&self, o: &exact::ExactOptions) -> best::BestOptions {
        best::BestOptions {
            time_cap: o.time_cap.or(best::BestOptions::default().time_cap),
            ..best::BestOptions::default()
        }
    }
}

/// `total / bound`, 1 for a zero bound.
pub fn ratio(total: u64, bound: u64) -> f64 {
    if bound == 0 {
        1.0
    } else {
        total as f64 / bound as f64
    }
}

/// Plans `problem` with `strategy` (by name; the family's default without one) and the
/// default budgets.
pub fn run(problem: &Problem, strategy: Option<&str>, shared: bool) -> Result<Planned, String> {
    run_with(problem, strategy, shared, ExactFlags::default())
}

/// Plans `problem` with `strategy` (by name; the family's default without one), `exact`
/// with `flags`.
pub fn run_with(
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
        return run_shared(problem, s);
    }
    let s: OffsetStrategy = strategy
        .unwrap_or("best")
        .parse()
        .map_err(|e| format!("{e}"))?;
    if s == OffsetStrategy::Exact {
        return run_exact(problem, flags);
    }
    run_offsets(problem, s)
}

/// A shared-objects strategy, its objects laid out end to end and checked as offsets too.
fn run_shared(problem: &Problem, s: SharedObjectStrategy) -> Result<Planned, String> {
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
}

/// An offset strategy other than `exact`.
fn run_offsets(problem: &Problem, s: OffsetStrategy) -> Result<Planned, String> {
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

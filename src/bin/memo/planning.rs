//! Running one strategy of either family on a problem, timed and validated.

use std::time::{Duration, Instant};

use memo_planner::offsets::{best, exact};
use memo_planner::{
    offsets_lower_bound, shared_objects_lower_bound, validate_offsets, validate_shared, OffsetPlan,
    OffsetStrategy, Problem, SharedObjectStrategy, SharedObjectsPlan, UnknownStrategy,
};

use crate::failure::Failure;

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

/// A strategy of either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// An offset strategy (one arena).
    Offsets(OffsetStrategy),
    /// A shared-objects strategy (whole buffers reused).
    Shared(SharedObjectStrategy),
}

impl Strategy {
    /// The strategy called `name` in the family `--shared` picks; without a name, the
    /// family's default (`best`, `greedy-by-size-improved`).
    pub fn choose(name: Option<&str>, shared: bool) -> Result<Strategy, UnknownStrategy> {
        Ok(if shared {
            Strategy::Shared(name.unwrap_or("greedy-by-size-improved").parse()?)
        } else {
            Strategy::Offsets(name.unwrap_or("best").parse()?)
        })
    }
}

/// The flags of `memo plan` that only `exact` takes.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactFlags {
    /// Decide this capacity instead of minimising.
    pub capacity: Option<u64>,
    /// Wall-clock safety net.
    pub time_limit: Option<Duration>,
}

impl ExactFlags {
    /// Whether any flag is given.
    pub fn any(&self) -> bool {
        self.capacity.is_some() || self.time_limit.is_some()
    }

    /// The search's options: the defaults, with `--time-limit` for the time cap.
    pub fn options(&self) -> exact::ExactOptions {
        let mut o = exact::ExactOptions::default();
        if let Some(limit) = self.time_limit {
            o.time_cap = Some(limit);
        }
        o
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

/// Plans `problem` with `strategy`, `exact` with the default budgets.
pub fn run(problem: &Problem, strategy: Strategy) -> Result<Planned, Failure> {
    run_with(problem, strategy, ExactFlags::default())
}

/// Plans `problem` with `strategy`, `exact` with `flags`.
pub fn run_with(
    problem: &Problem,
    strategy: Strategy,
    flags: ExactFlags,
) -> Result<Planned, Failure> {
    match strategy {
        Strategy::Shared(s) => run_shared(problem, s),
        Strategy::Offsets(OffsetStrategy::Exact) => run_exact(problem, flags),
        Strategy::Offsets(s) => run_offsets(problem, s),
    }
}

/// The failure of a strategy whose plan does not validate.
pub fn invalid_plan(what: impl std::fmt::Display, e: impl std::fmt::Display) -> Failure {
    Failure::Failed(format!("internal error: {what} made an invalid plan: {e}"))
}

/// A shared-objects strategy, its objects laid out end to end and checked as offsets too.
fn run_shared(problem: &Problem, s: SharedObjectStrategy) -> Result<Planned, Failure> {
    let t = Instant::now();
    let plan = s.plan(problem);
    let millis = t.elapsed().as_secs_f64() * 1e3;
    let total = validate_shared(problem, &plan).map_err(|e| invalid_plan(s, e))?;
    let offsets = plan.to_offset_plan(problem);
    validate_offsets(problem, &offsets)
        .map_err(|e| Failure::Failed(format!("internal error: laid-out objects overlap: {e}")))?;
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
fn run_offsets(problem: &Problem, s: OffsetStrategy) -> Result<Planned, Failure> {
    let t = Instant::now();
    let offsets = s.plan(problem);
    let millis = t.elapsed().as_secs_f64() * 1e3;
    let total = validate_offsets(problem, &offsets).map_err(|e| invalid_plan(s, e))?;
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
fn run_exact(problem: &Problem, flags: ExactFlags) -> Result<Planned, Failure> {
    let options = flags.options();
    let t = Instant::now();
    let start = best::portfolio(problem, &flags.start_options(&options));
    let out = exact::search(problem, &start, &options);
    let millis = t.elapsed().as_secs_f64() * 1e3;
    let total = validate_offsets(problem, &out.plan).map_err(|e| invalid_plan("exact", e))?;
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

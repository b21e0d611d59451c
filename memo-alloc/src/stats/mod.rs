//! Process-wide counters: [`Stats`], as `memo_alloc::stats()` takes them, and the reasons
//! they count by ([`MissReason`], [`AbandonReason`], [`PlanRejection`]).

// The folder: `snapshot.rs` (Stats), `misses.rs`, `reasons.rs`, `prometheus.rs` (Stats in
// the Prometheus text format), and `counters.rs` (what passes count into while they run).
// It may use `support` only.

mod counters;
mod misses;
mod prometheus;
mod reasons;
mod snapshot;

pub(crate) use counters::{add, PassCounters, GLOBAL};
pub use misses::Misses;
pub use reasons::{
    AbandonReason, MissReason, PlanRejection, ABANDON_REASONS, MISS_REASONS, PLAN_REJECTIONS,
};
pub use snapshot::Stats;

//! Process-wide counters ([`Stats`], read with `memo_alloc::stats()`) and the reasons they
//! count by.

mod counters;
mod reasons;
mod snapshot;

pub(crate) use counters::{add, PassCounters, GLOBAL};
pub use reasons::{
    AbandonReason, MissReason, PlanRejection, ABANDON_REASONS, MISS_REASONS, PLAN_REJECTIONS,
};
pub use snapshot::Stats;

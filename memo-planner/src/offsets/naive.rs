//! `naive`: every buffer gets its own address range, in input order. The baseline.

use crate::plan::OffsetPlan;
use crate::problem::{align_up, Problem};

/// Lays the buffers end to end in input order, each at its alignment.
pub fn plan(problem: &Problem) -> OffsetPlan {
    let mut end = 0u64;
    let offsets = problem
        .buffers()
        .iter()
        .map(|b| {
            let o = align_up(end, b.align);
            end = o + b.size;
            o
        })
        .collect();
    OffsetPlan { offsets }
}

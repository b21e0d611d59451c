//! `naive`: one object per buffer. The baseline.

use crate::plan::SharedObjectsPlan;
use crate::problem::Problem;

/// Gives every buffer an object of its own.
pub fn plan(problem: &Problem) -> SharedObjectsPlan {
    SharedObjectsPlan {
        object_ids: (0..problem.len()).collect(),
        object_sizes: problem.buffers().iter().map(|b| b.size).collect(),
    }
}

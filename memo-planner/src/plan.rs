//! Plans: one offset per buffer in one arena, or one shared object per buffer.

use serde::{Deserialize, Serialize};

use crate::problem::{align_up, Problem};

/// An offset plan: `offsets[i]` is the address of buffer `i` inside one arena.
///
/// Its height (the arena size it needs) is `max(offset + size)`.
///
/// ```
/// use memo_planner::{Buffer, OffsetPlan, Problem};
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b", 1, 3, 4)]).unwrap();
/// let plan = OffsetPlan { offsets: vec![0, 8] };
/// assert_eq!(plan.height(&p), 12);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetPlan {
    /// Offset of each buffer, in the problem's order.
    pub offsets: Vec<u64>,
}

impl OffsetPlan {
    /// `max(offset + size)` over all buffers; 0 for an empty problem.
    ///
    /// Saturates instead of overflowing; [`crate::validate_offsets`] rejects such plans.
    pub fn height(&self, problem: &Problem) -> u64 {
        self.offsets
            .iter()
            .zip(problem.buffers())
            .map(|(&o, b)| o.saturating_add(b.size))
            .max()
            .unwrap_or(0)
    }
}

/// A shared-objects plan: buffer `i` lives in object `object_ids[i]`, whose size is
/// `object_sizes[object_ids[i]]`.
///
/// Buffers of one object never conflict; an object's size is that of its largest buffer;
/// the plan's total is the sum of the object sizes. Laying the objects end to end turns
/// it into an offset plan ([`SharedObjectsPlan::to_offset_plan`]).
///
/// ```
/// use memo_planner::{Buffer, Problem, SharedObjectsPlan};
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b", 2, 3, 4)]).unwrap();
/// let plan = SharedObjectsPlan { object_ids: vec![0, 0], object_sizes: vec![8] };
/// assert_eq!(plan.total(), 8);
/// assert_eq!(plan.to_offset_plan(&p).offsets, vec![0, 0]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedObjectsPlan {
    /// Object of each buffer, in the problem's order.
    pub object_ids: Vec<usize>,
    /// Size of each object.
    pub object_sizes: Vec<u64>,
}

impl SharedObjectsPlan {
    /// Sum of the object sizes.
    pub fn total(&self) -> u64 {
        self.object_sizes.iter().sum()
    }

    /// Number of objects.
    pub fn num_objects(&self) -> usize {
        self.object_sizes.len()
    }

    /// Lays the objects out end to end in id order, each at a multiple of the largest
    /// alignment among its buffers; every buffer gets its object's offset.
    ///
    /// Without alignments above 1 the height equals [`SharedObjectsPlan::total`].
    pub fn to_offset_plan(&self, problem: &Problem) -> OffsetPlan {
        let mut object_align = vec![1u64; self.object_sizes.len()];
        for (b, &obj) in problem.buffers().iter().zip(&self.object_ids) {
            if let Some(a) = object_align.get_mut(obj) {
                *a = (*a).max(b.align);
            }
        }
        let mut object_offset = Vec::with_capacity(self.object_sizes.len());
        let mut end = 0u64;
        for (size, align) in self.object_sizes.iter().zip(&object_align) {
            let start = align_up(end, *align);
            object_offset.push(start);
            end = start.saturating_add(*size);
        }
        OffsetPlan {
            offsets: self
                .object_ids
                .iter()
                .map(|&obj| object_offset.get(obj).copied().unwrap_or(u64::MAX))
                .collect(),
        }
    }
}

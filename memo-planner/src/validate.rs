//! Plan validation, independent of every strategy.
//!
//! [`validate_offsets`] sweeps the buffers in time order and keeps the live ones in an
//! ordered map by offset: because live buffers are pairwise disjoint in address before each
//! insertion, checking the new buffer against its two address neighbours is enough. The
//! sweep is `O(n log n)` and shares no code with the strategies.

use std::collections::BTreeMap;
use std::fmt;

use crate::plan::{OffsetPlan, SharedObjectsPlan};
use crate::problem::Problem;

/// Why a plan is invalid for its problem. Buffers are named by index and id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// The plan has a different number of entries than the problem has buffers.
    WrongLength { expected: usize, got: usize },
    /// A buffer's offset is not a multiple of its alignment.
    Misaligned {
        index: usize,
        id: String,
        offset: u64,
        align: u64,
    },
    /// `offset + size` does not fit in a `u64`.
    Overflow { index: usize, id: String },
    /// Two buffers alive at the same time share addresses.
    Overlap {
        first: (usize, String),
        second: (usize, String),
        /// A time at which both are alive.
        time: u64,
        /// The first shared address range `[start, end)`.
        addresses: (u64, u64),
    },
    /// A buffer refers to an object that does not exist.
    UnknownObject {
        index: usize,
        id: String,
        object: usize,
    },
    /// Two buffers of one object are alive at the same time.
    ObjectConflict {
        object: usize,
        first: (usize, String),
        second: (usize, String),
    },
    /// An object's size differs from the size of its largest buffer.
    ObjectSize {
        object: usize,
        size: u64,
        largest: u64,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::WrongLength { expected, got } => {
                write!(f, "the plan has {got} entries for {expected} buffers")
            }
            PlanError::Misaligned {
                index,
                id,
                offset,
                align,
            } => write!(
                f,
                "buffer #{index} ({id:?}) at offset {offset} is not aligned to {align}"
            ),
            PlanError::Overflow { index, id } => {
                write!(f, "buffer #{index} ({id:?}): offset + size overflows")
            }
            PlanError::Overlap {
                first,
                second,
                time,
                addresses,
            } => write!(
                f,
                "buffers #{} ({:?}) and #{} ({:?}) are both alive at time {} and share addresses [{}, {})",
                first.0, first.1, second.0, second.1, time, addresses.0, addresses.1
            ),
            PlanError::UnknownObject { index, id, object } => {
                write!(f, "buffer #{index} ({id:?}) refers to unknown object {object}")
            }
            PlanError::ObjectConflict {
                object,
                first,
                second,
            } => write!(
                f,
                "buffers #{} ({:?}) and #{} ({:?}) share object {} but are alive at the same time",
                first.0, first.1, second.0, second.1, object
            ),
            PlanError::ObjectSize {
                object,
                size,
                largest,
            } => write!(
                f,
                "object {object} has size {size} but its largest buffer has size {largest}"
            ),
        }
    }
}

impl std::error::Error for PlanError {}

/// Checks an offset plan and returns its height.
///
/// Errors name the misaligned buffer, or the first two buffers (in time order) that are
/// alive together and overlap in address.
///
/// ```
/// use memo_planner::{validate_offsets, Buffer, OffsetPlan, Problem};
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b", 1, 3, 8)]).unwrap();
/// assert_eq!(validate_offsets(&p, &OffsetPlan { offsets: vec![0, 8] }), Ok(16));
/// let err = validate_offsets(&p, &OffsetPlan { offsets: vec![0, 4] }).unwrap_err();
/// assert!(err.to_string().contains("\"a\""));
/// ```
pub fn validate_offsets(problem: &Problem, plan: &OffsetPlan) -> Result<u64, PlanError> {
    let buffers = problem.buffers();
    if plan.offsets.len() != buffers.len() {
        return Err(PlanError::WrongLength {
            expected: buffers.len(),
            got: plan.offsets.len(),
        });
    }
    let mut height = 0u64;
    for (index, (b, &offset)) in buffers.iter().zip(&plan.offsets).enumerate() {
        if offset % b.align != 0 {
            return Err(PlanError::Misaligned {
                index,
                id: b.id.clone(),
                offset,
                align: b.align,
            });
        }
        let end = offset
            .checked_add(b.size)
            .ok_or_else(|| PlanError::Overflow {
                index,
                id: b.id.clone(),
            })?;
        height = height.max(end);
    }

    // Events: (time, kind, index) with frees (kind 0) before allocations (kind 1) at one
    // time, because lifetimes are half-open.
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(2 * buffers.len());
    for (i, b) in buffers.iter().enumerate() {
        events.push((b.lower, 1, i));
        events.push((b.upper, 0, i));
    }
    events.sort_unstable();

    let mut live: BTreeMap<u64, usize> = BTreeMap::new();
    let name = |i: usize| (i, buffers[i].id.clone());
    for (time, kind, i) in events {
        let start = plan.offsets[i];
        if kind == 0 {
            live.remove(&start);
            continue;
        }
        let end = start + buffers[i].size;
        if let Some((&s, &j)) = live.range(..=start).next_back() {
            let e = s + buffers[j].size;
            if e > start {
                return Err(overlap(name(j), name(i), time, start, e.min(end)));
            }
        }
        if let Some((&s, &j)) = live.range(start..).next() {
            if s < end {
                return Err(overlap(
                    name(j),
                    name(i),
                    time,
                    s,
                    end.min(s + buffers[j].size),
                ));
            }
        }
        live.insert(start, i);
    }
    Ok(height)
}

fn overlap(a: (usize, String), b: (usize, String), time: u64, s: u64, e: u64) -> PlanError {
    let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
    PlanError::Overlap {
        first,
        second,
        time,
        addresses: (s, e),
    }
}

/// Checks a shared-objects plan and returns its total (the sum of object sizes).
///
/// Every buffer must refer to an existing object, buffers of one object must never be
/// alive together, and every object's size must equal its largest buffer's.
pub fn validate_shared(problem: &Problem, plan: &SharedObjectsPlan) -> Result<u64, PlanError> {
    let buffers = problem.buffers();
    if plan.object_ids.len() != buffers.len() {
        return Err(PlanError::WrongLength {
            expected: buffers.len(),
            got: plan.object_ids.len(),
        });
    }
    let n_obj = plan.object_sizes.len();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n_obj];
    for (index, (b, &obj)) in buffers.iter().zip(&plan.object_ids).enumerate() {
        let Some(m) = members.get_mut(obj) else {
            return Err(PlanError::UnknownObject {
                index,
                id: b.id.clone(),
                object: obj,
            });
        };
        m.push(index);
    }
    for (object, m) in members.iter_mut().enumerate() {
        m.sort_unstable_by_key(|&i| (buffers[i].lower, buffers[i].upper));
        for w in m.windows(2) {
            let (a, b) = (&buffers[w[0]], &buffers[w[1]]);
            if a.conflicts_with(b) {
                let (x, y) = (w[0].min(w[1]), w[0].max(w[1]));
                return Err(PlanError::ObjectConflict {
                    object,
                    first: (x, buffers[x].id.clone()),
                    second: (y, buffers[y].id.clone()),
                });
            }
        }
        let largest = m.iter().map(|&i| buffers[i].size).max().unwrap_or(0);
        if largest != plan.object_sizes[object] {
            return Err(PlanError::ObjectSize {
                object,
                size: plan.object_sizes[object],
                largest,
            });
        }
    }
    plan.object_sizes
        .iter()
        .try_fold(0u64, |acc, &s| acc.checked_add(s))
        .ok_or(PlanError::Overflow {
            index: 0,
            id: String::new(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Buffer;

    fn p(v: &[(u64, u64, u64)]) -> Problem {
        Problem::new(
            v.iter()
                .enumerate()
                .map(|(i, &(l, u, s))| Buffer::new(format!("b{i}"), l, u, s))
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn touching_lifetimes_may_share_addresses() {
        let prob = p(&[(0, 2, 8), (2, 4, 8)]);
        assert_eq!(
            validate_offsets(
                &prob,
                &OffsetPlan {
                    offsets: vec![0, 0]
                }
            ),
            Ok(8)
        );
    }

    #[test]
    fn names_both_overlapping_buffers() {
        let prob = p(&[(0, 10, 8), (0, 1, 4), (5, 6, 8)]);
        let err = validate_offsets(
            &prob,
            &OffsetPlan {
                offsets: vec![0, 8, 4],
            },
        )
        .unwrap_err();
        assert_eq!(
            err,
            PlanError::Overlap {
                first: (0, "b0".into()),
                second: (2, "b2".into()),
                time: 5,
                addresses: (4, 8)
            }
        );
    }

    #[test]
    fn detects_overlap_with_successor_and_equal_offsets() {
        let prob = p(&[(0, 3, 8), (1, 3, 8)]);
        assert!(validate_offsets(
            &prob,
            &OffsetPlan {
                offsets: vec![4, 0]
            }
        )
        .is_err());
        assert!(validate_offsets(
            &prob,
            &OffsetPlan {
                offsets: vec![0, 0]
            }
        )
        .is_err());
        assert!(validate_offsets(
            &prob,
            &OffsetPlan {
                offsets: vec![8, 0]
            }
        )
        .is_ok());
    }

    #[test]
    fn detects_misalignment_overflow_and_length() {
        let prob = Problem::new(vec![Buffer::new("a", 0, 1, 32).with_align(16)]).unwrap();
        assert!(matches!(
            validate_offsets(&prob, &OffsetPlan { offsets: vec![8] }),
            Err(PlanError::Misaligned { offset: 8, .. })
        ));
        assert!(matches!(
            validate_offsets(
                &prob,
                &OffsetPlan {
                    offsets: vec![u64::MAX - 15]
                }
            ),
            Err(PlanError::Overflow { .. })
        ));
        assert!(matches!(
            validate_offsets(&prob, &OffsetPlan { offsets: vec![] }),
            Err(PlanError::WrongLength { .. })
        ));
    }

    #[test]
    fn shared_plans_are_checked() {
        let prob = p(&[(0, 2, 8), (2, 4, 4), (1, 3, 2)]);
        let ok = SharedObjectsPlan {
            object_ids: vec![0, 0, 1],
            object_sizes: vec![8, 2],
        };
        assert_eq!(validate_shared(&prob, &ok), Ok(10));
        let conflict = SharedObjectsPlan {
            object_ids: vec![0, 1, 0],
            object_sizes: vec![8, 4],
        };
        assert!(matches!(
            validate_shared(&prob, &conflict),
            Err(PlanError::ObjectConflict { object: 0, .. })
        ));
        let wrong_size = SharedObjectsPlan {
            object_ids: vec![0, 0, 1],
            object_sizes: vec![16, 2],
        };
        assert!(matches!(
            validate_shared(&prob, &wrong_size),
            Err(PlanError::ObjectSize { .. })
        ));
        let unknown = SharedObjectsPlan {
            object_ids: vec![0, 0, 7],
            object_sizes: vec![8],
        };
        assert!(matches!(
            validate_shared(&prob, &unknown),
            Err(PlanError::UnknownObject { object: 7, .. })
        ));
        assert_eq!(validate_offsets(&prob, &ok.to_offset_plan(&prob)), Ok(10));
    }
}

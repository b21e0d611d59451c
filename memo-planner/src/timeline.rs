//! Compressed time: the distinct lifetime endpoints of a problem, numbered.
//!
//! Between two consecutive endpoints the set of live buffers does not change, so every
//! time-indexed structure of the planner works on these *slots* instead of raw times.

use crate::problem::Problem;

/// The distinct endpoints of a problem's lifetimes, and each buffer's lifetime in slots.
///
/// Slot `k` is the time range `[times[k], times[k + 1])`. Buffer `i` is alive in slots
/// `span[i].0 .. span[i].1`.
#[derive(Clone, Debug)]
pub struct Timeline {
    times: Vec<u64>,
    spans: Vec<(u32, u32)>,
}

impl Timeline {
    /// Numbers the endpoints of `problem` in `O(n log n)`.
    pub fn new(problem: &Problem) -> Timeline {
        let mut times: Vec<u64> = problem
            .buffers()
            .iter()
            .flat_map(|b| [b.lower, b.upper])
            .collect();
        times.sort_unstable();
        times.dedup();
        let slot = |t: u64| times.partition_point(|&x| x < t) as u32;
        let spans = problem
            .buffers()
            .iter()
            .map(|b| (slot(b.lower), slot(b.upper)))
            .collect();
        Timeline { times, spans }
    }

    /// Number of slots (one less than the number of distinct endpoints, or 0).
    pub fn slots(&self) -> usize {
        self.times.len().saturating_sub(1)
    }

    /// The start time of slot `k` (or the last endpoint for `k == slots()`).
    pub fn time(&self, k: usize) -> u64 {
        self.times[k]
    }

    /// The slots `[first, end)` in which buffer `i` is alive.
    pub fn span(&self, i: usize) -> (usize, usize) {
        let (a, b) = self.spans[i];
        (a as usize, b as usize)
    }

    /// Total size of the buffers alive in each slot (the operator breadths), in `O(n + T)`.
    pub fn breadths(&self, problem: &Problem) -> Vec<u64> {
        let mut diff = vec![0i128; self.slots() + 1];
        for (i, b) in problem.buffers().iter().enumerate() {
            let (s, e) = self.span(i);
            diff[s] += b.size as i128;
            diff[e] -= b.size as i128;
        }
        let mut acc = 0i128;
        diff.truncate(self.slots());
        diff.into_iter()
            .map(|d| {
                acc += d;
                acc as u64
            })
            .collect()
    }
}

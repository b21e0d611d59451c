//! Shape buckets and start-up profiling: a bounded set of plans for variable inputs.
//!
//! A service whose inputs vary in size (sequence lengths, batch sizes) keys its passes by
//! the bucket of the size, not by the size: [`Buckets::bucket`] maps a size to the
//! smallest bucket that holds it (powers of two, or a list), so a bucket's plan serves
//! every smaller shape in it (their buffers are no larger than planned; replay matches a
//! smaller shape's requests to the larger plan's slots, and a profile of a smaller shape
//! merges into the plan). [`prewarm`] profiles a bucket at its largest shape at start-up,
//! so no request pays for profiling.

use crate::api::guards::pass;
use crate::api::report::report;
use crate::plan::worker::wait_for_plans;
use crate::registry::PlanState;

/// Maps a size to the smallest bucket holding it.
///
/// ```
/// use memo_alloc::Buckets;
/// let p2 = Buckets::powers_of_two();
/// assert_eq!((p2.bucket(1), p2.bucket(300), p2.bucket(512)), (1, 512, 512));
/// let list = Buckets::list([128, 256, 512]);
/// assert_eq!((list.bucket(100), list.bucket(129), list.bucket(600)), (128, 256, 600));
/// assert_eq!(list.key("bert/seq", 200), "bert/seq<=256");
/// assert_eq!(list.key("bert/seq", 600), "bert/seq=600");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buckets {
    /// Sorted bounds; empty for powers of two.
    bounds: Vec<u64>,
}

impl Buckets {
    /// Buckets at the powers of two.
    pub fn powers_of_two() -> Buckets {
        Buckets { bounds: Vec::new() }
    }

    /// Buckets at these bounds (any order; duplicates ignored).
    pub fn list(bounds: impl IntoIterator<Item = u64>) -> Buckets {
        let mut bounds: Vec<u64> = bounds.into_iter().collect();
        bounds.sort_unstable();
        bounds.dedup();
        Buckets { bounds }
    }

    /// The smallest bucket holding `n`; `n` itself beyond the largest bound.
    pub fn bucket(&self, n: u64) -> u64 {
        if self.bounds.is_empty() {
            return n.checked_next_power_of_two().unwrap_or(n);
        }
        self.bounds
            .get(self.bounds.partition_point(|&b| b < n))
            .copied()
            .unwrap_or(n)
    }

    /// Whether `n` fits a bucket (it is not beyond the largest bound).
    pub fn holds(&self, n: u64) -> bool {
        self.bounds.last().is_none_or(|&b| n <= b)
    }

    /// A pass key for size `n`: `<prefix><=<bucket>`, or `<prefix>=<n>` beyond the largest
    /// bound (a key of its own).
    pub fn key(&self, prefix: &str, n: u64) -> String {
        if self.holds(n) {
            format!("{prefix}<={}", self.bucket(n))
        } else {
            format!("{prefix}={n}")
        }
    }
}

/// Profiles and plans pass `key` by running `f` in passes of it (at most 8) until the key
/// has a plan, waiting for the planner each time; returns whether it has one. Run it at
/// start-up, with `f` at the largest shape of the key's bucket.
///
/// ```
/// let planned = memo_alloc::prewarm("prewarm-doc", || vec![0u8; 4096].len());
/// # let _ = planned;
/// ```
pub fn prewarm<R>(key: &str, mut f: impl FnMut() -> R) -> bool {
    for _ in 0..8 {
        {
            let _pass = pass(key);
            std::hint::black_box(f());
        }
        wait_for_plans(std::time::Duration::from_secs(120));
        match report(key).map(|r| r.state) {
            Some(PlanState::Planned) => return true,
            None => return false, // passes are off
            _ => {}
        }
    }
    false
}

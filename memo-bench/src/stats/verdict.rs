//! The verdict of a cell: memo against another allocator, from the interval of their
//! time ratio.

use serde::Serialize;

use super::bootstrap::Interval;

/// memo's standing against another allocator in one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// memo is faster: the whole interval of other / memo lies above 1.
    Ahead,
    /// The interval spans 1 (or touches it): no difference shown.
    Level,
    /// memo is slower: the whole interval lies below 1.
    Behind,
}

impl Verdict {
    /// Every verdict, in the order summaries count them.
    pub const ALL: [Verdict; 3] = [Verdict::Ahead, Verdict::Level, Verdict::Behind];

    /// memo's verdict from the interval of `other / memo` (a ratio of times).
    pub fn of(other_over_memo: &Interval) -> Verdict {
        if other_over_memo.lo > 1.0 {
            Verdict::Ahead
        } else if other_over_memo.hi < 1.0 {
            Verdict::Behind
        } else {
            Verdict::Level
        }
    }

    /// `ahead`, `level` or `behind`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Ahead => "ahead",
            Verdict::Level => "level",
            Verdict::Behind => "behind",
        }
    }
}

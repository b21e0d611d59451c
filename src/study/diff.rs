//! Two traces compared (`memo diff A B`): by op and by call site, the allocations, bytes
//! and peak-live bytes of each, with the change from A to B, the largest change first.
//!
//! The figures are those of [`totals`]: every allocation record counts (a realloc's new
//! block included); a group's peak-live bytes are what it holds at its trace's first peak
//! of live bytes, so a trace's groups sum to its peak. An op is its op path ([`op_path`]),
//! a call site the frame [`site_name`] names (`?` where no call site was captured); the
//! two traces' groups are matched by those names. Pass traces and whole-program profiles
//! compare alike.
//!
//! [`op_path`]: super::op_path
//! [`site_name`]: super::site_name

use std::collections::BTreeMap;

use memo_alloc::trace::Trace;
use serde::Serialize;

use super::groups::{totals, Totals};

/// The figures of one side of a row, or of a whole trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Figures {
    /// Allocation records.
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Bytes held at the trace's peak of live bytes.
    pub peak_live_bytes: u64,
}

/// The change of each figure from A to B (B − A).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Delta {
    /// Change in allocation records.
    pub allocations: i64,
    /// Change in bytes.
    pub bytes: i64,
    /// Change in peak-live bytes.
    pub peak_live_bytes: i64,
}

/// Which traces a group appears in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    /// In both.
    Both,
    /// In A only.
    AOnly,
    /// In B only.
    BOnly,
}

/// One group (an op or a call site) in both traces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DiffRow {
    /// The op path or call site.
    pub group: String,
    /// Which traces it appears in.
    pub present: Presence,
    /// Its figures in A (zero when only in B).
    pub a: Figures,
    /// Its figures in B (zero when only in A).
    pub b: Figures,
    /// B − A.
    pub delta: Delta,
}

/// One trace's key and totals.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    /// The pass key (or the program's).
    pub key: String,
    /// Its totals over every group.
    pub totals: Figures,
}

/// Two traces compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// The first trace.
    pub a: Side,
    /// The second trace.
    pub b: Side,
    /// B − A over the whole traces.
    pub delta: Delta,
    /// By op path, the largest change first.
    pub by_op: Vec<DiffRow>,
    /// By call site, the largest change first.
    pub by_call_site: Vec<DiffRow>,
}

impl Figures {
    fn add(&mut self, t: &Totals) {
        self.allocations += t.allocations;
        self.bytes += t.bytes;
        self.peak_live_bytes += t.peak_live_bytes;
    }
}

impl Delta {
    /// `b − a`, each figure.
    pub fn between(a: &Figures, b: &Figures) -> Delta {
        let d = |a: u64, b: u64| {
            (i128::from(b) - i128::from(a)).clamp(i64::MIN as i128, i64::MAX as i128) as i64
        };
        Delta {
            allocations: d(a.allocations, b.allocations),
            bytes: d(a.bytes, b.bytes),
            peak_live_bytes: d(a.peak_live_bytes, b.peak_live_bytes),
        }
    }

    /// The order of changes, largest first: bytes, then peak-live bytes, then allocations,
    /// by absolute value.
    fn size(&self) -> (u64, u64, u64) {
        (
            self.bytes.unsigned_abs(),
            self.peak_live_bytes.unsigned_abs(),
            self.allocations.unsigned_abs(),
        )
    }
}

/// Compares two checked traces ([`Trace::check`]).
pub fn diff(a: &Trace, b: &Trace) -> Diff {
    let (ta, tb) = (totals(a), totals(b));
    let side = |trace: &Trace, t: &[Totals]| {
        let mut totals = Figures::default();
        t.iter().for_each(|g| totals.add(g));
        Side {
            key: trace.key.clone(),
            totals,
        }
    };
    let (sa, sb) = (side(a, &ta), side(b, &tb));
    Diff {
        delta: Delta::between(&sa.totals, &sb.totals),
        a: sa,
        b: sb,
        by_op: rows(&ta, &tb, |t| &t.op),
        by_call_site: rows(&ta, &tb, |t| &t.site),
    }
}

/// The groups `name` picks, matched between A and B, the largest change first (ties by
/// name).
fn rows(a: &[Totals], b: &[Totals], name: impl Fn(&Totals) -> &String) -> Vec<DiffRow> {
    let mut groups: BTreeMap<&str, (Option<Figures>, Option<Figures>)> = BTreeMap::new();
    for t in a {
        groups
            .entry(name(t))
            .or_default()
            .0
            .get_or_insert_default()
            .add(t);
    }
    for t in b {
        groups
            .entry(name(t))
            .or_default()
            .1
            .get_or_insert_default()
            .add(t);
    }
    let mut rows: Vec<DiffRow> = groups
        .into_iter()
        .map(|(group, (fa, fb))| {
            let present = match (fa.is_some(), fb.is_some()) {
                (true, false) => Presence::AOnly,
                (false, true) => Presence::BOnly,
                _ => Presence::Both,
            };
            let (a, b) = (fa.unwrap_or_default(), fb.unwrap_or_default());
            DiffRow {
                group: group.to_string(),
                present,
                delta: Delta::between(&a, &b),
                a,
                b,
            }
        })
        .collect();
    // Stable: equal changes stay in name order.
    rows.sort_by_key(|r| std::cmp::Reverse(r.delta.size()));
    rows
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;

//! What every view of a recorded pass builds on: the spans and paths of its op scopes,
//! its realloc chains and what became of them, when each record ends, and the peak of live
//! bytes.

use std::collections::HashMap;

use memo_alloc::trace::{Chain, Trace};
use serde::Serialize;

/// Where the scope spans of a study come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeTimes {
    /// Recorded by the profiler (`enter`/`exit` in every scope).
    Recorded,
    /// Inferred from the allocation times inside each scope (traces without scope times).
    Inferred,
}

/// The event-time span `[enter, exit]` of every scope of a trace, by scope id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spans {
    /// `(enter, exit)` per scope; the pass is `(0, events)`.
    pub spans: Vec<(u64, u64)>,
    /// Whether the spans were recorded or inferred.
    pub times: ScopeTimes,
}

/// The spans of the scopes of a checked trace ([`Trace::check`]).
pub fn scope_spans(trace: &Trace) -> Spans {
    let n = trace.scopes.len();
    let recorded = trace
        .scopes
        .iter()
        .map(|s| s.enter.zip(s.exit))
        .collect::<Option<Vec<_>>>();
    if let Some(mut spans) = recorded {
        if let Some(root) = spans.first_mut() {
            *root = (0, trace.events);
        }
        return Spans {
            spans,
            times: ScopeTimes::Recorded,
        };
    }
    // Allocations happen inside their scope (frees may come later, anywhere): the hull of
    // the allocation times of a subtree lies inside the subtree's real span.
    let mut spans = vec![(u64::MAX, 0u64); n];
    for a in &trace.allocations {
        if let Some(s) = spans.get_mut(a.scope as usize) {
            *s = (s.0.min(a.alloc), s.1.max(a.alloc.saturating_add(1)));
        }
    }
    // Children have larger ids than their parents: fold upwards in reverse order.
    for i in (1..n).rev() {
        let child = spans[i];
        if let Some(p) = trace.scopes[i].parent {
            let ps = &mut spans[p as usize];
            *ps = (ps.0.min(child.0), ps.1.max(child.1));
        }
    }
    if n > 0 {
        spans[0] = (0, trace.events);
    }
    // Scopes with no event inside: an empty span at their parent's start.
    for i in 1..n {
        if spans[i].0 == u64::MAX {
            let p = trace.scopes[i].parent.map_or(0, |p| p as usize);
            let start = spans[p].0;
            spans[i] = (start, start);
        }
    }
    Spans {
        spans,
        times: ScopeTimes::Inferred,
    }
}

/// `layer/matmul`: the op names from the pass down to `scope`, without the pass; the pass
/// itself is `(key)`.
pub fn op_path(trace: &Trace, scope: u32) -> String {
    let mut parts = Vec::new();
    let mut s = Some(scope);
    while let Some(id) = s {
        let Some(node) = trace.scopes.get(id as usize) else {
            break;
        };
        if node.parent.is_none() || parts.len() > trace.scopes.len() {
            break;
        }
        parts.push(node.name.as_str());
        s = node.parent;
    }
    if parts.is_empty() {
        return format!("({})", trace.key);
    }
    parts.reverse();
    parts.join("/")
}

/// The first record of the realloc chain of every allocation record.
pub(crate) fn chain_roots(trace: &Trace) -> Vec<u32> {
    let mut root: Vec<u32> = Vec::with_capacity(trace.allocations.len());
    for (i, a) in trace.allocations.iter().enumerate() {
        let r = match a.realloc_parent {
            Some(p) if (p as usize) < i => root[p as usize],
            _ => i as u32,
        };
        root.push(r);
    }
    root
}

/// End of an allocation record's live interval: its free, or the pass end.
pub(crate) fn record_end(trace: &Trace, i: usize) -> u64 {
    let a = &trace.allocations[i];
    a.free.unwrap_or(trace.events).max(a.alloc)
}

/// The maximum of live bytes over half-open intervals `(start, end, size)`: returns
/// `(peak bytes, live blocks at that time, first time it is reached)`.
pub(crate) fn peak(intervals: impl IntoIterator<Item = (u64, u64, u64)>) -> (u64, u64, u64) {
    // (time, 0 = end / 1 = start, size): ends first at equal times (half-open).
    let mut events: Vec<(u64, u8, u64)> = Vec::new();
    for (start, end, size) in intervals {
        if end > start {
            events.push((start, 1, size));
            events.push((end, 0, size));
        }
    }
    events.sort_unstable();
    let (mut live, mut blocks) = (0u64, 0u64);
    let (mut best, mut best_blocks, mut at) = (0u64, 0u64, 0u64);
    for (t, kind, size) in events {
        if kind == 1 {
            live += size;
            blocks += 1;
            if live > best {
                (best, best_blocks, at) = (live, blocks, t);
            }
        } else {
            live -= size;
            blocks -= 1;
        }
    }
    (best, best_blocks, at)
}

/// The chain (index into `chains`) of every allocation record, `None` for a record whose
/// root starts no chain.
pub(super) fn chain_of_records(trace: &Trace, chains: &[Chain]) -> Vec<Option<usize>> {
    let index: HashMap<u32, usize> = chains
        .iter()
        .enumerate()
        .map(|(ci, c)| (c.root, ci))
        .collect();
    chain_roots(trace)
        .iter()
        .map(|r| index.get(r).copied())
        .collect()
}

/// What became of a realloc chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    /// Finally freed in the pass at `upper`; `short_lived` when that is before the op
    /// instance that made it exits.
    Freed { upper: u64, short_lived: bool },
    /// Still live at the end of the pass.
    Escaping,
}

impl Fate {
    /// The fate of `chain`, short-lived against the span of the scope of its first record.
    pub(super) fn of(trace: &Trace, spans: &Spans, chain: &Chain) -> Fate {
        match chain.upper {
            Some(upper) if !chain.escaping => {
                let scope = trace.allocations[chain.root as usize].scope;
                let exit = spans.spans.get(scope as usize).map_or(0, |s| s.1);
                Fate::Freed {
                    upper,
                    short_lived: upper <= exit,
                }
            }
            _ => Fate::Escaping,
        }
    }
}

/// The chains freed in the pass, with their final free time.
pub(super) fn freed_chains<'c>(
    chains: &'c [Chain],
    fates: &'c [Fate],
) -> impl Iterator<Item = (&'c Chain, u64)> {
    chains.iter().zip(fates).filter_map(|(c, f)| match *f {
        Fate::Freed { upper, .. } => Some((c, upper)),
        Fate::Escaping => None,
    })
}

/// The enter times of the op scopes, sorted, to count lifetimes in ops.
pub(super) struct OpStarts(Vec<u64>);

impl OpStarts {
    /// The enter times of every scope but the pass.
    pub(super) fn of(spans: &Spans) -> OpStarts {
        let mut enters: Vec<u64> = spans.spans.iter().skip(1).map(|s| s.0).collect();
        enters.sort_unstable();
        OpStarts(enters)
    }

    /// How many op scopes were entered strictly between `lower` and `upper`.
    pub(super) fn between(&self, lower: u64, upper: u64) -> u64 {
        let hi = self.0.partition_point(|&t| t < upper);
        let lo = self.0.partition_point(|&t| t <= lower);
        hi.saturating_sub(lo) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::tests::sample;

    #[test]
    fn op_starts_count_ops_entered_strictly_inside_a_lifetime() {
        let t = sample();
        // Ops a, b, b enter at 0, 5 and 12.
        let starts = OpStarts::of(&scope_spans(&t));
        assert_eq!(starts.between(0, 5), 0);
        assert_eq!(starts.between(0, 6), 1);
        assert_eq!(starts.between(4, 13), 2);
        assert_eq!(starts.between(5, 5), 0);
    }

    #[test]
    fn peak_is_half_open() {
        // Back to back: never both live.
        assert_eq!(peak([(0, 2, 10), (2, 4, 10)]), (10, 1, 0));
        assert_eq!(peak([(0, 3, 10), (2, 4, 5), (5, 6, 1)]), (15, 2, 2));
        assert_eq!(peak([(1, 1, 99)]), (0, 0, 0));
    }
}

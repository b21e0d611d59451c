//! Allocation records grouped by op and call site: the live set at the peak, the leaks,
//! the per-thread breakdown of whole-program traces, and the totals `memo diff` compares.
//!
//! A group is one (op path, call site) pair: the op path as [`op_path`] names it, the call
//! site as [`site_name`] names it (`?` where no call site was captured). Every record
//! counts (a realloc is a record of its own), so the bytes of a group at a time are the
//! bytes its records hold then.

use std::collections::HashMap;

use memo_alloc::trace::Trace;
use serde::Serialize;

use super::pass::{peak, record_end};
use super::{op_path, site_name};

/// The records of one (op, call site) group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Group {
    /// The op path (`(key)` for the pass or program itself).
    pub op: String,
    /// The call site (`?` when none was captured).
    pub site: String,
    /// Records in the group.
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// The (op, call site) key of every record of `trace`.
pub fn group_keys(trace: &Trace) -> Vec<(String, String)> {
    let mut ops: HashMap<u32, String> = HashMap::new();
    trace
        .allocations
        .iter()
        .map(|a| {
            let op = ops
                .entry(a.scope)
                .or_insert_with(|| op_path(trace, a.scope))
                .clone();
            let site = a.call_site.as_deref().map_or_else(|| "?".into(), site_name);
            (op, site)
        })
        .collect()
}

/// Groups the records `records` (indices into the trace's allocations) by op and call
/// site, largest bytes first (ties by op, then site).
fn grouped(trace: &Trace, records: impl IntoIterator<Item = usize>) -> Vec<Group> {
    let keys = group_keys(trace);
    let mut index: HashMap<&(String, String), usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    for i in records {
        let key = &keys[i];
        let g = *index.entry(key).or_insert_with(|| {
            groups.push(Group {
                op: key.0.clone(),
                site: key.1.clone(),
                allocations: 0,
                bytes: 0,
            });
            groups.len() - 1
        });
        groups[g].allocations += 1;
        groups[g].bytes += trace.allocations[i].size;
    }
    sort_groups(&mut groups);
    groups
}

/// Largest bytes first; ties by op, then call site.
fn sort_groups(groups: &mut [Group]) {
    groups.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.op.cmp(&b.op))
            .then_with(|| a.site.cmp(&b.site))
    });
}

/// The first time live bytes reach their peak (0 for an empty trace).
pub fn peak_time(trace: &Trace) -> u64 {
    let intervals = (0..trace.allocations.len()).map(|i| {
        let a = &trace.allocations[i];
        (a.alloc, record_end(trace, i), a.size)
    });
    peak(intervals).2
}

/// What is live at the peak of live bytes, by op and call site, largest first: the
/// records with `alloc ≤ t < end` at the first time `t` the peak is reached.
pub fn peak_live_set(trace: &Trace) -> Vec<Group> {
    let t = peak_time(trace);
    grouped(
        trace,
        (0..trace.allocations.len()).filter(|&i| {
            let a = &trace.allocations[i];
            a.alloc <= t && t < record_end(trace, i)
        }),
    )
}

/// The blocks never freed (live at the end of the pass or program, their free unseen), by
/// op and call site, largest first.
pub fn leaks(trace: &Trace) -> Vec<Group> {
    grouped(
        trace,
        (0..trace.allocations.len()).filter(|&i| trace.allocations[i].free.is_none()),
    )
}

/// Every record by op and call site, with its peak-live bytes: what `memo diff` compares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// The group.
    pub op: String,
    /// Its call site.
    pub site: String,
    /// Records.
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Bytes the group holds at the trace's peak of live bytes.
    pub peak_live_bytes: u64,
}

/// Every group of `trace` with its totals and its bytes at the peak, largest bytes first.
pub fn totals(trace: &Trace) -> Vec<Totals> {
    let at_peak: HashMap<(String, String), u64> = peak_live_set(trace)
        .into_iter()
        .map(|g| ((g.op, g.site), g.bytes))
        .collect();
    grouped(trace, 0..trace.allocations.len())
        .into_iter()
        .map(|g| Totals {
            peak_live_bytes: at_peak
                .get(&(g.op.clone(), g.site.clone()))
                .copied()
                .unwrap_or(0),
            op: g.op,
            site: g.site,
            allocations: g.allocations,
            bytes: g.bytes,
        })
        .collect()
}

/// One thread of a whole-program trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadRow {
    /// Its index in the trace.
    pub thread: u32,
    /// The operating system's thread id.
    pub tid: u64,
    /// Its name, when it has one.
    pub name: Option<String>,
    /// Records it made.
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Of those, records freed by another thread.
    pub freed_elsewhere: u64,
    /// Bytes of its records never freed.
    pub leaked_bytes: u64,
    /// Bytes of its records live at the trace's peak.
    pub peak_live_bytes: u64,
}

/// Each thread of a trace that records threads (a whole-program trace), by bytes
/// allocated, largest first; empty for a pass trace.
pub fn threads(trace: &Trace) -> Vec<ThreadRow> {
    let Some(rec) = &trace.recording else {
        return Vec::new();
    };
    let mut rows: Vec<ThreadRow> = rec
        .threads
        .iter()
        .map(|t| ThreadRow {
            thread: t.id,
            tid: t.tid,
            name: t.name.clone(),
            allocations: 0,
            bytes: 0,
            freed_elsewhere: 0,
            leaked_bytes: 0,
            peak_live_bytes: 0,
        })
        .collect();
    let t = peak_time(trace);
    for (i, a) in trace.allocations.iter().enumerate() {
        let Some(w) = a.when else { continue };
        let Some(row) = rows.get_mut(w.thread as usize) else {
            continue;
        };
        row.allocations += 1;
        row.bytes += a.size;
        if w.free_thread.is_some_and(|f| f != w.thread) {
            row.freed_elsewhere += 1;
        }
        if a.free.is_none() {
            row.leaked_bytes += a.size;
        }
        if a.alloc <= t && t < record_end(trace, i) {
            row.peak_live_bytes += a.size;
        }
    }
    rows.retain(|r| r.allocations > 0);
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.thread.cmp(&b.thread)));
    rows
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;

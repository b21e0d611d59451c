//! Allocation-pattern studies of recorded passes: the analysis behind `memo stats`, the
//! exporters behind `memo export` and the comparison behind `memo diff`.
//!
//! Input is a [`Trace`] written by memo-alloc (`MEMO_TRACE_DIR` for passes, `MEMO_PROFILE`
//! or `Profiler` for a whole program). Time in a trace is an
//! event counter: every allocation, free, realloc, op enter and op exit of the pass is one
//! tick. The pass is scope 0; every op scope of the trace is one op *instance* (one enter
//! and one exit).
//!
//! Definitions used throughout:
//! - an **allocation** is a logical buffer: a realloc chain counted once, from its first
//!   allocation, with the largest size over the chain ([`Trace::chains`]). *Calls* count
//!   every `alloc`, `alloc_zeroed`, `realloc` and `free` separately;
//! - the **op** of an allocation is the path of op names from the pass down to the
//!   innermost scope open when the chain was first allocated (`layer/matmul`; allocations
//!   made directly in the pass are attributed to `(pass key)`);
//! - **lifetime in events** is `free − alloc` of the chain (first allocation to final
//!   free); **lifetime in ops** is the number of op scopes entered strictly between those
//!   two times, i.e. how many ops started while the buffer was live. Allocations still
//!   live at the end of the pass (escaping) have no lifetime and are counted apart;
//! - an allocation is **short-lived** when its final free happens before the op instance
//!   that made it exits (for allocations made directly in the pass: before the pass ends,
//!   so every non-escaping one), **escaping** when it outlives the pass, **realloc'd** when
//!   its chain has more than one member;
//! - **live bytes** at time `t` sum the sizes of the allocation records with
//!   `alloc ≤ t < free` (a realloc ends its predecessor at the time it starts).
//!
//! A trace without scope times (no `enter`/`exit` in its scopes) has its scope spans
//! inferred from the allocation events inside each scope ([`ScopeTimes::Inferred`]), which
//! makes op lifetimes and short-lived shares approximate.

pub mod dhat;
pub mod diff;
pub mod folded;
pub mod groups;
mod ops;
mod pass;
pub mod perfetto;
pub mod pprof;
mod stacks;

use std::collections::HashMap;

use memo_alloc::trace::{AllocKind, Chain, Trace};
use memo_planner::format::problem_to_csv;
use memo_planner::{align_up, offsets_lower_bound, OffsetStrategy};
use serde::Serialize;

pub use groups::{Group, ThreadRow, Totals};
pub use ops::OpRow;
pub use pass::{op_path, scope_spans, ScopeTimes, Spans};

use pass::{chain_of_records, freed_chains, peak, record_end, Fate, OpStarts};

/// How many call sites [`Study::call_sites`] keeps.
pub const TOP_CALL_SITES: usize = 10;

/// Index of the power-of-two bucket of `v`: 0 holds 0, `k ≥ 1` holds `[2^(k−1), 2^k − 1]`.
fn bucket_of(v: u64) -> usize {
    (64 - v.leading_zeros()) as usize
}

/// One bucket of a histogram: values in `[min, max]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Smallest value of the bucket.
    pub min: u64,
    /// Largest value of the bucket.
    pub max: u64,
    /// Allocations in the bucket.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// A power-of-two histogram of `(value, bytes)` pairs, from the smallest to the largest
/// non-empty bucket (empty buckets in between included).
fn histogram(values: impl IntoIterator<Item = (u64, u64)>) -> Vec<Bucket> {
    let mut counts = [(0u64, 0u64); 65];
    for (v, bytes) in values {
        let c = &mut counts[bucket_of(v)];
        c.0 += 1;
        c.1 += bytes;
    }
    let Some(first) = counts.iter().position(|c| c.0 > 0) else {
        return Vec::new();
    };
    let last = counts.iter().rposition(|c| c.0 > 0).unwrap_or(first);
    (first..=last)
        .map(|k| {
            let (min, max) = match k {
                0 => (0, 0),
                64 => (1 << 63, u64::MAX),
                k => (1u64 << (k - 1), (1u64 << k) - 1),
            };
            Bucket {
                min,
                max,
                count: counts[k].0,
                bytes: counts[k].1,
            }
        })
        .collect()
}

/// Calls of each kind made by the pass.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Calls {
    /// `alloc` calls.
    pub alloc: u64,
    /// `alloc_zeroed` calls.
    pub alloc_zeroed: u64,
    /// `realloc` calls.
    pub realloc: u64,
    /// `dealloc` calls seen (final frees of chains).
    pub free: u64,
    /// Bytes requested over all `alloc`, `alloc_zeroed` and `realloc` calls.
    pub bytes: u64,
}

/// Memory: the peak against what a plan needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// Most bytes live at once, escaping allocations included.
    pub peak_live: u64,
    /// First event time of that peak.
    pub peak_time: u64,
    /// Most bytes of planned (non-escaping) allocations live at once.
    pub peak_live_planned: u64,
    /// Planned buffers (non-escaping realloc chains).
    pub planned_buffers: u64,
    /// Their sizes summed, aligned as planned (a heap with no reuse).
    pub naive: u64,
    /// The offsets lower bound of the planned buffers.
    pub lower_bound: u64,
    /// Strategy of the plan.
    pub strategy: String,
    /// The plan's slab height.
    pub height: u64,
}

/// A count of allocations and their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Share {
    /// Allocations.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Allocations by fate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Shares {
    /// Freed before the op instance that made them exits.
    pub short_lived: Share,
    /// Still live at the end of the pass (never planned).
    pub escaping: Share,
    /// Grown or shrunk by `realloc` at least once.
    pub reallocated: Share,
}

/// Allocations attributed to one call site.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallSite {
    /// The first frame outside the standard library (or the innermost frame).
    pub site: String,
    /// Allocations made there.
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The full frames of the first of them, innermost first.
    pub frames: Vec<String>,
}

/// Everything `memo stats` reports about a pass; see the [module documentation](self) for
/// the definitions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Study {
    /// The pass key.
    pub key: String,
    /// Events of the pass (its final time).
    pub events: u64,
    /// Op scope instances entered.
    pub op_instances: u64,
    /// Whether scope spans were recorded or inferred.
    pub scope_times: ScopeTimes,
    /// Allocations (realloc chains).
    pub allocations: u64,
    /// Their bytes (the largest size of each chain).
    pub bytes: u64,
    /// Calls by kind.
    pub calls: Calls,
    /// Allocations by size, in power-of-two buckets of bytes.
    pub sizes: Vec<Bucket>,
    /// Non-escaping allocations by lifetime in events, in power-of-two buckets.
    pub lifetime_events: Vec<Bucket>,
    /// Non-escaping allocations by lifetime in ops (op scopes entered while live).
    pub lifetime_ops: Vec<Bucket>,
    /// Allocations by op, by bytes (largest first).
    pub ops: Vec<OpRow>,
    /// Peak live bytes against the lower bound and a plan.
    pub memory: Memory,
    /// Allocations by fate.
    pub shares: Shares,
    /// Whether call sites were captured (`MEMO_BACKTRACE=1`).
    pub call_sites_captured: bool,
    /// The top call sites by bytes (empty when not captured).
    pub call_sites: Vec<CallSite>,
    /// What is live at the peak of live bytes, by op and call site, largest first.
    pub peak_live_set: Vec<Group>,
    /// The blocks never freed, by op and call site, largest first.
    pub leaks: Vec<Group>,
    /// Each thread, for traces that record threads (whole-program profiles).
    pub threads: Vec<ThreadRow>,
}

impl Study {
    /// Studies a checked trace ([`Trace::check`]), planning it with `best`.
    pub fn of(trace: &Trace) -> Study {
        Study::with_strategy(trace, OffsetStrategy::Best)
    }

    /// Studies a checked trace, planning it with `strategy`.
    pub fn with_strategy(trace: &Trace, strategy: OffsetStrategy) -> Study {
        let spans = scope_spans(trace);
        let chains = trace.chains();
        let chain_of = chain_of_records(trace, &chains);
        let fates: Vec<Fate> = chains.iter().map(|c| Fate::of(trace, &spans, c)).collect();
        let freed = || freed_chains(&chains, &fates);
        let starts = OpStarts::of(&spans);
        Study {
            key: trace.key.clone(),
            events: trace.events,
            op_instances: trace.scopes.len().saturating_sub(1) as u64,
            scope_times: spans.times,
            allocations: chains.len() as u64,
            bytes: chains.iter().map(|c| c.size).sum(),
            calls: Calls::of(trace),
            sizes: histogram(chains.iter().map(|c| (c.size, c.size))),
            lifetime_events: histogram(
                freed().map(|(c, upper)| (upper.saturating_sub(c.lower), c.size)),
            ),
            lifetime_ops: histogram(
                freed().map(|(c, upper)| (starts.between(c.lower, upper), c.size)),
            ),
            ops: ops::rows(trace, &chains, &fates, &chain_of),
            memory: Memory::of(trace, &chains, &chain_of, strategy),
            shares: Shares::of(&chains, &fates, &chain_of),
            call_sites_captured: trace.allocations.iter().any(|a| a.call_site.is_some()),
            call_sites: top_call_sites(trace, &chains),
            peak_live_set: groups::peak_live_set(trace),
            leaks: groups::leaks(trace),
            threads: groups::threads(trace),
        }
    }
}

impl Calls {
    /// Every record is one `alloc`, `alloc_zeroed` or `realloc` call; a `free` is the final
    /// free of a chain (a freed, non-escaping record that no realloc continued).
    fn of(trace: &Trace) -> Calls {
        let mut calls = Calls::default();
        let mut continued = vec![false; trace.allocations.len()];
        for a in &trace.allocations {
            match a.kind {
                AllocKind::Alloc => calls.alloc += 1,
                AllocKind::AllocZeroed => calls.alloc_zeroed += 1,
                AllocKind::Realloc => calls.realloc += 1,
            }
            calls.bytes += a.size;
            if let Some(c) = a.realloc_parent.and_then(|p| continued.get_mut(p as usize)) {
                *c = true;
            }
        }
        calls.free = trace
            .allocations
            .iter()
            .zip(&continued)
            .filter(|(a, &c)| a.free.is_some() && !a.escaping && !c)
            .count() as u64;
        calls
    }
}

impl Share {
    /// Counts one more allocation of `bytes`.
    fn add(&mut self, bytes: u64) {
        self.count += 1;
        self.bytes += bytes;
    }
}

impl Shares {
    fn of(chains: &[Chain], fates: &[Fate], chain_of: &[Option<usize>]) -> Shares {
        let mut records = vec![0u64; chains.len()];
        for ci in chain_of.iter().flatten() {
            records[*ci] += 1;
        }
        let mut shares = Shares::default();
        for ((c, fate), records) in chains.iter().zip(fates).zip(records) {
            if records > 1 {
                shares.reallocated.add(c.size);
            }
            match fate {
                Fate::Freed {
                    short_lived: true, ..
                } => shares.short_lived.add(c.size),
                Fate::Freed { .. } => {}
                Fate::Escaping => shares.escaping.add(c.size),
            }
        }
        shares
    }
}

impl Memory {
    /// The peaks of all records and of the planned ones (records of non-escaping chains),
    /// against the plan `strategy` makes of the trace's problem.
    fn of(
        trace: &Trace,
        chains: &[Chain],
        chain_of: &[Option<usize>],
        strategy: OffsetStrategy,
    ) -> Memory {
        let intervals = (0..trace.allocations.len()).map(|i| {
            let a = &trace.allocations[i];
            (a.alloc, record_end(trace, i), a.size)
        });
        let planned = intervals
            .clone()
            .zip(chain_of)
            .filter(|(_, ci)| ci.is_some_and(|ci| !chains[ci].escaping))
            .map(|(interval, _)| interval);
        let (peak_live, _, peak_time) = peak(intervals);
        let (problem, _) = trace.to_problem();
        let plan = strategy.plan(&problem);
        Memory {
            peak_live,
            peak_time,
            peak_live_planned: peak(planned).0,
            planned_buffers: problem.len() as u64,
            naive: problem
                .buffers()
                .iter()
                .map(|b| align_up(b.size, b.align))
                .sum(),
            lower_bound: offsets_lower_bound(&problem),
            strategy: strategy.name().to_string(),
            height: plan.height(&problem),
        }
    }
}

/// The [`TOP_CALL_SITES`] call sites of the chains' first allocations with the most bytes.
fn top_call_sites(trace: &Trace, chains: &[Chain]) -> Vec<CallSite> {
    let mut sites: Vec<CallSite> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for c in chains {
        let Some(frames) = &trace.allocations[c.root as usize].call_site else {
            continue;
        };
        let site = site_name(frames);
        let i = *index.entry(site.clone()).or_insert_with(|| {
            sites.push(CallSite {
                site,
                allocations: 0,
                bytes: 0,
                frames: frames.clone(),
            });
            sites.len() - 1
        });
        sites[i].allocations += 1;
        sites[i].bytes += c.size;
    }
    sites.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)));
    sites.truncate(TOP_CALL_SITES);
    sites
}

/// Whether frame `f` is the standard library's (or its allocation machinery's).
fn is_std_frame(f: &str) -> bool {
    let f = f.trim_start_matches('<');
    ["alloc::", "core::", "std::", "hashbrown::", "__rust"]
        .iter()
        .any(|p| f.starts_with(p))
}

/// The frames of a call site from the frame that names it ([`site_name`]) outwards: the
/// innermost frames of the standard library left out, unless every frame is one.
pub fn site_frames(frames: &[String]) -> &[String] {
    match frames.iter().position(|f| !is_std_frame(f)) {
        Some(i) => &frames[i..],
        None => frames,
    }
}

/// The frame that names a call site: the first one outside the standard library, or the
/// innermost one, or `?` with no frames.
pub fn site_name(frames: &[String]) -> String {
    site_frames(frames)
        .first()
        .cloned()
        .unwrap_or_else(|| "?".to_string())
}

/// The pass as a planner problem in the minimalloc CSV convention (`id,lower,upper,size`
/// plus `alignment` when needed): one buffer per non-escaping realloc chain, named by the
/// id of its first allocation, as planned by memo-alloc ([`Trace::to_problem`]).
pub fn to_csv(trace: &Trace) -> String {
    let (problem, _) = trace.to_problem();
    problem_to_csv(&problem, None)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use memo_alloc::trace::{TraceAlloc, TraceScope, FORMAT_VERSION, TRACE_FORMAT};

    fn scope(id: u32, parent: Option<u32>, name: &str, span: (u64, u64)) -> TraceScope {
        TraceScope {
            id,
            parent,
            name: name.into(),
            occurrence: 0,
            enter: Some(span.0),
            exit: Some(span.1),
        }
    }

    fn alloc(id: u32, scope: u32, size: u64, alloc: u64, free: Option<u64>) -> TraceAlloc {
        TraceAlloc {
            id,
            tag: id as u16,
            ptr: 0x1000 * (id as u64 + 1),
            size,
            align: 8,
            kind: AllocKind::Alloc,
            alloc,
            free,
            scope,
            ordinal: Some(id),
            realloc_parent: None,
            escaping: free.is_none(),
            call_site: None,
            when: None,
        }
    }

    /// A pass of 16 events:
    /// ```text
    /// t  0 enter a        (scope 1)
    /// t  1 alloc #0 64 B  in a, freed at 3 (short-lived)
    /// t  2 alloc #1 100 B in a, freed at 9 (outlives a)
    /// t  3 free #0
    /// t  4 exit a
    /// t  5 enter b        (scope 2)
    /// t  6 alloc #2 1000 B in b, realloc'd at 7 to #3 (2000 B), freed at 8
    /// t  9 free #1
    /// t 10 exit b
    /// t 11 alloc #4 10 B in the pass, escaping
    /// t 12 enter b (scope 3) ... t 13 exit b
    /// ```
    pub(crate) fn sample() -> Trace {
        let mut r2 = alloc(2, 2, 1000, 6, Some(7));
        r2.escaping = false;
        let mut r3 = alloc(3, 2, 2000, 7, Some(8));
        r3.kind = AllocKind::Realloc;
        r3.ordinal = None;
        r3.realloc_parent = Some(2);
        Trace {
            format: TRACE_FORMAT.into(),
            version: FORMAT_VERSION,
            key: "model".into(),
            events: 16,
            scopes: vec![
                scope(0, None, "model", (0, 16)),
                scope(1, Some(0), "a", (0, 4)),
                scope(2, Some(0), "b", (5, 10)),
                scope(3, Some(0), "b", (12, 13)),
            ],
            allocations: vec![
                alloc(0, 1, 64, 1, Some(3)),
                alloc(1, 1, 100, 2, Some(9)),
                r2,
                r3,
                alloc(4, 0, 10, 11, None),
            ],
            uses: Vec::new(),
            recording: None,
        }
    }

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        assert_eq!(bucket_of(2), 2);
        assert_eq!(bucket_of(3), 2);
        assert_eq!(bucket_of(4), 3);
        assert_eq!(bucket_of(u64::MAX), 64);
        let h = histogram([(3, 3), (5, 5), (6, 6)]);
        let rows: Vec<_> = h.iter().map(|b| (b.min, b.max, b.count, b.bytes)).collect();
        assert_eq!(rows, [(2, 3, 1, 3), (4, 7, 2, 11)]);
        assert!(histogram([]).is_empty());
        assert_eq!(histogram([(u64::MAX, 1)])[0].max, u64::MAX);
    }

    #[test]
    fn studies_the_sample() {
        let t = sample();
        t.check().unwrap();
        let s = Study::of(&t);
        assert_eq!(s.scope_times, ScopeTimes::Recorded);
        assert_eq!(s.op_instances, 3);
        assert_eq!(s.allocations, 4);
        assert_eq!(s.bytes, 64 + 100 + 2000 + 10);
        assert_eq!(
            s.calls,
            Calls {
                alloc: 4,
                alloc_zeroed: 0,
                realloc: 1,
                free: 3,
                bytes: 64 + 100 + 1000 + 2000 + 10
            }
        );
        assert_eq!(
            s.shares.short_lived,
            Share {
                count: 2,
                bytes: 2064
            }
        );
        assert_eq!(
            s.shares.escaping,
            Share {
                count: 1,
                bytes: 10
            }
        );
        assert_eq!(
            s.shares.reallocated,
            Share {
                count: 1,
                bytes: 2000
            }
        );
        // Lifetimes: #0 2 events, #1 7, chain #2 2; in ops: #1 sees b enter (t 5).
        let ev: Vec<_> = s.lifetime_events.iter().map(|b| (b.min, b.count)).collect();
        assert_eq!(ev, [(2, 2), (4, 1)]);
        let ops: Vec<_> = s.lifetime_ops.iter().map(|b| (b.min, b.count)).collect();
        assert_eq!(ops, [(0, 2), (1, 1)]);
        let rows: Vec<_> = s
            .ops
            .iter()
            .map(|r| {
                (
                    r.op.as_str(),
                    r.instances,
                    r.allocations,
                    r.bytes,
                    r.peak_live,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("b", 2, 1, 2000, 2000),
                ("a", 1, 2, 164, 164),
                ("(model)", 1, 1, 10, 10)
            ]
        );
        // Peak: at t 7, #1 (100) + #3 (2000).
        assert_eq!(s.memory.peak_live, 2100);
        assert_eq!(s.memory.peak_time, 7);
        assert_eq!(s.memory.peak_live_planned, 2100);
        assert_eq!(s.memory.planned_buffers, 3);
        assert!(s.memory.lower_bound >= 2100);
        assert!(s.memory.height >= s.memory.lower_bound);
        assert!(!s.call_sites_captured);
        assert!(to_csv(&t).starts_with("id,lower,upper,size"));
    }

    #[test]
    fn infers_spans_without_scope_times() {
        let mut t = sample();
        for s in &mut t.scopes {
            s.enter = None;
            s.exit = None;
        }
        let spans = scope_spans(&t);
        assert_eq!(spans.times, ScopeTimes::Inferred);
        assert_eq!(spans.spans, [(0, 16), (1, 3), (6, 8), (0, 0)]);
        let s = Study::of(&t);
        assert_eq!(s.scope_times, ScopeTimes::Inferred);
        assert_eq!(s.allocations, 4);
    }

    #[test]
    fn call_sites_skip_the_standard_library() {
        let frames = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            site_name(&frames(&[
                "<alloc::vec::Vec<T>>::with_capacity",
                "app::conv",
                "main"
            ])),
            "app::conv"
        );
        assert_eq!(site_name(&frames(&["core::x"])), "core::x");
        assert_eq!(site_name(&[]), "?");
        let f = frames(&["<alloc::raw_vec::RawVec<T>>::grow", "app::conv", "main"]);
        assert_eq!(site_frames(&f), &f[1..]);
        let all_std = frames(&["core::x", "std::rt"]);
        assert_eq!(site_frames(&all_std), &all_std[..]);
        let mut t = sample();
        t.allocations[1].call_site = Some(frames(&["app::big"]));
        t.allocations[2].call_site = Some(frames(&["app::grow"]));
        let s = Study::of(&t);
        assert!(s.call_sites_captured);
        let sites: Vec<_> = s
            .call_sites
            .iter()
            .map(|c| (c.site.as_str(), c.bytes))
            .collect();
        assert_eq!(sites, [("app::grow", 2000), ("app::big", 100)]);
    }
}

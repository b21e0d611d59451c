//! Property tests of lanes in plans: a profile recorded whole and one whose lane requests
//! the recorder counted plan alike, the cells are what the requests need, and the
//! escaping lane requests are listed.

use crate::format::trace::{LaneEscape, PlanLanes};
use crate::memory::lane_classes;
use crate::plan::document::build;
use crate::plan::lane_sizing::{lane_of, record_classes};
use crate::profiling::profile::{Profile, LIVE};
use crate::profiling::recorder::{Bounds, Recorder};
use memo_planner::OffsetStrategy;
use proptest::prelude::*;

/// One step of a generated pass.
#[derive(Clone, Debug)]
enum Step {
    /// An allocation of `size` bytes aligned to `1 << align_log2`, in the op or not.
    Alloc(u64, u8, bool),
    /// A free of the `i`-th live allocation (modulo their number).
    Free(usize),
    /// A realloc of the `i`-th live allocation to `size` bytes.
    Realloc(usize, u64),
    /// An allocation at the address of the `i`-th live allocation, whose free the
    /// recorder never saw (freed on another thread).
    Reuse(usize, u64),
}

fn step() -> impl Strategy<Value = Step> {
    let size = prop_oneof![3 => 1u64..300, 1 => 300u64..5000];
    prop_oneof![
        6 => (size.clone(), 0u8..8, any::<bool>()).prop_map(|(s, a, o)| Step::Alloc(s, a, o)),
        5 => any::<usize>().prop_map(Step::Free),
        2 => (any::<usize>(), size.clone()).prop_map(|(i, s)| Step::Realloc(i, s)),
        1 => (any::<usize>(), size).prop_map(|(i, s)| Step::Reuse(i, s)),
    ]
}

/// The profile of `steps`, recorded with lane requests of at most `lanes` bytes
/// counted instead of recorded.
fn record(steps: &[Step], lanes: u64) -> Profile {
    let unbounded = Bounds {
        events: u64::MAX,
        bytes: u64::MAX,
    };
    let mut r = Recorder::new("k", false, unbounded, lanes).unwrap();
    let op = r.enter_scope(0, "op").unwrap();
    let mut live: Vec<usize> = Vec::new();
    let mut next = 0x10_0000usize;
    let mut fresh = || {
        next += 0x1000;
        next as *mut u8
    };
    for s in steps {
        let pick = |i: usize| (!live.is_empty()).then(|| i % live.len());
        match *s {
            Step::Alloc(size, align_log2, in_op) => {
                let a = fresh();
                let scope = if in_op { op } else { 0 };
                r.on_alloc(a, size, 1 << align_log2, false, scope).unwrap();
                live.push(a as usize);
            }
            Step::Free(i) => {
                if let Some(k) = pick(i) {
                    r.on_dealloc(live.swap_remove(k) as *mut u8).unwrap();
                }
            }
            Step::Realloc(i, size) => {
                if let Some(k) = pick(i) {
                    let new = fresh();
                    r.on_realloc(live[k] as *mut u8, new, size, 8).unwrap();
                    live[k] = new as usize;
                }
            }
            Step::Reuse(i, size) => {
                if let Some(k) = pick(i) {
                    r.on_alloc(live[k] as *mut u8, size, 8, false, 0).unwrap();
                }
            }
        }
    }
    r.exit_scope(op).unwrap();
    r.finish().unwrap()
}

fn plan(profile: Profile, max: u64) -> crate::format::trace::PlanFile {
    let lanes = PlanLanes {
        max,
        ..PlanLanes::default()
    };
    build(profile, OffsetStrategy::GreedyBySize, &[], &lanes, drop)
}

/// When each record's chain ends, by root (`LIVE`: it escapes, never freed or lost).
fn chain_ends(p: &Profile) -> Vec<u64> {
    let mut root = vec![0usize; p.records.len()];
    let mut end = vec![0u64; p.records.len()];
    for (i, r) in p.records.iter().enumerate() {
        root[i] = r.parent().map_or(i, |q| root[q as usize]);
        let e = if r.escaping() { LIVE } else { r.free };
        end[root[i]] = end[root[i]].max(e);
    }
    end
}

/// The cells each class needs, worked out afresh from a profile of every request: each
/// lane chain is walked from its request, live in its class's cell until a realloc
/// outgrows the cell, then in the cell of the realloc's class (or on the backend, past the
/// lanes), until the chain ends (one never freed or lost for good: never); at each start
/// of a stay, the stays of its class live, most of them at once, plus those never ended.
fn cells_by_brute_force(p: &Profile, max: u64) -> Vec<u32> {
    let lane = record_classes(&p.records, max);
    let end = chain_ends(p);
    let mut next = vec![None; p.records.len()];
    for (i, r) in p.records.iter().enumerate() {
        if let Some(q) = r.parent() {
            next[q as usize] = Some(i);
        }
    }
    // (class, from, to) of every stay.
    let mut stays: Vec<(usize, u64, u64)> = Vec::new();
    for root in 0..p.records.len() {
        let Some(k) = lane_of(&lane, root as u32) else {
            continue;
        };
        let mut at = Some((k, p.records[root].alloc));
        let mut m = next[root];
        while let Some(i) = m {
            let r = &p.records[i];
            if let Some((k, from)) = at.filter(|&(k, _)| r.size > lane_classes::cell_size(k)) {
                stays.push((k, from, r.alloc));
                at = lane_classes::class_of(r.size, r.align(), max).map(|k| (k, r.alloc));
            }
            m = next[i];
        }
        if let Some((k, from)) = at {
            stays.push((k, from, end[root]));
        }
    }
    let mut cells = vec![0u32; lane_classes::classes_below(max)];
    for (k, n) in cells.iter_mut().enumerate() {
        let of_k: Vec<(u64, u64)> = stays
            .iter()
            .filter(|s| s.0 == k)
            .map(|s| (s.1, s.2))
            .collect();
        let most = of_k
            .iter()
            .map(|&(t, _)| of_k.iter().filter(|&&(a, e)| a <= t && t < e).count())
            .max()
            .unwrap_or(0);
        let never = of_k.iter().filter(|&&(_, e)| e == LIVE).count();
        *n = (most + never) as u32;
    }
    cells
}

/// The lane requests whose chains escape, worked out afresh: each scope's lane requests
/// numbered in order, those whose chains never end.
fn escapes_by_brute_force(p: &Profile, max: u64) -> Vec<LaneEscape> {
    let lane = record_classes(&p.records, max);
    let end = chain_ends(p);
    let mut escapes = Vec::new();
    for scope in 0..p.scopes.len() as u32 {
        let requests = (0..p.records.len())
            .filter(|&i| p.records[i].scope == scope)
            .filter_map(|i| Some((i, lane_of(&lane, i as u32)?)));
        for (ordinal, (i, k)) in (0u32..).zip(requests) {
            if end[i] == LIVE {
                escapes.push(LaneEscape {
                    scope,
                    ordinal,
                    cell: lane_classes::cell_size(k),
                });
            }
        }
    }
    escapes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 256 }))]

    /// A pass recorded with its lane requests counted plans exactly as the same pass
    /// recorded whole (as when trace files are written): slots, ordinals, offsets,
    /// cells and request count.
    #[test]
    fn counted_and_recorded_lane_requests_plan_alike(
        steps in prop::collection::vec(step(), 0..200),
        max in prop_oneof![Just(16u64), Just(64), Just(256), Just(4096)],
    ) {
        let whole = plan(record(&steps, 0), max);
        let counted = plan(record(&steps, max), max);
        prop_assert_eq!(counted, whole);
    }

    /// Lane requests take no slot: each scope's slots are its other requests, their
    /// ordinals dense from 0; the lanes hold, per class, the most requests live at
    /// once plus those never freed, and list those that escape by scope and count.
    #[test]
    fn lane_requests_take_cells_not_slots(
        steps in prop::collection::vec(step(), 0..200),
        max in prop_oneof![Just(16u64), Just(64), Just(256)],
    ) {
        let profile = record(&steps, 0);
        let lane = record_classes(&profile.records, max);
        let keyed: Vec<(u32, u64)> = (0u32..)
            .zip(&profile.records)
            .filter(|&(i, r)| r.ordinal().is_some() && lane_of(&lane, i).is_none())
            .map(|(_, r)| (r.scope, r.size))
            .collect();
        let lane_requests = lane.iter().filter(|&&k| k > 0).count() as u64;
        let cells = cells_by_brute_force(&profile, max);
        let escapes = escapes_by_brute_force(&profile, max);
        let p = plan(profile, max);
        prop_assert_eq!(p.slots.len(), keyed.len());
        let mut next = [0u32; 2];
        for (s, &(scope, size)) in p.slots.iter().zip(&keyed) {
            prop_assert_eq!(s.scope, scope);
            prop_assert_eq!(s.ordinal, next[scope as usize]);
            prop_assert_eq!(s.min_size.unwrap_or(s.size), size);
            next[scope as usize] += 1;
        }
        prop_assert_eq!(p.lanes.max, max);
        prop_assert_eq!(p.lanes.requests, lane_requests);
        prop_assert_eq!(&p.lanes.cells, &cells);
        prop_assert_eq!(&p.lanes.escapes, &escapes);
        prop_assert_eq!(p.check(), Ok(()));
    }
}

/// A re-profile keeps at least the cells of the plan it replaces.
#[test]
fn cells_never_shrink_across_profiles() {
    let steps = [Step::Alloc(24, 3, false), Step::Free(0)];
    let earlier = PlanLanes {
        max: 64,
        cells: vec![5, 0, 7],
        requests: 0,
        ..PlanLanes::default()
    };
    let p = build(
        record(&steps, 64),
        OffsetStrategy::GreedyBySize,
        &[],
        &earlier,
        drop,
    );
    assert_eq!(p.lanes.cells, vec![5, 1, 7]);
    assert_eq!(p.lanes.requests, 1);
}

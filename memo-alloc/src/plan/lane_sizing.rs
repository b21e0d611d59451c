//! The lanes of a new plan (see `replay`'s lanes): which requests of a profile take lane
//! cells, and how many cells of each class the plan needs.
//!
//! A profile holds its lane requests either as records (when trace files are written,
//! every allocation is recorded) or counted by the recorder (`Recorder::new`); both give
//! the same plan.

use crate::format::trace::{contexts_of, LaneEscape, PlanLanes, MAX_LANE_REQUESTS};
use crate::memory::lane_classes;
use crate::profiling::profile::{Profile, Record, LIVE, NONE};

/// Per record, `1 + k` when its request takes a lane cell of class `k` in replay (an
/// allocation, not a realloc, of at most `max` bytes, size and alignment), else 0; empty
/// when `max` is 0 (no lanes). Taken before the fold raises the roots' sizes.
pub(crate) fn record_classes(records: &[Record], max: u64) -> Vec<u8> {
    if max == 0 {
        return Vec::new();
    }
    records
        .iter()
        .map(|r| match r.ordinal() {
            Some(_) => lane_classes::class_of(r.size, r.align(), max).map_or(0, |k| k as u8 + 1),
            None => 0,
        })
        .collect()
}

/// The lane class of record `root`'s request, if it takes a cell.
pub(crate) fn lane_of(lane: &[u8], root: u32) -> Option<usize> {
    match lane.get(root as usize) {
        Some(&k) if k > 0 => Some(k as usize - 1),
        _ => None,
    }
}

/// The plan's lanes: per class, the most of its lane requests a context had live at once
/// (a chain live in its cell until the chain's end, or until a realloc moved it to a
/// larger class: see [`stays`]), summed over the contexts (they run concurrently), plus
/// those still live at the pass's end (a later pass may find them in the instance still);
/// at least `earlier.cells`, so that plans converge. The requests the recorder counted
/// instead of recording come with their cells. The lane requests whose chains escape the
/// pass are listed (see [`lane_escapes`]). Called after the chains are folded into their
/// roots.
pub(crate) fn size_lanes(profile: &Profile, lane: &[u8], earlier: &PlanLanes) -> PlanLanes {
    let max = earlier.max;
    if max == 0 {
        return PlanLanes::default();
    }
    let (context_of, _) = contexts_of(&profile.scopes);
    let classes = lane_classes::classes_below(max);
    // The recorded chains' stays in cells, by context and class.
    let mut groups: Vec<((u32, usize), Stay)> = stays(&profile.records, lane, max)
        .into_iter()
        .map(|s| {
            let scope = profile.records[s.root as usize].scope;
            let context = context_of.get(scope as usize).copied().unwrap_or(0);
            ((context, s.class), s)
        })
        .collect();
    groups.sort_unstable_by_key(|&(group, _)| group);
    let mut cells: Vec<u64> = (0..classes)
        .map(|k| profile.lanes.cells.get(k).copied().unwrap_or(0) as u64)
        .collect();
    for group in groups.chunk_by(|a, b| a.0 == b.0) {
        let k = group[0].0 .1;
        cells[k] += most_live(group.iter().map(|&(_, s)| (s.from, s.to)));
    }
    let cells = cells
        .iter()
        .zip(earlier.cells.iter().chain(std::iter::repeat(&0)))
        .map(|(&n, &e)| (n.min(lane_classes::MAX_CELLS as u64) as u32).max(e))
        .collect();
    let recorded = lane.iter().filter(|&&k| k > 0).count() as u64;
    let requests = (profile.lanes.requests + recorded).min(MAX_LANE_REQUESTS);
    let mut escapes = lane_escapes(profile, lane);
    escapes.retain(|e| (e.ordinal as u64) < requests);
    PlanLanes {
        max,
        cells,
        requests,
        escapes,
    }
}

/// The lane requests whose chains escape the pass, by scope and lane ordinal: those the
/// recorder counted, and the recorded ones (each scope's lane records, in order, numbered
/// as replay counts its lane requests). Called after the chains are folded into their
/// roots (a root escapes when its chain does).
fn lane_escapes(profile: &Profile, lane: &[u8]) -> Vec<LaneEscape> {
    let mut escapes = profile.lanes.escapes.clone();
    let mut ordinals = vec![
        0u32;
        if lane.is_empty() {
            0
        } else {
            profile.scopes.len()
        }
    ];
    for (root, r) in (0u32..).zip(&profile.records) {
        let (Some(k), Some(n)) = (lane_of(lane, root), ordinals.get_mut(r.scope as usize)) else {
            continue;
        };
        if r.escaping() {
            escapes.push(LaneEscape {
                scope: r.scope,
                ordinal: *n,
                cell: lane_classes::cell_size(k),
            });
        }
        *n += 1;
    }
    escapes.sort_unstable_by_key(|e| (e.scope, e.ordinal));
    escapes.dedup_by_key(|e| (e.scope, e.ordinal));
    escapes
}

/// A stretch of a recorded lane chain in one cell: replay grows a chain in its cell while
/// it fits and moves it to a cell of the larger class when a realloc outgrows it (past
/// the lanes, to the backend: the chain leaves them).
#[derive(Clone, Copy, Debug)]
struct Stay {
    /// The chain's root record.
    root: u32,
    class: usize,
    /// From the request (or the realloc that moved the chain here) to the realloc that
    /// moved it on, or the chain's end ([`LIVE`]: never, it escapes).
    from: u64,
    to: u64,
}

/// The stays of the recorded lane chains, their roots already folded (a root's free is its
/// chain's end).
fn stays(records: &[Record], lane: &[u8], max: u64) -> Vec<Stay> {
    let mut out = Vec::new();
    if lane.is_empty() {
        return out;
    }
    // Per record of a lane chain: its root; per root: the stay open now (none once the
    // chain left the lanes).
    let mut root_of = vec![NONE; records.len()];
    let mut open: Vec<Option<(usize, u64)>> = vec![None; records.len()];
    for (i, r) in (0u32..).zip(records) {
        if let Some(k) = lane_of(lane, i) {
            root_of[i as usize] = i;
            open[i as usize] = Some((k, r.alloc));
            continue;
        }
        let Some(root) = r.parent().and_then(|p| root_of.get(p as usize).copied()) else {
            continue;
        };
        if root == NONE {
            continue;
        }
        root_of[i as usize] = root;
        let Some((k, from)) = open[root as usize] else {
            continue; // on the backend since it left the lanes
        };
        if r.size <= lane_classes::cell_size(k) {
            continue; // grows (or shrinks) in place
        }
        out.push(Stay {
            root,
            class: k,
            from,
            to: r.alloc,
        });
        open[root as usize] = lane_classes::class_of(r.size, r.align(), max).map(|k| (k, r.alloc));
    }
    for (root, stay) in (0u32..).zip(open) {
        if let Some((class, from)) = stay {
            let r = &records[root as usize];
            let to = if r.escaping() { LIVE } else { r.free };
            out.push(Stay {
                root,
                class,
                from,
                to,
            });
        }
    }
    out
}

/// The most of the stays `from..to` live at once, plus those never ended (escaping).
fn most_live(stays: impl Iterator<Item = (u64, u64)> + Clone) -> u64 {
    let mut allocs: Vec<u64> = stays.clone().map(|(from, _)| from).collect();
    let mut frees: Vec<u64> = stays
        .filter(|&(_, to)| to != LIVE)
        .map(|(_, to)| to)
        .collect();
    let escaping = (allocs.len() - frees.len()) as u64;
    allocs.sort_unstable();
    frees.sort_unstable();
    let (mut live, mut most, mut freed) = (0u64, 0u64, 0usize);
    for a in allocs {
        while freed < frees.len() && frees[freed] <= a {
            live = live.saturating_sub(1);
            freed += 1;
        }
        live += 1;
        most = most.max(live);
    }
    most + escaping
}

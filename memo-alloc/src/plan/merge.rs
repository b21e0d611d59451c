//! Plans that converge: a re-profile of a key is merged with its previous plan.
//!
//! The new trace is aligned with the previous plan node by node (scopes are matched by
//! parent, name and occurrence, as replay enters them). Within a node, allocations are
//! aligned with the old slots in order, as a diff would, tolerating sizes that changed by
//! up to a factor of two either way and skipping slots (or allocations) that have no
//! counterpart within a window. Each aligned allocation key then keeps the smallest
//! request, the largest size and the strictest alignment seen in either profile
//! ([`Seen`]); the new plan is made with those. So a key whose sizes jitter between passes
//! (alternating sizes, the shapes of a bucket) stops missing after a few profiles, while
//! allocations the new profile no longer makes (a process's first-pass, one-time state)
//! drop out of the plan. Requests that took lane cells have no slots to align with; the
//! new plan keeps at least the old plan's cells (`job::lanes_after`).

use crate::format::trace::Seen;
use crate::profiling::profile::Profile;
use crate::replay::slab::compile::{CompiledPlan, Slot};

/// How far ahead, in old slots, an allocation looks for its counterpart.
const WINDOW: u32 = 16;

/// For each allocation of `profile` (by id), what `old` saw for its key, if it has one.
pub(crate) fn seen_in(profile: &Profile, old: &CompiledPlan) -> Vec<Option<Seen>> {
    let node_of = old_nodes(profile, old);
    let mut seen = vec![None; profile.records.len()];
    let mut cursors: Vec<Option<u32>> = vec![None; profile.scopes.len()];
    for (id, a) in profile.records.iter().enumerate() {
        if a.ordinal().is_none() {
            continue; // a realloc continues its chain's key
        }
        if crate::memory::lane_classes::class_of(a.size, a.align(), old.lanes.max).is_some() {
            continue; // took a lane cell, not a slot
        }
        let Some(node) = node_of.get(a.scope as usize).copied().flatten() else {
            continue;
        };
        let Some(&range) = old.initial_cursors().get(node as usize) else {
            continue;
        };
        let cursor = cursors[a.scope as usize].get_or_insert(range.next);
        let end = range.end.min(cursor.saturating_add(WINDOW));
        let found = (*cursor..end).find(|&i| {
            old.slots
                .get(i as usize)
                .is_some_and(|s| tolerates(s, a.size))
        });
        if let Some(i) = found {
            *cursor = i + 1;
            let s = &old.slots[i as usize];
            let (min, max) = s.seen();
            seen[id] = Some(Seen {
                min,
                max: with_headroom(max, a.size),
                align: 1 << s.align_log2,
            });
        }
    }
    seen
}

/// The size to plan for a key whose old slot held `old` bytes and whose new request asks
/// `new`: the old size while the request fits it; past it, room for four more steps of
/// the growth seen, at most up to the next power of two. So a size that grows from pass
/// to pass (a decoding step's attention over a growing cache) outgrows its slot a few
/// times, not at every profile, while a size that jitters costs a bounded margin.
fn with_headroom(old: u64, new: u64) -> u64 {
    if new <= old {
        return old;
    }
    let room = new.saturating_add((new - old).saturating_mul(4));
    room.min(new.checked_next_power_of_two().unwrap_or(new))
}

/// Whether an old slot can be the same key as a new request of `size` bytes.
fn tolerates(slot: &Slot, size: u64) -> bool {
    let (min, max) = slot.seen();
    max > 0 && size <= max.saturating_mul(2) && size.saturating_mul(2) >= min
}

/// For each scope of `profile` (by id), the node of `old` it enters, if any.
fn old_nodes(profile: &Profile, old: &CompiledPlan) -> Vec<Option<u32>> {
    let mut node_of: Vec<Option<u32>> = vec![None; profile.scopes.len()];
    for s in &profile.scopes {
        let node = match s.parent {
            None => Some(0),
            Some(p) => node_of
                .get(p as usize)
                .copied()
                .flatten()
                .and_then(|parent| old.scope_group(parent, &s.name))
                .and_then(|(base, count)| (s.occurrence < count).then_some(base + s.occurrence)),
        };
        if let Some(n) = node_of.get_mut(s.id as usize) {
            *n = node;
        }
    }
    node_of
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::format::trace::{
        AllocKind, PlanFile, Trace, TraceAlloc, TraceScope, FORMAT_VERSION, TRACE_FORMAT,
    };
    use memo_planner::OffsetStrategy;

    /// A trace of one node: allocations of these sizes, each freed right after.
    fn trace(sizes: &[u64]) -> Trace {
        let allocations = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| TraceAlloc {
                id: i as u32,
                tag: i as u16,
                ptr: 0x1000 * (i as u64 + 1),
                size,
                align: 8,
                kind: AllocKind::Alloc,
                alloc: 2 * i as u64,
                free: Some(2 * i as u64 + 1),
                scope: 0,
                ordinal: Some(i as u32),
                realloc_parent: None,
                escaping: false,
                call_site: None,
                when: None,
            })
            .collect();
        Trace {
            format: TRACE_FORMAT.into(),
            version: FORMAT_VERSION,
            key: "m".into(),
            events: 2 * sizes.len() as u64,
            scopes: vec![TraceScope {
                id: 0,
                parent: None,
                name: "m".into(),
                occurrence: 0,
                enter: Some(0),
                exit: Some(2 * sizes.len() as u64),
            }],
            allocations,
            uses: Vec::new(),
            recording: None,
        }
    }

    /// What `old` saw for the keys of trace `t`.
    fn seen(t: &Trace, old: &CompiledPlan) -> Vec<Option<Seen>> {
        seen_in(&Profile::from_trace(t), old)
    }

    fn plan(t: &Trace, seen: &[Option<Seen>]) -> PlanFile {
        PlanFile::from_trace_seen(t, OffsetStrategy::GreedyBySize, seen)
    }

    fn ranges(p: &PlanFile) -> Vec<(u64, u64)> {
        p.slots
            .iter()
            .map(|s| (s.min_size.unwrap_or(s.size), s.size))
            .collect()
    }

    #[test]
    fn jittering_sizes_converge_to_their_range() {
        let a = trace(&[1000, 64, 4096, 200]);
        let pa = plan(&a, &[]);
        let b = trace(&[1100, 64, 3900, 200]);
        let old = CompiledPlan::compile(&pa).unwrap();
        let pb = plan(&b, &seen(&b, &old));
        assert_eq!(
            ranges(&pb),
            [(1000, 1500), (64, 64), (3900, 4096), (200, 200)]
        );
        // Merging again with either shape changes nothing: converged.
        let again = CompiledPlan::compile(&pb).unwrap();
        assert_eq!(ranges(&plan(&a, &seen(&a, &again))), ranges(&pb));
    }

    #[test]
    fn allocations_no_longer_made_drop_out() {
        // The first profile made three one-time allocations up front.
        let first = trace(&[16, 24, 32, 1000, 64, 4096]);
        let old = CompiledPlan::compile(&plan(&first, &[])).unwrap();
        let later = trace(&[1000, 64, 4096]);
        let p = plan(&later, &seen(&later, &old));
        assert_eq!(ranges(&p), [(1000, 1000), (64, 64), (4096, 4096)]);
    }

    #[test]
    fn a_slot_that_grows_gets_headroom_up_to_the_next_power_of_two() {
        // A decoding step's scores over a cache of 65, then 70 tokens (48 bytes a token).
        let first = trace(&[48 * 65, 64]);
        let old = CompiledPlan::compile(&plan(&first, &[])).unwrap();
        let grown = trace(&[48 * 70, 64]);
        let p = plan(&grown, &seen(&grown, &old));
        assert_eq!(ranges(&p), [(48 * 65, 4096), (64, 64)]);
        // Growth within the headroom changes nothing more: converged.
        let again = CompiledPlan::compile(&p).unwrap();
        let later = trace(&[48 * 85, 64]);
        assert_eq!(ranges(&plan(&later, &seen(&later, &again))), ranges(&p));
        // A size that shrinks keeps the slot as it was.
        let smaller = trace(&[48 * 60, 64]);
        assert_eq!(
            ranges(&plan(&smaller, &seen(&smaller, &old))),
            [(48 * 60, 48 * 65), (64, 64)]
        );
    }

    #[test]
    fn sizes_far_apart_are_not_the_same_key() {
        let old = CompiledPlan::compile(&plan(&trace(&[1000]), &[])).unwrap();
        let t = trace(&[10_000]);
        assert_eq!(seen(&t, &old), [None]);
    }
}

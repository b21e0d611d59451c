//! Matching a request to its slot, off the hit path: a request whose node's next slot does
//! not match it (rule 1, inlined in `hit.rs`) is aligned with the node's planned sequence
//! by the rules below, in this order ([`take`]). The state they keep is `state.rs`.
//!
//! # The rules
//! A request is matched to a slot of its scope node's planned sequence, as a diff aligns
//! two sequences, so that an inserted, missing or resized allocation costs that
//! allocation, not the ones after it. A slot *matches* a request whose size lies in the
//! slot's seen range (`min_size..=size`, widened as profiles merge). With the node's
//! cursor at slot `next`:
//! 1. `next` matches: take it (the hit path; everything else is cold);
//! 2. the last request of the node jumped (rules 3 and 4 below: it took a slot past the
//!    cursor, which passed the slots between) and this one does not follow the jump, but
//!    matches one of the first two slots passed: the jump was wrong (the last request
//!    was inserted before a slot of its size, or two requests of common sizes matched a
//!    place ahead by chance): go back and take it. Left alone, a wrong jump cascades:
//!    every displaced request jumps again, and the cursor runs ahead of the program,
//!    whose requests then miss until they catch up with it. A skip (below) the jump
//!    learned or took is forgotten;
//! 3. `next + 1` matches: `next` is missing (or this request replaced it): take `next + 1`;
//! 4. an earlier unmatched request named a candidate `c` ahead and this one matches `c + 1`:
//!    the two agree that the slots before `c` are missing: jump and take `c + 1` (the
//!    earlier request is placed; unless the pass was lost, rule 7's run of misses ends,
//!    and when that run began at `next`, the plan learns the skip from `next` to the
//!    candidate its first miss named); or a skip a pass before learned from `next` names
//!    a slot this request matches: jump and take it;
//! 5. the pass is *shrinking* and the request fits `next`, at least an eighth of its
//!    smallest seen size (a smaller shape of the bucket): take `next`. With lanes, a slot
//!    whose request shrank to a lane's size is not in the pass's sequence: a request that
//!    does not fit `next` takes the first slot it fits within [`WINDOW`] when every slot
//!    before it, shrunk as much as the request is from that slot, would be a lane
//!    request. A pass starts shrinking when
//!    a request fitting at half size or more only (a *probe*, served by the backend) is
//!    followed, with no hit in between, by another that fits so (in any node; in the
//!    probe's node, the slot after the probe's): isolated insertions between hits never
//!    confirm each other;
//! 6. otherwise look for a matching slot in the next [`WINDOW`] slots, past the
//!    candidate the request before named, if any (in a run of equal sizes, candidates
//!    walk the run until one is confirmed): it becomes the candidate of rule 4; the
//!    request is served by the backend and the cursor stays;
//! 7. a pass that missed [`ANCHOR`] requests of a node in a row (no hit in between) has
//!    lost its place, as after a run of more than [`WINDOW`] missing slots (a process's
//!    first pass, planned, made one-time allocations later passes do not), or after a
//!    wrong jump that rule 2 could not take back (the cursor then runs ahead of the
//!    program): it looks for the nearest place, in the next [`LONG_WINDOW`] slots or the
//!    [`BEHIND`] slots before the cursor, where [`ANCHOR`] slots in a row match those
//!    requests. It jumps there (this request takes the last of them) when the run's
//!    search before found the same place (the same slot less request index, within
//!    [`AGREE`]: an insertion between the two anchors moves it by one): in a sequence
//!    that repeats block after block, an anchor holding one inserted request can match
//!    only a place blocks ahead, and a later anchor does not agree. A later anchor also
//!    agrees when it matches at the place before and that place is within [`WINDOW`] of
//!    its nearest: in a stretch that repeats with a short period, the nearest place can
//!    be a period short of the right one. A place found and not taken is checked by the
//!    search [`ANCHOR`] misses later (a few times in a run); a search that finds nothing,
//!    or a place after those, waits for a run twice as long before the next, so a pass
//!    that matches nothing at all pays a logarithmic number of searches. An anchor of one
//!    size (which matches anywhere in a run of it) waits for another size without a
//!    search. A place taken past the slot the cursor stood at when the run began is
//!    learned as a skip from that slot to the run's first request's, if that matches it.
//!
//! Skips (`skips.rs`) are what a pass found out about the plan for the passes after it: a
//! plan of a process's first pass holds one-time slots that every later pass passes
//! over, and each would pay rule 7's search again (a few requests a pass, served by the
//! backend) or rule 4's miss. They are hints, shared by the plan's
//! instances and taken only by a request that matches the slot they name. A skip belongs
//! to the first request that misses at its slot, the one a later pass brings there first
//! (learned for a later one, in a run of equal sizes it puts each request of the run a
//! slot on, and a buffer living the whole pass on a slot planned to live briefly).
//!
//! A taken slot is then checked (escaping, alignment, overlap); failing a check misses
//! with that reason, the slot used up. A request matching nothing moves nothing. Going
//! back (rule 2) walks the slots a wrong jump passed, up to the one the jump took: taken
//! again in the pass, its overlap check fails while the jump's request lives, and it is
//! a hit once that request was freed (the check, not the matching, keeps live
//! allocations apart).
//!
//! A request small enough for the plan's lanes takes a free cell of its size class
//! instead (see `hit.rs`): it is matched to nothing and moves no cursor, and its hits
//! are not in the clock the rules above count hits by. Its node counts it, though: the
//! profile listed the lane requests that escaped it by node and count (see
//! `lane_count.rs`), and those go to the backend, as every escaping allocation does.
//!
//! [`LONG_WINDOW`]: crate::replay::state::LONG_WINDOW
//! [`BEHIND`]: crate::replay::state::BEHIND
//! [`AGREE`]: crate::replay::state::AGREE

use crate::replay::anchor::{anchored, learn_from_place};
use crate::replay::slab::compile::{CompiledPlan, Slot};
use crate::replay::state::{
    At, Cursor, Lost, Shrink, ANCHOR, BACK, NO_SLOT, SHRINK, SHRINK_CONFIRMED, WINDOW,
};
use crate::stats::MissReason;

/// The slot a request of `size` bytes takes from `cursor`, which advances past it; or why
/// none (the cursor then moves only to remember a candidate). The rules are tried in their
/// order; the first that takes a slot decides. The hit path (rule 1) is inlined in
/// `hit::alloc`; this is the general case.
#[cold]
#[inline(never)]
pub(super) fn take(
    plan: &CompiledPlan,
    cursor: &mut Cursor,
    size: u64,
    (shrink, lost): (&mut Shrink, &mut Lost),
    at: At,
) -> Result<u32, MissReason> {
    let r = Request {
        plan,
        cursor: *cursor,
        size,
        at,
    };
    let (candidate, back) = r.pending();
    let taken = r
        .in_step()
        .or_else(|| r.back_after_jump(back))
        .or_else(|| r.next_missing())
        .or_else(|| r.candidate_confirmed(candidate, lost))
        .or_else(|| r.learned_skip(lost))
        .or_else(|| r.shrinking(shrink))
        .or_else(|| r.found_again(lost));
    match taken {
        Some(taken) => Ok(r.advance(cursor, taken)),
        None => Err(r.look_ahead(cursor, candidate, lost)),
    }
}

/// What a rule took: a slot in step with the cursor (which then goes on after it, nothing
/// pending), or one past the cursor (a jump: the slot the cursor stood at is left to the
/// next request, see rule 2).
#[derive(Clone, Copy, Debug)]
enum Taken {
    InStep(u32),
    Jump(u32),
}

/// A request being matched: its plan, its node's cursor as it stood, its size and where
/// it stands in its pass.
struct Request<'a> {
    plan: &'a CompiledPlan,
    cursor: Cursor,
    size: u64,
    at: At,
}

impl Request<'_> {
    /// Slot `i` of the node (`None` past its range).
    fn slot(&self, i: u32) -> Option<&Slot> {
        self.plan
            .slots
            .get(i as usize)
            .filter(|_| i < self.cursor.end)
    }

    /// Whether slot `i` of the node matches the request.
    fn matches_at(&self, i: u32) -> bool {
        self.slot(i).is_some_and(|s| s.matches(self.size))
    }

    /// Whether the request fits slot `i` as a shape up to `k` times smaller (rule 5).
    fn fits_at(&self, i: u32, k: u64) -> bool {
        self.slot(i).is_some_and(|s| fits_shrunk(s, self.size, k))
    }

    /// What the node's last request left pending: a candidate slot ahead (rule 4), or the
    /// slot the cursor stood at before it jumped (rule 2); [`NO_SLOT`] where none.
    fn pending(&self) -> (u32, u32) {
        match self.cursor.pending {
            NO_SLOT => (NO_SLOT, NO_SLOT),
            p if p & BACK != 0 => (NO_SLOT, p & !BACK),
            p => (p, NO_SLOT),
        }
    }

    /// Moves `cursor` past the slot taken; returns the slot.
    fn advance(&self, cursor: &mut Cursor, taken: Taken) -> u32 {
        let next = self.cursor.next;
        let (i, pending) = match taken {
            Taken::InStep(i) => (i, NO_SLOT),
            Taken::Jump(i) => {
                debug_assert!(i > next);
                (i, BACK | next)
            }
        };
        cursor.next = i + 1;
        cursor.pending = pending;
        i
    }

    /// Rule 1: the next slot matches.
    fn in_step(&self) -> Option<Taken> {
        let next = self.cursor.next;
        self.matches_at(next).then_some(Taken::InStep(next))
    }

    /// Rule 2: after a jump from slot `back` ([`NO_SLOT`]: none), the first of the first
    /// two slots passed that the request matches. The jump was wrong: a skip it learned or
    /// took misleads the passes after, and is forgotten.
    fn back_after_jump(&self, back: u32) -> Option<Taken> {
        if back == NO_SLOT {
            return None;
        }
        // The slots passed are untaken; the jump took the one before `next`.
        let next = self.cursor.next;
        debug_assert!(back < next);
        let passed = back..back.saturating_add(2).min(next.saturating_sub(1));
        let i = passed.into_iter().find(|&i| {
            self.plan
                .slots
                .get(i as usize)
                .is_some_and(|s| s.matches(self.size))
        })?;
        self.plan.skips.unlearn(back);
        Some(Taken::InStep(i))
    }

    /// Rule 3: the slot after the next matches (the next is missing).
    fn next_missing(&self) -> Option<Taken> {
        let i = self.cursor.next + 1;
        self.matches_at(i).then_some(Taken::Jump(i))
    }

    /// Rule 4: the request matches the slot after the candidate an earlier unmatched
    /// request named; the two agree that the slots before it are missing. The earlier
    /// request is placed, and the plan may learn a skip.
    fn candidate_confirmed(&self, candidate: u32, lost: &mut Lost) -> Option<Taken> {
        if candidate == NO_SLOT || !self.matches_at(candidate + 1) {
            return None;
        }
        learn_from_candidate(self.plan, lost, self.at.node, self.cursor.next, candidate);
        placed(lost);
        Some(Taken::Jump(candidate + 1))
    }

    /// Rule 4: a skip a pass before learned from the next slot names a slot the request
    /// matches.
    fn learned_skip(&self, lost: &mut Lost) -> Option<Taken> {
        let to = self.plan.skips.from(self.cursor.next)?;
        if !self.matches_at(to) {
            return None;
        }
        placed(lost);
        Some(Taken::Jump(to))
    }

    /// Rule 5: in a pass of a smaller shape, the next slot the request fits. A request that
    /// fits the next slot only at half size or more is a probe; the next such request
    /// (with no hit in between) confirms the pass is shrinking.
    fn shrinking(&self, shrink: &mut Shrink) -> Option<Taken> {
        let (next, node, hits) = (self.cursor.next, self.at.node, self.at.hits);
        match *shrink {
            Shrink::On => {
                if self.fits_at(next, SHRINK_CONFIRMED) {
                    return Some(Taken::InStep(next));
                }
                if let Some(f) = self.past_lane_slots() {
                    return Some(Taken::Jump(f));
                }
            }
            Shrink::Probe {
                node: n,
                slot: p,
                hits: h,
            } if h == hits => {
                // In the probe's node, the probe stood for `next`: this request is the next.
                let target = if n == node && p == next {
                    next + 1
                } else {
                    next
                };
                if self.fits_at(target, SHRINK) {
                    *shrink = Shrink::On;
                    return Some(Taken::InStep(target));
                }
            }
            _ => {}
        }
        if *shrink != Shrink::On && self.fits_at(next, SHRINK) {
            *shrink = Shrink::Probe {
                node,
                slot: next,
                hits,
            };
        }
        None
    }

    /// Rule 5 with lanes: in a shrinking pass, the first slot after the next within
    /// [`WINDOW`] that the request fits, if every slot before it, shrunk as much as the
    /// request is from it, would be a lane request (a slot whose request shrank to a
    /// lane's size is not in the pass's sequence).
    fn past_lane_slots(&self) -> Option<u32> {
        let (size, lane_max) = (self.size, self.at.lane_max);
        if lane_max == 0 {
            return None;
        }
        let next = self.cursor.next;
        let end = self.cursor.end.min(next.saturating_add(WINDOW));
        let slot = |i: u32| self.plan.slots.get(i as usize).filter(|_| i < end);
        let f = (next + 1..end)
            .find(|&i| slot(i).is_some_and(|s| fits_shrunk(s, size, SHRINK_CONFIRMED)))?;
        let fit_size = slot(f)?.size;
        // `min_size * (size / fit_size) <= lane_max`, in integers.
        let in_lanes = |i: u32| {
            slot(i).is_some_and(|s| {
                s.min_size().saturating_mul(size) <= lane_max.saturating_mul(fit_size)
            })
        };
        (next..f).all(in_lanes).then_some(f)
    }

    /// Rule 7: a pass that lost its place finds it again (see `anchor.rs`), and the plan
    /// may learn a skip to it.
    fn found_again(&self, lost: &mut Lost) -> Option<Taken> {
        let i = anchored(&self.plan.slots, &self.cursor, self.size, lost, self.at)?;
        learn_from_place(self.plan, lost, i, self.at);
        Some(Taken::InStep(i))
    }

    /// Rule 6: no slot taken. The request looks for a matching slot in the next
    /// [`WINDOW`] slots, past the candidate the request before named (in a run of equal
    /// sizes, candidates walk the run until one is confirmed): it becomes the candidate of
    /// rule 4. Returns why the request missed.
    fn look_ahead(&self, cursor: &mut Cursor, candidate: u32, lost: &mut Lost) -> MissReason {
        let next = self.cursor.next;
        // After an unconfirmed candidate, this request's slot (if the two are in order)
        // is past it.
        let from = match candidate {
            NO_SLOT => next + 2,
            c => c.saturating_add(2).max(next + 2),
        };
        let ahead =
            (from..self.cursor.end.min(next.saturating_add(WINDOW))).find(|&i| self.matches_at(i));
        cursor.pending = ahead.unwrap_or(NO_SLOT);
        if lost.run == 1 {
            lost.start.candidate = cursor.pending; // this miss began the run
        }
        match self.slot(next) {
            Some(s) if self.size > s.size => MissReason::TooLarge,
            _ => MissReason::Unplanned,
        }
    }
}

/// Whether a request of `size` bytes fits `slot` as a shape up to `k` times smaller than
/// the smallest seen for it (rule 5).
fn fits_shrunk(slot: &Slot, size: u64, k: u64) -> bool {
    size <= slot.size && size.saturating_mul(k) >= slot.min_size()
}

/// A jump placed the pass: unless it was lost (its run of misses searched already: there
/// a jump may be chance), the run's misses are behind the place, and an anchor holding
/// one would match nowhere (its distance in requests is not its distance in slots past
/// the jump): the run ends.
fn placed(lost: &mut Lost) {
    if lost.run < ANCHOR as u32 {
        lost.run = 0;
    }
}

/// Rule 4 confirmed candidate `pending` of `node`, whose cursor stands at `next`: when
/// the pass was not lost and its run of misses began at `next`, the skip goes from `next`
/// to the candidate the run's first miss named (the next pass's first request at `next`
/// takes it): `pending` itself when that miss named it, or one before it when a request
/// that later passes make elsewhere stood between the two (in a run of equal sizes whose
/// first two requests missed at one slot). Learned for the later miss, the skip would
/// take each request of the run a slot one place on.
fn learn_from_candidate(plan: &CompiledPlan, lost: &Lost, node: u32, next: u32, pending: u32) {
    let start = lost.start;
    let run = 1..ANCHOR as u32; // a run is going on, and has not searched yet
    let began_here = lost.node == node && start.slot == next && run.contains(&lost.run);
    let to = start.candidate;
    if began_here && to <= pending && to > next.saturating_add(1) {
        plan.skips.learn(next, to);
    }
}

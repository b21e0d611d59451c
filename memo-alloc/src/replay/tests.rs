//! Tests of replay: the matching rules (`take`), and the hand-out and free of slots.

use proptest::prelude::*;

use super::hit::{all_empty, claim};
use super::matching::take;
use crate::format::trace::{PlanFile, PlanSlot, TraceScope, FORMAT_VERSION, PLAN_FORMAT};
use crate::replay::free::free;
use crate::replay::slab::compile::CompiledPlan;
use crate::replay::slab::instance::EMPTY;
use crate::replay::slab::pool::{Lend, Slabs};
use crate::replay::state::{At, Lost, Shrink, ANCHOR};
use crate::stats::MissReason;
use crate::support::sync::{AtomicU32, Ordering};

/// A plan of one node whose slots have these sizes (all planned, disjoint).
fn plan(sizes: &[u64]) -> CompiledPlan {
    let mut offset = 0;
    let slots: Vec<(u64, u64)> = sizes
        .iter()
        .map(|&size| {
            let s = (offset, size);
            offset += size.next_multiple_of(16);
            s
        })
        .collect();
    plan_at(&slots)
}

/// A plan of one node whose slots are at these `(offset, size)`, in this order.
fn plan_at(at: &[(u64, u64)]) -> CompiledPlan {
    let slots = (0..)
        .zip(at)
        .map(|(i, &(offset, size))| PlanSlot {
            scope: 0,
            ordinal: i,
            size,
            min_size: None,
            align: 16,
            offset: Some(offset),
            lifetime: None,
        })
        .collect();
    let height = at.iter().map(|&(o, s)| o + s).max().unwrap_or(0);
    let file = PlanFile {
        format: PLAN_FORMAT.into(),
        version: FORMAT_VERSION,
        key: "t".into(),
        strategy: "test".into(),
        height: height.max(16),
        lower_bound: 0,
        naive: 0,
        scopes: vec![TraceScope {
            id: 0,
            parent: None,
            name: "t".into(),
            occurrence: 0,
            enter: None,
            exit: None,
        }],
        slots,
        lanes: Default::default(),
    };
    CompiledPlan::compile(&file).unwrap()
}

/// Runs `requests` through the matcher as the plan's first replayed pass (the skips
/// earlier runs learned are forgotten); returns what each took.
fn run(plan: &CompiledPlan, requests: &[u64]) -> Vec<Option<u32>> {
    run_with_lanes(plan, requests, 0)
}

/// [`run`] for a plan with lanes of at most `lane_max` bytes (the requests given are
/// the others).
fn run_with_lanes(plan: &CompiledPlan, requests: &[u64], lane_max: u64) -> Vec<Option<u32>> {
    plan.skips.forget();
    run_learned(plan, requests, lane_max)
}

/// [`run_with_lanes`] as a later pass: with the skips the plan's passes learned.
fn run_learned(plan: &CompiledPlan, requests: &[u64], lane_max: u64) -> Vec<Option<u32>> {
    let mut c = plan.initial_cursors()[0];
    let mut shrink = Shrink::Off;
    let mut lost = Lost::default();
    let mut hits = 0u64;
    requests
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            // Hits so far stand in for the pass's: enough for the probe's rule.
            let at = At {
                node: 0,
                hits,
                request: i as u64,
                lane_max,
            };
            let t = take(plan, &mut c, size, (&mut shrink, &mut lost), at);
            hits += t.is_ok() as u64;
            t.ok()
        })
        .collect()
}

/// What `run` took, a slot taken again counted as a miss: a going back (see
/// [`BACK`]) walks slots a wrong jump passed, and may reach the one the jump's
/// confirming request took. In a pass that is a claim of a slot taken already, which
/// fails if it is still live: counting it as a miss is the worst case.
fn once(took: Vec<Option<u32>>) -> Vec<Option<u32>> {
    let mut seen = std::collections::HashSet::new();
    took.into_iter()
        .map(|t| t.filter(|&i| seen.insert(i)))
        .collect()
}

fn at0() -> At {
    At {
        node: 0,
        hits: 0,
        request: 0,
        lane_max: 0,
    }
}

#[test]
fn each_rule() {
    let p = plan(&[100, 200, 300, 400, 500, 600]);
    // In step.
    assert_eq!(run(&p, &[100, 200, 300]), [Some(0), Some(1), Some(2)]);
    // An inserted request matching nothing moves nothing.
    assert_eq!(run(&p, &[100, 7, 200]), [Some(0), None, Some(1)]);
    // One missing: the next but one.
    assert_eq!(run(&p, &[100, 300, 400]), [Some(0), Some(2), Some(3)]);
    // Several missing: a candidate, confirmed by the request after it.
    assert_eq!(run(&p, &[500, 600]), [None, Some(5)]);
    // A candidate the next request does not confirm is dropped (it was an insertion).
    assert_eq!(run(&p, &[500, 100, 200]), [None, Some(0), Some(1)]);
    // Resized larger: a miss (too large), the rest in step.
    assert_eq!(
        run(&p, &[100, 250, 300, 400]),
        [Some(0), None, Some(2), Some(3)]
    );
    // A smaller shape: the first request probes, the second confirms, the rest follow.
    assert_eq!(
        run(&p, &[60, 120, 180, 240]),
        [None, Some(1), Some(2), Some(3)]
    );
    // An isolated smaller request (an insertion) never confirms its probe.
    assert_eq!(
        run(&p, &[60, 100, 200, 150]),
        [None, Some(0), Some(1), None]
    );
    // Far smaller than seen is never taken in place.
    assert_eq!(run(&p, &[40, 80, 100]), [None, None, Some(0)]);
    // Past the end: nothing.
    let all = run(&p, &[100, 200, 300, 400, 500, 600, 600]);
    assert_eq!(all.last(), Some(&None));
}

/// A request inserted before a slot of its size takes it; the displaced request then
/// goes back to the slot its predecessor passed, and the rest follow in step (without
/// rule 2, each displaced request would jump again and the cursor run ahead, every
/// request from the fourth on missing).
#[test]
fn an_insertion_before_a_slot_of_its_size_costs_one_slot() {
    let p = plan(&[16, 4096, 256, 16, 4096, 1000, 4096, 16, 256, 1000]);
    let took = run(
        &p,
        &[16, 256, 4096, 256, 16, 4096, 1000, 4096, 16, 256, 1000],
    );
    let in_step = (0..10).map(Some);
    let expected: Vec<_> = [Some(0), Some(2), Some(1)]
        .into_iter()
        .chain(in_step.skip(2))
        .collect();
    assert_eq!(took, expected, "slot 2 taken again: its claim decides");
}

/// Two inserted requests matching a place ahead by chance make a wrong jump; the
/// request after it does not follow and goes back (without rule 2, every later request
/// would miss: the cursor would stand ahead of them all).
#[test]
fn a_wrong_jump_goes_back() {
    let p = plan(&[100, 200, 300, 400, 500, 600, 700, 800, 900]);
    let took = run(&p, &[500, 600, 100, 200, 300, 400, 500, 600, 700]);
    let expected = [
        None,
        Some(5),
        Some(0),
        Some(1),
        Some(2),
        Some(3),
        Some(4),
        Some(5),
        Some(6),
    ];
    assert_eq!(took, expected);
}

/// A bucket's smaller shape with lanes: slots whose requests shrink to a lane's size
/// are not in the pass's sequence, and a shrinking pass passes over them. Without
/// lanes it waits at such a slot (its request is still to come).
#[test]
fn a_shrinking_pass_passes_over_slots_shrunk_into_lanes() {
    let p = plan(&[24576, 24576, 24576, 3072, 3072, 384, 384, 3072, 24576]);
    // Half the shape: 384 bytes shrink to 192, a lane request.
    let requests = [12288, 12288, 12288, 1536, 1536, 1536, 12288];
    let took = run_with_lanes(&p, &requests, 256);
    let all = [None, Some(1), Some(2), Some(3), Some(4), Some(7), Some(8)];
    assert_eq!(took, all);
    let took = run(&p, &requests);
    assert_eq!(took[..5], all[..5]);
    assert_eq!(
        took[5..],
        [None, None],
        "too large for slot 5, and waiting there"
    );
}

/// In a run of equal sizes, a candidate the next request does not confirm (its next
/// slot is of another size) gives way to the next slot of the size ahead of it, so the
/// run is found again, rather than every request naming the first candidate again.
#[test]
fn candidates_walk_a_run_of_equal_sizes() {
    let p = plan(&[1888, 1744, 3312, 368, 496, 368, 368, 368, 368, 2640]);
    let took = run(&p, &[368, 368, 368, 368, 368, 2640]);
    assert_eq!(took, [None, None, Some(6), Some(7), Some(8), Some(9)]);
}

/// A run of misses of one size does not search: such an anchor matches wherever the
/// plan has a run of that size, and a search would only double the wait for the next.
#[test]
fn an_anchor_of_one_size_is_not_searched() {
    let p = plan(&(1..=400u64).map(mixed_size).collect::<Vec<_>>());
    let mut c = p.initial_cursors()[0];
    let (mut shrink, mut lost) = (Shrink::Off, Lost::default());
    for i in 0..1000u64 {
        let at = At {
            node: 0,
            hits: 0,
            request: i,
            lane_max: 0,
        };
        assert!(take(&p, &mut c, 8, (&mut shrink, &mut lost), at).is_err());
    }
    assert_eq!(lost.search_at, ANCHOR as u32, "no search");
}

/// The `i`-th size of a sequence that does not repeat itself (no period): one of 16
/// multiples of 16, hashed from `i`.
fn mixed_size(i: u64) -> u64 {
    let x = (i ^ (i >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    16 * (1 + ((x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb) >> 60))
}

/// A run of missing slots longer than the window (a first pass's one-time
/// allocations, planned): the requests after it find their place again after
/// `2 * ANCHOR - 1` misses (two anchors that agree), not never.
#[test]
fn a_long_missing_run_costs_a_few_requests() {
    // Not periodic: in a periodic sequence every place of the same phase is the same.
    let sizes: Vec<u64> = (1..=400u64).map(mixed_size).collect();
    let p = plan(&sizes);
    let requests: Vec<u64> = sizes[..40].iter().chain(&sizes[140..]).copied().collect();
    let took = run(&p, &requests);
    let missed: Vec<usize> = (0..took.len()).filter(|&i| took[i].is_none()).collect();
    assert!(missed.len() < 2 * ANCHOR, "missed {missed:?}");
    assert_eq!(took.last(), Some(&Some(399)), "in step at the end");
    // A pass that matches nothing searches at runs of 4, 8, 16, ...: a handful.
    // (Of two sizes: an anchor of one size is never searched for.)
    let strangers: Vec<u64> = (0..1000u64).map(|i| 8 + 16 * (i % 2)).collect();
    let mut c = p.initial_cursors()[0];
    let (mut shrink, mut lost) = (Shrink::Off, Lost::default());
    for (i, &size) in strangers.iter().enumerate() {
        let at = At {
            node: 0,
            hits: 0,
            request: i as u64,
            lane_max: 0,
        };
        assert!(take(&p, &mut c, size, (&mut shrink, &mut lost), at).is_err());
    }
    assert_eq!(
        lost.search_at,
        (ANCHOR as u32) << 8,
        "8 searches for 1,000 misses"
    );
}

/// A process's first pass, planned: a run of one-time slots of one size, longer than
/// the window, before a stretch of the model that repeats with a short period. The
/// run's nearest place for one anchor is then a period short of the place the anchor
/// before found; doubling the wait after each such disagreement would miss the rest of
/// the stretch.
#[test]
fn a_missing_run_before_a_short_period_costs_a_few_requests() {
    let head: Vec<u64> = (1..=12u64).map(mixed_size).collect();
    let period = [262144u64, 131072, 131072, 8192, 765, 765];
    let tail: Vec<u64> = (20..=120u64).map(mixed_size).collect();
    let model: Vec<u64> = period
        .iter()
        .cycle()
        .take(4 * period.len())
        .chain(&tail)
        .copied()
        .collect();
    let one_time = [4096u64; 80];
    let sizes: Vec<u64> = head
        .iter()
        .chain(&one_time)
        .chain(&model)
        .copied()
        .collect();
    let p = plan(&sizes);
    // The first forward's head differed a little too: a request of its own there.
    let requests: Vec<u64> = head.iter().chain(&[24]).chain(&model).copied().collect();
    let took = run(&p, &requests);
    let missed: Vec<usize> = (0..took.len()).filter(|&i| took[i].is_none()).collect();
    // Three anchors' runs at most (the first holds the head's stray request and finds
    // nothing; the next finds the place; the third's nearest place is a period short,
    // and it matches at the place before too).
    assert!(
        missed.len() <= 3 * ANCHOR,
        "missed {} requests: {missed:?}",
        missed.len()
    );
    assert_eq!(
        took.last(),
        Some(&Some(sizes.len() as u32 - 1)),
        "in step at the end"
    );
}

/// A first forward's slot sizes (two one-time slots in its head, 40 after it) and a
/// later forward's requests (without them).
fn first_forward_plan() -> (Vec<u64>, Vec<u64>) {
    let after: Vec<u64> = (20..=80u64).map(mixed_size).collect();
    let head = [100u64, 200, 901, 902, 300, 400, 500, 600];
    let sizes = head.iter().chain(&[4096; 40]).chain(&after).copied();
    let requests = [100u64, 200, 300, 400, 500, 600]
        .iter()
        .chain(&after)
        .copied();
    (sizes.collect(), requests.collect())
}

/// A plan of a process's first pass: a few one-time slots in the head (the second
/// pass's request stands for the first of them: it misses and names a candidate, which
/// the request after it confirms), then a run of one-time slots. The head's miss has
/// its place once the candidate is confirmed: left in the run, it would spoil the first
/// anchor of the missing run after it (its distance in requests is not its distance in
/// slots past the jump), and the place would be found one anchor later.
#[test]
fn a_miss_placed_by_a_jump_leaves_the_run() {
    let (sizes, requests) = first_forward_plan();
    let p = plan(&sizes);
    let took = run(&p, &requests);
    assert_eq!(
        took[..4],
        [Some(0), Some(1), None, Some(5)],
        "the head's jump"
    );
    let missed = took.iter().filter(|t| t.is_none()).count();
    // The head's miss and two anchors (the first finds the place, the second confirms
    // it): 8 misses.
    assert!(missed <= 1 + 2 * ANCHOR, "missed {missed}: {took:?}");
    assert_eq!(took.last(), Some(&Some(sizes.len() as u32 - 1)));
}

/// The plan of a first forward (one-time slots in its head, and a run of them after
/// it), replayed by the passes after it: the first finds its place again past both
/// (a candidate confirmed, two anchors that agree) and the plan learns the skips; the
/// next takes them at once.
#[test]
fn the_skips_one_pass_found_cost_the_next_nothing() {
    let (sizes, requests) = first_forward_plan();
    let p = plan(&sizes);
    let first = run(&p, &requests);
    let missed = |took: &[Option<u32>]| took.iter().filter(|t| t.is_none()).count();
    assert!(
        missed(&first) > ANCHOR,
        "the first pass searches: {first:?}"
    );
    let second = run_learned(&p, &requests, 0);
    assert_eq!(missed(&second), 0, "{second:?}");
    let own: Vec<Option<u32>> = [0, 1, 4, 5, 6, 7]
        .into_iter()
        .chain(48..sizes.len() as u32)
        .map(Some)
        .collect();
    assert_eq!(second, own, "each request its own slot");
}

/// A plan of a process's first pass: one-time slots in the head, and two small requests
/// there that later passes make further on, so the first two requests of a run of equal
/// sizes miss at the same slot before a third confirms a candidate. The skip belongs to
/// the first request to miss there: learned for the second (the one that named the
/// candidate), the next pass's first would take it, and every request of the run after
/// it the slot one place on: a buffer that lives the whole pass would take a slot
/// planned to live a few allocations, and the slots planned after those at its place
/// would overlap it for the rest of each pass. The next pass takes what the first took,
/// and the slot the first request's miss named; the pass after it misses nothing.
#[test]
fn a_skip_belongs_to_the_first_request_missing_at_its_slot() {
    let (big, mid) = (1_605_632u64, 401_408u64);
    let one_time = [1024u64, 384, 1024, 384, 1024, 384, 1024, 384, 1520, 640];
    let moved = [8192u64, 765, 765];
    let head = [big, 602_112, 3456];
    let run_of_big = [big, big, big, big, mid, big, 36_864, mid, mid, mid];
    let sizes: Vec<u64> = head
        .iter()
        .chain(&one_time)
        .chain(&[big])
        .chain(&moved)
        .chain(&run_of_big)
        .copied()
        .collect();
    let requests: Vec<u64> = head
        .iter()
        .chain(&[big])
        .chain(&run_of_big)
        .copied()
        .collect();
    let p = plan(&sizes);
    let first = run(&p, &requests);
    let second = run_learned(&p, &requests, 0);
    for (i, took) in first.iter().enumerate() {
        if took.is_some() {
            assert_eq!(second[i], *took, "request {i}: {first:?}, then {second:?}");
        }
    }
    // The first request of the run took the first miss's candidate; the second, at
    // the slot after it, missed and named its own, which the third confirmed: a skip
    // for the pass after, which misses none.
    assert_eq!((second[3], second[4]), (Some(13), None), "{second:?}");
    let third = run_learned(&p, &requests, 0);
    assert!(third.iter().all(Option::is_some), "{third:?}");
}

/// A skip is a hint: a pass that stands where one was learned, with a request that
/// matches the skip's slot but is an insertion, jumps, and the requests after it take
/// the jump back (rule 2).
#[test]
fn a_wrong_skip_is_taken_back() {
    let p = plan(&[100, 200, 901, 902, 300, 400, 500, 600]);
    run(&p, &[100, 200, 300, 400]); // learns 2 -> 4
    let took = run_learned(&p, &[100, 200, 300, 901, 902, 300, 400, 500, 600], 0);
    assert_eq!(took[..5], [Some(0), Some(1), Some(4), Some(2), Some(3)]);
    assert_eq!(took.last(), Some(&Some(7)), "in step at the end: {took:?}");
}

/// A pass whose plan holds a first pass's one-time slots after its first few, whose
/// sequence repeats block after block, and in which a request that moves about from
/// pass to pass (`x`, in the plan a few blocks on) comes first in the lost run. The
/// run's anchor then matches only the far place where the plan has `x`: taken, the rest
/// of the pass would take slots whole blocks ahead of its own. A far place one anchor
/// finds is taken only once the next anchor agrees.
#[test]
fn an_insertion_in_the_anchor_does_not_jump_blocks_ahead() {
    let block: Vec<u64> = (1..=60u64).map(mixed_size).collect();
    let one_time: Vec<u64> = (100..130u64).map(mixed_size).collect();
    let (head, x) = ([4096u64, 2048, 512, 16, 32], 1520);
    let mut sizes: Vec<u64> = head.iter().chain(&one_time).copied().collect();
    let mut own = Vec::new(); // each block request's own slot
    for b in 0..10 {
        if b == 3 {
            sizes.push(x);
        }
        own.extend(sizes.len() as u32..(sizes.len() + block.len()) as u32);
        sizes.extend(&block);
    }
    let p = plan(&sizes);
    let mut requests = head.to_vec();
    requests.push(x);
    requests.extend(block.iter().cycle().take(own.len()));
    let took = run(&p, &requests);
    let right = took[head.len() + 1..]
        .iter()
        .zip(&own)
        .filter(|(t, own)| **t == Some(**own))
        .count();
    // Three searches' runs (a false place, the true one, the one agreeing with it),
    // and the requests that meanwhile took one-time slots of their size.
    assert!(
        right + 8 * ANCHOR >= own.len(),
        "{right} of {} block requests took their own slots",
        own.len()
    );
}

/// Why a request missed, for each kind of divergence.
#[test]
fn miss_reasons() {
    let p = plan(&[100, 200]);
    let mut shrink = Shrink::Off;
    let mut lost = Lost::default();
    let mut c = p.initial_cursors()[0];
    let size = 150;
    assert_eq!(
        take(&p, &mut c, size, (&mut shrink, &mut lost), at0()),
        Err(MissReason::TooLarge)
    );
    let mut c = p.initial_cursors()[0];
    assert_eq!(
        take(&p, &mut c, 5, (&mut shrink, &mut lost), at0()),
        Err(MissReason::Unplanned)
    );
    assert_eq!(c.next, 0, "nothing moved");
}

#[derive(Clone, Debug)]
enum Edit {
    Insert(usize, u64),
    Delete(usize),
    Resize(usize, bool),
}

fn edits() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1u64..5000).prop_map(|(i, s)| Edit::Insert(i, s)),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), any::<bool>()).prop_map(|(i, up)| Edit::Resize(i, up)),
    ]
}

/// Occupant words from values.
fn words(values: &[u32]) -> Vec<AtomicU32> {
    values.iter().map(|&v| AtomicU32::new(v)).collect()
}

#[test]
fn a_claim_sees_any_occupied_word() {
    for len in [1usize, 7, 8, 9, 24, 1000] {
        assert!(all_empty(&words(&vec![EMPTY; len])));
        for at in [0, len / 2, len - 1] {
            let mut v = vec![EMPTY; len];
            v[at] = 5;
            assert!(!all_empty(&words(&v)), "len {len}, word {at}");
        }
    }
}

/// Slot layouts for the hand-out property: small slots at 16-byte steps over 8 KiB (up
/// to 512 groups), and large ones over hundreds of them (whole blocks of groups).
fn layouts() -> impl Strategy<Value = Vec<(u64, u64)>> {
    let small = (0u64..512, 1u64..4).prop_map(|(at, len)| (at * 16, len * 16));
    let large = (0u64..512, 1u64..400).prop_map(|(at, len)| (at * 16, len * 64));
    prop::collection::vec(prop_oneof![3 => small, 1 => large], 1..160)
}

/// Hands out and frees slots of one instance as `ops` say, checking each hand-out
/// against the byte ranges of the slots live (it succeeds exactly when none
/// overlaps), and the live slots the instance reports after each step.
fn hand_out_and_free(at: &[(u64, u64)], ops: &[(bool, usize)]) {
    let slabs = Slabs::new(plan_at(at), 1).unwrap();
    slabs.register();
    let inst = slabs.take(Lend::Nothing).unwrap();
    // SAFETY: taken above; lives as long as `slabs`.
    let i = unsafe { &*inst };
    let overlap = |a: usize, b: usize| {
        let ((ao, asz), (bo, bsz)) = (at[a], at[b]);
        ao < bo + bsz && bo < ao + asz
    };
    let mut live: Vec<usize> = Vec::new();
    for &(hand_out, k) in ops {
        if hand_out || live.is_empty() {
            let s = k % at.len();
            let expected = !live.iter().any(|&l| overlap(l, s));
            assert_eq!(
                claim(i, s as u32, &slabs.plan.slots[s]),
                expected,
                "slot {s} {:?} with live {live:?}",
                at[s]
            );
            if expected {
                live.push(s);
            }
        } else {
            let s = live.swap_remove(k % live.len());
            // SAFETY: slot `s` is live in `inst`, freed once.
            unsafe { free(inst.cast(), i.base().add(at[s].0 as usize)) };
        }
        let mut seen = i.live_slots().expect("memory for the list");
        seen.sort_unstable();
        let mut want: Vec<u32> = live.iter().map(|&s| s as u32).collect();
        want.sort_unstable();
        assert_eq!(seen, want);
        assert_eq!(i.slots_live() || i.lanes_live(), !live.is_empty());
    }
    for s in live {
        // SAFETY: as above.
        unsafe { free(inst.cast(), i.base().add(at[s].0 as usize)) };
    }
    assert!(i
        .occupant
        .iter()
        .chain(i.spanning.iter())
        .all(|o| o.load(Ordering::Relaxed) == EMPTY));
    // SAFETY: taken above; the pass is over and nothing is live.
    unsafe { slabs.release(inst, false, Lend::Nothing) };
    assert!(slabs.try_retire());
}

#[test]
fn a_slot_over_whole_blocks_sees_and_is_seen_by_the_slots_inside() {
    // 300 groups of 16 bytes; slot 300 covers all of them (blocks 1-3 whole).
    let mut at: Vec<(u64, u64)> = (0..300).map(|g| (g * 16, 16)).collect();
    at.push((0, 300 * 16));
    at.push((70 * 16, 200 * 16)); // starts inside block 1, covers blocks 2-3 whole
    let big = 300;
    // A small slot inside a whole block refuses the big one, and the other way round.
    hand_out_and_free(
        &at,
        &[
            (true, 150),
            (true, big),
            (false, 0),
            (true, big),
            (true, 150),
        ],
    );
    // The second big one starts inside the first's whole block 1: refused, then not.
    hand_out_and_free(
        &at,
        &[
            (true, big),
            (true, big + 1),
            (false, 0),
            (true, big + 1),
            (true, 299),
        ],
    );
    // A slot starting at a block's first group, after a whole-block slot's tail.
    hand_out_and_free(
        &at,
        &[
            (true, big + 1),
            (true, 64),
            (true, 69),
            (true, 270),
            (true, 64 * 4),
        ],
    );
}

proptest! {
    #[test]
    fn a_hand_out_succeeds_exactly_when_no_live_slot_overlaps(
        at in layouts(),
        ops in prop::collection::vec((prop::bool::weighted(0.6), 0usize..1000), 1..200),
    ) {
        hand_out_and_free(&at, &ops);
    }
}

proptest! {
    // A fixed seed: an online alignment can be unlucky (of 100,000 random cases, 1
    // edited sequence exceeds 3k and 14 long-run cases their bound: `matcher_study`),
    // so the same 1,000 cases run every time; any regression of the matcher shows in
    // them.
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 1000 },
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6d65_6d6f),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Runs of missing slots longer than the window, as a process's first pass leaves
    /// in its plan: each costs at most a few requests. (Sizes of a real pass's variety:
    /// 64 of them. Over a handful of sizes a long run is ambiguous: many places fit.)
    #[test]
    fn long_missing_runs_cost_a_bounded_number_of_matches(
        sizes in prop::collection::vec((1u64..=64).prop_map(|k| 16 * k), 200..1500),
        runs in prop::collection::vec((any::<usize>(), 17usize..200), 1..4),
    ) {
        let (hits, n, bound) = long_runs_case(&sizes, &runs);
        prop_assert!(hits + bound >= n, "{} of {} hit after {} runs", hits, n, runs.len());
    }

    /// A sequence of n requests with k random insertions, deletions and resizes: at
    /// least n - 3k requests take a slot of their own planned size (their own, or,
    /// inside a run of equal sizes, a neighbour: all the same to the matcher), a slot
    /// taken again counting as a miss (see [`once`]).
    #[test]
    fn each_divergence_costs_a_bounded_number_of_matches(
        // Sizes from a small alphabet: many repeats, as in real passes.
        sizes in prop::collection::vec(
            prop::sample::select(vec![16u64, 24, 64, 256, 1024, 4096, 65536]),
            1..300,
        ),
        edits in prop::collection::vec(edits(), 0..12),
    ) {
        let (right, n, k) = divergence_case(&sizes, &edits);
        prop_assert!(right + 3 * k >= n, "{} of {} matched after {} edits", right, n, k);
    }
}

/// [`long_missing_runs_cost_a_bounded_number_of_matches`]'s case: the requests that
/// hit, the requests, and the bound on misses.
fn long_runs_case(sizes: &[u64], runs: &[(usize, usize)]) -> (usize, usize, usize) {
    let p = plan(sizes);
    let mut keep = vec![true; sizes.len()];
    for &(at, len) in runs {
        let at = at % sizes.len();
        keep[at..(at + len).min(sizes.len())].fill(false);
    }
    let requests: Vec<u64> = (0..sizes.len())
        .filter(|&i| keep[i])
        .map(|i| sizes[i])
        .collect();
    let hits = once(run(&p, &requests)).iter().flatten().count();
    // Per run, two agreeing anchors' misses, and as many again for a false anchor.
    (hits, requests.len(), 4 * ANCHOR * runs.len())
}

/// [`each_divergence_costs_a_bounded_number_of_matches`]'s case: the requests that
/// took a slot of their planned size, the slots, and the edits.
fn divergence_case(sizes: &[u64], edits: &[Edit]) -> (usize, usize, usize) {
    let p = plan(sizes);
    // The requests: their size, and their planned size (none: inserted or grown).
    let mut requests: Vec<(u64, Option<u64>)> = sizes.iter().map(|&s| (s, Some(s))).collect();
    for e in edits {
        let n = requests.len();
        match *e {
            Edit::Insert(i, s) => requests.insert(i % (n + 1), (s, None)),
            Edit::Delete(i) if n > 0 => {
                requests.remove(i % n);
            }
            Edit::Resize(i, up) if n > 0 => {
                let r = &mut requests[i % n];
                if up {
                    *r = (r.0 * 2 + 1, None); // cannot be served from its slot
                } else {
                    r.0 = (r.0 / 3).max(1);
                }
            }
            _ => {}
        }
    }
    let took = once(run(&p, &requests.iter().map(|r| r.0).collect::<Vec<_>>()));
    let right = requests
        .iter()
        .zip(&took)
        .filter(
            |(r, t)| matches!((r.1, t), (Some(size), Some(i)) if p.slots[*i as usize].size == size),
        )
        .count();
    (right, sizes.len(), edits.len())
}

/// A study, run by hand: how often the two properties above fail over random cases
/// (they run on a fixed seed):
///
/// ```text
/// MATCHER_CASES=20000 cargo test -p memo-alloc --release --lib matcher_study -- --ignored --nocapture
/// ```
#[test]
#[ignore = "a study: run by hand (see the doc comment)"]
fn matcher_study() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let cases: usize = std::env::var("MATCHER_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut runner = TestRunner::default();
    let long = (
        prop::collection::vec((1u64..=64).prop_map(|k| 16 * k), 200..1500),
        prop::collection::vec((any::<usize>(), 17usize..200), 1..4),
    );
    let over_long = (0..cases)
        .filter(|_| {
            let (sizes, runs) = long.new_tree(&mut runner).unwrap().current();
            let (hits, n, bound) = long_runs_case(&sizes, &runs);
            hits + bound < n
        })
        .count();
    let edited = (
        prop::collection::vec(
            prop::sample::select(vec![16u64, 24, 64, 256, 1024, 4096, 65536]),
            1..300,
        ),
        prop::collection::vec(edits(), 0..12),
    );
    let (mut over, mut worst) = (0, 0.0f64);
    for _ in 0..cases {
        let (sizes, edits) = edited.new_tree(&mut runner).unwrap().current();
        let (right, n, k) = divergence_case(&sizes, &edits);
        over += (right + 3 * k < n) as usize;
        worst = worst.max(n.saturating_sub(right) as f64 / k.max(1) as f64);
    }
    eprintln!(
        "matcher study: {cases} cases each; long missing runs over the bound: {over_long}; \
         edited sequences over 3 per edit: {over} (worst {worst:.1} per edit)"
    );
}

/// A real engine's pass (see `a_repeating_sequence_finds_its_own_block`): how many
/// of its block requests took a slot of their own size, and how many there were.
fn repeating(
    block: &[u64],
    one_time: &[u64],
    repeats: usize,
    planned_at: usize,
    moved_to: usize,
) -> (usize, usize) {
    let (head, x) = ([40_000u64, 20_000, 10_000], 1528);
    let mut sizes: Vec<u64> = head.iter().chain(one_time).copied().collect();
    let mut own = Vec::new();
    for b in 0..repeats {
        if b == planned_at % repeats {
            sizes.push(x);
        }
        own.extend(sizes.len() as u32..(sizes.len() + block.len()) as u32);
        sizes.extend(block);
    }
    let p = plan(&sizes);
    let mut requests: Vec<Option<u32>> = own.iter().map(|&o| Some(o)).collect();
    requests.insert(moved_to % (requests.len() + 1), None);
    let size_of = |r: &Option<u32>| r.map_or(x, |o| sizes[o as usize]);
    let all: Vec<u64> = head
        .iter()
        .copied()
        .chain(requests.iter().map(size_of))
        .collect();
    let took = once(run(&p, &all));
    let right = took[head.len()..]
        .iter()
        .zip(&requests)
        .filter(|(t, r)| matches!((t, r), (Some(t), Some(o)) if sizes[*t as usize] == sizes[*o as usize]))
        .count();
    (right, own.len())
}

/// A real engine's pass: a head, a first pass's one-time slots (planned, never made
/// again), then a block of requests that repeats (a model's layers), with one request
/// that moves from pass to pass (a thread pool's queue block). Every block request of
/// a later pass but a bounded number takes a slot of its own size (its own, or the same
/// request's of a neighbouring block), a slot taken again counting as a miss.
///
/// Over 1,000 random passes (a fixed seed), as an online matcher can be unlucky:
/// one-time slots can hold a stretch of a block's sizes, and a short block can make
/// them look like one: about 1 pass in 1,000 loses more than the bound with one-time
/// runs no longer than a block (2 without that limit).
#[test]
fn a_repeating_sequence_finds_its_own_block() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let passes = (
        prop::sample::subsequence((1u64..=256).map(|k| 16 * k).collect::<Vec<_>>(), 16),
        prop::collection::vec(0usize..16, 20..120),
        prop::collection::vec(0usize..16, 17..60),
        4usize..12,
        any::<usize>(),
        any::<usize>(),
    );
    let mut runner = TestRunner::deterministic();
    let (mut over, mut worst) = (0, 0.0f64);
    for _ in 0..1000 {
        let (alphabet, block, one_time, repeats, planned_at, moved_to) =
            passes.new_tree(&mut runner).unwrap().current();
        let block: Vec<u64> = block.iter().map(|&i| alphabet[i]).collect();
        let one_time: Vec<u64> = one_time
            .iter()
            .take(block.len())
            .map(|&i| alphabet[i])
            .collect();
        let (right, own) = repeating(&block, &one_time, repeats, planned_at, moved_to);
        over += usize::from(right + 8 * ANCHOR < own);
        worst = worst.max((own - right) as f64 / own as f64);
    }
    assert!(
        over <= 3,
        "{over} of 1,000 passes lost more than {}",
        8 * ANCHOR
    );
    assert!(
        worst <= 0.5,
        "a pass lost {:.0}% of its block requests",
        100.0 * worst
    );
}

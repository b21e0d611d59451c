//! Property tests over every planning strategy of both families, written against the
//! public API only (`OffsetStrategy::ALL`, `SharedObjectStrategy::ALL`, the validators and
//! the lower bounds), so they hold for placeholder strategies and catch broken ones.
//!
//! Properties, on random problems from [`problems`] (short, medium and long lifetimes,
//! intervals touching earlier ones, many equal sizes, alignments 1..4096, sizes near 2^40,
//! up to 60 buffers):
//!
//! - **(a) offsets**: every offset plan passes `validate_offsets` (cross-checked against an
//!   `O(n²)` brute-force check written here), its height is `>= offsets_lower_bound`, and
//!   without alignments it is never above the sum of the sizes.
//! - **(b) shared objects**: every shared plan passes `validate_shared` (cross-checked by
//!   brute force), its total is `>= shared_objects_lower_bound`, and `to_offset_plan` is a
//!   valid offset plan whose height is the total (exactly, when every alignment is 1).
//! - **(c) best**: `best`'s height is `<=` every other offset strategy's (against `naive`
//!   only when every alignment is 1, see [`check_best`]).
//! - **(d) determinism**: planning twice gives identical plans.
//! - **(e) time invariance**: plans of the problem with every time shifted (`t + k`) or
//!   scaled (`t * c`) stay valid; heights and totals are unchanged under shifting, and
//!   greedy-by-size (both families) and naive are unchanged under scaling too.
//! - **(f) naive**: the naive offset plan's height is the sum of the sizes with alignment
//!   padding in input order; the naive shared total is the sum of the sizes.
//! - the validators agree with the brute-force checks on randomly corrupted plans.
//!
//! `exact` (branch and bound, possibly slow) gets its own properties with fewer, smaller
//! cases. Unit tests cover the empty problem, single buffers (down to sizes near `u64::MAX`)
//! and *mutation sanity*: the same checkers, fed broken plans and broken planners, fail.
//!
//! Run: `cargo test -p memo-planner --test properties` (add `--release` for speed;
//! `PROPTEST_CASES` does not apply, case counts are set per block below).

use std::cell::Cell;
use std::fmt::Debug;

use memo_planner::fixtures::{minimalloc_example, tflite_complex};
use memo_planner::*;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

/// Cases for the properties of the fast strategies.
const CASES: u32 = 256;
/// Cases for the properties of `exact`.
const EXACT_CASES: u32 = 24;
/// Largest problem for the fast strategies.
const MAX_N: usize = 60;
/// Largest problem for `exact`.
const EXACT_MAX_N: usize = 12;

// ---------------------------------------------------------------------------------------
// Problem generation
// ---------------------------------------------------------------------------------------

/// How a generated buffer's lifetime is chosen.
#[derive(Clone, Debug)]
enum Life {
    /// `[start, start + len)`.
    At { start: u64, len: u64 },
    /// Starts exactly when an earlier buffer ends (touching half-open intervals).
    After { prev: Index, len: u64 },
    /// Ends exactly when an earlier buffer starts (when it does not start at 0).
    Before { next: Index, len: u64 },
}

fn life() -> impl Strategy<Value = Life> {
    prop_oneof![
        // Short: one to three steps, as workspaces and activations.
        4 => (0u64..40, 1u64..4).prop_map(|(start, len)| Life::At { start, len }),
        // Medium: skip connections.
        3 => (0u64..40, 4u64..16).prop_map(|(start, len)| Life::At { start, len }),
        // Long: weights alive over most of the horizon.
        1 => (0u64..6, 30u64..70).prop_map(|(start, len)| Life::At { start, len }),
        3 => (any::<Index>(), 1u64..12).prop_map(|(prev, len)| Life::After { prev, len }),
        1 => (any::<Index>(), 1u64..12).prop_map(|(next, len)| Life::Before { next, len }),
    ]
}

fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        // A few values, so that equal sizes (ties) are common.
        3 => prop::sample::select(vec![1u64, 8, 16, 24, 64, 100, 4096]),
        4 => 1u64..5_000,
        1 => 1u64..(1 << 24),
        // Large, near 2^40.
        1 => ((1u64 << 40) - 4096)..((1u64 << 40) + 4096),
    ]
}

fn align() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(1u64),
        2 => (1u32..=12).prop_map(|e| 1u64 << e),
    ]
}

/// Random valid problems of up to `max_n` buffers. A third of them have every alignment 1,
/// so that the exact-equality properties of unaligned problems run often.
fn problems(max_n: usize) -> impl Strategy<Value = Problem> {
    (
        prop::bool::weighted(0.67),
        prop::collection::vec((life(), size(), align()), 0..=max_n),
    )
        .prop_map(|(aligned, raw)| {
            let mut buffers: Vec<Buffer> = Vec::with_capacity(raw.len());
            for (i, (life, size, align)) in raw.into_iter().enumerate() {
                let (lower, upper) = match life {
                    Life::At { start, len } => (start, start + len),
                    Life::After { prev, len } if i > 0 => {
                        let t = buffers[prev.index(i)].upper;
                        (t, t + len)
                    }
                    Life::Before { next, len } if i > 0 && buffers[next.index(i)].lower > 0 => {
                        let t = buffers[next.index(i)].lower;
                        (t - len.min(t), t)
                    }
                    Life::After { len, .. } | Life::Before { len, .. } => (0, len),
                };
                let align = if aligned { align } else { 1 };
                buffers.push(Buffer::new(format!("b{i}"), lower, upper, size).with_align(align));
            }
            Problem::new(buffers).expect("generated problems are valid")
        })
}

/// The problem with every time `t` replaced by `t * scale + shift`.
fn retimed(p: &Problem, scale: u64, shift: u64) -> Problem {
    Problem::new(
        p.buffers()
            .iter()
            .map(|b| Buffer {
                lower: b.lower * scale + shift,
                upper: b.upper * scale + shift,
                ..b.clone()
            })
            .collect(),
    )
    .expect("retimed problem is valid")
}

fn unaligned(p: &Problem) -> bool {
    p.buffers().iter().all(|b| b.align == 1)
}

fn sum_of_sizes(p: &Problem) -> u64 {
    p.buffers().iter().map(|b| b.size).sum()
}

/// The offset strategies that are fast enough for every case (all but `exact`).
fn fast_offset_strategies() -> impl Iterator<Item = OffsetStrategy> {
    OffsetStrategy::ALL
        .into_iter()
        .filter(|&s| s != OffsetStrategy::Exact)
}

// ---------------------------------------------------------------------------------------
// Independent brute-force checks
// ---------------------------------------------------------------------------------------

/// `O(n²)` check of an offset plan: `Some(height)` when valid.
fn brute_offsets(p: &Problem, plan: &OffsetPlan) -> Option<u64> {
    let b = p.buffers();
    if plan.offsets.len() != b.len() {
        return None;
    }
    let mut ends = Vec::with_capacity(b.len());
    for (x, &o) in b.iter().zip(&plan.offsets) {
        if o % x.align != 0 {
            return None;
        }
        ends.push(o.checked_add(x.size)?);
    }
    for i in 0..b.len() {
        for j in i + 1..b.len() {
            let time = b[i].lower < b[j].upper && b[j].lower < b[i].upper;
            let space = plan.offsets[i] < ends[j] && plan.offsets[j] < ends[i];
            if time && space {
                return None;
            }
        }
    }
    Some(ends.into_iter().max().unwrap_or(0))
}

/// `O(n²)` check of a shared-objects plan: `Some(total)` when valid.
fn brute_shared(p: &Problem, plan: &SharedObjectsPlan) -> Option<u64> {
    let b = p.buffers();
    if plan.object_ids.len() != b.len() || plan.object_ids.iter().any(|&o| o >= plan.num_objects())
    {
        return None;
    }
    for i in 0..b.len() {
        for j in i + 1..b.len() {
            let time = b[i].lower < b[j].upper && b[j].lower < b[i].upper;
            if time && plan.object_ids[i] == plan.object_ids[j] {
                return None;
            }
        }
    }
    for (obj, &size) in plan.object_sizes.iter().enumerate() {
        let largest = (0..b.len())
            .filter(|&i| plan.object_ids[i] == obj)
            .map(|i| b[i].size)
            .max()
            .unwrap_or(0);
        if largest != size {
            return None;
        }
    }
    plan.object_sizes
        .iter()
        .try_fold(0u64, |acc, &s| acc.checked_add(s))
}

// ---------------------------------------------------------------------------------------
// Checkers: shared by the properties and by the mutation-sanity tests
// ---------------------------------------------------------------------------------------

/// (a) A valid offset plan, agreeing with the brute-force check, at or above the lower
/// bound, and (without alignments) no higher than the sum of the sizes. Returns the height.
fn check_offset_plan(p: &Problem, plan: &OffsetPlan, who: &str) -> Result<u64, String> {
    let brute = brute_offsets(p, plan);
    let height = match validate_offsets(p, plan) {
        Ok(h) => h,
        Err(e) => {
            if brute.is_some() {
                return Err(format!(
                    "{who}: validate_offsets rejects a plan the brute-force check accepts: {e}"
                ));
            }
            return Err(format!("{who}: invalid offset plan: {e}"));
        }
    };
    if brute != Some(height) {
        return Err(format!(
            "{who}: validate_offsets says Ok({height}), brute force says {brute:?}"
        ));
    }
    if height != plan.height(p) {
        return Err(format!(
            "{who}: validated height {height} != plan.height() {}",
            plan.height(p)
        ));
    }
    let lb = offsets_lower_bound(p);
    if height < lb {
        return Err(format!("{who}: height {height} below the lower bound {lb}"));
    }
    if unaligned(p) && height > sum_of_sizes(p) {
        return Err(format!(
            "{who}: height {height} above the sum of sizes {} (worse than naive)",
            sum_of_sizes(p)
        ));
    }
    Ok(height)
}

/// (b) A valid shared-objects plan, agreeing with the brute-force check, at or above its
/// lower bound, whose layout is a valid offset plan of height `total` (`>= total` with
/// alignments). Returns the total.
fn check_shared_plan(p: &Problem, plan: &SharedObjectsPlan, who: &str) -> Result<u64, String> {
    let brute = brute_shared(p, plan);
    let total = match validate_shared(p, plan) {
        Ok(t) => t,
        Err(e) => {
            if brute.is_some() {
                return Err(format!(
                    "{who}: validate_shared rejects a plan the brute-force check accepts: {e}"
                ));
            }
            return Err(format!("{who}: invalid shared-objects plan: {e}"));
        }
    };
    if brute != Some(total) || total != plan.total() {
        return Err(format!(
            "{who}: validate_shared says Ok({total}), brute force {brute:?}, plan.total() {}",
            plan.total()
        ));
    }
    let lb = shared_objects_lower_bound(p);
    if total < lb {
        return Err(format!("{who}: total {total} below the lower bound {lb}"));
    }
    let laid_out = plan.to_offset_plan(p);
    let height = check_offset_plan(p, &laid_out, &format!("{who} (to_offset_plan)"))?;
    if unaligned(p) && height != total {
        return Err(format!(
            "{who}: to_offset_plan height {height} != total {total} without alignments"
        ));
    }
    if height < total {
        return Err(format!(
            "{who}: to_offset_plan height {height} < total {total}"
        ));
    }
    Ok(total)
}

/// (c) `best` is no higher than any other strategy. `heights` pairs strategies with their
/// heights on `p`.
///
/// `naive` is compared only when every alignment is 1: with alignments, laying buffers end
/// to end in input order can pad less than a size-descending order does. Minimal case
/// (found by this property): `b0 [3, 6) size 1 align 2`, `b1 [0, 30) size 925`; naive puts
/// b0 at 0 and b1 at 1 (height 926), greedy-by-size b1 at 0 and b0 at 926 (height 927).
/// The `best` placeholder is greedy-by-size; a `best` whose portfolio includes naive may
/// tighten this.
fn check_best(p: &Problem, best: u64, heights: &[(OffsetStrategy, u64)]) -> Result<(), String> {
    for &(s, h) in heights {
        if s == OffsetStrategy::Best || (s == OffsetStrategy::Naive && !unaligned(p)) {
            continue;
        }
        if best > h {
            return Err(format!("best: height {best} above {s}'s {h}"));
        }
    }
    Ok(())
}

/// (d) Planning `p` twice gives the same plan.
fn check_deterministic<T: PartialEq + Debug>(
    p: &Problem,
    who: &str,
    plan: impl Fn(&Problem) -> T,
) -> Result<(), String> {
    let (a, b) = (plan(p), plan(p));
    if a != b {
        return Err(format!("{who}: two runs differ:\n{a:?}\n{b:?}"));
    }
    Ok(())
}

/// (e) for offsets: plans of shifted/scaled problems are valid; heights are equal under
/// shifting, and under scaling too when `scale_invariant`.
fn check_offsets_retimed(
    p: &Problem,
    who: &str,
    plan: impl Fn(&Problem) -> OffsetPlan,
    (scale, shift): (u64, u64),
    scale_invariant: bool,
) -> Result<(), String> {
    let base = check_offset_plan(p, &plan(p), who)?;
    let shifted = retimed(p, 1, shift);
    let h = check_offset_plan(
        &shifted,
        &plan(&shifted),
        &format!("{who} shifted by {shift}"),
    )?;
    if h != base {
        return Err(format!(
            "{who}: height {base} becomes {h} with times shifted by {shift}"
        ));
    }
    let scaled = retimed(p, scale, 0);
    let h = check_offset_plan(&scaled, &plan(&scaled), &format!("{who} scaled by {scale}"))?;
    if scale_invariant && h != base {
        return Err(format!(
            "{who}: height {base} becomes {h} with times scaled by {scale}"
        ));
    }
    Ok(())
}

/// (e) for shared objects, as [`check_offsets_retimed`].
fn check_shared_retimed(
    p: &Problem,
    who: &str,
    plan: impl Fn(&Problem) -> SharedObjectsPlan,
    (scale, shift): (u64, u64),
    scale_invariant: bool,
) -> Result<(), String> {
    let base = check_shared_plan(p, &plan(p), who)?;
    let shifted = retimed(p, 1, shift);
    let t = check_shared_plan(
        &shifted,
        &plan(&shifted),
        &format!("{who} shifted by {shift}"),
    )?;
    if t != base {
        return Err(format!(
            "{who}: total {base} becomes {t} with times shifted by {shift}"
        ));
    }
    let scaled = retimed(p, scale, 0);
    let t = check_shared_plan(&scaled, &plan(&scaled), &format!("{who} scaled by {scale}"))?;
    if scale_invariant && t != base {
        return Err(format!(
            "{who}: total {base} becomes {t} with times scaled by {scale}"
        ));
    }
    Ok(())
}

/// (f) The naive offset height: sizes end to end in input order, each start aligned.
fn naive_height(p: &Problem) -> u64 {
    p.buffers()
        .iter()
        .fold(0, |end, b| align_up(end, b.align) + b.size)
}

fn ok(r: Result<impl Sized, String>) -> Result<(), TestCaseError> {
    r.map(|_| ()).map_err(TestCaseError::fail)
}

// ---------------------------------------------------------------------------------------
// Properties of the fast strategies
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(Config { cases: CASES, ..Config::default() })]

    /// (a)
    #[test]
    fn offset_plans_are_valid_and_above_the_bound(p in problems(MAX_N)) {
        for s in fast_offset_strategies() {
            ok(check_offset_plan(&p, &s.plan(&p), s.name()))?;
        }
    }

    /// (b), plus the two bounds' ordering (breadth <= sum of positional maximums).
    #[test]
    fn shared_plans_are_valid_and_lay_out_to_their_total(p in problems(MAX_N)) {
        prop_assert!(offsets_lower_bound(&p) <= shared_objects_lower_bound(&p));
        for s in SharedObjectStrategy::ALL {
            ok(check_shared_plan(&p, &s.plan(&p), s.name()))?;
        }
    }

    /// (c)
    #[test]
    fn best_is_never_beaten(p in problems(MAX_N)) {
        let heights: Vec<(OffsetStrategy, u64)> =
            fast_offset_strategies().map(|s| (s, s.plan(&p).height(&p))).collect();
        let best = OffsetStrategy::Best.plan(&p);
        let best = ok(check_offset_plan(&p, &best, "best")).map(|_| best.height(&p))?;
        ok(check_best(&p, best, &heights))?;
    }

    /// (d)
    #[test]
    fn planning_is_deterministic(p in problems(MAX_N)) {
        for s in fast_offset_strategies() {
            ok(check_deterministic(&p, s.name(), |p| s.plan(p)))?;
        }
        for s in SharedObjectStrategy::ALL {
            ok(check_deterministic(&p, s.name(), |p| s.plan(p)))?;
        }
    }

    /// (e)
    #[test]
    fn plans_survive_time_shift_and_scale(
        p in problems(MAX_N),
        scale in 2u64..1000,
        shift in 1u64..(1 << 32),
    ) {
        prop_assert_eq!(offsets_lower_bound(&retimed(&p, scale, shift)), offsets_lower_bound(&p));
        prop_assert_eq!(
            shared_objects_lower_bound(&retimed(&p, scale, shift)),
            shared_objects_lower_bound(&p)
        );
        for s in fast_offset_strategies() {
            let invariant = matches!(s, OffsetStrategy::GreedyBySize | OffsetStrategy::Naive);
            ok(check_offsets_retimed(&p, s.name(), |p| s.plan(p), (scale, shift), invariant))?;
        }
        for s in SharedObjectStrategy::ALL {
            let invariant =
                matches!(s, SharedObjectStrategy::GreedyBySize | SharedObjectStrategy::Naive);
            ok(check_shared_retimed(&p, s.name(), |p| s.plan(p), (scale, shift), invariant))?;
        }
        // Greedy by size sees only the order of the endpoints: the very same offsets.
        let gbs = OffsetStrategy::GreedyBySize;
        prop_assert_eq!(gbs.plan(&retimed(&p, scale, shift)), gbs.plan(&p));
    }

    /// (f)
    #[test]
    fn naive_plans_cost_the_sum_of_sizes(p in problems(MAX_N)) {
        let plan = OffsetStrategy::Naive.plan(&p);
        prop_assert_eq!(validate_offsets(&p, &plan), Ok(naive_height(&p)));
        if unaligned(&p) {
            prop_assert_eq!(plan.height(&p), sum_of_sizes(&p));
        }
        let shared = SharedObjectStrategy::Naive.plan(&p);
        prop_assert_eq!(validate_shared(&p, &shared), Ok(sum_of_sizes(&p)));
        prop_assert_eq!(shared.num_objects(), p.len());
    }

    /// The validators agree with the brute-force checks on corrupted plans: one offset
    /// moved onto another buffer's, next to it, or anywhere; object ids reassigned and
    /// sizes recomputed or perturbed.
    #[test]
    fn validators_agree_with_brute_force(
        p in problems(24),
        edits in prop::collection::vec((any::<Index>(), any::<Index>(), 0u8..5, 0u64..(1 << 20)), 1..4),
    ) {
        prop_assume!(!p.is_empty());
        let n = p.len();
        let mut plan = OffsetStrategy::GreedyBySize.plan(&p);
        let mut shared = SharedObjectStrategy::Naive.plan(&p);
        for &(a, b, how, x) in &edits {
            let (i, j) = (a.index(n), b.index(n));
            plan.offsets[i] = match how {
                0 => plan.offsets[j],
                1 => plan.offsets[j] + p.buffers()[j].size,
                2 => plan.offsets[j].saturating_sub(p.buffers()[i].size),
                3 => plan.offsets[j] + x % 8,
                _ => x,
            };
            shared.object_ids[i] = shared.object_ids[j];
        }
        let got = validate_offsets(&p, &plan).ok();
        prop_assert_eq!(got, brute_offsets(&p, &plan), "offsets {:?}", plan.offsets);
        // Recompute object sizes from the members (empty objects get 0) ...
        let mut sizes = vec![0u64; shared.num_objects()];
        for (b, &o) in p.buffers().iter().zip(&shared.object_ids) {
            sizes[o] = sizes[o].max(b.size);
        }
        shared.object_sizes = sizes;
        let got = validate_shared(&p, &shared).ok();
        prop_assert_eq!(got, brute_shared(&p, &shared), "objects {:?}", shared.object_ids);
        // ... then break one size.
        let o = shared.object_ids[edits[0].0.index(n)];
        shared.object_sizes[o] += 1;
        prop_assert_eq!(validate_shared(&p, &shared).ok(), None);
        prop_assert_eq!(brute_shared(&p, &shared), None);
    }
}

// ---------------------------------------------------------------------------------------
// Properties of `exact` (fewer, smaller cases)
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(Config { cases: EXACT_CASES, ..Config::default() })]

    /// (a), (c), (d), (e) for `exact`.
    #[test]
    fn exact_is_valid_deterministic_and_time_invariant(
        p in problems(EXACT_MAX_N),
        scale in 2u64..1000,
        shift in 1u64..(1 << 32),
    ) {
        let exact = OffsetStrategy::Exact;
        let plan = exact.plan(&p);
        let h = ok(check_offset_plan(&p, &plan, "exact")).map(|_| plan.height(&p))?;
        prop_assert_eq!(&exact.plan(&p), &plan, "exact: two runs differ");
        ok(check_offsets_retimed(&p, "exact", |p| exact.plan(p), (scale, shift), false))?;
        let best = OffsetStrategy::Best.plan(&p).height(&p);
        ok(check_best(&p, best, &[(exact, h)]))?;
    }
}

// ---------------------------------------------------------------------------------------
// Edge cases
// ---------------------------------------------------------------------------------------

#[test]
fn every_strategy_handles_the_empty_problem() {
    let p = Problem::default();
    for s in OffsetStrategy::ALL {
        let plan = s.plan(&p);
        assert!(plan.offsets.is_empty(), "{s}");
        assert_eq!(check_offset_plan(&p, &plan, s.name()), Ok(0));
    }
    for s in SharedObjectStrategy::ALL {
        let plan = s.plan(&p);
        assert!(plan.object_ids.is_empty(), "{s}");
        assert_eq!(check_shared_plan(&p, &plan, s.name()), Ok(0));
    }
}

#[test]
fn every_strategy_handles_a_single_buffer() {
    let singles = [
        Buffer::new("x", 0, 1, 1),
        Buffer::new("x", 7, 8, 24).with_align(4096),
        Buffer::new("x", 3, 1 << 40, (1 << 40) + 1).with_align(64),
        Buffer::new("x", 0, u64::MAX, u64::MAX - 4096).with_align(4096),
    ];
    for b in singles {
        let p = Problem::new(vec![b.clone()]).unwrap();
        for s in OffsetStrategy::ALL {
            let who = format!("{s} on {b:?}");
            assert_eq!(
                check_offset_plan(&p, &s.plan(&p), &who),
                Ok(b.size),
                "{who}"
            );
        }
        for s in SharedObjectStrategy::ALL {
            let who = format!("{s} on {b:?}");
            let plan = s.plan(&p);
            assert_eq!(check_shared_plan(&p, &plan, &who), Ok(b.size), "{who}");
            assert_eq!(plan.num_objects(), 1, "{who}");
        }
    }
}

#[test]
fn every_strategy_handles_buffers_that_fill_u64() {
    // Three huge buffers, two alive together: sizes plus alignments take nearly all of u64
    // (Problem::new requires their sum to fit), so any stray addition overflows.
    let big = u64::MAX / 3 - 8192;
    let p = Problem::new(vec![
        Buffer::new("a", 0, 2, big).with_align(4096),
        Buffer::new("b", 1, 3, big).with_align(4096),
        Buffer::new("c", 3, 4, big),
    ])
    .unwrap();
    for s in OffsetStrategy::ALL {
        check_offset_plan(&p, &s.plan(&p), s.name()).unwrap();
    }
    for s in SharedObjectStrategy::ALL {
        check_shared_plan(&p, &s.plan(&p), s.name()).unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// Mutation sanity: the checkers used above do fail on broken plans and planners
// ---------------------------------------------------------------------------------------

/// Two conflicting buffers of `p`.
fn conflicting_pair(p: &Problem) -> (usize, usize) {
    let b = p.buffers();
    (0..b.len())
        .flat_map(|i| (i + 1..b.len()).map(move |j| (i, j)))
        .find(|&(i, j)| b[i].conflicts_with(&b[j]))
        .expect("a conflict")
}

#[test]
fn mutation_sanity_offsets() {
    for p in [tflite_complex(), minimalloc_example()] {
        let good = OffsetStrategy::GreedyBySize.plan(&p);
        check_offset_plan(&p, &good, "greedy-by-size").unwrap();

        // Move one buffer onto a buffer it conflicts with.
        let (i, j) = conflicting_pair(&p);
        let mut moved = good.clone();
        moved.offsets[j] = moved.offsets[i];
        assert!(matches!(
            validate_offsets(&p, &moved),
            Err(PlanError::Overlap { .. })
        ));
        assert_eq!(brute_offsets(&p, &moved), None);
        let err = check_offset_plan(&p, &moved, "moved").unwrap_err();
        assert!(err.contains("invalid offset plan"), "{err}");

        // Make it overlap by a single byte.
        let mut nudged = good.clone();
        let (lo, hi) = if good.offsets[i] < good.offsets[j] {
            (i, j)
        } else {
            (j, i)
        };
        nudged.offsets[hi] = good.offsets[lo] + p.buffers()[lo].size - 1;
        assert!(check_offset_plan(&p, &nudged, "nudged").is_err());

        // A broken strategy: everything at 0.
        let zeros = OffsetPlan {
            offsets: vec![0; p.len()],
        };
        assert!(check_offset_plan(&p, &zeros, "zeros").is_err());

        // A plan that forgets a buffer.
        let short = OffsetPlan {
            offsets: good.offsets[1..].to_vec(),
        };
        assert!(check_offset_plan(&p, &short, "short").is_err());
    }

    // Misalignment, and "worse than naive" without alignments.
    let p = Problem::new(vec![
        Buffer::new("a", 0, 2, 8).with_align(8),
        Buffer::new("b", 1, 3, 8),
    ])
    .unwrap();
    let err = check_offset_plan(
        &p,
        &OffsetPlan {
            offsets: vec![4, 12],
        },
        "x",
    )
    .unwrap_err();
    assert!(err.contains("not aligned"), "{err}");
    let q = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b", 1, 3, 8)]).unwrap();
    let err = check_offset_plan(
        &q,
        &OffsetPlan {
            offsets: vec![0, 9],
        },
        "x",
    )
    .unwrap_err();
    assert!(err.contains("worse than naive"), "{err}");
}

#[test]
fn mutation_sanity_shared() {
    let p = tflite_complex();
    let good = SharedObjectStrategy::Naive.plan(&p);
    check_shared_plan(&p, &good, "naive").unwrap();

    // Put two conflicting buffers into one object (sizes kept consistent).
    let (i, j) = conflicting_pair(&p);
    let mut merged = good.clone();
    merged.object_ids[j] = merged.object_ids[i];
    merged.object_sizes[good.object_ids[i]] = p.buffers()[i].size.max(p.buffers()[j].size);
    merged.object_sizes[good.object_ids[j]] = 0;
    assert!(matches!(
        validate_shared(&p, &merged),
        Err(PlanError::ObjectConflict { .. })
    ));
    assert!(check_shared_plan(&p, &merged, "merged").is_err());

    // An object smaller than its largest buffer.
    let mut shrunk = good.clone();
    shrunk.object_sizes[0] -= 1;
    assert!(check_shared_plan(&p, &shrunk, "shrunk").is_err());

    // An object id out of range.
    let mut unknown = good;
    unknown.object_ids[0] = 99;
    assert!(check_shared_plan(&p, &unknown, "unknown").is_err());
}

#[test]
fn mutation_sanity_planners() {
    let p = tflite_complex();

    // (c): a `best` higher than greedy-by-size is caught.
    let gbs = OffsetStrategy::GreedyBySize.plan(&p).height(&p);
    let heights = [(OffsetStrategy::GreedyBySize, gbs)];
    assert!(check_best(&p, gbs, &heights).is_ok());
    assert!(check_best(&p, gbs + 1, &heights).is_err());

    // (d): a planner that changes its mind between runs is caught.
    let runs = Cell::new(0u64);
    let flaky = |p: &Problem| {
        runs.set(runs.get() + 1);
        let mut plan = OffsetStrategy::Naive.plan(p);
        plan.offsets.iter_mut().for_each(|o| *o += runs.get() % 2);
        plan
    };
    assert!(check_deterministic(&p, "flaky", flaky).is_err());
    assert!(check_deterministic(&p, "naive", |p| OffsetStrategy::Naive.plan(p)).is_ok());

    // (e): a planner that looks at absolute times is caught under shifting ...
    let by_clock = |p: &Problem| {
        if p.buffers().iter().any(|b| b.lower == 0) {
            OffsetStrategy::GreedyBySize.plan(p)
        } else {
            OffsetStrategy::Naive.plan(p)
        }
    };
    assert!(check_offsets_retimed(&p, "by-clock", by_clock, (3, 5), false).is_err());
    // ... and one that looks at lifetime lengths under scaling, when that must not matter.
    let by_length = |p: &Problem| {
        if p.buffers().iter().all(|b| b.lifetime() < 10) {
            SharedObjectStrategy::Naive.plan(p)
        } else {
            let mut plan = SharedObjectStrategy::Naive.plan(p);
            // Share one object between two buffers that do not conflict.
            let b = p.buffers();
            let (i, j) = (0..b.len())
                .flat_map(|i| (i + 1..b.len()).map(move |j| (i, j)))
                .find(|&(i, j)| !b[i].conflicts_with(&b[j]) && b[i].size >= b[j].size)
                .expect("a non-conflicting pair");
            plan.object_ids[j] = plan.object_ids[i];
            plan.object_sizes[j] = 0;
            plan
        }
    };
    check_shared_retimed(&p, "by-length", by_length, (100, 5), false).unwrap();
    assert!(check_shared_retimed(&p, "by-length", by_length, (100, 5), true).is_err());

    // (f): the expected naive height counts alignment padding.
    let q = Problem::new(vec![
        Buffer::new("a", 0, 1, 3),
        Buffer::new("b", 0, 1, 8).with_align(16),
    ])
    .unwrap();
    assert_eq!(naive_height(&q), 24);
    assert_eq!(OffsetStrategy::Naive.plan(&q).height(&q), 24);
}

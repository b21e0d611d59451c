//! Hand-worked cases of the offset heuristics: each strategy on the empty problem, TFLite's
//! chain and complex records (`data/tflite-cases.md`, half-open) and the minimalloc
//! example, with the derivation of every expected plan. A failure names the strategy and
//! the case.

use super::OffsetStrategy::{self, *};
use crate::fixtures::{minimalloc_example, tflite_chain, tflite_complex};
use crate::problem::Problem;
use crate::validate::validate_offsets;

/// One strategy on one case: the expected offsets and height.
struct Case {
    strategy: OffsetStrategy,
    case: &'static str,
    offsets: &'static [u64],
    height: u64,
}

/// The problem a case names.
fn problem(case: &str) -> Problem {
    match case {
        "empty" => Problem::default(),
        "tflite chain" => tflite_chain(),
        "tflite complex" => tflite_complex(),
        "minimalloc example" => minimalloc_example(),
        _ => panic!("unknown case {case}"),
    }
}

const fn case(
    strategy: OffsetStrategy,
    case: &'static str,
    offsets: &'static [u64],
    height: u64,
) -> Case {
    Case {
        strategy,
        case,
        offsets,
        height,
    }
}

// The chain, half-open: b0 [0,2) 16, b1 [1,3) 8, b2 [2,4) 64, b3 [3,5) 32, b4 [4,6) 8.
// The complex records, half-open: b0 [0,2) 32, b1 [1,5) 32, b2 [2,6) 8, b3 [3,6) 16,
// b4 [4,6) 8, b5 [5,8) 64, b6 [6,9) 8, b7 [7,9) 8, b8 [8,10) 16.
// The minimalloc example: b1 [0,3), b2 [3,9), b3 [0,9), b4 [9,21), b5 [0,21), all size 4.
const CASES: &[Case] = &[
    case(GreedyByBreadth, "empty", &[], 0),
    // Slots = times 0..5; breadths: t0 16, t1 24, t2 72, t3 96, t4 40, t5 8.
    // t3 (96): b2 -> 0, b3 -> 64 (conflicts with b2, none below fits).
    // t2 (72): b1 conflicts with b2 [0,64) only (b3 starts at 3) -> 64.
    // t4 (40): b4 conflicts with b3 [64,96) -> gap [0,64) -> 0.
    // t1 (24): b0 conflicts with b1 [64,72) -> gap [0,64) -> 0.
    // Height 96 = the lower bound.
    case(GreedyByBreadth, "tflite chain", &[0, 64, 0, 64, 0], 96),
    // Breadths: t0 32, t1 64, t2 40, t3 56, t4 64, t5 96, t6 72, t7 80, t8 32, t9 16,
    // so the order is t5, t7, t6, t1, t4, t3, t2, t0, t8, t9.
    // t5: b5 (64) -> 0; b3 (16, conflicts b5) -> 64; b2 (8; b5, b3) -> 80;
    //     b4 (8; b5, b3, b2) -> 88.
    // t7: b6 (conflicts b5 [0,64) only) -> 64; b7 (b5, b6 [64,72)) -> 72.
    // t6: nothing new. t1: b0 (32, input order first) conflicts with nothing placed
    //     -> 0; b1 (32) conflicts b0 [0,32), b3 [64,80), b2 [80,88), b4 [88,96):
    //     gap [32,64) fits exactly -> 32.
    // t4, t3, t2, t0: nothing new. t8: b8 conflicts b6, b7 ([64,80)) -> gap [0,64) -> 0.
    // Height 96 = the lower bound.
    case(
        GreedyByBreadth,
        "tflite complex",
        &[0, 32, 80, 64, 88, 0, 64, 72, 0],
        96,
    ),
    // Slots [0,3) 12, [3,9) 12, [9,21) 8. First [0,3): b1 -> 0, b3 -> 4, b5 -> 8.
    // [3,9): b2 conflicts with b3, b5 -> gap [0,4) -> 0.
    // [9,21): b4 conflicts with b5 -> gap [0,8) -> 0. Height 12 = the optimum.
    case(GreedyByBreadth, "minimalloc example", &[0, 0, 4, 0, 8], 12),
    case(GreedyInOrder, "empty", &[], 0),
    // t=0: b0 -> 0.            live {b0 [0,16)}
    // t=1: b1: no gap -> top 16. live {b0, b1 [16,24)}
    // t=2: free b0; gap [0,16) < 64 -> top 24: b2 [24,88).
    // t=3: free b1; gap [0,24) < 32 -> top 88: b3 [88,120).
    // t=4: free b2; gap [0,88) fits 8 -> 0. Height 120 (lower bound 96).
    case(GreedyInOrder, "tflite chain", &[0, 16, 24, 88, 0], 120),
    // t=0: b0 -> 0 [0,32).
    // t=1: b1 -> top 32 [32,64).
    // t=2: free b0; gap [0,32): b2 -> 0 [0,8); gaps now [8,32).
    // t=3: b3 (16) -> gap [8,32) (24) -> 8 [8,24); gap [24,32).
    // t=4: b4 (8) -> gap [24,32) exactly -> 24. live [0,8) [8,24) [24,32) [32,64).
    // t=5: free b1 -> top is 32; b5 (64) -> 32 [32,96).
    // t=6: free b2, b3, b4 -> gap [0,32); b6 (8) -> 0.
    // t=7: b7 (8) -> gap [8,32) -> 8.
    // t=8: free b5 -> top 16; b8 (16) -> gap? live [0,8) [8,16); none -> 16.
    // Height 96 = the lower bound.
    case(
        GreedyInOrder,
        "tflite complex",
        &[0, 32, 0, 8, 24, 32, 0, 8, 16],
        96,
    ),
    // t=0: b1 [0,3) 4 -> 0, b3 [0,9) 4 -> 4, b5 [0,21) 4 -> 8 (input order).
    // t=3: free b1; b2 [3,9) -> gap [0,4) -> 0.
    // t=9: free b2, b3; b4 [9,21) -> gap [0,8): 0. Height 12 = the optimum.
    case(GreedyInOrder, "minimalloc example", &[0, 0, 4, 0, 8], 12),
    case(StripPacking, "empty", &[], 0),
    // Slots are the times 0..6. All lifetimes are 2, so the fit order is by size:
    // b2, b3, b0, b1, b4.
    // [0,6)@0: b2 -> 0; sky [0,2)@0 [2,4)@64 [4,6)@0.
    // [0,2)@0: b0 -> 0; sky [0,2)@16.   [4,6)@0: b4 -> 0; sky [4,6)@8.
    // [4,6)@8: nothing fits (b3 starts at 3) -> raised to 64, merged: [2,6)@64.
    // [0,2)@16: nothing fits (b1 ends at 3) -> raised to 64: [0,6)@64.
    // [0,6)@64: b3 -> 64; sky [0,3)@64 [3,5)@96 [5,6)@64.
    // [0,3)@64: b1 -> 64. Height 96 = the lower bound.
    case(StripPacking, "tflite chain", &[0, 64, 0, 64, 0], 96),
    // Slots = times 0..10.
    // Fit order (lifetime, then size): b1 (4), b2 (4), b5 (3), b3 (3), b6 (3), b0,
    // b8 (2, size 32 then 16), b4, b7 (2, size 8: input order).
    // [0,10)@0: b1 -> 0; sky [0,1)@0 [1,5)@32 [5,10)@0.
    // [0,1)@0: nothing fits (b0 is [0,2)) -> raised to 32: [0,5)@32.
    // [5,10)@0: b5 [5,8) -> 0; sky [5,8)@64 [8,10)@0.
    // [8,10)@0: b8 -> 0; sky [8,10)@16.
    // [8,10)@16: nothing -> raised to 64: [5,10)@64.
    // [0,5)@32: b0 [0,2) -> 32 (best: b0 is the only one inside [0,5) with lifetime
    //   2 and size 32); sky [0,2)@64 [2,5)@32.
    // [2,5)@32: nothing inside (b2, b3, b4 end at 6) -> raised to 64: [0,10)@64.
    // [0,10)@64: b2 (lifetime 4) -> 64; sky [0,2)@64 [2,6)@72 [6,10)@64.
    // [0,2)@64: nothing -> 72: [0,6)@72. [6,10)@64: b6 -> 64; sky [6,9)@72
    //   merges with [0,6)@72: [0,9)@72 [9,10)@64.
    // [9,10)@64: nothing -> 72: [0,10)@72. b3 -> 72; sky [3,6)@88.
    // [0,3)@72: nothing -> 88. [6,10)@72: b7 [7,9) -> 72 (only one inside):
    //   sky [6,7)@72 [7,9)@80 [9,10)@72.
    // [6,7)@72: nothing -> 80 (left 88, right 80): [6,9)@80.
    // [9,10)@72: nothing -> 80: [6,10)@80. Then -> 88: [0,10)@88. b4 -> 88.
    // Height 96 = the lower bound.
    case(
        StripPacking,
        "tflite complex",
        &[32, 0, 64, 72, 88, 0, 64, 72, 0],
        96,
    ),
    // Slots [0,3) [3,9) [9,21). Fit order: b5 (21), b4 (12), b3 (9), b2 (6), b1 (3).
    // All slots @0: b5 -> 0; all @4: b4 (slot 2) -> 4; sky [0,2)@4 [2,3)@8.
    // [0,2)@4: b3 -> 4; merged [0,3)@8. b2 (slot 1) -> 8; sky [0,1)@8 [1,2)@12
    // [2,3)@8. [0,1)@8: b1 -> 8. Height 12 = the optimum.
    case(StripPacking, "minimalloc example", &[8, 8, 4, 4, 0], 12),
];

#[test]
fn hand_worked_cases() {
    for c in CASES {
        let what = format!("{} on the {}", c.strategy, c.case);
        let p = problem(c.case);
        let plan = c.strategy.plan(&p);
        assert_eq!(plan.offsets, c.offsets, "{what}");
        assert_eq!(validate_offsets(&p, &plan), Ok(c.height), "{what}");
    }
}

//! TFLite's shared-object test cases (`data/tflite-cases.md`), every strategy on every
//! case, in one table: a failure names the strategy and the case.

use super::objects::test_support::check;
use super::SharedObjectStrategy::{self, *};
use crate::fixtures;
use crate::problem::Problem;

/// One strategy on one case: the expected total, and the object of each buffer and the
/// size of each object where the case pins them.
struct Case {
    strategy: SharedObjectStrategy,
    case: &'static str,
    total: u64,
    object_ids: Option<&'static [usize]>,
    object_sizes: Option<&'static [u64]>,
}

/// The problem a case names.
fn problem(case: &str) -> Problem {
    match case {
        "one record" => fixtures::tflite_records(&[(16, 0, 1)]),
        "chain" => fixtures::tflite_chain(),
        "complex" => fixtures::tflite_complex(),
        _ => panic!("unknown case {case}"),
    }
}

const fn case(
    strategy: SharedObjectStrategy,
    case: &'static str,
    total: u64,
    object_ids: Option<&'static [usize]>,
    object_sizes: Option<&'static [u64]>,
) -> Case {
    Case {
        strategy,
        case,
        total,
        object_ids,
        object_sizes,
    }
}

const CASES: &[Case] = &[
    case(GreedyBySize, "one record", 16, Some(&[0]), None),
    // Not TFLite's 96: see the module documentation of `greedy_by_size`.
    case(
        GreedyBySize,
        "chain",
        104,
        Some(&[1, 2, 0, 1, 2]),
        Some(&[64, 32, 8]),
    ),
    case(
        GreedyBySize,
        "complex",
        128,
        Some(&[0, 1, 3, 2, 4, 0, 4, 3, 2]),
        None,
    ),
    case(GreedyInOrder, "one record", 16, None, None),
    case(
        GreedyInOrder,
        "chain",
        96,
        Some(&[0, 1, 0, 1, 0]),
        Some(&[64, 32]),
    ),
    case(
        GreedyInOrder,
        "complex",
        120,
        Some(&[0, 1, 0, 2, 3, 1, 3, 2, 0]),
        Some(&[32, 64, 16, 8]),
    ),
    case(GreedyByBreadth, "one record", 16, None, None),
    case(
        GreedyByBreadth,
        "chain",
        96,
        Some(&[0, 1, 0, 1, 0]),
        Some(&[64, 32]),
    ),
    case(
        GreedyByBreadth,
        "complex",
        128,
        Some(&[0, 4, 2, 1, 3, 0, 2, 3, 1]),
        Some(&[64, 16, 8, 8, 32]),
    ),
    case(MinCostFlow, "one record", 16, None, None),
    case(
        MinCostFlow,
        "chain",
        96,
        Some(&[0, 1, 0, 1, 0]),
        Some(&[64, 32]),
    ),
    case(
        MinCostFlow,
        "complex",
        112,
        Some(&[0, 1, 2, 0, 3, 1, 3, 2, 0]),
        Some(&[32, 64, 8, 8]),
    ),
    case(GreedyBySizeImproved, "one record", 16, None, None),
    case(
        GreedyBySizeImproved,
        "chain",
        96,
        Some(&[0, 1, 0, 1, 0]),
        Some(&[64, 32]),
    ),
    case(
        GreedyBySizeImproved,
        "complex",
        112,
        Some(&[1, 0, 2, 1, 3, 0, 1, 2, 0]),
        Some(&[64, 32, 8, 8]),
    ),
];

#[test]
fn tflite_cases() {
    for c in CASES {
        let what = format!("{} on {}", c.strategy, c.case);
        let p = problem(c.case);
        let plan = c.strategy.plan(&p);
        assert_eq!(check(&p, &plan), Ok(c.total), "{what}");
        if let Some(ids) = c.object_ids {
            assert_eq!(plan.object_ids, ids, "{what}");
        }
        if let Some(sizes) = c.object_sizes {
            assert_eq!(plan.object_sizes, sizes, "{what}");
        }
    }
}

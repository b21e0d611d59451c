//! Tests of `best`: never worse than any strategy, the large-problem mode and its
//! budgets, determinism, and the improvement phase.

use std::cmp::Reverse;

use super::search::STATIC_ORDERS;
use super::*;
use crate::fixtures::*;
use crate::offsets::greedy_by_size;
use crate::problem::Buffer;
use crate::validate::validate_offsets;

/// Small budgets, so that debug-mode tests stay fast.
fn light() -> BestOptions {
    BestOptions {
        min_work: 20_000,
        max_work: 200_000,
        exact_nodes: 5_000,
        time_cap: None,
        ..BestOptions::default()
    }
}

#[test]
fn reaches_the_hand_checked_optima() {
    for (name, p, want) in [
        ("minimalloc example", minimalloc_example(), 12),
        ("minimalloc tricky", minimalloc_tricky(), 5),
        ("tflite complex", tflite_complex(), 96),
        ("tflite chain", tflite_chain(), 96),
    ] {
        assert_eq!(validate_offsets(&p, &plan(&p)), Ok(want), "{name}");
    }
    for (name, p, _, heap) in xla_cases() {
        let h = validate_offsets(&p, &plan(&p)).unwrap();
        assert!(h <= heap, "{name}: {h} > {heap}");
        assert!(h >= offsets_lower_bound(&p), "{name}");
    }
    assert_eq!(plan(&Problem::default()), OffsetPlan::default());
}

#[test]
#[cfg_attr(miri, ignore = "thousands of buffers: hours under Miri")]
fn engine_matches_greedy_by_size() {
    // The engine's size-descending pass is Greedy by Size, offset for offset.
    for seed in 0..5 {
        let p = dnn_trace(700, seed);
        let mut order: Vec<usize> = (0..p.len()).collect();
        order.sort_by_key(|&i| Reverse(p.buffers()[i].size));
        let mut engine = Engine::new(&p);
        let h = engine.run(&order, u64::MAX).unwrap();
        let g = greedy_by_size::plan(&p);
        assert_eq!(engine.offsets, g.offsets, "seed {seed}");
        assert_eq!(h, g.height(&p));
    }
}

#[test]
#[cfg_attr(miri, ignore = "thousands of buffers: hours under Miri")]
fn is_deterministic_and_improves_on_greedy() {
    // Long-lived and short-lived buffers mixed: greedy by size leaves room here.
    let p = dnn_trace(3000, 11);
    let a = plan(&p);
    assert_eq!(a, plan(&p));
    let h = validate_offsets(&p, &a).unwrap();
    assert!(h <= greedy_by_size::plan(&p).height(&p));
    assert!(h >= offsets_lower_bound(&p));
    // Threads do not change the result.
    let o = BestOptions {
        parallel: false,
        ..BestOptions::default()
    };
    assert_eq!(plan_with(&p, &o), a);
}

#[test]
fn improvement_phase_lowers_a_bad_start() {
    // Greedy by size is 57% above the lower bound here, which is the optimum; without
    // the exact step and the other strategies, the improvement phase must find it.
    let v = [
        (2, 4, 2),
        (1, 4, 2),
        (2, 3, 3),
        (4, 5, 4),
        (3, 6, 3),
        (0, 1, 5),
    ];
    let p = Problem::new(
        v.iter()
            .enumerate()
            .map(|(i, &(l, u, s))| Buffer::new(i.to_string(), l, u, s))
            .collect(),
    )
    .unwrap();
    assert_eq!(greedy_by_size::plan(&p).height(&p), 11);
    let lb = offsets_lower_bound(&p);
    let o = BestOptions {
        exact_max_buffers: 0,
        run_other_strategies: false,
        ..light()
    };
    let h = validate_offsets(&p, &plan_with(&p, &o)).unwrap();
    assert_eq!((h, lb), (7, 7));
}

#[test]
#[cfg_attr(miri, ignore = "thousands of buffers: hours under Miri")]
fn a_pass_past_its_work_limit_leaves_the_near_linear_heuristics() {
    let p = dnn_trace(2000, 3);
    // Within the default limit: every best-fit order runs.
    let (plan, report) = portfolio_report(&p, &light());
    assert!(!report.large);
    assert!(report.passes >= 1);
    assert!(validate_offsets(&p, &plan).is_ok());
    // A limit far below one pass: the first pass stops there, nothing else best-fit
    // runs, and the plan is the better of greedy-in-order and strip-packing.
    let o = BestOptions {
        pass_work: 1_000,
        ..light()
    };
    let (plan, report) = portfolio_report(&p, &o);
    assert!(report.large);
    assert_eq!(report.passes, 1);
    // One query more than the limit at most, and a query visits fewer ranges than
    // there are buffers.
    assert!(report.work <= 1_000 + p.len() as u64 + 1, "{report:?}");
    let h = validate_offsets(&p, &plan).unwrap();
    let in_order = greedy_in_order::plan(&p).height(&p);
    let strip = strip_packing::plan(&p).height(&p);
    let lb = offsets_lower_bound(&p);
    let backwards = greedy_in_order::plan_backwards(&p).height(&p);
    let within = in_order <= lb + lb / 1000 * NEAR_LINEAR_GAP_PER_MILLE;
    if within {
        assert_eq!(h, in_order);
    } else {
        assert_eq!(h, in_order.min(strip));
    }
    // With strip-packing's memory capped below its need, greedy-in-order backwards
    // stands in for it.
    let capped = BestOptions {
        strip_packing_memory: Some(strip_packing::index_bytes(&p) - 1),
        ..o.clone()
    };
    let h = validate_offsets(&p, &portfolio(&p, &capped)).unwrap();
    assert_eq!(
        h,
        if within {
            in_order
        } else {
            in_order.min(backwards)
        }
    );
    // The placer-based strategies stop at the same kind of limit.
    assert_eq!(greedy_by_size::plan_within(&p, 1_000), None);
    assert_eq!(greedy_by_breadth::plan_within(&p, 1_000), None);
    assert_eq!(
        greedy_by_size::plan_within(&p, u64::MAX),
        Some(greedy_by_size::plan(&p))
    );
}

#[test]
#[cfg_attr(miri, ignore = "thousands of buffers: hours under Miri")]
fn many_conflicting_pairs_make_a_problem_large_without_a_pass() {
    let p = dnn_trace(2000, 3);
    let pairs = conflicting_pairs(&p, u64::MAX);
    large_below(&p, pairs, |limit| BestOptions {
        large_pairs: Some(limit),
        ..light()
    });
}

/// With `at(bound)` the portfolio runs its first pass, as without the option; with
/// `at(bound - 1)` the problem is large: no pass, the near-linear plan.
fn large_below(p: &Problem, bound: u64, at: impl Fn(u64) -> BestOptions) {
    assert_eq!(
        portfolio_report(p, &at(bound)),
        portfolio_report(p, &light())
    );
    let (plan, report) = portfolio_report(p, &at(bound - 1));
    assert_eq!((report.large, report.passes, report.work), (true, 0, 0));
    let lb = offsets_lower_bound(p);
    assert_eq!(plan, near_linear(p, lb, None));
}

#[test]
#[cfg_attr(miri, ignore = "thousands of buffers: hours under Miri")]
fn a_best_fit_index_past_its_memory_makes_a_problem_large_without_a_pass() {
    let p = dnn_trace(2000, 3);
    let bytes = best_fit_index_bytes(&p, u64::MAX);
    large_below(&p, bytes, |limit| BestOptions {
        best_fit_memory: Some(limit),
        ..light()
    });
    // Counting stops just past its limit.
    assert!(best_fit_index_bytes(&p, 1 << 10) < bytes);
}

proptest::proptest! {
    #[test]
    fn conflicting_pairs_counts_the_pairs_alive_together(
        p in crate::fixtures::strategies::problem(30)
    ) {
        let b = p.buffers();
        let brute = (0..b.len())
            .flat_map(|i| (0..i).map(move |j| (i, j)))
            .filter(|&(i, j)| b[i].lower < b[j].upper && b[j].lower < b[i].upper)
            .count() as u64;
        proptest::prop_assert_eq!(conflicting_pairs(&p, u64::MAX), brute);
        // Stopped early: past the stop, never above the count.
        if brute > 0 {
            let c = conflicting_pairs(&p, brute - 1);
            proptest::prop_assert!(c > brute - 1 && c <= brute);
        }
    }
}

#[test]
fn improvement_waits_for_a_budget_that_holds_a_pass() {
    // The bound (6) ignores the alignment padding: every plan is 7 high, so no static
    // order reaches the bound and improvement rounds go on while their budget lasts.
    let p = Problem::new(vec![
        Buffer::new("a", 0, 2, 3).with_align(4),
        Buffer::new("b", 0, 2, 3).with_align(4),
    ])
    .unwrap();
    let o = BestOptions {
        exact_max_buffers: 0,
        run_other_strategies: false,
        ..light()
    };
    let (_, report) = portfolio_report(&p, &o);
    assert!(report.passes > STATIC_ORDERS as u64, "{report:?}");
    // A pass costs more than the whole improvement budget: no improvement round.
    let o = BestOptions {
        min_work: 1,
        max_work: 1,
        ..o
    };
    let (_, report) = portfolio_report(&p, &o);
    assert_eq!(report.passes, STATIC_ORDERS as u64, "{report:?}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 96 }))]

    #[test]
    fn never_worse_than_any_heuristic(p in strategies::problem(30)) {
        let plan = plan_with(&p, &light());
        let h = validate_offsets(&p, &plan).unwrap();
        proptest::prop_assert!(h >= offsets_lower_bound(&p));
        for s in OffsetStrategy::ALL {
            if matches!(s, OffsetStrategy::Best | OffsetStrategy::Exact) {
                continue;
            }
            let other = s.plan(&p).height(&p);
            proptest::prop_assert!(h <= other, "{} beats best: {} < {}", s, other, h);
        }
    }

    #[test]
    fn default_budget_plans_validate(p in strategies::problem(12)) {
        let h = validate_offsets(&p, &plan(&p)).unwrap();
        proptest::prop_assert!(h >= offsets_lower_bound(&p));
        proptest::prop_assert!(h <= greedy_by_size::plan(&p).height(&p));
    }
}

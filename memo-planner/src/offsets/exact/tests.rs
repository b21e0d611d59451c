use std::time::Instant;

use super::decide::{Decider, Probe};
use super::sweep::Sweep;
use super::*;
use crate::fixtures::*;
use crate::offsets::naive;
use crate::problem::{align_up, Buffer};
use crate::validate::validate_offsets;

fn small() -> ExactOptions {
    ExactOptions {
        node_limit: 200_000,
        min_nodes: 200_000,
        time_cap: None,
        max_buffers: 64,
        parallel: false,
    }
}

/// Starts from a plan that is deliberately bad, so that the search has to work.
fn from_naive(p: &Problem, o: &ExactOptions) -> ExactOutcome {
    search(p, &naive::plan(p), o)
}

fn problem(bufs: &[(u64, u64, u64, u64)]) -> Problem {
    Problem::new(
        bufs.iter()
            .enumerate()
            .map(|(i, &(l, u, s, a))| Buffer::new(i.to_string(), l, u, s).with_align(a))
            .collect(),
    )
    .unwrap()
}

fn probe(p: &Problem, capacity: u64) -> Probe {
    let sw = Sweep::new(p, u64::MAX).unwrap();
    let mut d = Decider::new(&sw);
    d.solve(capacity, u64::MAX, Instant::now(), None)
}

#[test]
fn solves_the_hand_checked_cases() {
    for (name, p, want) in [
        ("minimalloc example", minimalloc_example(), 12),
        ("minimalloc tricky", minimalloc_tricky(), 5),
        ("tflite complex", tflite_complex(), 96),
        ("tflite chain", tflite_chain(), 96),
    ] {
        for o in [
            small(),
            ExactOptions {
                parallel: true,
                ..small()
            },
        ] {
            let out = from_naive(&p, &o);
            assert_eq!(validate_offsets(&p, &out.plan), Ok(want), "{name}");
            assert_eq!((out.height, out.lower_bound), (want, want), "{name}");
            assert!(out.optimal, "{name}");
        }
        assert_eq!(
            validate_offsets(&p, &plan(&p, &naive::plan(&p))),
            Ok(want),
            "{name}"
        );
    }
}

#[test]
fn tricky_is_infeasible_at_its_lower_bound() {
    let p = minimalloc_tricky();
    assert_eq!(crate::offsets_lower_bound(&p), 4);
    assert_eq!(probe(&p, 4), Probe::Infeasible);
    assert!(matches!(probe(&p, 5), Probe::Found(_)));
    assert_eq!(decide(&p, 4, &small()), Decision::Infeasible);
    assert_eq!(decide(&p, 3, &small()), Decision::Infeasible);
    let Decision::Feasible(plan) = decide(&p, 5, &small()) else {
        panic!("5 fits");
    };
    assert_eq!(validate_offsets(&p, &plan), Ok(5));
    // The proof raises the lower bound.
    let out = from_naive(&p, &small());
    assert_eq!((out.height, out.lower_bound, out.optimal), (5, 5, true));
}

#[test]
fn minimalloc_solver_tests() {
    // (buffers as (lower, upper, size, align), capacity, feasible)
    type Case = (&'static [(u64, u64, u64, u64)], u64, bool);
    let cases: [Case; 6] = [
        (&[(0, 2, 3, 1)], 2, false),
        (&[(0, 2, 2, 1), (0, 2, 2, 1)], 3, false),
        (
            &[
                (1, 2, 1, 1),
                (0, 2, 1, 1),
                (2, 3, 2, 1),
                (1, 3, 1, 1),
                (0, 1, 2, 1),
            ],
            3,
            true,
        ),
        (
            &[(0, 2, 2, 1), (1, 3, 2, 1), (3, 5, 2, 1), (4, 6, 2, 1)],
            4,
            true,
        ),
        (&[(0, 2, 1, 2), (0, 2, 1, 2)], 4, true),
        (&[(0, 2, 1, 2), (0, 2, 1, 2)], 2, false),
    ];
    for (k, (bufs, cap, feasible)) in cases.iter().enumerate() {
        let p = problem(bufs);
        match probe(&p, *cap) {
            Probe::Found(offsets) => {
                assert!(feasible, "case {k}");
                let h = validate_offsets(&p, &OffsetPlan { offsets }).unwrap();
                assert!(h <= *cap, "case {k}");
            }
            Probe::Infeasible => assert!(!feasible, "case {k}"),
            Probe::Unknown => panic!("case {k}: no answer"),
        }
    }
}

#[test]
fn independent_sides_are_solved_separately() {
    // Two identical halves joined by one long buffer: once it is placed, the cut in the
    // middle is empty and each half is its own sub-problem.
    let mut v = vec![(0, 20, 4, 1)];
    for base in [0, 10] {
        v.extend([
            (base, base + 4, 2, 1),
            (base + 2, base + 7, 3, 1),
            (base + 5, base + 10, 2, 1),
            (base + 1, base + 6, 1, 1),
        ]);
    }
    let p = problem(&v);
    let out = from_naive(&p, &small());
    let h = validate_offsets(&p, &out.plan).unwrap();
    assert_eq!(h, brute_force(&p));
    assert!(out.optimal);
}

#[test]
fn respects_the_node_budget_and_stays_valid() {
    let p = dnn_trace(200, 3);
    let o = ExactOptions {
        node_limit: 50,
        min_nodes: 0,
        time_cap: None,
        max_buffers: 1000,
        parallel: false,
    };
    let start = naive::plan(&p);
    let out = search(&p, &start, &o);
    // Two tracks of 50 nodes, and the short probe before them.
    assert!(out.nodes <= 150, "{}", out.nodes);
    let h = validate_offsets(&p, &out.plan).unwrap();
    assert!(h <= start.height(&p));
    // Above max_buffers: the start plan comes back untouched.
    let o = ExactOptions {
        max_buffers: 10,
        ..o
    };
    assert_eq!(search(&p, &start, &o).plan, start);
    assert_eq!(decide(&p, u64::MAX, &o), Decision::Unknown);
    let empty = Problem::default();
    assert_eq!(
        plan(&empty, &OffsetPlan::default()).offsets,
        Vec::<u64>::new()
    );
}

#[test]
#[cfg_attr(miri, ignore = "solves many problems on threads: hours under Miri")]
fn threads_do_not_change_the_answer() {
    // DNN traces, and exact tilings (whose searches reach the randomised descent).
    let mut searched = 0;
    for (seed, p) in (0..4)
        .map(|s| (s, dnn_trace(120, s)))
        .chain((0..4).map(|s| (s, exact_plane(60, 1000, s))))
    {
        let start = crate::offsets::greedy_by_size::plan(&p);
        let o = ExactOptions {
            node_limit: 6_000,
            min_nodes: 0,
            max_buffers: 1000,
            ..small()
        };
        let a = search(&p, &start, &o);
        searched += u32::from(a.nodes > 0 && a.height < start.height(&p));
        let b = search(
            &p,
            &start,
            &ExactOptions {
                parallel: true,
                ..o
            },
        );
        assert_eq!(
            (a.plan, a.height, a.optimal),
            (b.plan, b.height, b.optimal),
            "seed {seed}"
        );
    }
    assert!(searched >= 3, "{searched}");
}

#[test]
fn exact_tilings_are_tight_and_dnn_traces_are_not() {
    let tight = |p: &Problem| {
        let sw = Sweep::new(p, u64::MAX).unwrap();
        super::schedule::is_tight(&sw, crate::offsets_lower_bound(p))
    };
    assert!((0..4).all(|seed| tight(&exact_plane(200, 1 << 20, seed))));
    assert!((0..4).all(|seed| !tight(&dnn_trace(200, seed))));
    assert!(!tight(&minimalloc_example()));
}

/// The serial options of the tests below, with the node budget `node_limit`.
fn tight_options(node_limit: u64) -> ExactOptions {
    ExactOptions {
        node_limit,
        min_nodes: 0,
        time_cap: None,
        max_buffers: 1000,
        parallel: false,
    }
}

#[test]
fn tight_budgets_are_not_scaled_down_up_to_1024_buffers() {
    let o = ExactOptions::default();
    for n in [250, 256, 300, 500, 1024] {
        assert_eq!(o.nodes_for_tight(n), o.node_limit, "{n}");
    }
    assert!(o.nodes_for(500) < o.node_limit / 2 + o.node_limit / 50);
    assert_eq!(o.nodes_for_tight(2048), o.node_limit / 2);
    for n in [1, 60, 200, 256, 4096, 50_000] {
        assert!(o.nodes_for_tight(n) >= o.nodes_for(n), "{n}");
    }
}

/// The deciders' race at the lower bound of a tight instance, as `search` runs it after
/// the skyline race: tight rotations, seven eighths of the tight budget of `options`.
fn tight_race(p: &Problem, options: &ExactOptions) -> Probe {
    let sw = Sweep::new(p, u64::MAX).unwrap();
    let lb = crate::offsets_lower_bound(p);
    assert!(super::schedule::is_tight(&sw, lb));
    let bar = std::sync::atomic::AtomicU64::new(u64::MAX);
    let mut race = race::Race::new(&sw, &bar, options.parallel);
    race.set_rotations(&race::TIGHT_FIRST, &race::TIGHT_SECOND);
    let limit = options.nodes_for_tight(p.len()) / 8 * 7;
    race.probe(lb, limit, Instant::now(), None).probe
}

/// On a tight instance of more than 256 buffers the deciders' race at the lower bound
/// gets the unscaled budget: with a node limit of 3M, plane:500:2 packs at its bound
/// (with the budget scaled down as for other instances of 500 buffers it does not).
#[test]
fn a_tiling_of_500_packs_at_its_bound_on_the_tight_budget() {
    let p = exact_plane(500, 1 << 20, 2);
    let Probe::Found(offsets) = tight_race(&p, &tight_options(3_000_000)) else {
        panic!("no packing at the bound");
    };
    assert_eq!(validate_offsets(&p, &OffsetPlan { offsets }), Ok(1 << 20));
}

/// The second racer at the bound of a tight instance orders at random, not by area with
/// random weights as the first: plane:400:5 packs at its bound with a node limit of 2M
/// (with area first on both racers it does not).
#[test]
fn a_plain_random_order_packs_a_tiling_that_area_orders_do_not() {
    let p = exact_plane(400, 1 << 20, 5);
    let Probe::Found(offsets) = tight_race(&p, &tight_options(2_000_000)) else {
        panic!("no packing at the bound");
    };
    assert_eq!(validate_offsets(&p, &OffsetPlan { offsets }), Ok(1 << 20));
}

/// The skyline race runs first at the bound of a tight instance: with a node limit of
/// 100k, plane:300:1 packs at its bound, proven optimal (the deciders' race alone does
/// not, and neither does the search without the skyline race).
#[test]
fn the_skyline_race_packs_a_tiling_the_deciders_do_not() {
    let p = exact_plane(300, 1 << 20, 1);
    let options = tight_options(100_000);
    assert!(!matches!(tight_race(&p, &options), Probe::Found(_)));
    let start = crate::offsets::greedy_by_size::plan(&p);
    let out = search(&p, &start, &options);
    assert_eq!(validate_offsets(&p, &out.plan), Ok(1 << 20));
    assert!(out.optimal);
}

/// The optimum by brute force: every order, each buffer at the top of the placed
/// buffers it conflicts with (aligned). Every packing can be pushed down into one of
/// these, so the minimum over all orders is optimal.
pub(super) fn brute_force(p: &Problem) -> u64 {
    fn rec(p: &Problem, offsets: &mut Vec<u64>, used: &mut Vec<bool>, height: u64, best: &mut u64) {
        if height >= *best {
            return;
        }
        let b = p.buffers();
        if used.iter().all(|&u| u) {
            *best = height;
            return;
        }
        for i in 0..b.len() {
            if used[i] {
                continue;
            }
            let top = (0..b.len())
                .filter(|&j| used[j] && b[j].conflicts_with(&b[i]))
                .map(|j| offsets[j] + b[j].size)
                .max()
                .unwrap_or(0);
            let o = align_up(top, b[i].align);
            used[i] = true;
            offsets[i] = o;
            rec(p, offsets, used, height.max(o + b[i].size), best);
            used[i] = false;
        }
    }
    if p.is_empty() {
        return 0;
    }
    let mut best = u64::MAX;
    rec(
        p,
        &mut vec![0; p.len()],
        &mut vec![false; p.len()],
        0,
        &mut best,
    );
    best
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 96 }))]

    /// With a budget the search never exhausts on 8 buffers, `exact` is the optimum.
    #[test]
    fn equals_brute_force_on_small_problems(p in strategies::problem(9)) {
        let out = from_naive(&p, &ExactOptions { node_limit: u64::MAX / 4, ..small() });
        let h = validate_offsets(&p, &out.plan).unwrap();
        proptest::prop_assert_eq!(h, out.height);
        proptest::prop_assert!(out.optimal);
        proptest::prop_assert_eq!(h, brute_force(&p));
        proptest::prop_assert_eq!(out.lower_bound, h);
    }

    /// Every capacity the search calls infeasible is infeasible by brute force, and every
    /// packing it finds fits.
    #[test]
    fn claimed_infeasibility_is_confirmed_by_brute_force(p in strategies::problem(9), slack in 0u64..3) {
        let opt = brute_force(&p);
        let lb = crate::offsets_lower_bound(&p);
        for cap in lb.saturating_sub(slack)..=opt + slack {
            match decide(&p, cap, &ExactOptions { node_limit: u64::MAX / 4, ..small() }) {
                Decision::Infeasible => proptest::prop_assert!(cap < opt, "{} claimed infeasible, optimum {}", cap, opt),
                Decision::Feasible(plan) => {
                    let h = validate_offsets(&p, &plan).unwrap();
                    proptest::prop_assert!(h <= cap);
                    proptest::prop_assert!(cap >= opt);
                }
                Decision::Unknown => proptest::prop_assert!(false, "no answer at {}", cap),
            }
        }
    }

    /// Exact tilings are tight everywhere (no section has a granule of slack), where the
    /// level rule prunes most: every capacity from the bound up must still be found
    /// feasible, and one below it proven infeasible.
    #[test]
    fn tight_tilings_pack_at_their_height(n in 2usize..14, height in 2u64..40, seed in 0u64..1_000) {
        let p = exact_plane(n, height, seed);
        let o = ExactOptions { node_limit: u64::MAX / 4, ..small() };
        for cap in height..height + 3 {
            match decide(&p, cap, &o) {
                Decision::Feasible(plan) => {
                    proptest::prop_assert!(validate_offsets(&p, &plan).unwrap() <= cap);
                }
                other => proptest::prop_assert!(false, "{:?} at {}", other, cap),
            }
        }
        proptest::prop_assert_eq!(decide(&p, height - 1, &o), Decision::Infeasible);
        let out = from_naive(&p, &o);
        proptest::prop_assert_eq!((out.height, out.optimal), (height, true));
    }

    #[test]
    fn plans_validate_within_a_small_budget(p in strategies::problem(40)) {
        let o = ExactOptions { node_limit: 2_000, min_nodes: 0, time_cap: None, max_buffers: 64, parallel: false };
        let start = crate::offsets::greedy_by_size::plan(&p);
        let out = search(&p, &start, &o);
        let h = validate_offsets(&p, &out.plan).unwrap();
        proptest::prop_assert_eq!(h, out.height);
        proptest::prop_assert!(h >= out.lower_bound);
        proptest::prop_assert!(out.lower_bound >= crate::offsets_lower_bound(&p));
        proptest::prop_assert!(h <= start.height(&p));
    }
}

/// Nodes each preorder needs alone at the lower bound (a measurement, not a check):
/// `cargo test --release -p memo-planner census -- --ignored --nocapture`, with
/// `CENSUS=A,B,plane:200:1` to choose the instances, `CENSUS_NODES` the limit and
/// `CENSUS_RATIO` the capacity as a multiple of the lower bound.
#[test]
#[ignore]
fn census_of_preorders() {
    let dir = format!("{DATA}/minimalloc/challenging");
    let names = std::env::var("CENSUS").unwrap_or_else(|_| "A,B,C,E,F,G,H,I,K".into());
    let limit: u64 = std::env::var("CENSUS_NODES")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(20_000_000);
    let orders: Vec<[u8; 3]> = std::env::var("CENSUS_ORDERS")
        .unwrap_or_else(|_| "WAT,TAW,TWA,AWT,ATW,ZWT,WZT".into())
        .split(',')
        .map(|s| s.as_bytes().try_into().expect("three letters"))
        .collect();
    for name in names.split(',') {
        let p = match name.strip_prefix("plane:") {
            Some(spec) => {
                let v: Vec<u64> = spec.split(':').map(|x| x.parse().unwrap()).collect();
                exact_plane(v[0] as usize, 1 << 20, v[1])
            }
            None => {
                crate::format::read_problem_file(format!("{dir}/{name}.1048576.csv"))
                    .unwrap()
                    .0
            }
        };
        let ratio: f64 = std::env::var("CENSUS_RATIO")
            .ok()
            .and_then(|x| x.parse().ok())
            .unwrap_or(1.0);
        let cap = (crate::offsets_lower_bound(&p) as f64 * ratio) as u64;
        let sw = Sweep::new(&p, u64::MAX).unwrap();
        let mut line = format!("{name} n={}", p.len());
        let repeats: usize = std::env::var("CENSUS_REPEAT")
            .ok()
            .and_then(|x| x.parse().ok())
            .unwrap_or(1);
        let mut d = Decider::new(&sw);
        for &o in orders.iter().flat_map(|o| std::iter::repeat_n(o, repeats)) {
            let t = Instant::now();
            let r = d.solve_once(cap, o, limit);
            let tag = match r {
                Probe::Found(_) => "ok",
                Probe::Infeasible => "INF",
                Probe::Unknown => "-",
            };
            line += &format!(
                "  {}:{}{} {:.2}s",
                std::str::from_utf8(&o).unwrap(),
                d.probe_nodes(),
                tag,
                t.elapsed().as_secs_f64()
            );
        }
        println!("{line}");
    }
}

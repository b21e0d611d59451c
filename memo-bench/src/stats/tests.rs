//! The statistics on known samples: the median and mean, the bootstrap's intervals (exact
//! where the data leave no doubt, paired repetitions, the spread between processes), the
//! verdict rule, and the shuffle's determinism.

use super::*;

fn boot() -> Bootstrap {
    Bootstrap::default()
}

/// `reps` repetitions of `n` passes: pass `i` of repetition `r` takes `f(r, i)`.
fn reps(reps: usize, n: usize, f: impl Fn(usize, usize) -> u64) -> Vec<Vec<u64>> {
    (0..reps)
        .map(|r| (0..n).map(|i| f(r, i)).collect())
        .collect()
}

#[test]
fn median_and_mean_of_known_samples() {
    let s = stats_of(&mut [5, 1, 3]).unwrap();
    assert_eq!((s.p50, s.mean), (3.0, 3.0));
    let s = stats_of(&mut [4, 1, 10, 3]).unwrap();
    assert_eq!((s.p50, s.mean), (3.5, 4.5));
    assert_eq!(stats_of(&mut []), None);
}

#[test]
fn the_99th_percentile_is_the_nearest_rank() {
    // 1..=200 shuffled: the 198th smallest (99% of 200) is 198.
    let mut v: Vec<u64> = (1..=200).map(|i| (i * 73) % 200 + 1).collect();
    assert_eq!(stats_of(&mut v).unwrap().p99, 198.0);
    // Of 100 values the 99th; of fewer than 100, the largest.
    let mut v: Vec<u64> = (1..=100).rev().collect();
    assert_eq!(stats_of(&mut v).unwrap().p99, 99.0);
    let mut v: Vec<u64> = (1..=60).collect();
    assert_eq!(stats_of(&mut v).unwrap().p99, 60.0);
    assert_eq!(stats_of(&mut [7]).unwrap().p99, 7.0);
}

#[test]
fn a_slower_tail_is_found_where_the_medians_agree() {
    // 200 passes per repetition; one in twenty of the other's takes twice as long, which
    // leaves its median where memo's is and doubles its 99th percentile.
    let memo = reps(6, 200, |r, i| {
        100_000 + ((i * 37 + r * 11) % 20) as u64 * 100
    });
    let other: Vec<Vec<u64>> = memo
        .iter()
        .map(|rep| {
            rep.iter()
                .enumerate()
                .map(|(i, &t)| if i % 20 == 0 { 2 * t } else { t })
                .collect()
        })
        .collect();
    let r = ratio_intervals(&other, &memo, &boot(), &[5]).unwrap();
    assert_eq!(Verdict::of(&r.p50), Verdict::Level, "{:?}", r.p50);
    assert_eq!(Verdict::of(&r.p99), Verdict::Ahead, "{:?}", r.p99);
    assert!(r.p99.lo > 1.5, "{:?}", r.p99);
}

#[test]
fn constant_samples_give_exact_intervals() {
    let memo = reps(3, 10, |_, _| 1000);
    let same = reps(3, 10, |_, _| 1000);
    let twice = reps(3, 10, |_, _| 2000);
    let r = ratio_intervals(&same, &memo, &boot(), &[0]).unwrap();
    for i in [r.p50, r.p99, r.mean] {
        assert_eq!((i.ratio, i.lo, i.hi), (1.0, 1.0, 1.0));
        assert_eq!(Verdict::of(&i), Verdict::Level);
    }
    let p50 = ratio_intervals(&twice, &memo, &boot(), &[0]).unwrap().p50;
    assert_eq!((p50.ratio, p50.lo, p50.hi), (2.0, 2.0, 2.0));
    assert_eq!(Verdict::of(&p50), Verdict::Ahead);
    assert_eq!(Verdict::of(&p50.reciprocal()), Verdict::Behind);
    assert!(ratio_intervals(&[vec![]], &memo, &boot(), &[0]).is_none());
}

#[test]
fn a_ten_percent_difference_over_spread_passes_is_found_and_bracketed() {
    // Passes spread over 100..119 us in every repetition; the other allocator 10% slower.
    let memo = reps(5, 40, |r, i| {
        100_000 + ((i * 37 + r * 11) % 20) as u64 * 1000
    });
    let other: Vec<Vec<u64>> = memo
        .iter()
        .map(|r| r.iter().map(|&t| t * 11 / 10).collect())
        .collect();
    let Ratios { p50, mean, .. } = ratio_intervals(&other, &memo, &boot(), &[1]).unwrap();
    for i in [p50, mean] {
        assert!((i.ratio - 1.1).abs() < 1e-9, "{i:?}");
        assert!(i.lo <= i.ratio && i.ratio <= i.hi, "{i:?}");
        assert!(i.lo > 1.0 && i.hi < 1.25, "{i:?}");
        assert_eq!(Verdict::of(&i), Verdict::Ahead);
    }
    // Paired repetitions of identical pass lists: the same passes are never drawn for
    // both sides, so the interval has width, but it is centred on 1.1.
    assert!(p50.relative_half_width() > 0.0);
}

#[test]
fn paired_repetitions_cancel_drift_between_processes() {
    // Each repetition runs at its own speed (the machine's load at the time), the same
    // for both allocators, which ran back to back; the other is 5% slower in each.
    let speed = [1.0, 1.6, 0.7, 1.3, 0.9];
    let memo = reps(5, 20, |r, _| (100_000.0 * speed[r]) as u64);
    let other = reps(5, 20, |r, _| (105_000.0 * speed[r]) as u64);
    let p50 = ratio_intervals(&other, &memo, &boot(), &[2]).unwrap().p50;
    assert!(p50.hi - p50.lo < 0.02, "{p50:?}");
    assert_eq!(Verdict::of(&p50), Verdict::Ahead);
    // Unpaired (a repetition missing on one side), the same drift swamps the 5%.
    let p50 = ratio_intervals(&other[..4], &memo, &boot(), &[2])
        .unwrap()
        .p50;
    assert!(p50.hi - p50.lo > 0.3, "{p50:?}");
    assert_eq!(Verdict::of(&p50), Verdict::Level);
}

#[test]
fn the_spread_between_processes_widens_the_interval() {
    // Two allocators of equal speed, three processes each, unrelated offsets per process
    // (a cold start, a noisy neighbour): pooled as if one process, the passes would
    // suggest a difference; resampled by repetition they do not.
    let a = reps(3, 30, |r, i| {
        [100_000, 112_000, 95_000][r] + (i % 5) as u64 * 100
    });
    let b = reps(3, 30, |r, i| {
        [104_000, 97_000, 108_000][r] + (i % 5) as u64 * 100
    });
    let by_rep = ratio_intervals(&a, &b, &boot(), &[3]).unwrap().p50;
    let flat = |v: &[Vec<u64>]| vec![v.concat()];
    let by_pass = ratio_intervals(&flat(&a), &flat(&b), &boot(), &[3])
        .unwrap()
        .p50;
    assert!(
        by_rep.hi - by_rep.lo > 2.0 * (by_pass.hi - by_pass.lo),
        "{by_rep:?} vs {by_pass:?}"
    );
    assert_eq!(Verdict::of(&by_rep), Verdict::Level);
}

#[test]
fn intervals_repeat_for_a_seed_and_stream() {
    let a = reps(3, 15, |r, i| 1000 + ((r * 7 + i * 13) % 50) as u64);
    let b = reps(3, 15, |r, i| 1010 + ((r * 5 + i * 3) % 50) as u64);
    let once = ratio_intervals(&a, &b, &boot(), &[4, 1]);
    assert_eq!(once, ratio_intervals(&a, &b, &boot(), &[4, 1]));
    assert_ne!(once, ratio_intervals(&a, &b, &boot(), &[4, 2]));
    let other_seed = Bootstrap { seed: 99, ..boot() };
    assert_ne!(once, ratio_intervals(&a, &b, &other_seed, &[4, 1]));
}

#[test]
fn the_verdict_rule() {
    let i = |lo, hi| Interval {
        ratio: (lo + hi) / 2.0,
        lo,
        hi,
    };
    assert_eq!(Verdict::of(&i(1.02, 1.10)), Verdict::Ahead);
    assert_eq!(Verdict::of(&i(0.90, 0.99)), Verdict::Behind);
    assert_eq!(Verdict::of(&i(0.95, 1.05)), Verdict::Level);
    // An interval that touches 1 does not exclude it.
    assert_eq!(Verdict::of(&i(1.0, 1.1)), Verdict::Level);
    assert_eq!(Verdict::of(&i(0.9, 1.0)), Verdict::Level);
    let r = i(0.8, 1.25).reciprocal();
    assert!((r.lo - 0.8).abs() < 1e-12 && (r.hi - 1.25).abs() < 1e-12);
}

#[test]
fn the_shuffle_is_a_permutation_fixed_by_its_seed_and_stream() {
    let order = |seed, rep| {
        let mut v: Vec<u32> = (0..8).collect();
        shuffle(&mut v, &mut Rng::new(seed, &[rep, 0]));
        v
    };
    let a = order(7, 0);
    assert_eq!(
        a,
        order(7, 0),
        "the same seed and repetition: the same order"
    );
    let mut sorted = a.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..8).collect::<Vec<_>>());
    assert!((1..6).any(|rep| order(7, rep) != a), "repetitions differ");
    assert_ne!(order(8, 0), a, "seeds differ");
    // Every item leads about equally often.
    let mut first = [0u32; 8];
    for rep in 0..8000 {
        first[order(1, rep)[0] as usize] += 1;
    }
    assert!(first.iter().all(|&n| (800..1200).contains(&n)), "{first:?}");
}

//! Aggregation of children's results: percentiles over repetitions, memo's shares and
//! ratios, checksum disagreements, the jemalloc-tuned check.

use super::*;
use crate::harness::{CellSpec, MemoCounters};
use crate::stats::Verdict;

fn group() -> Group {
    Group {
        workload: "resnet50:b1:s32".into(),
        threads: 2,
        compute: 1.0,
        warmup: 2,
        passes: 3,
    }
}

/// One repetition of `allocator`: passes of `ms` milliseconds.
fn run(allocator: Allocator, ms: &[u64], checksum: &str) -> Run {
    let memo = allocator.is_memo().then(|| MemoCounters {
        replay_allocations: 100,
        slab_hits: 90,
        pass_thread_allocations: 100,
        helper_allocations: 50,
        misses_by_reason: BTreeMap::from([("too_large".to_string(), 10)]),
        measured_passes_profiled: 1,
        plan_height: 4096,
        profiled_allocations: 100,
        ..MemoCounters::default()
    });
    let threshold = match allocator {
        Allocator::Jemalloc => Some(8 << 20),
        Allocator::JemallocTuned => Some(1 << 20),
        _ => None,
    };
    Run {
        group: 0,
        rep: 0,
        result: CellResult {
            spec: CellSpec {
                workload: group().workload,
                allocator: allocator.name().into(),
                threads: 2,
                warmup: 2,
                passes: 3,
                compute: 1.0,
            },
            samples_ns: ms.iter().map(|m| m * 1_000_000).collect(),
            cpu_samples_ns: ms.iter().map(|m| m * 900_000).collect(),
            elapsed_s: 1.0,
            checksum: checksum.into(),
            checksum_consistent: true,
            peak_rss_bytes: 10 << 20,
            measured_peak_rss_bytes: Some(8 << 20),
            minflt: 30,
            majflt: 0,
            allocations_per_pass: 100,
            bytes_per_pass: 1 << 20,
            memo,
            jemalloc_oversize_threshold: threshold,
        },
    }
}

/// `r` as repetition `rep`.
fn in_rep(rep: usize, mut r: Run) -> Run {
    r.rep = rep;
    r
}

#[test]
fn cells_pool_their_repetitions_and_compare_with_memo() {
    let allocators = [
        Allocator::Memo,
        Allocator::Jemalloc,
        Allocator::JemallocTuned,
    ];
    let runs = vec![
        run(Allocator::Memo, &[10, 10, 10], "a"),
        in_rep(1, run(Allocator::Memo, &[10, 10, 10], "a")),
        run(Allocator::Jemalloc, &[20, 20, 20], "a"),
        in_rep(1, run(Allocator::Jemalloc, &[20, 20, 20], "a")),
        run(Allocator::JemallocTuned, &[30, 30, 30], "a"),
    ];
    let r = aggregate(&[group()], &allocators, &runs, &Bootstrap::default());
    assert!(r.checksums_agree, "{:?}", r.checksum_mismatches);
    assert_eq!(r.jemalloc_tuned_verified, Some(true));
    let names: Vec<&str> = r.cells.iter().map(|c| c.allocator.as_str()).collect();
    assert_eq!(names, ["memo", "jemalloc", "jemalloc-tuned"]);
    let (memo, jemalloc) = (&r.cells[0], &r.cells[1]);
    assert_eq!(memo.passes, 6);
    assert!((memo.p50_us - 10_000.0).abs() < 10.0, "{}", memo.p50_us);
    assert_eq!(memo.passes_per_sec, 3.0);
    assert_eq!(memo.minflt_per_pass, 10.0);
    assert_eq!(memo.slab_share_pass_thread, Some(0.9));
    assert_eq!(memo.slab_share_all_threads, Some(0.6));
    assert_eq!(memo.helper_allocations_per_pass, Some(100.0 / 6.0));
    assert_eq!(memo.misses_by_reason.as_ref().unwrap()["too_large"], 20);
    assert_eq!(memo.measured_passes_profiled, Some(2));
    assert_eq!(memo.measured_peak_rss_bytes, Some(8 << 20));
    assert_eq!(memo.p50_vs_memo, Some(1.0));
    let ratio = jemalloc.p50_vs_memo.unwrap();
    assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
    assert_eq!(jemalloc.slab_share_pass_thread, None);
    assert_eq!(jemalloc.misses_by_reason, None);
    // Constant passes: exact intervals, memo ahead; memo's own cell has none.
    assert_eq!((memo.reps, jemalloc.reps), (2, 2));
    assert_eq!(memo.vs_memo, None);
    let vs = jemalloc.vs_memo.expect("compared with memo");
    for r in [
        vs.p50,
        vs.p99,
        vs.mean,
        vs.cpu_p50.unwrap(),
        vs.cpu_mean.unwrap(),
    ] {
        assert_eq!(
            (r.ratio, r.lo, r.hi, r.verdict),
            (2.0, 2.0, 2.0, Verdict::Ahead)
        );
    }
    assert_eq!(jemalloc.cpu_p50_us, Some(18_000.0));
    assert_eq!(jemalloc.mean_us, 20_000.0);
    // jemalloc-tuned ran in repetition 0 alone: paired with memo's repetition 0.
    assert_eq!(r.cells[2].vs_memo.unwrap().p50.ratio, 3.0);
    assert_eq!(r.reps, 2);
    let counted: Vec<(&str, &str, usize)> = r
        .verdicts
        .iter()
        .map(|v| (v.allocator.as_str(), v.statistic.as_str(), v.ahead))
        .collect();
    assert_eq!(counted.len(), 10, "{counted:?}");
    assert!(counted.iter().all(|c| c.2 == 1), "{counted:?}");
    // memo / static is on static cells only.
    assert!(r.cells.iter().all(|c| c.memo_over_static_p50.is_none()));
}

#[test]
fn memo_over_static_is_reported_where_static_applies() {
    let allocators = [Allocator::Memo, Allocator::Static];
    let runs = vec![
        run(Allocator::Memo, &[10, 11, 10], "a"),
        run(Allocator::Static, &[10, 10, 9], "a"),
    ];
    let r = aggregate(&[group()], &allocators, &runs, &Bootstrap::default());
    let i = r.cells[1].memo_over_static_p50.expect("static applies");
    assert!(
        (i.ratio - 1.0).abs() < 1e-9 && i.lo <= i.ratio && i.ratio <= i.hi,
        "{i:?}"
    );
    let mut divergent = group();
    divergent.workload = "resnet50:b1:s32+divergent".into();
    let r = aggregate(&[divergent], &allocators, &runs, &Bootstrap::default());
    assert_eq!(r.cells[1].memo_over_static_p50, None);
    assert!(r.cells[1].vs_memo.is_some());
}

#[test]
fn disagreeing_checksums_and_a_missing_tuning_are_reported() {
    let allocators = [Allocator::Memo, Allocator::Glibc, Allocator::JemallocTuned];
    let mut untuned = run(Allocator::JemallocTuned, &[30], "a");
    untuned.result.jemalloc_oversize_threshold = Some(8 << 20);
    let runs = vec![
        run(Allocator::Memo, &[10], "a"),
        run(Allocator::Memo, &[10], "b"),
        run(Allocator::Glibc, &[10], "a"),
        untuned,
    ];
    let r = aggregate(&[group()], &allocators, &runs, &Bootstrap::default());
    assert!(!r.checksums_agree);
    assert_eq!(
        r.checksum_mismatches.len(),
        1,
        "{:?}",
        r.checksum_mismatches
    );
    assert!(r.checksum_mismatches[0].contains("memo (repetitions)"));
    assert_eq!(r.jemalloc_tuned_verified, Some(false));
    // An allocator with no run has no cell.
    let r = aggregate(
        &[group()],
        &[Allocator::Mimalloc],
        &runs,
        &Bootstrap::default(),
    );
    assert!(r.cells.is_empty() && r.checksums_agree);
    assert_eq!(r.jemalloc_tuned_verified, None);
}

/// memo / static below 1 with its interval is static behind memo (a harness fault the
/// summary lists); above 1 is memo behind the limit, counted when above 1.05.
#[test]
fn the_summary_lists_static_behind_memo_and_counts_memo_above_the_limit() {
    let i = |lo, ratio, hi| Interval { ratio, lo, hi };
    assert!(summary::static_behind_memo(&i(0.80, 0.85, 0.90)));
    assert!(!summary::static_behind_memo(&i(1.20, 1.40, 1.50)));
    assert!(!summary::static_behind_memo(&i(0.90, 1.00, 1.10)));
    let allocators = [Allocator::Memo, Allocator::Static];
    let slow_static = vec![
        run(Allocator::Memo, &[10, 10, 10], "a"),
        run(Allocator::Static, &[12, 12, 12], "a"),
    ];
    let r = aggregate(&[group()], &allocators, &slow_static, &Bootstrap::default());
    let text = summary::render(&r);
    assert!(
        text.contains("static behind memo outside its interval in 1 ("),
        "{text}"
    );
    assert!(
        text.contains("above 1.05 outside its interval in 0 of 1"),
        "{text}"
    );
    let slow_memo = vec![
        run(Allocator::Memo, &[12, 12, 12], "a"),
        run(Allocator::Static, &[10, 10, 10], "a"),
    ];
    let r = aggregate(&[group()], &allocators, &slow_memo, &Bootstrap::default());
    let text = summary::render(&r);
    assert!(
        text.contains("static behind memo outside its interval in 0"),
        "{text}"
    );
    assert!(
        text.contains("above 1.05 outside its interval in 1 of 1"),
        "{text}"
    );
}

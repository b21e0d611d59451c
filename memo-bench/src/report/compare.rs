//! Each cell against memo's cell of its group: the ratios of the medians and means of
//! the pass times (wall and thread CPU) and of their 99th percentiles (wall), each with
//! its bootstrap interval
//! ([`crate::stats::bootstrap`]) and memo's verdict; and the counts of verdicts per
//! allocator that the summary prints.

use serde::Serialize;

use crate::harness::parent::Run;
use crate::stats::{ratio_intervals, Bootstrap, Interval, Verdict};

/// A ratio of pass times `other / memo` (above 1: memo is faster), its interval and
/// memo's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ratio {
    /// The ratio over all passes of every repetition.
    pub ratio: f64,
    /// Lower end of the 95% interval.
    pub lo: f64,
    /// Upper end of the 95% interval.
    pub hi: f64,
    /// memo's verdict: ahead (the interval lies above 1), level, behind (below 1).
    pub verdict: Verdict,
}

impl Ratio {
    fn of(i: Interval) -> Ratio {
        Ratio {
            ratio: i.ratio,
            lo: i.lo,
            hi: i.hi,
            verdict: Verdict::of(&i),
        }
    }

    /// The interval alone.
    pub fn interval(&self) -> Interval {
        Interval {
            ratio: self.ratio,
            lo: self.lo,
            hi: self.hi,
        }
    }
}

/// A cell against memo's cell of its group.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct VsMemo {
    /// Median pass time (wall clock) over memo's.
    pub p50: Ratio,
    /// 99th percentile of the pass times (wall clock) over memo's: the tail.
    pub p99: Ratio,
    /// Mean pass time (wall clock) over memo's.
    pub mean: Ratio,
    /// Median thread CPU time per pass over memo's (null without CPU times).
    pub cpu_p50: Option<Ratio>,
    /// Mean thread CPU time per pass over memo's.
    pub cpu_mean: Option<Ratio>,
}

impl VsMemo {
    /// The ratios' names, in the order [`VsMemo::by_name`] gives them and the summary
    /// prints them.
    pub const STATISTICS: [&'static str; 5] = ["p50", "p99", "mean", "cpu_p50", "cpu_mean"];

    /// The ratios by name ([`VsMemo::STATISTICS`]).
    pub fn by_name(&self) -> [(&'static str, Option<Ratio>); 5] {
        let [p50, p99, mean, cpu_p50, cpu_mean] = Self::STATISTICS;
        [
            (p50, Some(self.p50)),
            (p99, Some(self.p99)),
            (mean, Some(self.mean)),
            (cpu_p50, self.cpu_p50),
            (cpu_mean, self.cpu_mean),
        ]
    }
}

/// One allocator's pass times in one group, one vector per repetition (index: the
/// repetition; empty where it did not run).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    /// Wall-clock pass times (ns).
    pub wall: Vec<Vec<u64>>,
    /// Thread CPU time per pass (ns).
    pub cpu: Vec<Vec<u64>>,
}

impl Samples {
    /// The pass times of `runs` (one allocator's in one group) by repetition, over
    /// `reps` repetitions.
    pub fn of(runs: &[&Run], reps: usize) -> Samples {
        let mut s = Samples {
            wall: vec![Vec::new(); reps],
            cpu: vec![Vec::new(); reps],
        };
        for r in runs.iter().filter(|r| r.rep < reps) {
            s.wall[r.rep].extend(&r.result.samples_ns);
            s.cpu[r.rep].extend(&r.result.cpu_samples_ns);
        }
        s
    }
}

/// `other` against `memo` (`None` when either has no passes); `stream` names the
/// bootstrap's resampling streams (the group and the allocator).
pub fn vs_memo(
    other: &Samples,
    memo: &Samples,
    boot: &Bootstrap,
    stream: [u64; 2],
) -> Option<VsMemo> {
    let wall = ratio_intervals(&other.wall, &memo.wall, boot, &[stream[0], stream[1], 0])?;
    let cpu = ratio_intervals(&other.cpu, &memo.cpu, boot, &[stream[0], stream[1], 1]);
    Some(VsMemo {
        p50: Ratio::of(wall.p50),
        p99: Ratio::of(wall.p99),
        mean: Ratio::of(wall.mean),
        cpu_p50: cpu.map(|c| Ratio::of(c.p50)),
        cpu_mean: cpu.map(|c| Ratio::of(c.mean)),
    })
}

/// How many cells gave each verdict, for one allocator and one ratio.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VerdictCount {
    /// The allocator memo is compared with.
    pub allocator: String,
    /// The ratio: `p50`, `p99`, `mean`, `cpu_p50` or `cpu_mean`.
    pub statistic: String,
    /// Cells where memo is ahead.
    pub ahead: usize,
    /// Cells where the interval spans 1.
    pub level: usize,
    /// Cells where memo is behind.
    pub behind: usize,
}

impl VerdictCount {
    fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Ahead => self.ahead += 1,
            Verdict::Level => self.level += 1,
            Verdict::Behind => self.behind += 1,
        }
    }
}

/// The verdicts of `cells` (allocator, comparison) counted per allocator and ratio, in
/// the order the allocators first appear.
pub fn count_verdicts<'a>(cells: impl Iterator<Item = (&'a str, &'a VsMemo)>) -> Vec<VerdictCount> {
    let mut counts: Vec<VerdictCount> = Vec::new();
    for (allocator, vs) in cells {
        for (statistic, ratio) in vs.by_name() {
            let Some(r) = ratio else { continue };
            let at = counts
                .iter()
                .position(|c| c.allocator == allocator && c.statistic == statistic);
            let at = at.unwrap_or_else(|| {
                counts.push(VerdictCount {
                    allocator: allocator.to_string(),
                    statistic: statistic.to_string(),
                    ..VerdictCount::default()
                });
                counts.len() - 1
            });
            counts[at].add(r.verdict);
        }
    }
    counts
}

//! Ratios of pass times between two allocators with bootstrap confidence intervals.
//!
//! The data of one allocator in one cell are its repetitions (one child process each) and
//! each repetition's passes. Passes of one process are not independent: they share its
//! memory layout, its CPU, the load the machine had while it ran and whatever the first
//! passes left in the caches. Resampling passes alone would treat hundreds of correlated
//! passes as independent draws and give intervals far too narrow. The repetitions are
//! independent, so the resampling unit is the repetition, in two stages (a hierarchical
//! bootstrap): draw repetitions with replacement, then passes with replacement within
//! each drawn repetition, and compute the statistic over the drawn passes together. The
//! first stage carries the spread between processes, the second the spread within one.
//!
//! The two allocators of a ratio are resampled *paired* when they have as many
//! repetitions: the same repetition indices are drawn for both, because repetition `r`
//! of every allocator of a group ran back to back (see `harness::parent`), under the same
//! machine conditions; drift that moves both cancels in the ratio. With one repetition
//! only the second stage is left: the interval then covers the noise within one process
//! only and is too narrow to decide on (the report says how many repetitions it had).
//!
//! The interval is the percentile interval of the resampled ratios.

use serde::Serialize;

use super::rng::Rng;

/// How the intervals are computed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bootstrap {
    /// Resamples per interval.
    pub resamples: usize,
    /// Coverage of the interval (0.95: from the 2.5th to the 97.5th percentile).
    pub level: f64,
    /// Seed of the resampling streams (each interval derives its own stream from it).
    pub seed: u64,
}

impl Default for Bootstrap {
    fn default() -> Bootstrap {
        Bootstrap {
            resamples: 2000,
            level: 0.95,
            seed: 0x6d65_6d6f,
        }
    }
}

/// A ratio of two statistics and its confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// The ratio over all passes.
    pub ratio: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end of the interval.
    pub hi: f64,
}

impl Interval {
    /// The interval of the reciprocal ratio (`b / a` from `a / b`).
    pub fn reciprocal(self) -> Interval {
        Interval {
            ratio: 1.0 / self.ratio,
            lo: 1.0 / self.hi,
            hi: 1.0 / self.lo,
        }
    }

    /// Half the interval's width relative to the ratio (0.03: ± 3%).
    pub fn relative_half_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0 / self.ratio
    }
}

/// The statistics of a set of pass times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// The median.
    pub p50: f64,
    /// The 99th percentile (nearest rank: the smallest value at least 99% of the values
    /// are at or below).
    pub p99: f64,
    /// The mean.
    pub mean: f64,
}

/// The median (the mean of the two middle values when their number is even), the 99th
/// percentile and the mean of `v` (reordered); `None` when empty.
pub fn stats_of(v: &mut [u64]) -> Option<Stats> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    let (below, &mut upper, _) = v.select_nth_unstable(n / 2);
    let p50 = if n % 2 == 1 {
        upper as f64
    } else {
        let lower = below.iter().copied().max().unwrap_or(upper);
        (lower as f64 + upper as f64) / 2.0
    };
    // Nearest rank: the ceil(0.99 n)-th smallest value.
    let rank = (n * 99).div_ceil(100).max(1);
    let p99 = *v.select_nth_unstable(rank - 1).1 as f64;
    Some(Stats { p50, p99, mean })
}

/// The ratios `num / den` of the medians, the 99th percentiles and the means of two sets
/// of pass times, each with its interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratios {
    /// Of the medians.
    pub p50: Interval,
    /// Of the 99th percentiles: the tail. Its interval is wide unless each side has
    /// hundreds of passes (a 99th percentile of 60 passes is their largest).
    pub p99: Interval,
    /// Of the means.
    pub mean: Interval,
}

/// The ratios `num / den` of the medians, 99th percentiles and means, each with its
/// interval; `None` when either side has no passes. `num` and `den` hold one vector of
/// pass times per repetition; `stream` names the interval's resampling stream (derived
/// from the seed).
pub fn ratio_intervals(
    num: &[Vec<u64>],
    den: &[Vec<u64>],
    b: &Bootstrap,
    stream: &[u64],
) -> Option<Ratios> {
    let (num, den) = paired_or_not(num, den);
    let pooled =
        |reps: &[&Vec<u64>]| -> Vec<u64> { reps.iter().flat_map(|r| r.iter()).copied().collect() };
    let n0 = stats_of(&mut pooled(&num))?;
    let d0 = stats_of(&mut pooled(&den))?;
    let paired = num.len() == den.len();
    let mut rng = Rng::new(b.seed, stream);
    let (mut bn, mut bd) = (Vec::new(), Vec::new());
    let mut p50s = Vec::with_capacity(b.resamples);
    let mut p99s = Vec::with_capacity(b.resamples);
    let mut means = Vec::with_capacity(b.resamples);
    for _ in 0..b.resamples {
        let picks = draw_reps(num.len(), &mut rng);
        resample(&num, &picks, &mut rng, &mut bn);
        let picks = if paired {
            picks
        } else {
            draw_reps(den.len(), &mut rng)
        };
        resample(&den, &picks, &mut rng, &mut bd);
        let (Some(n), Some(d)) = (stats_of(&mut bn), stats_of(&mut bd)) else {
            continue;
        };
        p50s.push(n.p50 / d.p50.max(f64::MIN_POSITIVE));
        p99s.push(n.p99 / d.p99.max(f64::MIN_POSITIVE));
        means.push(n.mean / d.mean.max(f64::MIN_POSITIVE));
    }
    let interval = |ratio: f64, rs: &mut Vec<f64>| {
        rs.sort_by(f64::total_cmp);
        let tail = (1.0 - b.level) / 2.0;
        Interval {
            ratio,
            lo: percentile(rs, tail).unwrap_or(ratio),
            hi: percentile(rs, 1.0 - tail).unwrap_or(ratio),
        }
    };
    Some(Ratios {
        p50: interval(n0.p50 / d0.p50.max(f64::MIN_POSITIVE), &mut p50s),
        p99: interval(n0.p99 / d0.p99.max(f64::MIN_POSITIVE), &mut p99s),
        mean: interval(n0.mean / d0.mean.max(f64::MIN_POSITIVE), &mut means),
    })
}

/// The repetitions with passes; when both sides have as many, those where both have
/// passes (so that the same indices pair them).
fn paired_or_not<'a>(
    num: &'a [Vec<u64>],
    den: &'a [Vec<u64>],
) -> (Vec<&'a Vec<u64>>, Vec<&'a Vec<u64>>) {
    if num.len() == den.len() {
        num.iter()
            .zip(den)
            .filter(|(a, b)| !a.is_empty() && !b.is_empty())
            .unzip()
    } else {
        let keep = |v: &'a [Vec<u64>]| v.iter().filter(|r| !r.is_empty()).collect();
        (keep(num), keep(den))
    }
}

/// `n` repetition indices drawn with replacement.
fn draw_reps(n: usize, rng: &mut Rng) -> Vec<usize> {
    (0..n).map(|_| rng.below(n)).collect()
}

/// The passes of the repetitions `picks`, each repetition's drawn with replacement, into
/// `out`.
fn resample(reps: &[&Vec<u64>], picks: &[usize], rng: &mut Rng, out: &mut Vec<u64>) {
    out.clear();
    for &r in picks {
        let passes = reps[r];
        out.extend((0..passes.len()).map(|_| passes[rng.below(passes.len())]));
    }
}

/// The `q`-quantile of sorted values, interpolated between neighbours.
fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let at = q.clamp(0.0, 1.0) * last as f64;
    let (i, frac) = (at.floor() as usize, at.fract());
    let j = (i + 1).min(last);
    Some(sorted[i] + (sorted[j] - sorted[i]) * frac)
}

//! The benchmark's statistics, importing nothing else of the crate: the seeded generator
//! and shuffle that order each repetition's cells ([`rng`]), ratios of pass times with
//! bootstrap confidence intervals ([`bootstrap`], which documents the resampling unit),
//! and the verdict rule ([`verdict`]).

pub mod bootstrap;
pub mod rng;
pub mod verdict;

pub use bootstrap::{ratio_intervals, stats_of, Bootstrap, Interval, Ratios, Stats};
pub use rng::{shuffle, Rng};
pub use verdict::Verdict;

#[cfg(test)]
mod tests;

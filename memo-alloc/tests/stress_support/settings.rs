//! What a run is: its seed, length and threads, from `MEMO_STRESS_SEED`,
//! `MEMO_STRESS_SECS` and `MEMO_STRESS_THREADS` or the test's defaults.

use std::time::Duration;

/// A run's settings.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Every thread's, round's and child's random source derives from it.
    pub seed: u64,
    /// How long the run lasts.
    pub length: Duration,
    /// Worker threads per round (2 to 32).
    pub threads: usize,
    /// Seconds without progress after which the watchdog fails the run.
    pub stall_secs: u64,
}

impl Settings {
    /// The environment's settings, else `secs` seconds on `threads` threads with a seed
    /// from the clock.
    pub fn from_env(secs: f64, threads: usize) -> Settings {
        let var = |name: &str| std::env::var(name).ok();
        let seed = var("MEMO_STRESS_SEED")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(clock_seed);
        let secs = var("MEMO_STRESS_SECS")
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(secs);
        let threads = var("MEMO_STRESS_THREADS")
            .and_then(|s| s.parse().ok())
            .unwrap_or(threads)
            .clamp(2, 32);
        Settings {
            seed,
            length: Duration::from_secs_f64(secs),
            threads,
            stall_secs: 60,
        }
    }

    /// The line that reproduces the run.
    pub fn describe(&self) -> String {
        format!(
            "MEMO_STRESS_SEED={} MEMO_STRESS_SECS={} MEMO_STRESS_THREADS={}",
            self.seed,
            self.length.as_secs_f64(),
            self.threads
        )
    }
}

fn clock_seed() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(1, |d| d.as_nanos() as u64)
}

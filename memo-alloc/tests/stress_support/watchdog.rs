//! Progress and the watchdog: each operation counts; a run that makes no progress for
//! the settings' stall time is deadlocked, and the watchdog ends the process with the
//! seed that reproduces it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Operations done so far (allocations, frees, reallocs, pass boundaries).
pub static PROGRESS: AtomicU64 = AtomicU64::new(0);

static DONE: AtomicBool = AtomicBool::new(false);

/// Counts `n` operations.
pub fn tick(n: u64) {
    PROGRESS.fetch_add(n, Ordering::Relaxed);
}

/// Starts the watchdog: when [`PROGRESS`] stays put for `stall_secs`, it prints
/// `message` and aborts the process.
pub fn start(stall_secs: u64, message: String) {
    DONE.store(false, Ordering::Relaxed);
    std::thread::spawn(move || {
        let mut last = PROGRESS.load(Ordering::Relaxed);
        let mut still = 0;
        while !DONE.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_secs(1));
            let now = PROGRESS.load(Ordering::Relaxed);
            still = if now == last { still + 1 } else { 0 };
            last = now;
            if still >= stall_secs {
                eprintln!("stress: no progress for {stall_secs} s (deadlock?): {message}");
                std::process::abort();
            }
        }
    });
}

/// Stops the watchdog.
pub fn stop() {
    DONE.store(true, Ordering::Relaxed);
}

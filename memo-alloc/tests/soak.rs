//! The soak: 10^6 passes over many keys with divergence, escapes, cross-thread frees,
//! plan evictions and forks, every block's contents checked before it is freed. Resident
//! memory must be flat after warm-up and no block corrupted. Ignored by default (minutes);
//! run by hand:
//!
//! ```text
//! cargo test -p memo-alloc --release --test soak -- --ignored --nocapture
//! SOAK_PASSES=100000 cargo test -p memo-alloc --release --test soak -- --ignored --nocapture
//! ```
//!
//! It prints the resident-size curve (one point per 5% of the passes) and the counters.

mod common;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;

use memo_alloc::{Config, MemoAlloc};

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

const KEYS: usize = 48;
const THREADS: usize = 2;

static CORRUPTED: AtomicUsize = AtomicUsize::new(0);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A block whose every word is derived from its id: checked before it is freed.
struct Checked {
    data: Vec<u64>,
    id: u64,
}

impl Checked {
    fn new(words: usize) -> Checked {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let data = (0..words as u64).map(|j| mix(id ^ j)).collect();
        Checked { data, id }
    }
}

impl Drop for Checked {
    fn drop(&mut self) {
        let bad = self
            .data
            .iter()
            .enumerate()
            .filter(|&(j, &w)| w != mix(self.id ^ j as u64))
            .count();
        if bad > 0 {
            CORRUPTED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^ (z >> 31)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn key(k: usize) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        (0..KEYS)
            .map(|k| &*Box::leak(format!("soak-{k}").into_boxed_str()))
            .collect()
    })[k]
}

/// One pass of key `k`: ops of a few buffers; with small probability an extra or a
/// missing buffer, a resized one, a block kept past the pass (freed later by another
/// thread), or a block freed by another thread during the pass.
fn pass(k: usize, rng: &mut Rng, to_freer: &mpsc::Sender<Checked>) {
    let _p = memo_alloc::pass(key(k));
    let ops = 3 + k % 5;
    let mut live: Vec<Checked> = Vec::with_capacity(16);
    for op in 0..ops {
        let _o = memo_alloc::op(["conv", "norm", "attn", "mlp"][op % 4]);
        let mut n = 2 + (k + op) % 4;
        if rng.below(50) == 0 {
            n += 1; // an extra buffer
        }
        if rng.below(50) == 0 {
            n -= 1; // a missing one
        }
        for j in 0..n {
            let mut words = 8 + 64 * ((k * 7 + op * 3 + j) % 17);
            if rng.below(100) == 0 {
                words += 1 + rng.below(512) as usize; // resized
            }
            live.push(Checked::new(words));
        }
        // Free about half of them now, some on another thread.
        while live.len() > 3 {
            let b = live.swap_remove(rng.below(live.len() as u64) as usize);
            if rng.below(40) == 0 {
                let _ = to_freer.send(b);
            } else {
                drop(b);
            }
        }
    }
    if rng.below(30) == 0 {
        if let Some(b) = live.pop() {
            let _ = to_freer.send(b); // escapes the pass, freed later elsewhere
        }
    }
    black_box(&live);
}

/// A forked child: a few passes of its own, then `_exit`.
fn fork_and_check(rng: &mut Rng) {
    // SAFETY: the child runs passes and exits with _exit (the fork safety under test).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let (tx, _rx) = mpsc::channel();
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut r = Rng(rng.next() | 1);
            for i in 0..20 {
                pass(i % KEYS, &mut r, &tx);
            }
        }))
        .is_ok();
        let code = if ok && CORRUPTED.load(Ordering::Relaxed) == 0 {
            0
        } else {
            1
        };
        // SAFETY: ends the child without the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let status = common::wait_bounded(pid, 60).expect("the forked child exits");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "forked child failed: {status:#x}"
    );
}

#[test]
#[ignore = "a soak of minutes: run by hand (see the file's doc comment)"]
fn soak() {
    assert!(memo_alloc::configure(Config::default().with_max_plans(16)));
    let passes: usize = std::env::var("SOAK_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let per_thread = passes / THREADS;
    let (tx, rx) = mpsc::channel::<Checked>();
    let freer = std::thread::spawn(move || {
        let mut held: Vec<Checked> = Vec::new();
        for b in rx {
            held.push(b);
            if held.len() > 64 {
                held.drain(..32); // freed here, long after their pass
            }
        }
    });
    let done = AtomicUsize::new(0);
    let mut curve: Vec<(usize, u64)> = Vec::new();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let tx = tx.clone();
            let done = &done;
            s.spawn(move || {
                let mut rng = Rng(0x1234_5678_9ABC_DEF1 ^ (t as u64 * 0x9E37));
                for _ in 0..per_thread {
                    // A skewed choice of keys: a hot set and a long tail (evictions).
                    let k = if rng.below(4) == 0 {
                        rng.below(KEYS as u64)
                    } else {
                        rng.below(12)
                    } as usize;
                    pass(k, &mut rng, &tx);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let mut rng = Rng(42);
        let step = (passes / 20).max(1);
        let mut next = step;
        while done.load(Ordering::Relaxed) < per_thread * THREADS {
            if done.load(Ordering::Relaxed) >= next {
                curve.push((next, common::rss_bytes()));
                fork_and_check(&mut rng);
                next += step;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
    drop(tx);
    freer.join().unwrap();
    curve.push((passes, common::rss_bytes()));
    let s = memo_alloc::stats();
    println!("passes  rss_MiB");
    for (n, rss) in &curve {
        println!("{n:>7}  {:.1}", *rss as f64 / (1 << 20) as f64);
    }
    println!("{s:#?}");
    assert_eq!(CORRUPTED.load(Ordering::Relaxed), 0, "corrupted blocks");
    assert!(s.evictions > 0 && s.passes_replayed > 0, "{s:?}");
    // Flat after warm-up: the last point within 10% (+4 MiB) of the point at 25%.
    let warm = curve[curve.len() / 4].1;
    let last = curve.last().unwrap().1;
    assert!(
        last <= warm + warm / 10 + (4 << 20),
        "resident memory grew from {} to {} MiB after warm-up",
        warm >> 20,
        last >> 20
    );
}

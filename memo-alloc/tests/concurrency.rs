//! Concurrency, with `MemoAlloc` as this binary's global allocator.
//!
//! What this proves:
//! - Many threads (more than the machine's cores) running the same key and different keys
//!   for many passes, handing buffers to each other and freeing each other's buffers
//!   during and after the allocating thread's pass, never see a buffer's contents change
//!   under them: every buffer carries a per-buffer pattern that is checked before it is
//!   freed (and whenever its owner touches it). Overlapping live allocations would
//!   corrupt a pattern.
//! - Replay really happens under concurrency (`stats().slab_hits` grows) and the pool of a
//!   key grows to the number of its concurrently running passes
//!   (`report(key).slab_instances`).
//! - A slab pointer freed on another thread during the owner's pass frees its slot: the
//!   owner's next allocation planned at the same address is served from the slab, with no
//!   `overlap` miss.
//! - A slab instance with a slot still live at pass end (held by another thread) is not
//!   handed to the next pass; the next pass gets a new instance.
//! - While one thread profiles a key, other threads' passes of that key run on the backend.
//! - Under constant plan churn (at most two plans kept, every miss triggers re-profiling),
//!   with passes, evictions, re-plans, retirement and reclamation racing with
//!   cross-thread frees, no buffer is corrupted and no retired slab is reused while live
//!   (run in a child process, since the settings are process-wide).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;

use memo_alloc::{MemoAlloc, MissReason, PlanState};

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

/// A buffer whose every word is a function of its seed and index; checked on drop.
struct Buf {
    words: Vec<u64>,
    seed: u64,
}

static CHECKED: AtomicUsize = AtomicUsize::new(0);

fn word(seed: u64, i: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

impl Buf {
    fn new(len: usize, seed: u64) -> Buf {
        let words: Vec<u64> = (0..len).map(|i| word(seed, i)).collect();
        Buf { words, seed }
    }

    fn check(&self) {
        for (i, &w) in self.words.iter().enumerate() {
            assert_eq!(
                w,
                word(self.seed, i),
                "buffer {:#x} (seed {:#x}, {} words) corrupted at word {i}",
                self.words.as_ptr() as usize,
                self.seed,
                self.words.len()
            );
        }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        self.check();
        CHECKED.fetch_add(1, Ordering::Relaxed);
    }
}

fn seed(t: usize, p: usize, op: usize, j: usize) -> u64 {
    ((t as u64) << 48) | ((p as u64) << 24) | ((op as u64) << 8) | j as u64
}

const OPS: [&str; 4] = ["embed", "attn", "mlp", "norm"];
const SHARED: [&str; 2] = ["conc-shared-a", "conc-shared-b"];
const OWN: [&str; 8] = [
    "conc-own-0",
    "conc-own-1",
    "conc-own-2",
    "conc-own-3",
    "conc-own-4",
    "conc-own-5",
    "conc-own-6",
    "conc-own-7",
];

/// Eight threads, each running 60 passes over a shared key and its own key, sending some of
/// its buffers to two neighbours (which free them whenever they get to it, inside or
/// outside their own passes) and keeping some across passes.
#[test]
fn many_threads_share_keys_and_free_each_others_buffers() {
    common::inline_planner();
    const THREADS: usize = 8;
    const PASSES: usize = 60;
    let before = memo_alloc::stats();
    let start = Arc::new(Barrier::new(THREADS));
    let done = Arc::new(Barrier::new(THREADS));
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| mpsc::channel::<Buf>()).unzip();
    let mut handles = Vec::new();
    for (t, rx) in rxs.into_iter().enumerate() {
        let right = txs[(t + 1) % THREADS].clone();
        let far = txs[(t + 3) % THREADS].clone();
        let (start, done) = (start.clone(), done.clone());
        handles.push(thread::spawn(move || {
            let drain = |rx: &mpsc::Receiver<Buf>| {
                while let Ok(b) = rx.try_recv() {
                    drop(b); // checked, then freed on this thread
                }
            };
            let mut held: Vec<Buf> = Vec::new();
            start.wait();
            for p in 0..PASSES {
                let key = if p % 3 == 2 { OWN[t] } else { SHARED[t % 2] };
                {
                    let _pass = memo_alloc::pass(key);
                    let mut live: Vec<Buf> = Vec::with_capacity(16);
                    for (o, name) in OPS.iter().enumerate() {
                        let _op = memo_alloc::op(name);
                        for j in 0..3 {
                            let len = 8 + 64 * ((o * 3 + j) % 5) + 128 * (j % 2);
                            live.push(Buf::new(len, seed(t, p, o, j)));
                        }
                        // A temporary that lives inside the op only.
                        let tmp = Buf::new(32 + 16 * o, seed(t, p, o, 99));
                        drop(tmp);
                        // Diverge from the profile now and then: hand buffers to others.
                        if p > 0 && (p + t + o) % 4 == 0 {
                            let _ = right.send(live.remove(0));
                        }
                        if p > 0 && (p * 7 + t + o) % 5 == 0 {
                            let b = live.swap_remove(live.len() / 2);
                            let _ = far.send(b);
                        }
                        drain(&rx);
                        for b in &live {
                            b.check();
                        }
                        // Free the oldest local buffers in program order.
                        while live.len() > 4 {
                            drop(live.remove(0));
                        }
                    }
                    if p % 5 == 1 {
                        if let Some(b) = live.pop() {
                            held.push(b); // outlives the pass
                        }
                    }
                    drop(live);
                }
                // Freed after the pass that allocated it ended.
                if held.len() > 2 {
                    drop(held.remove(0));
                }
                drain(&rx);
            }
            done.wait(); // every send has happened
            drain(&rx);
            drop(held);
        }));
    }
    drop(txs);
    for h in handles {
        h.join().expect("worker panicked");
    }
    let after = memo_alloc::stats();
    assert!(
        after.slab_hits > before.slab_hits,
        "no allocation was served from a slab: {before:?} {after:?}"
    );
    assert!(after.passes_replayed > before.passes_replayed);
    for key in SHARED.iter().chain(OWN.iter()) {
        let r = memo_alloc::report(key).expect("report");
        assert!(r.passes_profiled >= 1, "{r:?}");
        // A pass a shape class of the key decided counts in the class's report (the
        // buffers handed to other threads can make a re-profile of another shape).
        let class = format!("{key}#");
        let passes: u64 = memo_alloc::keys()
            .iter()
            .filter(|k| *k == key || k.starts_with(&class))
            .filter_map(|k| memo_alloc::report(k))
            .map(|c| c.passes_profiled + c.passes_replayed + c.passes_backend)
            .sum();
        assert!(passes >= 20, "{passes} passes: {r:?}");
        assert_ne!(r.state, PlanState::Profiling, "{r:?}");
    }
    assert!(CHECKED.load(Ordering::Relaxed) > THREADS * PASSES * 12);
}

/// One profile, then rounds in which eight threads are inside a pass of the same key at
/// once (a barrier inside the pass): every pass needs its own slab instance.
#[test]
fn concurrent_passes_of_one_key_each_get_an_instance() {
    common::inline_planner();
    const THREADS: usize = 8;
    const ROUNDS: usize = 6;
    const KEY: &str = "conc-same";
    fn run(t: usize, r: usize, inside: Option<&Barrier>) -> u64 {
        let _pass = memo_alloc::pass(KEY);
        let a = Buf::new(512, seed(t, r, 0, 0));
        if let Some(b) = inside {
            b.wait();
        }
        let b = {
            let _op = memo_alloc::op("b");
            Buf::new(1024, seed(t, r, 1, 0))
        };
        let c = Buf::new(256, seed(t, r, 2, 0));
        let sum = a.words[3] ^ b.words[5] ^ c.words[7];
        drop(a);
        drop(b);
        sum
    }
    run(99, 0, None); // profiled
    let hits_before = memo_alloc::report(KEY).unwrap().slab_hits;
    let inside = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let inside = inside.clone();
            thread::spawn(move || {
                for r in 1..=ROUNDS {
                    let expect = word(seed(t, r, 0, 0), 3)
                        ^ word(seed(t, r, 1, 0), 5)
                        ^ word(seed(t, r, 2, 0), 7);
                    assert_eq!(run(t, r, Some(&inside)), expect);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("worker panicked");
    }
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.passes_profiled, 1, "{r:?}");
    assert_eq!(r.passes_replayed, (THREADS * ROUNDS) as u64, "{r:?}");
    assert!(
        r.slab_instances >= 2,
        "{THREADS} passes ran at once but the pool has {} instance(s): {r:?}",
        r.slab_instances
    );
    assert!(
        r.slab_instances >= THREADS as u64,
        "{THREADS} passes held an instance at once: {r:?}"
    );
    assert!(
        r.slab_hits >= hits_before + (THREADS * ROUNDS * 3) as u64,
        "{r:?}"
    );
    assert_eq!(r.misses_by_reason.total(), 0, "{r:?}");
}

enum ToFreer {
    /// Check and free now, then acknowledge.
    FreeNow(Buf),
    /// Keep until told.
    Hold(Buf),
    /// Free what is held, then acknowledge.
    FreeHeld,
    /// Acknowledge (warms the channels up: their first send allocates, outside passes).
    Ping,
}

/// A thread that frees buffers sent to it. Acknowledgements go through a barrier, which
/// (unlike a blocking channel receive) never allocates, so passes waiting for one stay
/// identical to their profile.
fn spawn_freer() -> (mpsc::Sender<ToFreer>, Arc<Barrier>, thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<ToFreer>();
    let ack = Arc::new(Barrier::new(2));
    let ack2 = ack.clone();
    let h = thread::spawn(move || {
        let mut held = Vec::new();
        for m in rx {
            match m {
                ToFreer::FreeNow(b) => {
                    drop(b);
                    ack2.wait();
                }
                ToFreer::Hold(b) => held.push(b),
                ToFreer::FreeHeld => {
                    held.clear();
                    ack2.wait();
                }
                ToFreer::Ping => {
                    ack2.wait();
                }
            }
        }
    });
    tx.send(ToFreer::Ping).unwrap();
    ack.wait();
    (tx, ack, h)
}

/// Profiled: `x` freed, then `y` of the same size allocated (the plan puts both at offset
/// 0). Replayed: `x` is freed on another thread while the pass waits; `y` must then be
/// served from the slab at the same address, which requires the cross-thread free to
/// have marked the slot free.
#[test]
fn cross_thread_free_during_the_pass_frees_the_slot() {
    common::inline_planner();
    const KEY: &str = "conc-ack";
    let (tx, ack, freer) = spawn_freer();
    let run = |p: usize, remote: bool| {
        let _pass = memo_alloc::pass(KEY);
        let x = {
            let _op = memo_alloc::op("x");
            Buf::new(1000, seed(1, p, 0, 0))
        };
        let x_addr = x.words.as_ptr() as usize;
        if remote {
            tx.send(ToFreer::FreeNow(x)).unwrap();
            ack.wait();
        } else {
            drop(x);
        }
        let y = {
            let _op = memo_alloc::op("y");
            Buf::new(1000, seed(1, p, 1, 0))
        };
        let same = y.words.as_ptr() as usize == x_addr;
        drop(y);
        same
    };
    run(0, false); // profiled
    for p in 1..20 {
        let same = run(p, p % 2 == 1);
        assert!(
            same,
            "pass {p}: y was not placed where x was: {:?}",
            memo_alloc::report(KEY)
        );
    }
    drop(tx);
    freer.join().unwrap();
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.passes_profiled, 1, "{r:?}");
    assert_eq!(r.passes_replayed, 19, "{r:?}");
    assert_eq!(r.slab_hits, 2 * 19, "{r:?}");
    assert_eq!(
        r.misses_by_reason.get(MissReason::Overlap),
        0,
        "a slot freed on another thread still counted as live: {r:?}"
    );
}

/// A buffer of a replayed pass is still live (held by another thread) when the pass ends:
/// its instance must not serve the next pass, which gets a second instance; once the
/// buffer is freed on the other thread, the instance is reused.
#[test]
fn an_instance_with_a_live_slot_is_not_reused_until_drained() {
    common::inline_planner();
    const KEY: &str = "conc-late";
    let (tx, ack, freer) = spawn_freer();
    let run = |p: usize, hand_off: bool| -> usize {
        let _pass = memo_alloc::pass(KEY);
        let x = Buf::new(300, seed(2, p, 0, 0));
        let addr = x.words.as_ptr() as usize;
        let y = Buf::new(300, seed(2, p, 1, 0));
        if hand_off {
            tx.send(ToFreer::Hold(x)).unwrap();
        } else {
            drop(x);
        }
        drop(y);
        addr
    };
    run(0, false); // profiled
    let first = run(1, true); // replayed in instance 1; `x` outlives the pass
    assert_eq!(memo_alloc::report(KEY).unwrap().slab_instances, 1);
    let second = run(2, false); // instance 1 has a live slot: instance 2
    assert_ne!(first, second, "the held buffer's slot was handed out again");
    assert_eq!(memo_alloc::report(KEY).unwrap().slab_instances, 2);
    tx.send(ToFreer::FreeHeld).unwrap(); // `x` freed after its pass, on another thread
    ack.wait();
    for p in 3..10 {
        run(p, false);
    }
    drop(tx);
    freer.join().unwrap();
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.slab_instances, 2, "drained instances are reused: {r:?}");
    assert_eq!(r.passes_replayed, 9, "{r:?}");
    assert_eq!(r.slab_hits, 2 * 9, "{r:?}");
}

/// While one thread's profiling pass of a key is held open, other threads' passes of the
/// key run on the backend (and are counted so); afterwards they replay.
#[test]
fn passes_run_on_the_backend_while_the_key_is_being_profiled() {
    common::inline_planner();
    const KEY: &str = "conc-profiling";
    const OTHERS: usize = 4;
    let entered = Arc::new(Barrier::new(OTHERS + 1));
    let finished = Arc::new(Barrier::new(OTHERS + 1));
    let profiler = {
        let (entered, finished) = (entered.clone(), finished.clone());
        thread::spawn(move || {
            let _pass = memo_alloc::pass(KEY);
            let a = Buf::new(100, 1);
            entered.wait(); // the pass is open and profiling
            finished.wait(); // the others ran their passes meanwhile
            drop(a);
        })
    };
    let others: Vec<_> = (0..OTHERS)
        .map(|t| {
            let (entered, finished) = (entered.clone(), finished.clone());
            thread::spawn(move || {
                entered.wait();
                for p in 0..3 {
                    let _pass = memo_alloc::pass(KEY);
                    let a = Buf::new(100, seed(t, p, 0, 0));
                    drop(a);
                }
                finished.wait();
            })
        })
        .collect();
    for h in others {
        h.join().unwrap();
    }
    profiler.join().unwrap();
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.passes_profiled, 1, "{r:?}");
    assert_eq!(r.passes_backend, (OTHERS * 3) as u64, "{r:?}");
    assert_eq!(r.passes_replayed, 0, "{r:?}");
    assert_eq!(r.state, PlanState::Planned, "{r:?}");
    // And now the key replays.
    {
        let _pass = memo_alloc::pass(KEY);
        drop(Buf::new(100, 7));
    }
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.passes_replayed, 1, "{r:?}");
    assert_eq!(r.slab_hits, 1, "{r:?}");
}

/// Runs `--exact name` of this binary in a child process and asserts it passed.
fn run_child(name: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            name,
            "--test-threads=1",
            "--nocapture",
        ])
        .env("MEMO_TEST_CHILD", "1")
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child {name} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn plan_churn_under_concurrency() {
    common::inline_planner();
    run_child("child_churn");
}

const CHURN_KEYS: [&str; 5] = ["churn-0", "churn-1", "churn-2", "churn-3", "churn-4"];

/// Passes profiled over the churn keys.
fn profiled_passes() -> u64 {
    CHURN_KEYS
        .iter()
        .filter_map(|k| memo_alloc::report(k))
        .map(|r| r.passes_profiled)
        .sum()
}

/// Plans were replayed, and some key was profiled again (what the test is about).
fn churned() -> bool {
    memo_alloc::stats().slab_hits > 0 && profiled_passes() > CHURN_KEYS.len() as u64
}

#[test]
#[ignore = "child process of plan_churn_under_concurrency"]
fn child_churn() {
    if std::env::var_os("MEMO_TEST_CHILD").is_none() {
        return;
    }
    // Planned on the planner thread, as in production: churn races publication there.
    assert!(memo_alloc::configure(
        memo_alloc::Config::default()
            .with_max_plans(2)
            .with_miss_window(1)
            .with_replan_miss_ratio(0.0)
    ));
    const THREADS: usize = 8;
    const PASSES: usize = 150;
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| mpsc::channel::<Buf>()).unzip();
    let done = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(t, rx)| {
            let right = txs[(t + 1) % THREADS].clone();
            let done = done.clone();
            thread::spawn(move || {
                let mut held = Vec::new();
                let start = std::time::Instant::now();
                for p in 0.. {
                    // The planner thread may not have had a core yet (8 workers, 2 cores):
                    // go on until plans were replayed and re-made, or for 10 s at most.
                    if p >= PASSES && (churned() || start.elapsed().as_secs() >= 10) {
                        break;
                    }
                    let key = CHURN_KEYS[(t + p) % CHURN_KEYS.len()];
                    {
                        let _pass = memo_alloc::pass(key);
                        let mut live = Vec::new();
                        for (o, name) in OPS.iter().enumerate() {
                            let _op = memo_alloc::op(name);
                            // Sizes drift now and then: misses, hence re-profiling.
                            let len = 16 + 32 * o + if (p / 7 + t) % 3 == 0 { 40 } else { 0 };
                            live.push(Buf::new(len, seed(t, p, o, 0)));
                            live.push(Buf::new(len / 2 + 1, seed(t, p, o, 1)));
                            if (p + o + t) % 3 == 0 {
                                let _ = right.send(live.remove(0));
                            }
                            while let Ok(b) = rx.try_recv() {
                                drop(b);
                            }
                            if live.len() > 3 {
                                drop(live.remove(0));
                            }
                        }
                        if p % 4 == 0 {
                            held.extend(live.pop());
                        }
                    }
                    if held.len() > 3 {
                        drop(held.remove(0));
                    }
                    if p % 10 == 0 {
                        let s = memo_alloc::stats();
                        assert!(s.plans <= 2 + 1, "{s:?}");
                        let _ = memo_alloc::report(key);
                    }
                }
                done.wait();
                while let Ok(b) = rx.try_recv() {
                    drop(b);
                }
            })
        })
        .collect();
    drop(txs);
    for h in handles {
        h.join().expect("worker panicked");
    }
    // A plan being published holds a place above the cap until its publication evicts
    // (the workers' check allows one more): the final count is taken once the planner
    // thread is idle.
    assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(
        60
    )));
    let s = memo_alloc::stats();
    assert!(s.plans <= 2, "{s:?}");
    assert!(s.slab_hits > 0, "{s:?}");
    let profiled = profiled_passes();
    eprintln!("churn: {s:?}, profiled {profiled}");
    assert!(
        profiled > CHURN_KEYS.len() as u64,
        "plans were evicted and re-made: {profiled}"
    );
}

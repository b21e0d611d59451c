//! What a worker thread does: passes over random keys (static, run-time and bucket keys),
//! each a program of allocations, reallocs and frees in op scopes that repeats for its
//! key (so that later passes replay) and now and then diverges; blocks handed to other
//! threads or kept past their pass; passes with a helper thread in the pass's context;
//! async passes on a tokio runtime; forks whose child runs a few passes; requests whose
//! backend fails.

use std::time::Instant;

use memo_alloc::{Buckets, Pass};

use super::block::Block;
use super::rng::{hash, Rng};
use super::{transfer, watchdog};

/// Blocks a thread keeps past their passes (the oldest is freed beyond this).
const KEPT: usize = 64;
/// Static keys.
const KEYS: u64 = 24;
/// Op names a pass's scopes take.
const OPS: [&str; 4] = ["embed", "attn", "mlp", "norm"];

/// What a worker shares with the others and the harness.
pub struct Shared<'a> {
    /// The runtime async passes run on.
    pub runtime: &'a tokio::runtime::Runtime,
    /// Whether this process may fork (not in a forked child).
    pub may_fork: bool,
}

/// A worker's state across its passes.
pub struct Worker<'a> {
    rng: Rng,
    kept: Vec<Block>,
    shared: &'a Shared<'a>,
    /// Forked children whose exit was not clean.
    pub child_failures: u64,
}

impl<'a> Worker<'a> {
    /// A worker drawing from `rng`.
    pub fn new(rng: Rng, shared: &'a Shared<'a>) -> Worker<'a> {
        Worker {
            rng,
            kept: Vec::new(),
            shared,
            child_failures: 0,
        }
    }

    /// Runs passes until `deadline`.
    pub fn run_until(&mut self, deadline: Instant) {
        while Instant::now() < deadline {
            self.one();
        }
    }

    /// One random action.
    pub fn one(&mut self) {
        let key = self.key();
        match self.rng.below(1000) {
            0..=869 => self.sync_pass(&key),
            870..=929 => self.async_pass(&key),
            930..=969 => self.helper_pass(&key),
            970..=971 if self.shared.may_fork => self.fork(),
            _ => {
                let mut program = Rng::derive(self.rng.next(), 0);
                let live = self.body(&mut program, 16);
                drop(live);
            }
        }
    }

    /// A pass key: static, run-time or a bucket's.
    fn key(&mut self) -> String {
        match self.rng.below(10) {
            0..=5 => format!("stress/k{}", self.rng.below(KEYS)),
            6..=7 => format!("stress/rt/{}", self.rng.below(256)),
            _ => Buckets::powers_of_two().key("stress/seq", 1 + self.rng.below(1 << 12)),
        }
    }

    /// The program of a pass of `key`: the key's own, or now and then a divergent one.
    fn program(&mut self, key: &str) -> Rng {
        let diverge = if self.rng.chance(1, 8) {
            self.rng.next()
        } else {
            0
        };
        Rng::derive(hash(key), diverge)
    }

    fn sync_pass(&mut self, key: &str) {
        let mut program = self.program(key);
        let _pass = memo_alloc::pass(key);
        let steps = 4 + program.below(48) as usize;
        let live = self.body(&mut program, steps);
        drop(live);
        watchdog::tick(1);
    }

    /// A program's steps: returns the blocks still live at its end (in scopes of
    /// `OPS`, nested now and then).
    fn body(&mut self, program: &mut Rng, steps: usize) -> Vec<Block> {
        let mut live: Vec<Block> = Vec::with_capacity(steps);
        let mut done = 0;
        while done < steps {
            let _op = memo_alloc::op(OPS[program.below(OPS.len() as u64) as usize]);
            let _inner = program
                .chance(1, 4)
                .then(|| memo_alloc::op(OPS[program.below(OPS.len() as u64) as usize]));
            let chunk = (1 + program.below(8) as usize).min(steps - done);
            for _ in 0..chunk {
                self.step(program, &mut live);
            }
            done += chunk;
        }
        live
    }

    /// One step of a program: mostly the program's own choice, now and then the
    /// thread's (a transfer, a block kept, a failing backend).
    fn step(&mut self, program: &mut Rng, live: &mut Vec<Block>) {
        let fail = self.rng.chance(1, 50).then(|| 1 + self.rng.below(3) as u32);
        match program.below(100) {
            0..=54 => live.extend(Block::new(program.size(), program.align(), fail)),
            55..=74 if !live.is_empty() => {
                let i = program.below(live.len() as u64) as usize;
                drop(live.swap_remove(i));
            }
            75..=84 if !live.is_empty() => {
                let i = program.below(live.len() as u64) as usize;
                live[i].realloc(program.size(), fail);
            }
            85..=94 if !live.is_empty() && self.rng.chance(1, 4) => {
                let i = self.rng.below(live.len() as u64) as usize;
                let block = live.swap_remove(i);
                if self.rng.chance(1, 2) {
                    drop(transfer::swap(self.rng.next(), block));
                } else {
                    self.keep(block);
                }
            }
            _ => {}
        }
        watchdog::tick(1);
    }

    fn keep(&mut self, block: Block) {
        if self.kept.len() >= KEPT {
            let i = self.rng.below(KEPT as u64) as usize;
            self.kept.swap_remove(i);
        }
        self.kept.push(block);
    }

    /// A pass whose helper thread (in the pass's context, through `current()`) makes
    /// blocks freed by the pass's thread.
    fn helper_pass(&mut self, key: &str) {
        let mut program = self.program(key);
        let _pass = memo_alloc::pass(key);
        let handle = memo_alloc::current();
        let mut helper_program = Rng::derive(program.next(), 1);
        let made: Vec<Block> = std::thread::scope(|s| {
            s.spawn(move || {
                let _in = handle.as_ref().map(|h| h.enter(1));
                let n = 1 + helper_program.below(16);
                (0..n)
                    .filter_map(|_| Block::new(helper_program.size(), 8, None))
                    .collect()
            })
            .join()
            .expect("the helper thread")
        });
        let live = self.body(&mut program, 8);
        drop((made, live));
        watchdog::tick(1);
    }

    /// An async pass on the runtime: its steps yield between them, so the future moves
    /// between the runtime's threads.
    fn async_pass(&mut self, key: &str) {
        let mut program = self.program(key);
        let pass = Pass::new(key);
        let steps = 2 + program.below(16);
        let task = pass.wrap(async move {
            let mut live = Vec::new();
            for _ in 0..steps {
                live.extend(Block::new(program.size(), program.align(), None));
                if program.chance(1, 3) && !live.is_empty() {
                    let i = program.below(live.len() as u64) as usize;
                    drop(live.swap_remove(i));
                }
                tokio::task::yield_now().await;
                watchdog::tick(1);
            }
            live
        });
        let live = self
            .shared
            .runtime
            .block_on(self.shared.runtime.spawn(task));
        drop(live.expect("the async pass"));
    }

    /// Forks: the child runs a few passes (no threads, no runtime) and exits with 0 when
    /// it found no corruption; the parent waits (a child that hangs is killed and counts
    /// as failed).
    fn fork(&mut self) {
        let seed = self.rng.next();
        // SAFETY: the child only runs passes on this thread and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let shared = Shared {
                runtime: self.shared.runtime,
                may_fork: false,
            };
            let mut child = Worker::new(Rng::derive(seed, 2), &shared);
            for _ in 0..8 {
                let key = child.key();
                child.sync_pass(&key);
            }
            child.kept.clear();
            let bad = super::block::CORRUPTIONS.load(std::sync::atomic::Ordering::Relaxed);
            // SAFETY: leaves the child without running the parent's destructors.
            unsafe { libc::_exit(i32::from(bad > 0)) };
        }
        assert!(pid > 0, "fork failed");
        let clean = crate::common::wait_bounded(pid, 60)
            .is_ok_and(|s| libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0);
        if !clean {
            eprintln!("stress: a forked child failed");
            self.child_failures += 1;
        }
        watchdog::tick(1);
    }
}

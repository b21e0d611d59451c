//! The shadow checker: the allocator's safety under generated programs (no two live
//! blocks overlap; every block satisfies its layout, keeps its contents through a realloc
//! and reads zero from `alloc_zeroed`).
//!
//! What it proves: for proptest-generated pass programs (nested op scopes, and passes inside
//! passes, which are scopes; allocations from 1 byte to 1 MiB with alignments 1..=4096;
//! frees within and across ops; reallocs that grow and shrink; `alloc_zeroed`; allocations
//! kept past the pass), profiled once and then
//! replayed with proptest-chosen divergences (sibling ops swapped, ops skipped or repeated,
//! sizes changed up and down, extra and missing allocations, early and late frees, frees
//! on another thread, synchronous or racing with the pass, kept allocations freed after the
//! pass, on another thread, during the next pass or at the very end, a panic unwinding
//! through the pass, alignments raised up to 8192), every block `MemoAlloc` hands out:
//! - is non-null and aligned for its layout, and overlaps no other live block of the
//!   process (all live blocks of all tests sit in one address-ordered map);
//! - keeps a pattern derived from a process-unique id intact until it is freed (checked
//!   before every free and realloc, also on the freeing thread): a byte written through an
//!   overlap with any other allocation is found;
//! - keeps its contents across `realloc` (the old prefix is checked at the new address),
//!   and is all zero when it comes from `alloc_zeroed`, also from a reused slab slot.
//!
//! And the program cannot tell: each run's checksum of the data it read back equals that of
//! the same (diverged) program run outside any pass, and un-diverged or alignment-only
//! divergences equal the profiled run's. The counters agree with what happened: a
//! profiled pass is served entirely by the backend but for its large blocks (from the
//! region: `own_blocks.rs`), in a replayed pass slab hits plus
//! misses equal the allocations made and the backend served exactly the misses, and a
//! replay of the program the current plan was made from hits exactly the planned slots and
//! misses exactly the escaping ones (so the suite fails if replay silently stops using
//! slabs). Hand-made tests pin the miss reasons: `TooLarge`, `Alignment`, `Unplanned`,
//! `Overlap` (a reordered op keeps a slot live), `ReallocGrow`, plus backend failures
//! returning null.
//!
//! The allocator under test is a `static MemoAlloc<CountingBackend>` driven by direct calls;
//! this binary's global allocator is not a `MemoAlloc`, so proptest's own allocations never
//! enter a pass. Underneath both is a checking allocator (`shadow_support::checked`):
//! canaries around every block, poison and a quarantine after every free. memo-alloc's own
//! bookkeeping goes to the global allocator, so an overflow, a double free or a write
//! after free in the bookkeeping aborts the run, as do the same faults in blocks the
//! backend serves. Keys: the registry holds at most 4,096 keys, so each generated program
//! takes a key from a per-test pool that is reused only after the key's plan was evicted
//! (`max_plans` = 32 here); every program therefore starts from an unplanned key. (A key is
//! re-profiled at most 8 times in its life, so once a pool's keys have used that up,
//! typically late in the long run, diverging replays no longer re-profile.) The
//! configuration is fixed in code (`greedy-by-size` plans, default re-planning), so
//! `MEMO_*` variables do not change what runs.
//!
//! Case counts: 8,000 + 4,000 = 12,000 generated programs in every run of the suite,
//! `cargo test --workspace` included (a few minutes in a debug build, about 12 s with
//! `--release`); `SHADOW_CASES_SCALE=1` runs a quarter. The same programs run again with
//! lanes (`generated_programs_with_lanes`, half of them). The long run, 500,000 programs
//! by default:
//!
//! ```text
//! SHADOW_LONG_CASES=500000 cargo test -p memo-alloc --release --test shadow -- --ignored --nocapture
//! ```

mod shadow_support;

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, sync_channel, Sender, SyncSender};
use std::sync::{Mutex, Once, RwLock};

use common::{delta, hits};
use memo_alloc::{Config, MemoAlloc, MissReason, PassReport, PlanState};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{
    Config as PtConfig, FileFailurePersistence, TestCaseError, TestRunner,
};
use shadow_support::{checked::Checked, Alloc, Block, CountingBackend};

/// Everything else, memo-alloc's own bookkeeping included, is checked too.
#[global_allocator]
static GLOBAL: Checked = Checked;

static MAIN: Alloc = MemoAlloc::new(CountingBackend::new());
static SMALL: Alloc = MemoAlloc::new(CountingBackend::new());
static LONG: Alloc = MemoAlloc::new(CountingBackend::new());
static HAND: Alloc = MemoAlloc::new(CountingBackend::new());

const NAMES: [&str; 4] = ["conv", "relu", "pool", "norm"];

// ---------------------------------------------------------------------------------------
// Setup
// ---------------------------------------------------------------------------------------

/// The panic payload of an injected panic (silenced by the hook).
struct Injected;

/// Hand-made tests take this for writing: no generated program publishes plans (and so
/// evicts theirs) while they run. Generated cases take it for reading.
static CHURN: RwLock<()> = RwLock::new(());

fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut cfg = Config::default()
            .with_strategy(memo_planner::OffsetStrategy::GreedyBySize)
            .with_planner(memo_alloc::Planner::Inline)
            .with_max_plans(64)
            .with_lanes(lanes());
        cfg.max_classes = if classes() { 8 } else { 1 };
        assert!(
            memo_alloc::configure(cfg),
            "configuration fixed before the first pass"
        );
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Injected>() {
                default(info);
            }
        }));
    });
}

/// A key from `prefix`'s pool of `pool` keys, leaked once each.
///
/// The registry holds at most 4,096 keys and re-profiles a key at most 8 times in its
/// life, so the pools are sized to stay under the first and rarely reach the second.
fn pool_key(prefix: &str, pool: usize, counter: &AtomicUsize) -> &'static str {
    static LEAKED: Mutex<Option<HashMap<String, &'static str>>> = Mutex::new(None);
    let n = counter.fetch_add(1, Ordering::Relaxed) % pool;
    let name = format!("shadow/{prefix}/{n}");
    let mut map = LEAKED.lock().unwrap_or_else(|e| e.into_inner());
    map.get_or_insert_with(HashMap::new)
        .entry(name.clone())
        .or_insert_with(|| Box::leak(name.into_boxed_str()))
}

/// The lanes of this run: none, but in the child of [`generated_programs_with_lanes`]
/// (`SHADOW_LANES`).
fn lanes() -> u64 {
    std::env::var("SHADOW_LANES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Whether keys get shape classes in this run: only in the child of
/// [`generated_programs_changing_shape_class`] (`SHADOW_CLASSES`). Elsewhere a key's
/// passes all use the key's own plan, which its counters are checked against.
fn classes() -> bool {
    std::env::var_os("SHADOW_CLASSES").is_some()
}

fn scaled(release: u32) -> u32 {
    let scale: u32 = std::env::var("SHADOW_CASES_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    (release / 4 * scale).max(1)
}

// ---------------------------------------------------------------------------------------
// Programs and divergences
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// A new buffer; `keep`: it outlives the pass.
    Alloc {
        size: usize,
        align: usize,
        zeroed: bool,
        keep: bool,
    },
    /// Frees the `pick % n`-th of the run's n live, not kept buffers (none: nothing).
    Free { pick: u16 },
    /// Reallocs the `pick % n`-th of the live, not kept buffers to `size`.
    Realloc { pick: u16, size: usize },
    /// An op scope (`name` indexes `NAMES`; `NAMES.len()` is a nested `pass()`).
    Op { name: u8, body: Vec<Step> },
    /// Panics (only ever inserted by a divergence).
    Panic,
}

#[derive(Clone, Debug)]
enum Mutation {
    SwapOps(u16),
    SkipOp(u16),
    RepeatOp(u16),
    Resize(u16, u8),
    ExtraAlloc(u16, u16, usize, usize),
    RemoveAlloc(u16),
    MoveFree(u16, bool),
    RaiseAlign(u16, u8),
    FlipKeep(u16),
    InsertPanic(u16, u16),
}

/// Which frees go to the worker thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum XFree {
    None,
    /// Every k-th free, waiting until the worker freed it.
    Sync(u8),
    /// Every k-th free, racing with the pass.
    Async(u8),
}

/// What happens to a run's kept buffers after its pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeepPolicy {
    AfterPass,
    OtherThread,
    DuringNextPass,
    EndOfCase,
}

#[derive(Clone, Debug)]
struct RunSpec {
    mutations: Vec<Mutation>,
    xfree: XFree,
    keep: KeepPolicy,
}

impl RunSpec {
    fn clean() -> RunSpec {
        RunSpec {
            mutations: Vec::new(),
            xfree: XFree::None,
            keep: KeepPolicy::AfterPass,
        }
    }
}

#[derive(Clone, Debug)]
struct Case {
    program: Vec<Step>,
    /// Replays after the profiled run; the first is always clean.
    runs: Vec<RunSpec>,
}

#[derive(Clone, Copy)]
struct Shape {
    /// Largest "large" size (0: none).
    large: usize,
    max_top: usize,
    width: usize,
    /// Keys in the test's pool.
    pool: usize,
}

fn size_strategy(shape: Shape) -> BoxedStrategy<usize> {
    if shape.large > 0 {
        prop_oneof![
            12 => 1usize..=64,
            6 => 65usize..=1024,
            2 => 1025usize..=16384,
            1 => 16385usize..=shape.large,
        ]
        .boxed()
    } else {
        prop_oneof![6 => 1usize..=64, 3 => 65usize..=1024, 1 => 1025usize..=8192].boxed()
    }
}

fn align_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => Just(1usize),
        3 => Just(8usize),
        4 => Just(16usize),
        2 => (5u32..=7).prop_map(|s| 1usize << s),
        1 => (8u32..=12).prop_map(|s| 1usize << s),
    ]
}

fn step_strategy(shape: Shape) -> impl Strategy<Value = Step> {
    let alloc = (
        size_strategy(shape),
        align_strategy(),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.08),
    )
        .prop_map(|(size, align, zeroed, keep)| Step::Alloc {
            size,
            align,
            zeroed,
            keep,
        });
    let leaf = prop_oneof![
        6 => alloc,
        4 => any::<u16>().prop_map(|pick| Step::Free { pick }),
        2 => (any::<u16>(), size_strategy(shape)).prop_map(|(pick, size)| Step::Realloc { pick, size }),
    ];
    let width = shape.width;
    leaf.prop_recursive(3, 40, width as u32, move |inner| {
        (0u8..=NAMES.len() as u8, vec(inner, 0..width))
            .prop_map(|(name, body)| Step::Op { name, body })
    })
}

fn mutation_strategy(shape: Shape) -> impl Strategy<Value = Mutation> {
    let s = any::<u16>();
    prop_oneof![
        1 => s.prop_map(Mutation::SwapOps),
        1 => s.prop_map(Mutation::SkipOp),
        1 => s.prop_map(Mutation::RepeatOp),
        2 => (s, any::<u8>()).prop_map(|(a, k)| Mutation::Resize(a, k)),
        1 => (s, s, size_strategy(shape), align_strategy())
            .prop_map(|(a, b, size, align)| Mutation::ExtraAlloc(a, b, size, align)),
        1 => s.prop_map(Mutation::RemoveAlloc),
        1 => (s, any::<bool>()).prop_map(|(a, e)| Mutation::MoveFree(a, e)),
        2 => (s, any::<u8>()).prop_map(|(a, k)| Mutation::RaiseAlign(a, k)),
        1 => s.prop_map(Mutation::FlipKeep),
        1 => (s, s).prop_map(|(a, b)| Mutation::InsertPanic(a, b)),
    ]
}

fn run_strategy(shape: Shape) -> impl Strategy<Value = RunSpec> {
    (
        prop_oneof![1 => Just(0usize), 2 => 1usize..=3],
        vec(mutation_strategy(shape), 3),
        prop_oneof![
            3 => Just(XFree::None),
            1 => (1u8..=3).prop_map(XFree::Sync),
            1 => (1u8..=3).prop_map(XFree::Async),
        ],
        prop_oneof![
            Just(KeepPolicy::AfterPass),
            Just(KeepPolicy::OtherThread),
            Just(KeepPolicy::DuringNextPass),
            Just(KeepPolicy::EndOfCase),
        ],
    )
        .prop_map(|(n, mut mutations, xfree, keep)| {
            mutations.truncate(n);
            RunSpec {
                mutations,
                xfree,
                keep,
            }
        })
}

fn case_strategy(shape: Shape) -> impl Strategy<Value = Case> {
    (
        vec(step_strategy(shape), 1..shape.max_top),
        vec(run_strategy(shape), 1..=4),
    )
        .prop_map(|(program, runs)| {
            let mut all = vec![RunSpec::clean()];
            all.extend(runs);
            Case { program, runs: all }
        })
}

/// Paths (child indices from the root) of the steps matching `pred`, in pre-order.
fn paths(prog: &[Step], pred: &dyn Fn(&[Step], usize) -> bool) -> Vec<Vec<usize>> {
    fn walk(
        v: &[Step],
        prefix: &mut Vec<usize>,
        pred: &dyn Fn(&[Step], usize) -> bool,
        out: &mut Vec<Vec<usize>>,
    ) {
        for i in 0..v.len() {
            prefix.push(i);
            if pred(v, i) {
                out.push(prefix.clone());
            }
            if let Step::Op { body, .. } = &v[i] {
                walk(body, prefix, pred, out);
            }
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    walk(prog, &mut Vec::new(), pred, &mut out);
    out
}

/// Paths of every step list: the root (`[]`) and each op's body.
fn containers(prog: &[Step]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    out.extend(paths(prog, &|v, i| matches!(v[i], Step::Op { .. })));
    out
}

fn list_at<'a>(prog: &'a mut Vec<Step>, path: &[usize]) -> &'a mut Vec<Step> {
    let mut v = prog;
    for &i in path {
        v = match &mut v[i] {
            Step::Op { body, .. } => body,
            _ => unreachable!("not an op"),
        };
    }
    v
}

fn pick<T>(v: &[T], sel: u16) -> Option<&T> {
    (!v.is_empty()).then(|| &v[sel as usize % v.len()])
}

fn step_at<'a>(prog: &'a mut Vec<Step>, path: &[usize]) -> &'a mut Step {
    let (last, parent) = path.split_last().expect("non-empty path");
    &mut list_at(prog, parent)[*last]
}

fn is_op(v: &[Step], i: usize) -> bool {
    matches!(v[i], Step::Op { .. })
}

fn is_alloc(v: &[Step], i: usize) -> bool {
    matches!(v[i], Step::Alloc { .. })
}

fn apply(prog: &mut Vec<Step>, m: &Mutation) {
    match *m {
        Mutation::SwapOps(sel) => {
            let c = paths(prog, &|v, i| {
                is_op(v, i) && i + 1 < v.len() && is_op(v, i + 1)
            });
            if let Some(p) = pick(&c, sel) {
                let (last, parent) = p.split_last().unwrap();
                list_at(prog, parent).swap(*last, *last + 1);
            }
        }
        Mutation::SkipOp(sel) | Mutation::RepeatOp(sel) => {
            let c = paths(prog, &is_op);
            if let Some(p) = pick(&c, sel) {
                let (last, parent) = p.split_last().unwrap();
                let list = list_at(prog, parent);
                if matches!(m, Mutation::SkipOp(_)) {
                    list.remove(*last);
                } else {
                    let op = list[*last].clone();
                    list.insert(*last + 1, op);
                }
            }
        }
        Mutation::Resize(sel, k) => {
            let c = paths(prog, &|v, i| {
                matches!(v[i], Step::Alloc { .. } | Step::Realloc { .. })
            });
            if let Some(p) = pick(&c, sel) {
                if let Step::Alloc { size, .. } | Step::Realloc { size, .. } = step_at(prog, p) {
                    *size = match k % 4 {
                        0 => *size * 2,
                        1 => *size * 4 + 7,
                        2 => (*size / 2).max(1),
                        _ => *size + 1,
                    }
                    .min(2 << 20);
                }
            }
        }
        Mutation::ExtraAlloc(sel, pos, size, align) => {
            let c = containers(prog);
            let list = list_at(prog, pick(&c, sel).unwrap());
            let at = pos as usize % (list.len() + 1);
            list.insert(
                at,
                Step::Alloc {
                    size,
                    align,
                    zeroed: false,
                    keep: false,
                },
            );
        }
        Mutation::RemoveAlloc(sel) => {
            let c = paths(prog, &is_alloc);
            if let Some(p) = pick(&c, sel) {
                let (last, parent) = p.split_last().unwrap();
                list_at(prog, parent).remove(*last);
            }
        }
        Mutation::MoveFree(sel, early) => {
            let c = paths(prog, &|v, i| matches!(v[i], Step::Free { .. }));
            if let Some(p) = pick(&c, sel) {
                let (last, parent) = p.split_last().unwrap();
                let f = list_at(prog, parent).remove(*last);
                if early {
                    list_at(prog, parent).insert(0, f);
                } else {
                    prog.push(f);
                }
            }
        }
        Mutation::RaiseAlign(sel, k) => {
            let c = paths(prog, &is_alloc);
            if let Some(p) = pick(&c, sel) {
                if let Step::Alloc { align, .. } = step_at(prog, p) {
                    *align = (*align).max(1 << (5 + k % 9));
                }
            }
        }
        Mutation::FlipKeep(sel) => {
            let c = paths(prog, &is_alloc);
            if let Some(p) = pick(&c, sel) {
                if let Step::Alloc { keep, .. } = step_at(prog, p) {
                    *keep = !*keep;
                }
            }
        }
        Mutation::InsertPanic(sel, pos) => {
            let c = containers(prog);
            let list = list_at(prog, pick(&c, sel).unwrap());
            let at = pos as usize % (list.len() + 1);
            list.insert(at, Step::Panic);
        }
    }
}

fn variant(program: &[Step], spec: &RunSpec) -> Vec<Step> {
    let mut v = program.to_vec();
    for m in &spec.mutations {
        apply(&mut v, m);
    }
    v
}

/// Whether the mutations leave the data the program reads unchanged.
fn same_semantics(spec: &RunSpec) -> bool {
    spec.mutations
        .iter()
        .all(|m| matches!(m, Mutation::RaiseAlign(..)))
}

// ---------------------------------------------------------------------------------------
// Execution
// ---------------------------------------------------------------------------------------

/// A message to the worker thread: free `block`; acknowledge on `ack` if given.
type Msg = (Block, Option<SyncSender<()>>);

struct Worker {
    tx: Sender<Msg>,
}

impl Worker {
    /// `block` must be verified and unregistered already.
    fn free(&self, block: Block, sync: bool) {
        if sync {
            let (atx, arx) = sync_channel(1);
            self.tx.send((block, Some(atx))).expect("worker alive");
            arx.recv().expect("worker freed the block");
        } else {
            self.tx.send((block, None)).expect("worker alive");
        }
    }
}

/// Hands `b` to the worker: the owner verifies it and gives it up first.
fn hand_off(worker: &Worker, b: Block, sync: bool) -> u64 {
    let d = b.verify(b.size, "free (hand-off)");
    shadow_support::unregister(&b);
    worker.free(b, sync);
    d
}

/// One execution of a program.
struct Exec<'w> {
    a: &'static Alloc,
    worker: Option<&'w Worker>,
    xfree: XFree,
    /// Live buffers of this run in allocation order, with their `keep` flag.
    live: Vec<(Block, bool)>,
    next_label: u64,
    /// Order-independent sum of the digests of everything read back.
    sum: u64,
    allocs: u64,
    /// Of `allocs`, the large blocks a profiled or interim pass took from the region.
    own: u64,
    frees: u64,
    /// Kept buffers of the previous run, freed inside this pass after its first step.
    carried: Vec<(usize, Block)>,
    /// Digests of `carried` blocks, for their runs.
    carried_sums: Vec<(usize, u64)>,
}

impl Exec<'_> {
    fn release(&mut self, b: Block) {
        self.frees += 1;
        let d = match (self.xfree, self.worker) {
            (XFree::Sync(k), Some(w)) if self.frees % k as u64 == 0 => hand_off(w, b, true),
            (XFree::Async(k), Some(w)) if self.frees % k as u64 == 0 => hand_off(w, b, false),
            _ => shadow_support::free(self.a, b),
        };
        self.sum = self.sum.wrapping_add(d);
    }

    fn choose(&self, sel: u16) -> Option<usize> {
        let n = self.live.iter().filter(|(_, k)| !k).count();
        if n == 0 {
            return None;
        }
        let want = sel as usize % n;
        self.live
            .iter()
            .enumerate()
            .filter(|(_, (_, k))| !k)
            .nth(want)
            .map(|(i, _)| i)
    }

    fn exec(&mut self, steps: &[Step], top: bool) {
        for (i, s) in steps.iter().enumerate() {
            match s {
                &Step::Alloc {
                    size,
                    align,
                    zeroed,
                    keep,
                } => {
                    let label = self.next_label;
                    self.next_label += 1;
                    let b = shadow_support::alloc(self.a, size, align, zeroed, label);
                    self.allocs += 1;
                    self.own += memo_alloc::testing::is_own_block(b.ptr as *const u8) as u64;
                    self.live.push((b, keep));
                }
                &Step::Free { pick } => {
                    if let Some(i) = self.choose(pick) {
                        let (b, _) = self.live.remove(i);
                        self.release(b);
                    }
                }
                &Step::Realloc { pick, size } => {
                    if let Some(i) = self.choose(pick) {
                        let b = self.live[i].0.clone();
                        let (nb, d) = shadow_support::realloc(self.a, b, size);
                        self.live[i].0 = nb;
                        self.sum = self.sum.wrapping_add(d);
                    }
                }
                Step::Op { name, body } if *name as usize == NAMES.len() => {
                    // A pass inside a pass is a scope (outside a pass, a pass of its own).
                    let _inner = memo_alloc::pass("shadow/inner");
                    self.exec(body, false);
                }
                Step::Op { name, body } => {
                    let _op = memo_alloc::op(NAMES[*name as usize]);
                    self.exec(body, false);
                }
                Step::Panic => std::panic::panic_any(Injected),
            }
            if top && i == 0 {
                self.free_carried();
            }
        }
    }

    fn free_carried(&mut self) {
        for (run, b) in std::mem::take(&mut self.carried) {
            let d = shadow_support::free(self.a, b);
            self.carried_sums.push((run, d));
        }
    }

    /// The pass body: the program, then every remaining buffer that is not kept.
    fn body(&mut self, program: &[Step]) {
        self.exec(program, true);
        self.free_carried();
        while let Some(i) = self.live.iter().position(|(_, k)| !k) {
            let (b, _) = self.live.remove(i);
            self.release(b);
        }
    }
}

struct Outcome {
    sum: u64,
    allocs: u64,
    own: u64,
    panicked: bool,
    kept: Vec<Block>,
    carried_sums: Vec<(usize, u64)>,
}

/// Runs `program` once, in a pass of `key` or (for `None`) outside any pass; frees what a
/// panic left behind.
fn execute(
    a: &'static Alloc,
    key: Option<&'static str>,
    program: &[Step],
    worker: Option<&Worker>,
    xfree: XFree,
    carried: Vec<(usize, Block)>,
) -> Outcome {
    let mut ex = Exec {
        a,
        worker,
        xfree,
        live: Vec::new(),
        next_label: 0,
        sum: 0,
        allocs: 0,
        own: 0,
        frees: 0,
        carried,
        carried_sums: Vec::new(),
    };
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _pass = key.map(memo_alloc::pass);
        ex.body(program);
    }));
    let panicked = match r {
        Ok(()) => false,
        Err(e) if e.is::<Injected>() => true,
        Err(e) => std::panic::resume_unwind(e),
    };
    // After a panic: the pass is over; free what the program still held, outside it.
    ex.free_carried();
    let mut kept = Vec::new();
    for (b, keep) in std::mem::take(&mut ex.live) {
        if keep {
            kept.push(b);
        } else {
            let d = shadow_support::free(a, b);
            ex.sum = ex.sum.wrapping_add(d);
        }
    }
    Outcome {
        sum: ex.sum,
        allocs: ex.allocs,
        own: ex.own,
        panicked,
        kept,
        carried_sums: ex.carried_sums,
    }
}

fn misses(r: &PassReport, before: &PassReport, reason: MissReason) -> u64 {
    r.misses_by_reason.get(reason) - before.misses_by_reason.get(reason)
}

/// Per-test totals, checked after all cases.
#[derive(Default)]
struct Totals {
    cases: AtomicUsize,
    /// Runs the plan cache kept on the backend.
    on_backend: AtomicUsize,
    exact_replays: AtomicUsize,
    slab_hits: AtomicUsize,
    evicted: AtomicUsize,
    allocations: AtomicUsize,
    misses: [AtomicUsize; 7],
    panicked: AtomicUsize,
    reprofiled: AtomicUsize,
    diverged: AtomicUsize,
    max_allocations: AtomicUsize,
}

/// Runs one generated case: profile the program, replay the variants, check everything.
fn check_case(
    a: &'static Alloc,
    prefix: &str,
    shape: Shape,
    keys: &AtomicUsize,
    totals: &Totals,
    case: &Case,
) -> Result<(), TestCaseError> {
    init();
    let _shared = CHURN.read().unwrap_or_else(|e| e.into_inner());
    let key = pool_key(prefix, shape.pool, keys);
    if let Some(r) = memo_alloc::report(key) {
        prop_assert!(
            r.state == PlanState::Unplanned,
            "reused key {key} still has a plan: {r:?}"
        );
    }
    totals.cases.fetch_add(1, Ordering::Relaxed);
    let nroot = paths(&case.program, &is_alloc).len();
    std::thread::scope(|s| -> Result<(), TestCaseError> {
        let (tx, rx) = channel::<Msg>();
        let worker_thread = s.spawn(move || {
            for (b, ack) in rx {
                shadow_support::free_unregistered(a, &b);
                if let Some(ack) = ack {
                    let _ = ack.send(());
                }
            }
        });
        let worker = Worker { tx };
        let mut sums: Vec<u64> = Vec::new();
        let mut expected: Vec<(usize, u64, &'static str)> = Vec::new();
        let mut carried: Vec<(usize, Block)> = Vec::new();
        let mut end_of_case: Vec<Block> = Vec::new();
        let mut baseline: Vec<Step> = case.program.clone();
        let mut plan_from_case = false;
        let specs = std::iter::once(RunSpec::clean()).chain(case.runs.iter().cloned());
        for (run, spec) in specs.enumerate() {
            let prog = if run == 0 {
                case.program.clone()
            } else {
                variant(&case.program, &spec)
            };
            // The same program outside any pass: what its checksum must be.
            let oracle = execute(a, None, &prog, None, XFree::None, Vec::new());
            let mut oracle_sum = oracle.sum;
            for b in oracle.kept {
                oracle_sum = oracle_sum.wrapping_add(shadow_support::free(a, b));
            }
            let r0 = memo_alloc::report(key).unwrap_or_default();
            let c0 = a.backend().counts();
            let out = execute(
                a,
                Some(key),
                &prog,
                Some(&worker),
                spec.xfree,
                std::mem::take(&mut carried),
            );
            let c = a.backend().counts().since(&c0);
            let r = memo_alloc::report(key).expect("a pass ran");
            sums.push(out.sum);
            for (owner, d) in out.carried_sums {
                sums[owner] = sums[owner].wrapping_add(d);
            }
            expected.push((run, oracle_sum, "the same program outside a pass"));
            if run > 0 && same_semantics(&spec) && !out.panicked {
                // expected[0]: the profiled run's (equal to its oracle's, checked below).
                expected.push((run, expected[0].1, "the profiled run"));
            }
            match spec.keep {
                _ if out.kept.is_empty() => {}
                KeepPolicy::AfterPass => {
                    for b in out.kept {
                        sums[run] = sums[run].wrapping_add(shadow_support::free(a, b));
                    }
                }
                KeepPolicy::OtherThread => {
                    for b in out.kept {
                        sums[run] = sums[run].wrapping_add(hand_off(&worker, b, false));
                    }
                }
                KeepPolicy::DuringNextPass => {
                    carried.extend(out.kept.into_iter().map(|b| (run, b)));
                }
                KeepPolicy::EndOfCase => {
                    // Read now, verified again and freed at the end of the case.
                    for b in out.kept {
                        sums[run] = sums[run].wrapping_add(b.verify(b.size, "kept buffer"));
                        end_of_case.push(b);
                    }
                }
            }

            if classes() {
                // A pass may have been profiled or replayed by a shape class of the key,
                // `<key>#<n>`, or begun on the backend before its class was known: its
                // blocks and checksums are checked, not the key's counters.
                continue;
            }
            // The counters.
            let profiled = r.passes_profiled - r0.passes_profiled;
            let replayed = r.passes_replayed - r0.passes_replayed;
            let backend = r.passes_backend - r0.passes_backend;
            prop_assert_eq!(
                profiled + replayed + backend,
                1,
                "run {} of {}: {:?} -> {:?}",
                run,
                key,
                r0,
                r
            );
            if backend == 1 {
                // The plan cache refused the key (the concurrent tests keep it full of
                // plans in use) or evicted its plan: the backend served everything and
                // nothing counted as a hit or a miss. A later run may be profiled.
                prop_assert!(
                    r.admissions_refused > r0.admissions_refused || r0.state != PlanState::Planned,
                    "run {} ran on the backend with a plan: {:?}",
                    run,
                    r
                );
                prop_assert_eq!(r.slab_hits, r0.slab_hits);
                prop_assert_eq!(r.misses_by_reason, r0.misses_by_reason);
                prop_assert_eq!(
                    c.fresh() + out.own,
                    out.allocs,
                    "the backend served all but the large blocks"
                );
                totals.on_backend.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let hits = r.slab_hits - r0.slab_hits;
            let miss: Vec<u64> = MissReason::ALL
                .iter()
                .map(|&m| misses(&r, &r0, m))
                .collect();
            let grow = miss[MissReason::ReallocGrow as usize];
            for (t, &m) in totals.misses.iter().zip(&miss) {
                t.fetch_add(m as usize, Ordering::Relaxed);
            }
            totals
                .allocations
                .fetch_add(out.allocs as usize, Ordering::Relaxed);
            totals
                .max_allocations
                .fetch_max(out.allocs as usize, Ordering::Relaxed);
            totals
                .panicked
                .fetch_add(out.panicked as usize, Ordering::Relaxed);
            if run > 0 && prog != case.program {
                totals.diverged.fetch_add(1, Ordering::Relaxed);
            }
            if run > 0 && profiled == 1 {
                totals.reprofiled.fetch_add(1, Ordering::Relaxed);
            }
            if profiled == 1 {
                if run == 0 {
                    // The plan summary is written before publication: eviction-proof.
                    prop_assert_eq!(
                        (r.planned + r.escaping + r.lane_requests) as usize,
                        nroot,
                        "every allocation key is planned, escaping or in a lane: {:?}",
                        r
                    );
                } else if run == 1 {
                    // Only an eviction of the key (under heavy preemption) re-profiles here.
                    prop_assert_eq!(
                        r0.state,
                        PlanState::Unplanned,
                        "run 1 was profiled: {:?}",
                        r
                    );
                    totals.evicted.fetch_add(1, Ordering::Relaxed);
                }
                prop_assert_eq!(hits, 0, "a profiled pass hit the slab");
                prop_assert_eq!(miss.iter().sum::<u64>(), 0);
                prop_assert_eq!(
                    c.fresh() + out.own,
                    out.allocs,
                    "profiled pass: the backend serves all but the large blocks"
                );
                if !out.panicked {
                    baseline = prog.clone();
                    plan_from_case = true;
                }
            } else {
                prop_assert!(
                    plan_from_case,
                    "run {} replayed a plan of another program",
                    run
                );
                let total_miss: u64 = miss.iter().sum();
                prop_assert_eq!(
                    hits + total_miss - grow,
                    out.allocs,
                    "run {}: hits and misses account for every allocation: {:?}",
                    run,
                    miss
                );
                prop_assert_eq!(
                    c.fresh(),
                    out.allocs - hits + grow,
                    "run {}: the backend served exactly the misses",
                    run
                );
                totals.slab_hits.fetch_add(hits as usize, Ordering::Relaxed);
                let exact =
                    prog == baseline && !matches!(spec.xfree, XFree::Async(_)) && !out.panicked;
                if exact {
                    totals.exact_replays.fetch_add(1, Ordering::Relaxed);
                    // Slots demoted by earlier runs (their blocks outlived two passes) are
                    // served by the backend, as escapes. A lane request misses (overlap)
                    // only when its class is full, which blocks kept from earlier replays
                    // can make it; never in the first replay. A lane request's realloc
                    // past its cell moves to the backend (`grow`, not an allocation).
                    let escapes = r.escaping + r.slots_demoted;
                    let full = miss[MissReason::Overlap as usize];
                    prop_assert_eq!(
                        (hits + full, miss[MissReason::Escaping as usize]),
                        (r.planned - r.slots_demoted + r.lane_requests, escapes),
                        "run {}: an un-diverged replay hits every planned slot and cell: {:?} {:?}",
                        run,
                        miss,
                        r
                    );
                    prop_assert!(run > 1 || full == 0, "run 1 found a class full: {:?}", r);
                    prop_assert_eq!(
                        total_miss - grow,
                        escapes + full,
                        "only escapes miss: {:?}",
                        miss
                    );
                }
            }
        }
        for b in end_of_case {
            shadow_support::free(a, b);
        }
        for (run, b) in std::mem::take(&mut carried) {
            sums[run] = sums[run].wrapping_add(shadow_support::free(a, b));
        }
        drop(worker);
        worker_thread.join().expect("worker thread");
        for (run, want, what) in expected {
            prop_assert_eq!(
                sums[run],
                want,
                "run {}: checksum differs from {}",
                run,
                what
            );
        }
        Ok(())
    })
}

fn run_proptest(a: &'static Alloc, prefix: &str, shape: Shape, cases: u32) {
    init();
    let keys = AtomicUsize::new(0);
    let totals = Totals::default();
    let mut runner = TestRunner::new(PtConfig {
        cases,
        max_shrink_iters: 2000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/shadow.proptest-regressions",
        ))),
        ..PtConfig::default()
    });
    let result = runner.run(&case_strategy(shape), |case| {
        check_case(a, prefix, shape, &keys, &totals, &case)
    });
    if let Err(e) = result {
        panic!("{prefix}: {e}");
    }
    let get = |a: &AtomicUsize| a.load(Ordering::Relaxed);
    let n = get(&totals.cases);
    let exact = get(&totals.exact_replays);
    let evicted = get(&totals.evicted);
    let misses: Vec<(&str, usize)> = MissReason::ALL
        .iter()
        .map(|&m| (m.name(), get(&totals.misses[m as usize])))
        .collect();
    eprintln!(
        "{prefix}: {n} programs, {} allocations in passes (at most {} in one), {} diverged runs, {exact} exact \
         replays, {} slab hits, misses {misses:?}, {} panics, {} re-profiles, {evicted} evicted, \
         {} runs kept on the backend by the plan cache",
        get(&totals.allocations),
        get(&totals.max_allocations),
        get(&totals.diverged),
        get(&totals.slab_hits),
        get(&totals.panicked),
        get(&totals.reprofiled),
        get(&totals.on_backend),
    );
    assert!(n >= cases as usize);
    if classes() {
        return; // the counters are the classes' (see `check_case`)
    }
    assert!(
        get(&totals.on_backend) * 50 <= n,
        "the plan cache kept {} runs of {n} programs on the backend",
        get(&totals.on_backend)
    );
    assert!(
        exact >= n / 2,
        "too few un-diverged replays: {exact} of {n}"
    );
    assert!(get(&totals.slab_hits) > 0, "no slab hits");
    assert!(evicted * 100 <= n, "{evicted} of {n} keys evicted mid-case");
    if n >= 1000 {
        // The generator reaches every kind of divergence the allocator can observe.
        for (name, count) in &misses {
            assert!(
                *name == "no_slab" || *count > 0,
                "no {name} misses: {misses:?}"
            );
        }
        assert!(get(&totals.panicked) > 0);
        // With lanes most of these small programs' divergences are lane requests, which
        // take cells (and their escapes go to the backend, as the profile saw them): a
        // run re-profiles 0-10 keys, and re-profiling is covered by the runs without.
        assert!(lanes() > 0 || get(&totals.reprofiled) > 0);
    }
}

/// The generated programs again, with lanes of 256 bytes (half the cases: lanes are the
/// allocator's default), in a child process: requests up to 256 bytes replay from lane
/// cells, the larger ones from slots, side by side. (The hand-made tests pin slot
/// mechanics and run without lanes.)
#[test]
fn generated_programs_with_lanes() {
    if lanes() > 0 {
        return; // the child itself
    }
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "generated_programs_with_divergences",
            "generated_small_programs_with_divergences",
            "--nocapture",
        ])
        .env("SHADOW_LANES", "256")
        .env("SHADOW_CASES_SCALE", "2")
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("2 passed"),
        "with lanes ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stderr.contains("slab hits"), "{stderr}");
}

/// The generated programs again with shape classes (half the cases), in a child
/// process: the divergences that change a program's first sizes found classes of its
/// key, route its passes to them and replace them, and no block overlaps another
/// whichever class serves it; the passes changing shape class among a few shapes of one
/// key (`passes_changing_shape_class_never_overlap`) run there too.
#[test]
fn generated_programs_changing_shape_class() {
    if lanes() > 0 || classes() {
        return; // a child
    }
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "generated_programs_with_divergences",
            "generated_small_programs_with_divergences",
            "passes_changing_shape_class_never_overlap",
            "--nocapture",
        ])
        .env("SHADOW_CLASSES", "1")
        .env("SHADOW_CASES_SCALE", "2")
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("3 passed"),
        "with shape classes ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

#[test]
fn generated_programs_with_divergences() {
    let shape = Shape {
        large: 1 << 20,
        max_top: 12,
        width: 6,
        pool: 1024,
    };
    run_proptest(&MAIN, "main", shape, scaled(8000));
}

#[test]
fn generated_small_programs_with_divergences() {
    let shape = Shape {
        large: 0,
        max_top: 12,
        width: 4,
        pool: 512,
    };
    run_proptest(&SMALL, "small", shape, scaled(4000));
}

/// The long run: `SHADOW_LONG_CASES` programs (default 500,000).
#[test]
#[ignore = "long: run with --ignored (see the file's doc comment)"]
fn generated_programs_long() {
    let cases = std::env::var("SHADOW_LONG_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500_000);
    let shape = Shape {
        large: 1 << 20,
        max_top: 10,
        width: 6,
        pool: 1536,
    };
    run_proptest(&LONG, "long", shape, cases);
}

// ---------------------------------------------------------------------------------------
// Hand-made divergences with a known miss reason
// ---------------------------------------------------------------------------------------

fn missed(d: &(PassReport, PassReport), reason: MissReason) -> u64 {
    misses(&d.1, &d.0, reason)
}

fn all_misses(d: &(PassReport, PassReport)) -> u64 {
    MissReason::ALL.iter().map(|&m| missed(d, m)).sum()
}

fn replayed(d: &(PassReport, PassReport)) -> bool {
    d.1.passes_replayed == d.0.passes_replayed + 1
}

fn hand_lock() -> std::sync::RwLockWriteGuard<'static, ()> {
    init();
    CHURN.write().unwrap_or_else(|e| e.into_inner())
}

use shadow_support::{alloc as talloc, free as tfree, realloc as trealloc};

#[test]
fn grown_size_misses_too_large() {
    let _w = hand_lock();
    let key = "shadow/hand/too-large";
    let run = |size: usize| {
        let _p = memo_alloc::pass(key);
        let b = {
            let _o = memo_alloc::op("conv");
            talloc(&HAND, size, 16, false, 1)
        };
        tfree(&HAND, b);
    };
    run(64);
    let d = delta(key, || run(64));
    assert!(
        replayed(&d) && hits(&d) == 1 && all_misses(&d) == 0,
        "{d:?}"
    );
    let d = delta(key, || run(65));
    assert_eq!(
        (hits(&d), missed(&d, MissReason::TooLarge)),
        (0, 1),
        "{d:?}"
    );
    assert_eq!(all_misses(&d), 1);
    // Far smaller than planned: more likely an insertion; a miss that moves nothing.
    let d = delta(key, || run(8));
    assert_eq!(
        (hits(&d), missed(&d, MissReason::Unplanned)),
        (0, 1),
        "{d:?}"
    );
}

/// A pass of a smaller shape than its plan's (a bucket's): its first request probes, the
/// next confirms, and the rest take their slots in place.
#[test]
fn a_smaller_shape_replays_from_the_larger_plan() {
    let _w = hand_lock();
    let key = "shadow/hand/smaller-shape";
    let run = |scale: usize| {
        let _p = memo_alloc::pass(key);
        for (i, size) in [4096usize, 1024, 8192, 2048, 4096, 512]
            .into_iter()
            .enumerate()
        {
            let _o = memo_alloc::op(NAMES[i % NAMES.len()]);
            let b = talloc(&HAND, size * scale / 4, 16, false, i as u64);
            tfree(&HAND, b);
        }
    };
    run(4);
    let d = delta(key, || run(4));
    assert_eq!((hits(&d), all_misses(&d)), (6, 0), "{d:?}");
    let d = delta(key, || run(3)); // three quarters of the planned sizes
    assert_eq!((hits(&d), all_misses(&d)), (5, 1), "{d:?}");
}

#[test]
fn raised_alignment_misses_alignment() {
    let _w = hand_lock();
    let key = "shadow/hand/alignment";
    let run = |align_x: usize, align_y: usize| {
        let _p = memo_alloc::pass(key);
        let _o = memo_alloc::op("conv");
        let x = talloc(&HAND, 16, align_x, false, 1);
        let y = talloc(&HAND, 16, align_y, false, 2);
        tfree(&HAND, x);
        tfree(&HAND, y);
    };
    run(16, 16);
    let r = memo_alloc::report(key).unwrap();
    assert_eq!(
        r.height, 32,
        "x and y side by side: one of them at offset 16: {r:?}"
    );
    let d = delta(key, || run(16, 16));
    assert_eq!((hits(&d), all_misses(&d)), (2, 0), "{d:?}");
    // The slot at offset 16 guarantees 16 bytes, the one at offset 0 the slab base's 2 MiB.
    let d = delta(key, || run(32, 32));
    assert_eq!(
        (hits(&d), missed(&d, MissReason::Alignment), all_misses(&d)),
        (1, 1, 1),
        "{d:?}"
    );
    // Beyond any slot's alignment (slab bases are 2 MiB-aligned).
    let d = delta(key, || run(4 << 20, 16));
    assert_eq!(missed(&d, MissReason::Alignment), 1, "{d:?}");
    assert_eq!(hits(&d), 1, "{d:?}");
}

#[test]
fn extra_allocations_and_unknown_ops_miss_unplanned() {
    let _w = hand_lock();
    let key = "shadow/hand/unplanned";
    let run = |extra: bool| {
        let _p = memo_alloc::pass(key);
        let mut bs = Vec::new();
        {
            let _o = memo_alloc::op("conv");
            bs.push(talloc(&HAND, 64, 8, false, 1));
            if extra {
                bs.push(talloc(&HAND, 64, 8, false, 2)); // ordinal 1: not in the plan
            }
        }
        if extra {
            let _o = memo_alloc::op("conv"); // a second occurrence: not in the plan
            bs.push(talloc(&HAND, 64, 8, false, 3));
            let _p = memo_alloc::op("pool"); // an op the plan never saw
            bs.push(talloc(&HAND, 64, 8, false, 4));
        }
        for b in bs {
            tfree(&HAND, b);
        }
    };
    run(false);
    let d = delta(key, || run(false));
    assert_eq!((hits(&d), all_misses(&d)), (1, 0), "{d:?}");
    let d = delta(key, || run(true));
    assert_eq!(hits(&d), 1, "{d:?}");
    assert_eq!(missed(&d, MissReason::Unplanned), 3, "{d:?}");
    assert_eq!(all_misses(&d), 3, "{d:?}");
}

#[test]
fn reordered_op_keeping_a_slot_live_misses_overlap() {
    let _w = hand_lock();
    let key = "shadow/hand/overlap";
    // Profiled: op a allocates and frees x; then op b allocates and frees y (zeroed).
    // x and y never coexist, so they share offset 0.
    {
        let _p = memo_alloc::pass(key);
        let x = {
            let _o = memo_alloc::op("a");
            talloc(&HAND, 1024, 16, false, 1)
        };
        tfree(&HAND, x);
        let y = {
            let _o = memo_alloc::op("b");
            talloc(&HAND, 1024, 16, true, 2)
        };
        tfree(&HAND, y);
    }
    let r = memo_alloc::report(key).unwrap();
    assert_eq!(
        (r.planned, r.height),
        (2, 1024),
        "x and y share memory: {r:?}"
    );
    // Replayed in order: both from the slab, and y (zeroed) sees zeros where x's pattern was.
    let d = delta(key, || {
        let _p = memo_alloc::pass(key);
        let x = {
            let _o = memo_alloc::op("a");
            talloc(&HAND, 1024, 16, false, 1)
        };
        let at = x.ptr;
        tfree(&HAND, x);
        let y = {
            let _o = memo_alloc::op("b");
            talloc(&HAND, 1024, 16, true, 2)
        };
        assert_eq!(y.ptr, at, "y reuses x's slot");
        tfree(&HAND, y);
    });
    assert_eq!((hits(&d), all_misses(&d)), (2, 0), "{d:?}");
    // Reordered: op b runs first and its buffer is still live when op a allocates.
    let d = delta(key, || {
        let _p = memo_alloc::pass(key);
        let y = {
            let _o = memo_alloc::op("b");
            talloc(&HAND, 1024, 16, true, 2)
        };
        let x = {
            let _o = memo_alloc::op("a");
            talloc(&HAND, 1024, 16, false, 1)
        };
        tfree(&HAND, x);
        tfree(&HAND, y);
    });
    assert_eq!(hits(&d), 1, "{d:?}");
    assert_eq!(missed(&d, MissReason::Overlap), 1, "{d:?}");
    assert_eq!(all_misses(&d), 1, "{d:?}");
}

#[test]
fn realloc_beyond_its_slot_moves_to_the_backend_with_its_contents() {
    let _w = hand_lock();
    let key = "shadow/hand/realloc";
    let run = |grow_to: usize| {
        let _p = memo_alloc::pass(key);
        let _o = memo_alloc::op("concat");
        let b = talloc(&HAND, 64, 8, false, 1);
        let (b, _) = trealloc(&HAND, b, 256);
        let (b, _) = trealloc(&HAND, b, 32);
        let (b, _) = trealloc(&HAND, b, grow_to);
        tfree(&HAND, b);
    };
    run(200);
    let c0 = HAND.backend().counts();
    let d = delta(key, || run(200));
    let c = HAND.backend().counts().since(&c0);
    assert_eq!((hits(&d), all_misses(&d)), (1, 0), "{d:?}");
    assert_eq!(
        (c.fresh(), c.reallocs),
        (0, 0),
        "in place in the slot: {c:?}"
    );
    let c0 = HAND.backend().counts();
    let d = delta(key, || run(4096));
    let c = HAND.backend().counts().since(&c0);
    assert_eq!(hits(&d), 1, "{d:?}");
    assert_eq!(missed(&d, MissReason::ReallocGrow), 1, "{d:?}");
    assert_eq!(c.fresh(), 1, "moved to the backend: {c:?}");
}

#[test]
fn backend_failures_return_null() {
    let _w = hand_lock();
    let key = "shadow/hand/null";
    let run = |size: usize| {
        let _p = memo_alloc::pass(key);
        let _o = memo_alloc::op("conv");
        let b = talloc(&HAND, size, 8, false, 1);
        tfree(&HAND, b);
    };
    run(64);
    // A miss (too large) whose backend call fails: null, no panic.
    {
        let _p = memo_alloc::pass(key);
        let _o = memo_alloc::op("conv");
        HAND.backend().fail_next(1);
        let layout = Layout::from_size_align(4096, 8).unwrap();
        // SAFETY: non-zero size.
        let p = unsafe { HAND.alloc(layout) };
        HAND.backend().fail_next(0);
        assert!(p.is_null());
    }
    // A slab block whose realloc needs the backend, which fails: null, and the block is
    // still intact and freeable.
    {
        let _p = memo_alloc::pass(key);
        let _o = memo_alloc::op("conv");
        let b = talloc(&HAND, 64, 8, false, 1);
        HAND.backend().fail_next(1);
        let layout = Layout::from_size_align(64, 8).unwrap();
        // SAFETY: `b` is live with this layout.
        let p = unsafe { HAND.realloc(b.ptr as *mut u8, layout, 1 << 20) };
        HAND.backend().fail_next(0);
        assert!(p.is_null());
        tfree(&HAND, b);
    }
    let d = delta(key, || run(64));
    assert_eq!(hits(&d), 1, "{d:?}");
}

#[test]
fn slab_blocks_freed_on_other_threads_and_after_their_pass() {
    let _w = hand_lock();
    let key = "shadow/hand/threads";
    let run = |xthread: bool, keep: bool, carried: Option<Block>| -> Option<Block> {
        let _p = memo_alloc::pass(key);
        let _o = memo_alloc::op("conv");
        let a = talloc(&HAND, 256, 16, false, 1);
        let b = talloc(&HAND, 256, 16, false, 2);
        if let Some(c) = carried {
            tfree(&HAND, c); // a slab block of the previous pass, freed in this one
        }
        if xthread {
            // `a` is freed on another thread while the pass goes on.
            a.verify(a.size, "hand-off");
            shadow_support::unregister(&a);
            std::thread::scope(|s| {
                s.spawn(|| shadow_support::free_unregistered(&HAND, &a));
            });
        } else {
            tfree(&HAND, a);
        }
        let c = talloc(&HAND, 256, 16, false, 3);
        tfree(&HAND, c);
        if keep {
            Some(b)
        } else {
            tfree(&HAND, b);
            None
        }
    };
    // Profiled with every free on the pass's thread (a free elsewhere would be unseen and
    // make `a` escape).
    run(false, false, None);
    let d = delta(key, || assert!(run(true, false, None).is_none()));
    assert_eq!((hits(&d), all_misses(&d)), (3, 0), "{d:?}");
    // `b` outlives its pass: still a slab block, freed during the next pass.
    let mut kept = None;
    let d = delta(key, || kept = run(true, true, None));
    assert_eq!((hits(&d), all_misses(&d)), (3, 0), "{d:?}");
    let d = delta(key, || assert!(run(true, false, kept.take()).is_none()));
    assert_eq!((hits(&d), all_misses(&d)), (3, 0), "{d:?}");
    assert!(
        d.1.slab_instances >= 2,
        "a second slab while b lived: {:?}",
        d.1
    );
}

#[test]
fn slab_blocks_outliving_their_passes_are_demoted_not_pooled() {
    let _w = hand_lock();
    let key = "shadow/hand/outliving";
    let run = |keep: bool| -> Option<Block> {
        let _p = memo_alloc::pass(key);
        let _o = memo_alloc::op("conv");
        let b = talloc(&HAND, 64, 8, false, 1);
        if keep {
            return Some(b);
        }
        tfree(&HAND, b);
        None
    };
    run(false);
    // Each replay keeps its block past its pass. The first two pin their instances (the
    // pool prefers drained ones); then the slot is demoted to the backend, so later passes
    // pin nothing and the pool does not grow: no pass ever lacks a slab.
    let mut kept = Vec::new();
    let d = delta(key, || {
        for _ in 0..300 {
            kept.push(run(true).unwrap());
        }
    });
    assert_eq!(hits(&d), 2, "two passes kept slab blocks: {d:?}");
    assert_eq!(missed(&d, MissReason::Escaping), 298, "then demoted: {d:?}");
    assert_eq!(missed(&d, MissReason::NoSlab), 0, "{d:?}");
    assert_eq!(d.1.slots_demoted, 1, "{d:?}");
    assert_eq!(d.1.instances_pinned, 2, "{d:?}");
    assert_eq!(d.1.slab_instances, 3, "{d:?}");
    for b in kept {
        tfree(&HAND, b);
    }
    // Once freed, the pinned instances are drained again; the slot stays demoted.
    let d = delta(key, || assert!(run(false).is_none()));
    assert_eq!(
        (hits(&d), missed(&d, MissReason::Escaping)),
        (0, 1),
        "{d:?}"
    );
    assert_eq!(d.1.slab_instances, 3);
}

/// The key of program `i` of [`concurrent_passes_of_one_key_free_each_others_blocks`]:
/// kept in a static rather than leaked, so that a LeakSanitizer run of this binary reports
/// only what the allocator leaks (the registry copies a key's name; nothing keeps a leaked
/// box reachable).
fn concurrent_key(i: usize) -> &'static str {
    static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    &KEYS.get_or_init(|| (0..24).map(|i| format!("shadow/concurrent/{i}")).collect())[i]
}

/// Several threads replay the same keys at once (one slab per concurrent pass), and free
/// each other's kept blocks in the middle of their own passes.
#[test]
fn concurrent_passes_of_one_key_free_each_others_blocks() {
    let _w = hand_lock();
    let shape = Shape {
        large: 1 << 16,
        max_top: 10,
        width: 5,
        pool: 0,
    };
    let threads = 3;
    let rounds = if cfg!(debug_assertions) { 10 } else { 40 };
    let mut runner = TestRunner::deterministic();
    let strategy = case_strategy(shape);
    let hits0 = memo_alloc::stats().slab_hits;
    for program in 0..24 {
        let case = strategy.new_tree(&mut runner).unwrap().current();
        let key = concurrent_key(program);
        // Profile on this thread.
        let out = execute(
            &HAND,
            Some(key),
            &case.program,
            None,
            XFree::None,
            Vec::new(),
        );
        for b in out.kept {
            tfree(&HAND, b);
        }
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..threads).map(|_| channel::<Block>()).unzip();
        let barrier = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            for (t, rx) in rxs.into_iter().enumerate() {
                let tx = txs[(t + 1) % threads].clone();
                let (case, barrier) = (&case, &barrier);
                s.spawn(move || {
                    for round in 0..rounds {
                        let spec = &case.runs[(t + round) % case.runs.len()];
                        let mut prog = variant(&case.program, spec);
                        prog.retain(|s| *s != Step::Panic);
                        let oracle = execute(&HAND, None, &prog, None, XFree::None, Vec::new());
                        for b in oracle.kept {
                            tfree(&HAND, b);
                        }
                        let carried: Vec<(usize, Block)> = rx.try_iter().map(|b| (0, b)).collect();
                        let out = execute(&HAND, Some(key), &prog, None, XFree::None, carried);
                        if !out.panicked {
                            assert_eq!(out.sum, oracle.sum, "{key} thread {t} round {round}");
                        }
                        for b in out.kept {
                            tx.send(b).expect("neighbour alive");
                        }
                    }
                    drop(tx);
                    barrier.wait();
                    for b in rx.try_iter() {
                        tfree(&HAND, b);
                    }
                });
            }
            drop(txs);
        });
    }
    assert!(
        memo_alloc::stats().slab_hits > hits0,
        "concurrent replays used slabs"
    );
}

/// The checking allocator underneath can fail: each fault, made in a child process of
/// this binary, aborts it with the checker's message.
#[test]
fn the_checking_allocator_catches_faults() {
    for fault in ["write-after-free", "double-free", "overflow"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "checked_fault", "--nocapture"])
            .env("SHADOW_FAULT", fault)
            .output()
            .expect("spawn the test binary");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("shadow checker:"),
            "{fault} was not caught ({}):\n{stderr}",
            out.status
        );
    }
}

#[test]
#[ignore = "child process of the_checking_allocator_catches_faults"]
fn checked_fault() {
    let Ok(fault) = std::env::var("SHADOW_FAULT") else {
        return;
    };
    let layout = Layout::from_size_align(64, 8).unwrap();
    // SAFETY: deliberately wrong uses of a block, to be caught by the checker (the child
    // aborts before anything reads the memory again).
    unsafe {
        let p = GLOBAL.alloc(layout);
        match fault.as_str() {
            "write-after-free" => {
                GLOBAL.dealloc(p, layout);
                p.write(1);
                for _ in 0..1024 {
                    let q = GLOBAL.alloc(layout);
                    GLOBAL.dealloc(q, layout);
                }
            }
            "double-free" => {
                GLOBAL.dealloc(p, layout);
                GLOBAL.dealloc(p, layout);
            }
            _ => {
                p.add(64).write(0);
                GLOBAL.dealloc(p, layout);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Re-synchronising replay
// ---------------------------------------------------------------------------------------

static FLAT: Alloc = MemoAlloc::new(CountingBackend::new());

/// A flat program: allocations of these sizes, each freed once `life` later ones were made.
type Flat = Vec<(usize, usize)>;

#[derive(Clone, Debug)]
enum FlatEdit {
    Insert(u16, usize, usize),
    Delete(u16),
    Resize(u16, bool),
}

/// The sizes of flat programs' allocations.
fn flat_size() -> impl Strategy<Value = usize> + Clone {
    prop::sample::select(vec![16usize, 24, 48, 64, 200, 256, 1000, 4096, 9000])
}

fn flat_edit() -> impl Strategy<Value = FlatEdit> {
    prop_oneof![
        (any::<u16>(), flat_size(), 1usize..5).prop_map(|(i, s, l)| FlatEdit::Insert(i, s, l)),
        any::<u16>().prop_map(FlatEdit::Delete),
        (any::<u16>(), any::<bool>()).prop_map(|(i, up)| FlatEdit::Resize(i, up)),
    ]
}

fn flat_apply(program: &mut Flat, e: &FlatEdit) {
    let n = program.len();
    match *e {
        FlatEdit::Insert(i, s, l) => program.insert(i as usize % (n + 1), (s, l)),
        FlatEdit::Delete(i) if n > 0 => {
            program.remove(i as usize % n);
        }
        FlatEdit::Resize(i, up) if n > 0 => {
            let s = &mut program[i as usize % n].0;
            *s = if up { *s * 2 + 1 } else { (*s / 3).max(1) };
        }
        _ => {}
    }
}

/// Plans `program` under a key of `prefix`'s pool, then replays it with `edits`; the
/// key's reports around the replay, or `None` when the replay did not use that plan (a
/// concurrent test's publication may evict it just before).
fn replay_edited(
    prefix: &str,
    keys: &AtomicUsize,
    program: &Flat,
    edits: &[FlatEdit],
) -> Option<(PassReport, PassReport)> {
    replay_edited_passes(prefix, keys, program, edits, 1).and_then(|d| d.into_iter().next())
}

/// [`replay_edited`] for `passes` passes of the edited program in a row (their reports,
/// in order; each replayed the plan): the later ones take the skips the first learned.
fn replay_edited_passes(
    prefix: &str,
    keys: &AtomicUsize,
    program: &Flat,
    edits: &[FlatEdit],
    passes: usize,
) -> Option<Vec<(PassReport, PassReport)>> {
    let key = pool_key(prefix, 1024, keys);
    // Until the key holds a plan of this program (a key used once may have to out-use
    // the plans of the concurrent tests to be admitted to the cache).
    for _ in 0..64 {
        flat_run(key, program);
        if memo_alloc::report(key).is_some_and(|r| r.state == PlanState::Planned) {
            break;
        }
    }
    let mut edited = program.clone();
    for e in edits {
        flat_apply(&mut edited, e);
    }
    (0..passes)
        .map(|_| {
            let d = delta(key, || flat_run(key, &edited));
            (replayed(&d) && d.0.state == PlanState::Planned).then_some(d)
        })
        .collect()
}

/// Runs `program` in a pass of `key` (every block tracked and verified).
fn flat_run(key: &'static str, program: &Flat) {
    let _p = memo_alloc::pass(key);
    let mut live: std::collections::VecDeque<(usize, Block)> = Default::default();
    for (i, &(size, life)) in program.iter().enumerate() {
        live.push_back((i + life, talloc(&FLAT, size, 8, false, i as u64)));
        while live.front().is_some_and(|(end, _)| *end <= i) {
            tfree(&FLAT, live.pop_front().unwrap().1);
        }
    }
    for (_, b) in live {
        tfree(&FLAT, b);
    }
}

proptest! {
    // A fixed seed, as for the matcher's own property test (`replay/tests.rs`): the same
    // cases run every time.
    #![proptest_config(PtConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x7265_7379),
        failure_persistence: None,
        ..PtConfig::default()
    })]

    /// A pass of n allocations replayed with k random insertions, deletions and resizes
    /// gets at least n - 3k slab hits, and the shadow tracker finds no overlap; the next
    /// pass of the same edited program, which takes the skips the first learned, hits at
    /// least as often.
    #[test]
    fn replay_resynchronises_after_each_divergence(
        program in vec((flat_size(), 1usize..5), 1..250),
        edits in vec(flat_edit(), 0..10),
    ) {
        init();
        let _shared = CHURN.read().unwrap_or_else(|e| e.into_inner());
        static KEYS: AtomicUsize = AtomicUsize::new(0);
        let d = replay_edited_passes("flat", &KEYS, &program, &edits, 2);
        prop_assume!(d.is_some());
        let d = d.unwrap();
        let (first, second) = (hits(&d[0]), hits(&d[1]));
        let k = edits.len() as u64;
        prop_assert!(
            first + 3 * k >= program.len() as u64,
            "{} hits of {} after {} edits: {:?}", first, program.len(), k, d[0].1
        );
        prop_assert!(second >= first, "{second} hits in the next pass, {first} in the first");
    }
}

/// First sizes of the shapes of one key: some within the classes' close ratio of each
/// other (jitter), most further apart (shapes of their own).
fn first_size() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![1000usize, 1100, 2000, 4096, 4500, 9000, 20000, 40000])
}

proptest! {
    #![proptest_config(PtConfig {
        cases: 64,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x636c_6173),
        failure_persistence: None,
        ..PtConfig::default()
    })]

    /// Passes of one key in a few shapes (each a flat program after a first allocation
    /// of its own size), in a generated order: the key founds shape classes, routes passes
    /// to them, replaces and re-profiles them, and the shadow tracker finds no two live
    /// blocks overlapping, whichever class profiles or replays which pass; the key keeps
    /// its classes within the bound.
    #[test]
    fn passes_changing_shape_class_never_overlap(
        shapes in vec((first_size(), vec((flat_size(), 1usize..5), 1..60)), 2..6),
        order in vec(any::<u16>(), 8..80),
    ) {
        init();
        if !classes() {
            return Ok(()); // see `generated_programs_changing_shape_class`
        }
        let _shared = CHURN.read().unwrap_or_else(|e| e.into_inner());
        static KEYS: AtomicUsize = AtomicUsize::new(0);
        // A small pool: each key may add up to `max_classes - 1` entries of its own.
        let key = pool_key("classes", 64, &KEYS);
        let programs: Vec<Flat> = shapes
            .iter()
            .map(|(first, rest)| {
                let mut p = vec![(*first, 3)];
                p.extend_from_slice(rest);
                p
            })
            .collect();
        for &i in &order {
            flat_run(key, &programs[i as usize % programs.len()]);
        }
        let prefix = format!("{key}#");
        let classes = memo_alloc::keys().iter().filter(|k| k.starts_with(&prefix)).count();
        prop_assert!(classes < memo_alloc::config::config().max_classes, "{classes}");
    }
}

/// A case `resync_study` found: seven edits of a 101-allocation program. Two insertions
/// (1000 and 9000 bytes) make matching's rule 4 confirm a candidate 13 slots ahead by
/// chance (a 9000 followed by a 64 there too), the resized request after them keeps rule
/// 2 from going back, and chance hits further ahead move the cursor on. The anchored
/// search (rule 7) finds the program's place behind the cursor, and a first place is
/// confirmed by the next anchor instead of a run twice as long: within 3 misses per edit.
/// It lost 25 (3.6 per edit) when the search looked only ahead and waited longer.
#[test]
fn a_cursor_run_ahead_finds_its_place_behind() {
    init();
    let _shared = CHURN.read().unwrap_or_else(|e| e.into_inner());
    static KEYS: AtomicUsize = AtomicUsize::new(0);
    let program: Flat = vec![
        (9000, 2),
        (4096, 3),
        (4096, 4),
        (200, 4),
        (9000, 3),
        (64, 1),
        (16, 1),
        (9000, 4),
        (64, 2),
        (9000, 4),
        (1000, 4),
        (200, 4),
        (200, 4),
        (9000, 3),
        (1000, 1),
        (200, 2),
        (256, 3),
        (200, 3),
        (9000, 2),
        (256, 3),
        (24, 4),
        (9000, 4),
        (200, 1),
        (16, 2),
        (48, 2),
        (256, 3),
        (9000, 4),
        (200, 2),
        (4096, 4),
        (256, 3),
        (24, 4),
        (64, 3),
        (24, 4),
        (24, 1),
        (64, 1),
        (200, 3),
        (16, 2),
        (9000, 1),
        (16, 4),
        (200, 3),
        (1000, 2),
        (48, 2),
        (16, 3),
        (256, 4),
        (4096, 1),
        (4096, 2),
        (48, 2),
        (9000, 4),
        (1000, 1),
        (24, 4),
        (16, 1),
        (256, 1),
        (256, 4),
        (200, 2),
        (256, 2),
        (200, 2),
        (200, 1),
        (200, 4),
        (9000, 3),
        (200, 4),
        (200, 2),
        (64, 2),
        (9000, 1),
        (24, 1),
        (16, 3),
        (16, 2),
        (24, 2),
        (48, 4),
        (256, 2),
        (64, 1),
        (1000, 3),
        (48, 1),
        (16, 4),
        (16, 3),
        (48, 4),
        (64, 1),
        (1000, 3),
        (4096, 4),
        (1000, 2),
        (4096, 1),
        (16, 4),
        (64, 4),
        (200, 3),
        (9000, 2),
        (64, 1),
        (16, 2),
        (1000, 4),
        (256, 3),
        (24, 1),
        (64, 4),
        (64, 3),
        (48, 4),
        (256, 1),
        (9000, 4),
        (4096, 3),
        (1000, 4),
        (4096, 3),
        (256, 3),
        (9000, 2),
        (9000, 4),
        (16, 1),
    ];
    let edits = [
        FlatEdit::Resize(4759, false),
        FlatEdit::Insert(3843, 1000, 4),
        FlatEdit::Insert(16962, 9000, 4),
        FlatEdit::Delete(16060),
        FlatEdit::Resize(17718, false),
        FlatEdit::Insert(4217, 16, 4),
        FlatEdit::Insert(60659, 4096, 3),
    ];
    let d = replay_edited("behind", &KEYS, &program, &edits).expect("the plan replayed");
    let k = edits.len() as u64;
    assert!(
        hits(&d) + 3 * k >= program.len() as u64,
        "{} hits of {} after {} edits: {:?}",
        hits(&d),
        program.len(),
        k,
        d.1
    );
}

/// A study, run by hand: the misses per edit of the flat programs above over random seeds
/// (the property holds on its fixed seed; this says how often and how far it does not),
/// with lanes when `SHADOW_LANES` is set, printing each case above 3 per edit when
/// `RESYNC_SHOW` is:
///
/// ```text
/// RESYNC_CASES=5000 cargo test -p memo-alloc --release --test shadow resync_study -- --ignored --nocapture
/// ```
#[test]
#[ignore = "a study: run by hand (see the doc comment)"]
fn resync_study() {
    init();
    let cases: usize = std::env::var("RESYNC_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let strategy = (
        vec((flat_size(), 1usize..5), 1..250),
        vec(flat_edit(), 1..10),
    );
    let mut runner = TestRunner::new(PtConfig::default());
    static KEYS: AtomicUsize = AtomicUsize::new(0);
    // Misses per edit of each replayed case.
    let mut per_edit: Vec<f64> = Vec::new();
    let mut over_3k = 0;
    // The second pass of each edited program against its first: hits gained in all,
    // and cases that lost some.
    let (mut later_hits, mut later_worse) = (0.0, 0);
    for _ in 0..cases {
        let (program, edits) = strategy.new_tree(&mut runner).unwrap().current();
        let Some(d) = replay_edited_passes("study", &KEYS, &program, &edits, 2) else {
            continue;
        };
        let k = edits.len() as f64;
        let missed = program.len() as f64 - hits(&d[0]) as f64;
        let (first, second) = (hits(&d[0]), hits(&d[1]));
        later_hits += second as f64 - first as f64;
        later_worse += (second < first) as usize;
        let d = &d[0];
        over_3k += (missed > 3.0 * k) as usize;
        if missed > 3.0 * k && std::env::var_os("RESYNC_SHOW").is_some() {
            let why: Vec<(&str, u64)> = MissReason::ALL
                .iter()
                .map(|&m| (m.name(), misses(&d.1, &d.0, m)))
                .filter(|&(_, n)| n > 0)
                .collect();
            eprintln!(
                "CASE missed {missed} k {k} ({why:?})\n  program {program:?}\n  edits {edits:?}"
            );
        }
        per_edit.push(missed.max(0.0) / k);
    }
    per_edit.sort_by(f64::total_cmp);
    let q = |p: f64| per_edit[((per_edit.len() - 1) as f64 * p) as usize];
    eprintln!(
        "resync study (lanes {}): {} cases; misses per edit p50 {:.2}, p90 {:.2}, p99 {:.2}, max {:.2}; {} cases ({:.2}%) above 3 per edit",
        lanes(),
        per_edit.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0),
        over_3k,
        100.0 * over_3k as f64 / per_edit.len().max(1) as f64
    );
    eprintln!(
        "  the second pass of each edited program: {:.3} hits more a case; {} cases ({:.2}%) hit less",
        later_hits / per_edit.len().max(1) as f64,
        later_worse,
        100.0 * later_worse as f64 / per_edit.len().max(1) as f64
    );
}

//! Passes and op scopes: `pass(key)` and `op(name)` guards, and what happens at their
//! boundaries (profiling decisions, planning, publication, slab hand-over).

use std::marker::PhantomData;
use std::ptr;
use std::time::Instant;

use crate::compile::CompiledPlan;
use crate::config::{config, Mode};
use crate::recorder::Recorder;
use crate::registry::{self, KeyEntry, Summary, PLANNED, PROFILING, REPLAN, UNPLANNED};
use crate::slab::{Instance, Slabs};
use crate::stats::{MissReason, PassCounters, GLOBAL};
use crate::sync::{fence, AtomicBool, Ordering};
use crate::tls::{self, Hot, ThreadState, MAX_DEPTH};
use crate::trace::{PlanFile, Trace};

/// Scope node of allocations under an op the plan does not know.
pub(crate) const UNKNOWN: u32 = u32::MAX;

/// Set in a forked child: passes there run on the backend.
pub(crate) static DISABLED: AtomicBool = AtomicBool::new(false);

/// The running pass of a thread.
pub(crate) struct Pass {
    pub(crate) key: &'static str,
    pub(crate) entry: Option<&'static KeyEntry>,
    pub(crate) recorder: Option<Recorder>,
    pub(crate) slabs: *const Slabs,
    pub(crate) plan: *const CompiledPlan,
    pub(crate) inst: *mut Instance,
    pub(crate) base: *mut u8,
    pub(crate) counters: PassCounters,
    /// The key had a plan but this pass got no slab.
    pub(crate) no_slab: bool,
    /// The innermost scope node (the top of the thread's op stack, 0 outside ops), kept
    /// here so the allocation path reads it without touching the stack.
    pub(crate) node: u32,
}

/// Ends the pass when dropped (**contract**). Not `Send`: a pass belongs to its thread.
#[must_use = "the pass ends when this guard is dropped"]
pub struct PassGuard {
    /// For an inner `pass()`, the scope it opened.
    inner: Option<OpGuard>,
    _not_send: PhantomData<*mut ()>,
}

/// Ends the op scope when dropped (**contract**). Not `Send`.
#[must_use = "the scope ends when this guard is dropped"]
pub struct OpGuard {
    /// Stack depth before the scope was entered.
    depth: u32,
    /// Whether a scope was pushed (false outside passes).
    pushed: bool,
    _not_send: PhantomData<*mut ()>,
}

/// Starts a pass of `key`: the first pass of a key is profiled, later ones are replayed
/// from a slab. A pass inside a pass is an inner scope named `key`.
///
/// ```
/// let _pass = memo_alloc::pass("model");
/// let v: Vec<u8> = vec![0; 1024]; // recorded, or served from the slab
/// drop(v);
/// ```
pub fn pass(key: &'static str) -> PassGuard {
    let nested = tls::with(|s| s.pass_depth.get() > 0, false);
    if nested {
        tls::with(|s| s.pass_depth.set(s.pass_depth.get() + 1), ());
        return PassGuard {
            inner: Some(op(key)),
            _not_send: PhantomData,
        };
    }
    tls::with(|s| s.pass_depth.set(1), ());
    tls::with_bookkeeping(|| start(key));
    PassGuard {
        inner: None,
        _not_send: PhantomData,
    }
}

impl Drop for PassGuard {
    fn drop(&mut self) {
        if let Some(op) = self.inner.take() {
            drop(op);
            tls::with(
                |s| s.pass_depth.set(s.pass_depth.get().saturating_sub(1)),
                (),
            );
            return;
        }
        tls::with(|s| s.pass_depth.set(0), ());
        tls::with_bookkeeping(|| end(std::thread::panicking()));
    }
}

/// Enters op scope `name` inside the running pass; outside a pass it does nothing.
///
/// Allocations are keyed by their innermost scope and their ordinal in it, so sibling ops
/// that run in another order than when profiled still find their slots.
pub fn op(name: &'static str) -> OpGuard {
    tls::with(
        |s| {
            let depth = s.depth.get();
            let p = s.pass.get();
            if p.is_null() {
                return OpGuard {
                    depth,
                    pushed: false,
                    _not_send: PhantomData,
                };
            }
            if (depth as usize) < MAX_DEPTH {
                // SAFETY: `p` is this thread's running pass, owned by its PassGuard; only
                // this thread touches it.
                let pass = unsafe { &mut *p };
                let node = enter_scope(s, pass, name);
                s.stack[depth as usize].set(node);
                pass.node = node;
            }
            s.depth.set(depth + 1);
            OpGuard {
                depth,
                pushed: true,
                _not_send: PhantomData,
            }
        },
        OpGuard {
            depth: 0,
            pushed: false,
            _not_send: PhantomData,
        },
    )
}

impl Drop for OpGuard {
    fn drop(&mut self) {
        if !self.pushed {
            return;
        }
        tls::with(
            |s| {
                s.depth.set(self.depth.min(s.depth.get()));
                let p = s.pass.get();
                if !p.is_null() {
                    // SAFETY: as in `op`.
                    let pass = unsafe { &mut *p };
                    pass.node = s.top(0);
                    if let Some(rec) = pass.recorder.as_mut() {
                        // The node this guard entered (still in its stack slot: inner
                        // scopes use deeper slots); none past the stack's capacity.
                        let node = s
                            .stack
                            .get(self.depth as usize)
                            .map_or(UNKNOWN, |c| c.get());
                        tls::begin_bookkeeping(s);
                        rec.exit_scope(node);
                        tls::end_bookkeeping(s);
                    }
                }
            },
            (),
        );
    }
}

fn enter_scope(s: &ThreadState, pass: &mut Pass, name: &'static str) -> u32 {
    let parent = s.top(0);
    if let Some(rec) = pass.recorder.as_mut() {
        tls::begin_bookkeeping(s);
        let node = rec.enter_scope(parent, name);
        tls::end_bookkeeping(s);
        return node;
    }
    if pass.inst.is_null() || parent == UNKNOWN {
        return UNKNOWN;
    }
    // SAFETY: a replayed pass holds its plan and instance until it ends; the
    // occurrences array is written only by this (the owning) thread.
    let (plan, occurrences) = unsafe { (&*pass.plan, &mut *(*pass.inst).occurrences.get()) };
    match plan.scope_group(parent, name) {
        Some((base, count)) => {
            let occ = &mut occurrences[base as usize];
            let k = *occ;
            *occ += 1;
            if k < count {
                base + k
            } else {
                UNKNOWN
            }
        }
        None => UNKNOWN,
    }
}

/// Resolves `ptr` (any pointer into a live allocation of the running profiled pass, such as
/// a view or a slice) to the allocation containing it and records the use. Returns that
/// allocation's index in the trace, or `None` outside a profiled pass or for unknown
/// pointers.
pub fn observe<T: ?Sized>(ptr: *const T) -> Option<u32> {
    let addr = ptr as *const u8 as usize;
    tls::with_bookkeeping(|| {
        tls::with(
            |s| {
                let p = s.pass.get();
                if p.is_null() {
                    return None;
                }
                // SAFETY: this thread's running pass.
                unsafe { (*p).recorder.as_mut()?.observe(addr) }
            },
            None,
        )
    })
}

thread_local! {
    /// Registered at a thread's first pass; its destructor ends a pass the thread left
    /// unfinished when it exited (a leaked guard), so the key is not stuck being profiled.
    static SENTINEL: Sentinel = const { Sentinel };
}

struct Sentinel;

impl Drop for Sentinel {
    fn drop(&mut self) {
        let unfinished = tls::with(|s| !s.pass.get().is_null(), false);
        if unfinished {
            // The leaked guard will never reset the nesting: do it here, or a pass started
            // by a later thread-local destructor would be taken for an inner scope of the
            // pass just ended (and run on the backend, unrecorded).
            tls::with(|s| s.pass_depth.set(0), ());
            tls::with_bookkeeping(|| end(true));
        }
    }
}

fn start(key: &'static str) {
    crate::init::once();
    let _ = SENTINEL.try_with(|_| ());
    // A forked child never reads the configuration: a thread of the parent may have been
    // initialising it at the fork, and the child would wait for it forever.
    let cfg = if DISABLED.load(Ordering::Relaxed) {
        None
    } else {
        Some(config()).filter(|c| c.mode != Mode::Off)
    };
    let mut pass = Pass {
        key,
        entry: None,
        recorder: None,
        slabs: ptr::null(),
        plan: ptr::null(),
        inst: ptr::null_mut(),
        base: ptr::null_mut(),
        counters: PassCounters::default(),
        no_slab: false,
        node: 0,
    };
    let mut hot = Hot::Backend;
    if let Some(cfg) = cfg {
        if let Some(entry) = registry::entry(key) {
            pass.entry = Some(entry);
            entry.touch();
            hot = choose(entry, cfg.mode, &mut pass, cfg.backtrace);
        }
    }
    if hot == Hot::Backend && pass.recorder.is_none() {
        GLOBAL.passes_backend.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = pass.entry {
            e.passes_backend.fetch_add(1, Ordering::Relaxed);
        }
    }
    let p = Box::into_raw(Box::new(pass));
    tls::with(
        |s| {
            s.pass.set(p);
            s.depth.set(0);
            tls::set_mode_after_bookkeeping(s, hot);
        },
        (),
    );
}

/// Profile, replay or backend for this pass of `entry`.
fn choose(entry: &'static KeyEntry, mode: Mode, pass: &mut Pass, backtrace: bool) -> Hot {
    if mode == Mode::Profile {
        pass.recorder = Some(Recorder::new(pass.key, backtrace));
        return Hot::Profile;
    }
    let state = entry.state.load(Ordering::Acquire);
    if (state == UNPLANNED || state == REPLAN)
        && entry
            .state
            .compare_exchange(state, PROFILING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    {
        if state == REPLAN {
            entry.replans.fetch_add(1, Ordering::Relaxed);
        }
        pass.recorder = Some(Recorder::new(pass.key, backtrace));
        return Hot::Profile;
    }
    // Replay the published plan (also while another thread re-profiles the key).
    entry.entering.fetch_add(1, Ordering::AcqRel);
    // SeqCst: pairs with the fences after the swap in `publish` and before the load of
    // `entering` in `registry::reclaim`. Without them, "increment `entering`, load
    // `slabs`" here and "swap `slabs`, load `entering`" there are a store-buffering pattern:
    // both loads may see old values, and the plan we load could be freed under us.
    fence(Ordering::SeqCst);
    let slabs = entry.slabs.load(Ordering::Acquire);
    let mut hot = Hot::Backend;
    if !slabs.is_null() {
        // SAFETY: `entering` keeps a published plan from being freed until we registered
        // with it through `acquire` (which counts us in `active`).
        let s = unsafe { &*slabs };
        match s.acquire() {
            Some(inst) => {
                pass.slabs = slabs;
                pass.plan = &s.plan;
                pass.inst = inst;
                // SAFETY: `inst` is held by this pass.
                pass.base = unsafe { (*inst).base };
                hot = Hot::Replay;
            }
            None => pass.no_slab = true,
        }
    }
    entry.entering.fetch_sub(1, Ordering::AcqRel);
    if pass.no_slab {
        // Count the pass as replayed-with-misses: every allocation misses with NoSlab.
        return Hot::Replay;
    }
    hot
}

/// Ends this thread's pass. `abandon`: the pass is cut short (panic or thread exit) and
/// its profile is not planned.
fn end(abandon: bool) {
    let p = tls::with(
        |s| {
            let p = s.pass.replace(ptr::null_mut());
            s.depth.set(0);
            tls::set_mode_after_bookkeeping(s, Hot::Backend);
            p
        },
        ptr::null_mut(),
    );
    if p.is_null() {
        return;
    }
    // SAFETY: `p` came from Box::into_raw in `start` and was just detached from the thread.
    let pass = unsafe { Box::from_raw(p) };
    if let Some(rec) = pass.recorder {
        GLOBAL.passes_profiled.fetch_add(1, Ordering::Relaxed);
        let entry = pass.entry;
        // This pass's number among the key's profiled passes (names its trace files):
        // taken from the increment itself, so concurrent profiles get distinct numbers.
        let serial = entry.map(|e| e.passes_profiled.fetch_add(1, Ordering::Relaxed) + 1);
        if abandon {
            if let Some(e) = entry {
                let back = if e.slabs.load(Ordering::Acquire).is_null() {
                    UNPLANNED
                } else {
                    PLANNED
                };
                let _ =
                    e.state
                        .compare_exchange(PROFILING, back, Ordering::AcqRel, Ordering::Relaxed);
            }
        } else {
            let trace = rec.finish();
            finish_profile(&trace, entry, serial, config());
            drop(trace);
            trim_backend_heap();
        }
    } else if !pass.slabs.is_null() || pass.no_slab {
        let mut pass = pass;
        pass.counters.allocations =
            pass.counters.slab_hits + pass.counters.misses.iter().sum::<u64>();
        GLOBAL.passes_replayed.fetch_add(1, Ordering::Relaxed);
        GLOBAL.add_replay(&pass.counters);
        if !pass.slabs.is_null() {
            // SAFETY: the pass registered with `slabs` at start; it stays alive until
            // released here.
            unsafe { (*pass.slabs).release(pass.inst) };
        }
        if let Some(e) = pass.entry {
            // Read only by passes that started with the configuration read (not in a
            // forked child's own passes).
            let cfg = config();
            if e.add_replay(&pass.counters, cfg.miss_window, cfg.replan_miss_ratio) {
                let _ =
                    e.state
                        .compare_exchange(PLANNED, REPLAN, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }
    registry::reclaim();
}

fn finish_profile(
    trace: &Trace,
    entry: Option<&'static KeyEntry>,
    serial: Option<u64>,
    cfg: &crate::config::Config,
) {
    let t0 = Instant::now();
    let plan = PlanFile::from_trace(trace, cfg.strategy);
    let plan_millis = t0.elapsed().as_secs_f64() * 1e3;
    if let Some(dir) = &cfg.trace_dir {
        crate::files::write_pass(dir, trace, &plan, serial);
    }
    let Some(entry) = entry else { return };
    let summary = Summary {
        allocations: trace.allocations.len() as u64,
        planned: plan.slots.iter().filter(|s| s.offset.is_some()).count() as u64,
        escaping: plan.slots.iter().filter(|s| s.offset.is_none()).count() as u64,
        reallocs: trace
            .allocations
            .iter()
            .filter(|a| a.realloc_parent.is_some())
            .count() as u64,
        events: trace.events,
        scopes: trace.scopes.len() as u64,
        height: plan.height,
        lower_bound: plan.lower_bound,
        naive: plan.naive,
        strategy: plan.strategy.clone(),
        plan_millis,
    };
    entry.summary.with(|s| *s = Some(summary));
    if cfg.mode != Mode::Replay {
        return;
    }
    match CompiledPlan::compile(&plan) {
        Ok(compiled) => entry.publish(Box::new(Slabs::new(compiled)), cfg.max_plans),
        Err(e) => {
            eprintln!("memomalloc: pass {:?} could not be planned: {e}", trace.key);
            let _ = entry.state.compare_exchange(
                PROFILING,
                UNPLANNED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
    }
}

/// After a profiled pass, its allocations are freed but glibc keeps their memory; the
/// slabs that replay the pass come on top of it. Returning it to the OS once per profile
/// keeps the peak resident size near one copy of the pass. Harmless when glibc is not the
/// backend (its heap is then nearly empty).
fn trim_backend_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of glibc's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Records a miss of the running replayed pass.
#[inline]
pub(crate) fn count_miss(pass: &mut Pass, reason: MissReason) {
    pass.counters.misses[reason as usize] += 1;
}

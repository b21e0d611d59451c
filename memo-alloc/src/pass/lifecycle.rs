//! How passes start and end, and how their contexts are entered and left.
//!
//! A pass is made ([`make`]) profiled, replayed or run on the backend ([`choose`]): the
//! key's state (see `registry`), admission to the plan cache, and a backoff after
//! abandoned profiles decide. A thread works in a pass through a context: the main one
//! ([`enter_main`], by `pass()` or a future wrapper's poll) or a helper ([`enter_helper`],
//! by `PassHandle::enter`), and [`leave`]s it. The owner [`end`]s the pass; when the last
//! holder of its resources leaves, the pass is [`finish`]ed: its profile (the main
//! context's recording and the helpers') goes to the planner, its replay gives its slab
//! instance back and adds its counters. A pass cut short (a panic, a thread exit, a
//! failed or unbounded profile) is *abandoned*: its profile is not planned and its replay
//! counts toward no re-profiling.
//!
//! Contexts are identified by serial numbers, not by their place on a stack: whatever
//! order guards are dropped in, each leaves its own context or nothing.

use std::ptr;

use crate::config::{self, Config, Mode};
use crate::pass::context::{self, Context, UNKNOWN};
use crate::pass::fork;
use crate::pass::{PassKind, PassState};
use crate::plan::job::{Job, Pinned};
use crate::plan::worker;
use crate::profiling::recorder::{counted_lanes, Bounds, Recorder};
use crate::registry::cache;
use crate::registry::reclaim::RECLAIMER;
use crate::registry::{self, KeyEntry, KeyState};
use crate::replay::slab::pool::Released;
use crate::stats::{self, AbandonReason, MissReason, PassCounters, GLOBAL};
use crate::support::fallible::try_box;
use crate::support::sync::{plain, Ordering};
use crate::support::thread::{self, AllocPath};

static SERIAL: plain::AtomicU64 = plain::AtomicU64::new(1);

fn next_serial() -> u64 {
    SERIAL.fetch_add(1, Ordering::Relaxed)
}

thread_local! {
    /// Registered at a thread's first pass; its destructor leaves every context the thread
    /// still has entered when it exits (a leaked guard), and ends the passes it owns.
    static SENTINEL: Sentinel = const { Sentinel };
}

struct Sentinel;

impl Drop for Sentinel {
    fn drop(&mut self) {
        thread::with_bookkeeping(|| loop {
            let top = context::current();
            // SAFETY: a non-null pointer is this thread's current context.
            let Some(ctx) = (unsafe { top.as_mut() }) else {
                context::free_spare(); // every context left: the spare is the last
                return;
            };
            ctx.abandoned.get_or_insert(AbandonReason::ThreadExit);
            let (serial, pass, owned) = (ctx.serial, ctx.pass, ctx.helper.is_none());
            leave(serial);
            // SAFETY: the context held the pass; a pass made by `pass()` on this thread
            // is owned by it, and its guard will never run.
            if owned && unsafe { (*pass).bound } {
                end(pass, Some(AbandonReason::ThreadExit));
            }
        });
    }
}

/// The configuration, unless passes are off (mode `off`, or a child forked while the
/// allocator was being set up, which must not wait for that setup).
fn enabled_config() -> Option<&'static Config> {
    if fork::disabled() {
        return None;
    }
    Some(config::config()).filter(|c| c.mode != Mode::Off)
}

/// Makes a pass of `key` with its main context checked in; the caller holds the owner's
/// reference and activity. `None` when no memory was left.
fn make(key: &str, bound: bool) -> Option<*const PassState> {
    fork::once();
    worker::restart_if_needed();
    let cfg = enabled_config();
    let entry = cfg.and_then(|_| registry::entry(key));
    let mut state = try_box(PassState::new(entry, cfg.is_some()))?;
    state.bound = bound;
    let mut recorder = None;
    if let (Some(cfg), Some(entry)) = (cfg, entry) {
        entry.touch();
        cache::age(cache::aging_period(cfg.max_plans));
        recorder = choose(entry, cfg, &mut state);
    }
    let mut main = Context::new(next_serial(), &state, 0, None);
    main.recorder = recorder;
    let Some(main) = try_box(main) else {
        let p = Box::into_raw(state);
        // SAFETY: just made; finished and freed at once, as an abandoned pass.
        unsafe {
            (*p).note_abandoned(AbandonReason::OutOfMemory);
            finish(&*p);
            drop(Box::from_raw(p));
        }
        return None;
    };
    state.check_in_main(Box::into_raw(main).cast());
    Some(Box::into_raw(state))
}

/// A re-profile of `entry` begins: the idle instances of the plan it will replace give
/// their memory back (see `Slabs::shed_idle`).
fn shed_old_slabs(entry: &KeyEntry) {
    let (_reading, slabs) = entry.read();
    // SAFETY: the read guard keeps the plan from being freed while it is used here.
    if let Some(s) = unsafe { slabs.as_ref() } {
        s.shed_idle();
    }
}

/// Profile, replay or backend for this pass of `entry`; the recorder of a profile.
fn choose(entry: &'static KeyEntry, cfg: &Config, pass: &mut PassState) -> Option<Recorder> {
    let key: &'static str = &entry.key; // entries are never freed
    if cfg.mode == Mode::Profile {
        let rec = Recorder::new(key, cfg.backtrace, Bounds::of(cfg), counted_lanes(cfg))?;
        pass.kind = PassKind::Profile;
        return Some(rec);
    }
    let state = entry.state();
    if matches!(state, KeyState::Unplanned | KeyState::Stale(_)) && entry.may_profile() {
        // A stale key keeps its place in the cache; a key without a plan must earn one.
        let admitted = matches!(state, KeyState::Stale(_)) || cache::admit(entry, cfg.max_plans);
        if !admitted {
            stats::add(&GLOBAL.admissions_refused, 1);
            stats::add(&entry.counters.admissions_refused, 1);
        } else if entry.begin_profile() {
            entry.note_profile(cfg.max_plans);
            shed_old_slabs(entry);
            match Recorder::new(key, cfg.backtrace, Bounds::of(cfg), counted_lanes(cfg)) {
                Some(rec) => {
                    pass.kind = PassKind::Profile;
                    return Some(rec);
                }
                None => {
                    entry.abandon_profile();
                    stats::add(
                        &GLOBAL.profiles_abandoned[AbandonReason::OutOfMemory as usize],
                        1,
                    );
                }
            }
        }
    }
    // Replay the published plan (also while another thread re-profiles the key).
    let (_reading, slabs) = entry.read();
    if slabs.is_null() {
        pass.interim = matches!(entry.state(), KeyState::Profiling(_));
        return None;
    }
    // SAFETY: the read guard keeps the plan from being freed until we registered with it.
    let s = unsafe { &*slabs };
    s.register();
    pass.kind = PassKind::Replay;
    pass.slabs = slabs;
    pass.plan = &s.plan;
    // A bound pass runs now; an unbound one takes its instance when first entered.
    // Without one, every allocation misses with `NoSlab`.
    if pass.bound {
        if let Some(inst) = s.take() {
            pass.set_inst(inst);
        }
    }
    None
}

/// `pass()`: makes a pass of `key` owned by this thread and enters its main context.
/// Returns the pass and the main context's serial.
pub(crate) fn start(key: &str) -> Option<(*const PassState, u64)> {
    debug_assert!(
        context::current().is_null(),
        "pass() inside a pass is a scope"
    );
    let _ = SENTINEL.try_with(|_| ());
    let p = make(key, true)?;
    // SAFETY: just made; this thread holds the owner's reference.
    let serial = enter_main(unsafe { &*p }).expect("a new pass's main context is free");
    Some((p, serial))
}

/// `Pass::new`: makes a pass of `key` owned by the caller, not entered anywhere.
pub(crate) fn create(key: &str) -> Option<*const PassState> {
    make(key, false)
}

/// The allocation path of `ctx`.
fn path_of(ctx: &Context) -> AllocPath {
    let pass = ctx.pass();
    if ctx.abandoned.is_some() {
        AllocPath::Backend
    } else if ctx.recorder.is_some() {
        AllocPath::Profile
    } else if pass.kind == PassKind::Replay && ctx.replay.has_slab() {
        AllocPath::Replay
    } else if pass.counted {
        AllocPath::Counted
    } else {
        AllocPath::Backend
    }
}

/// Makes `ctx` this thread's current context.
fn push(ctx: *mut Context) {
    let _ = SENTINEL.try_with(|_| ());
    thread::with(
        |s| {
            // SAFETY: `ctx` is a live context this thread just took.
            let c = unsafe { &mut *ctx };
            c.prev = s.context.get().cast();
            s.context.set(ctx.cast());
            thread::set_path(s, path_of(c));
        },
        (),
    );
}

/// Takes context `serial` off this thread's stack of contexts (wherever it is in it);
/// null if the thread has no such context.
fn pop(serial: u64) -> *mut Context {
    thread::with(
        |s| {
            let mut link: *mut Context = ptr::null_mut(); // the context above the current one
            let mut cur = s.context.get().cast::<Context>();
            // SAFETY: the stack holds live contexts this thread entered.
            while let Some(c) = unsafe { cur.as_mut() } {
                if c.serial == serial {
                    match unsafe { link.as_mut() } {
                        None => {
                            s.context.set(c.prev.cast());
                            // SAFETY: as above.
                            let path =
                                unsafe { c.prev.as_ref() }.map_or(AllocPath::Backend, path_of);
                            thread::set_path(s, path);
                        }
                        Some(above) => above.prev = c.prev,
                    }
                    c.prev = ptr::null_mut();
                    return cur;
                }
                link = cur;
                cur = c.prev;
            }
            ptr::null_mut()
        },
        ptr::null_mut(),
    )
}

/// Enters `pass`'s main context on this thread (with the re-entrancy guard set);
/// `None` if another thread has it entered.
pub(crate) fn enter_main(pass: &PassState) -> Option<u64> {
    let main = pass.check_out_main().cast::<Context>();
    if main.is_null() {
        return None;
    }
    // SAFETY: checked out: this thread owns the main context until it checks it in.
    let m = unsafe { &mut *main };
    if !pass.bound {
        supply(pass, m);
    }
    let serial = m.serial;
    push(main);
    Some(serial)
}

/// Gives the main context of an unbound replay, about to be entered, slab memory: the
/// pass's instance (taken now, the first time) and its block (again, after `park`).
/// When none can be had, this entry's allocations go to the backend, counted as misses
/// (`NoSlab`). With the re-entrancy guard set.
fn supply(p: &PassState, m: &mut Context) {
    if p.kind != PassKind::Replay || m.replay.has_slab() {
        return;
    }
    // SAFETY: a replay is registered with its plan until it is finished.
    let slabs = unsafe { &*p.slabs };
    let mut inst = p.inst();
    if inst.is_null() {
        let Some(taken) = slabs.take() else { return };
        p.set_inst(taken);
        inst = taken;
    // SAFETY: the pass holds `inst`; its main context (checked out by the caller) is the
    // only one that hands out its slots while no helper can be entered (see `park`).
    } else if !unsafe { slabs.unpark(inst) } {
        return;
    }
    // SAFETY: held by the pass, with its blocks.
    unsafe { m.replay.attach(inst) };
}

/// Enters helper context `id` of `pass` on this thread (with the re-entrancy guard set);
/// `None` once the pass has ended (the thread's allocations then stay where they were).
pub(crate) fn enter_helper(pass: &PassState, id: u32) -> Option<u64> {
    if !pass.activate() {
        return None;
    }
    pass.retain();
    let root = match pass.kind {
        PassKind::Replay if !pass.inst().is_null() => helper_node(pass, id),
        _ => 0,
    };
    let mut ctx = Context::new(next_serial(), pass, root, Some(id));
    if pass.kind == PassKind::Replay && !claim_helper(pass, root) {
        ctx.replay.detach(); // taken by another thread, or unknown: on the backend
    }
    if pass.kind == PassKind::Profile {
        let cfg = config::config();
        let key: &'static str = pass.entry.map_or("", |e| &e.key);
        ctx.recorder = Recorder::new(key, cfg.backtrace, Bounds::of(cfg), counted_lanes(cfg));
        if ctx.recorder.is_none() {
            ctx.abandoned = Some(AbandonReason::OutOfMemory);
        }
    }
    let serial = ctx.serial;
    let Some(ctx) = context::boxed(ctx) else {
        release_helper_claim(pass, root);
        leave_resources(pass);
        return None;
    };
    push(ctx);
    Some(serial)
}

/// The plan's node of helper `id` (the scope `@<id>` of the pass's root), or `UNKNOWN`.
fn helper_node(pass: &PassState, id: u32) -> u32 {
    // SAFETY: a replay holds its plan until it is finished.
    let plan = unsafe { &*pass.plan };
    let mut buf = [0u8; 16];
    plan.scope_group(0, helper_name(id, &mut buf))
        .map_or(UNKNOWN, |(base, _)| base)
}

/// `@<id>`, written into `buf`: the scope name of helper context `id`.
pub(crate) fn helper_name(id: u32, buf: &mut [u8; 16]) -> &str {
    use std::io::Write;
    let mut w = &mut buf[..];
    let _ = write!(w, "@{id}");
    let len = 16 - w.len();
    std::str::from_utf8(&buf[..len]).unwrap_or("@")
}

/// Claims helper node `root` of the pass's instance for this thread (one thread per
/// helper context at a time).
fn claim_helper(pass: &PassState, root: u32) -> bool {
    // SAFETY: a replay holds its instance until it is finished.
    root != UNKNOWN && unsafe { (*pass.inst()).claim_node(root) }
}

fn release_helper_claim(pass: &PassState, root: u32) {
    if pass.kind == PassKind::Replay && !pass.inst().is_null() && root != UNKNOWN {
        // SAFETY: as in `claim_helper`.
        unsafe { (*pass.inst()).release_node(root) };
    }
}

/// Leaves context `serial` of this thread (with the re-entrancy guard set): a main
/// context is checked back in; a helper hands its counts and recording to the pass.
pub(crate) fn leave(serial: u64) {
    let ctx = pop(serial);
    if ctx.is_null() {
        return; // left already (by the thread's exit) or never entered
    }
    // SAFETY: popped: this thread owns it; it holds a reference on its pass.
    let c = unsafe { &mut *ctx };
    let pass = c.pass;
    // SAFETY: as above.
    let p = unsafe { &*pass };
    let Some(id) = c.helper else {
        p.check_in_main(ctx.cast());
        return;
    };
    // SAFETY: a helper context was boxed by `enter_helper` and is now this thread's
    // alone (popped); `unboxed` below is its end.
    let c = unsafe { &mut *ctx };
    if c.replay.has_slab() {
        release_helper_claim(p, c.root);
    }
    c.counters.allocations = match p.kind {
        PassKind::Replay if c.replay.has_slab() => c.counters.slab_hits + c.counters.missed(),
        _ => c.counters.allocations,
    };
    if p.kind == PassKind::Replay && !c.replay.has_slab() {
        // A helper the instance could not serve (another thread in it, or unknown).
        c.counters.misses[MissReason::NoSlab as usize] += c.counters.allocations;
    }
    p.add_counters(&c.counters);
    if let Some(reason) = c.abandoned {
        p.note_abandoned(reason);
    }
    if let Some(rec) = c.recorder.take() {
        p.push_fragment(id, rec);
    }
    // The spare is freed by the sentinel: kept only while the sentinel is alive.
    let keep = SENTINEL.try_with(|_| ()).is_ok();
    // SAFETY: popped above and referenced nowhere else; not used after this.
    unsafe { context::unboxed(ctx, keep) };
    leave_resources(p);
    if p.release() {
        // SAFETY: the last reference.
        drop(unsafe { Box::from_raw(pass.cast_mut()) });
    }
}

/// A holder of the pass's resources is done; the last one finishes the pass.
fn leave_resources(p: &PassState) {
    if p.deactivate() {
        finish(p);
    }
}

/// The owner ends the pass (with the re-entrancy guard set; its main context checked
/// in). `abandon`: it is cut short (a panic, a thread exit, a cancelled future).
pub(crate) fn end(pass: *const PassState, abandon: Option<AbandonReason>) {
    // SAFETY: the owner's reference keeps the pass until released below.
    let p = unsafe { &*pass };
    if let Some(reason) = abandon {
        p.note_abandoned(reason);
    }
    p.mark_ended();
    leave_resources(p);
    if p.release() {
        // SAFETY: the last reference.
        drop(unsafe { Box::from_raw(pass.cast_mut()) });
    }
}

/// Finishes a pass whose resources nobody holds any more: every context left (the main
/// one is checked in), every helper's counts and recording handed in.
fn finish(p: &PassState) {
    let main = p.check_out_main().cast::<Context>();
    // SAFETY: checked in by everyone who entered it; owned by the pass.
    let mut main = (!main.is_null()).then(|| unsafe { Box::from_raw(main) });
    let mut counters = p.helper_counters();
    let mut recorder = None;
    let mut abandon = p.abandoned().map(|i| AbandonReason::ALL[i]);
    if let Some(m) = main.as_mut() {
        let mc = m.counters;
        if p.kind == PassKind::Replay {
            // Counted on the backend: allocations made while the context had no slab
            // memory (none could be had, see `supply`).
            counters.allocations += mc.slab_hits + mc.missed() + mc.allocations;
            counters.misses[MissReason::NoSlab as usize] += mc.allocations;
        } else {
            counters.allocations += mc.allocations;
        }
        counters.slab_hits += mc.slab_hits;
        counters.slab_bytes += mc.slab_bytes;
        counters.diverged_bytes += mc.diverged_bytes;
        counters.skipped += mc.skipped;
        for (a, b) in counters.misses.iter_mut().zip(mc.misses) {
            *a += b;
        }
        abandon = m.abandoned.or(abandon);
        recorder = m.recorder.take();
    }
    match p.kind {
        PassKind::Profile => finish_profile(p, recorder, abandon, &counters),
        PassKind::Replay => finish_replay(p, &mut counters, abandon),
        PassKind::Backend => {
            // Mode `off` (or a disabled child) counts its passes, not their allocations.
            stats::add(&GLOBAL.passes_backend, 1);
            stats::add(&GLOBAL.backend_pass_allocations, counters.allocations);
            if let Some(e) = p.entry {
                stats::add(&e.counters.passes_backend, 1);
                // Its key's plan was published while it ran (a backend pass starts only
                // without one): what it freed is of no more use to the key's passes.
                if e.has_plan() {
                    worker::trim_later();
                }
            }
        }
    }
    drop(main);
    RECLAIMER.reclaim();
}

fn finish_profile(
    p: &PassState,
    recorder: Option<Recorder>,
    abandon: Option<AbandonReason>,
    counters: &PassCounters,
) {
    stats::add(&GLOBAL.passes_profiled, 1);
    stats::add(&GLOBAL.profiled_allocations, counters.allocations);
    let entry = p.entry;
    // This pass's number among the key's profiled passes (names its trace files): taken
    // from the increment itself, so concurrent profiles get distinct numbers.
    let serial = entry.map(|e| e.counters.passes_profiled.fetch_add(1, Ordering::Relaxed) + 1);
    let fragments = p.take_fragments();
    let profile = match (recorder, abandon, fragments) {
        (Some(rec), None, Some(fragments)) => rec.finish().and_then(|mut profile| {
            for f in fragments {
                let part = f.recorder.finish()?;
                profile
                    .adopt_helper(f.helper, part)
                    .map_err(|_| AbandonReason::OutOfMemory)?;
            }
            Ok(profile)
        }),
        (_, Some(reason), _) => Err(reason),
        (_, None, None) => Err(AbandonReason::OutOfMemory),
        (None, None, _) => Err(AbandonReason::OutOfMemory), // not reached: see `choose`
    };
    let profile = match profile {
        Ok(profile) => profile,
        Err(reason) => return abandon_profile(entry, reason),
    };
    // The key's previous plan, held for merging into the new one.
    let base = entry.and_then(Pinned::current);
    let job = Job {
        profile,
        entry,
        serial,
        base,
    };
    if !worker::submit(job) {
        abandon_profile(entry, AbandonReason::PlannerBusy);
    }
}

/// A profile given up: counted, the key back to its previous state, and after a failure
/// that would recur (memory, bounds) no new profile of the key for a while.
fn abandon_profile(entry: Option<&'static KeyEntry>, reason: AbandonReason) {
    stats::add(&GLOBAL.profiles_abandoned[reason as usize], 1);
    let Some(e) = entry else { return };
    stats::add(&e.counters.profiles_abandoned, 1);
    e.abandon_profile();
    if matches!(reason, AbandonReason::OutOfMemory | AbandonReason::Bound) {
        e.back_off();
    }
}

fn finish_replay(p: &PassState, counters: &mut PassCounters, abandon: Option<AbandonReason>) {
    if !p.slabs.is_null() {
        // SAFETY: the pass registered with `slabs` at start; it stays alive until released
        // here, and every context left.
        let released = unsafe { (*p.slabs).release(p.inst(), abandon.is_some(), !p.bound) };
        note_released(&released);
        if !p.bound && crate::replay::slab::instance::lends_pending() {
            registry::lend_idle_blocks();
        }
    }
    stats::add(&GLOBAL.passes_replayed, 1);
    GLOBAL.add_replay(counters);
    let Some(e) = p.entry else { return };
    e.count_replay(counters);
    if abandon.is_some() {
        // Unwinding or exiting: what it allocated says nothing about the profile.
        stats::add(&GLOBAL.replays_abandoned, 1);
        stats::add(&e.counters.replays_abandoned, 1);
        return;
    }
    let cfg = config::config();
    let diverged = e.note_divergence(p.slabs, counters, cfg.miss_window, cfg.replan_miss_ratio);
    if diverged && !p.slabs.is_null() {
        e.mark_stale(p.slabs);
    }
}

fn note_released(r: &Released) {
    stats::add(&GLOBAL.slots_demoted, r.demoted);
    stats::add(&GLOBAL.pages_returned_bytes, r.pages_returned);
}

/// Between two polls of an unbound pass, which its caller (the future wrapper) holds
/// exclusively: a replay whose instance has no live slot gives the instance's block back
/// (`Slabs::park`), so that the memory serves other passes until this one is entered
/// again (`supply`). Nothing happens while anyone else can reach the pass (a handle, a
/// helper context: helpers hand out slots of the instance too). With the re-entrancy
/// guard set.
pub(crate) fn park(p: &PassState) {
    let inst = p.inst();
    if p.kind != PassKind::Replay || inst.is_null() || p.bound || !p.alone() {
        return;
    }
    let main = p.check_out_main().cast::<Context>();
    // SAFETY: checked out: this thread owns the main context until it checks it in.
    let Some(m) = (unsafe { main.as_mut() }) else {
        return;
    };
    // SAFETY: the pass holds `inst` and is registered with its plan until it is
    // finished; alone and between polls, nobody hands out its slots.
    if m.replay.has_slab() && unsafe { (*p.slabs).park(inst) } {
        m.replay.detach();
        stats::add(&GLOBAL.parks, 1);
    }
    p.check_in_main(main.cast());
}

/// Gives up this thread's running profile or replay context for `reason`, from the
/// allocation path (with the re-entrancy guard set): the rest of the context runs on the
/// backend, uncounted, and the pass is abandoned when it finishes.
pub(crate) fn abandon_running(ctx: &mut Context, reason: AbandonReason) {
    if ctx.abandoned.is_some() {
        return;
    }
    ctx.abandoned = Some(reason);
    // Dropping the recorder frees its buffers now (the guard is set: to the backend).
    drop(ctx.recorder.take());
    thread::with(|s| thread::set_path(s, AllocPath::Backend), ());
}

//! How threads enter and leave a pass's contexts: the main one ([`enter_main`], by `pass()`
//! or a future wrapper's poll) or a helper ([`enter_helper`], by `PassHandle::enter`), and
//! [`leave`] it. A thread's contexts form a stack in its thread state; contexts are
//! identified by serial numbers, not by their place on it: whatever order guards are
//! dropped in, each leaves its own context or nothing. An unbound pass between two polls
//! may [`park`]; a context cut short from the allocation path is abandoned
//! ([`abandon_running`]).

use std::ptr;

use crate::config;
use crate::pass::context::{self, Context, UNKNOWN};
use crate::pass::finish::{end, leave_resources};
use crate::pass::state::{PassKind, PassState};
use crate::profiling::recorder::{counted_lanes, Bounds, Recorder};
use crate::replay::slab::pool::Lend;
use crate::stats::{self, AbandonReason, MissReason, GLOBAL};
use crate::support::thread::{self, AllocPath};

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

/// Registers this thread's sentinel (at its first pass); whether it is alive (not during
/// or after the thread's exit).
pub(super) fn sentinel() -> bool {
    SENTINEL.try_with(|_| ()).is_ok()
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
        let Some(taken) = slabs.take(Lend::All) else {
            return;
        };
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
    let mut ctx = Context::new(pass, root, Some(id));
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
fn helper_name(id: u32, buf: &mut [u8; 16]) -> &str {
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
        c.replay.flush_freed(); // before the pass can give the instance back
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
    let keep = sentinel();
    // SAFETY: popped above and referenced nowhere else; not used after this.
    unsafe { context::unboxed(ctx, keep) };
    leave_resources(p);
    if p.release() {
        // SAFETY: the last reference.
        drop(unsafe { Box::from_raw(pass.cast_mut()) });
    }
}

/// The allocation path of `ctx`.
pub(super) fn path_of(ctx: &Context) -> AllocPath {
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
    sentinel();
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
    // Cells it kept count as live to `park`.
    m.replay.flush_freed();
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

//! How a pass starts: it is made profiled, replayed or run on the backend ([`choose`]):
//! the key's state (see `registry`), admission to the plan cache, and a backoff after
//! abandoned profiles decide. `pass()` makes one owned by its thread and enters its main
//! context at once ([`start`]); `Pass::new` makes one owned by the caller ([`create`]).

use crate::config::{self, Config, Mode};
use crate::pass::context::{self, Context};
use crate::pass::state::{PassKind, PassState};
use crate::pass::{enter, finish, fork};
use crate::plan::worker;
use crate::profiling::recorder::{counted_lanes, Bounds, Recorder};
use crate::registry::{self, cache, KeyEntry, KeyState};
use crate::replay::slab::pool::Lend;
use crate::stats::{self, AbandonReason, GLOBAL};
use crate::support::fallible::try_box;

/// `pass()`: makes a pass of `key` owned by this thread and enters its main context.
/// Returns the pass and the main context's serial.
pub(crate) fn start(key: &str) -> Option<(*const PassState, u64)> {
    debug_assert!(
        context::current().is_null(),
        "pass() inside a pass is a scope"
    );
    enter::sentinel();
    let p = make(key, true)?;
    // SAFETY: just made; this thread holds the owner's reference.
    let serial = enter::enter_main(unsafe { &*p }).expect("a new pass's main context is free");
    Some((p, serial))
}

/// `Pass::new`: makes a pass of `key` owned by the caller, not entered anywhere.
pub(crate) fn create(key: &str) -> Option<*const PassState> {
    make(key, false)
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
    let p = Box::into_raw(state);
    // SAFETY: just made; this function owns it until it returns it.
    let mut main = Context::new(unsafe { &*p }, 0, None);
    // The owner's pointer: an undecided pass's classification writes through it.
    main.pass = p;
    main.recorder = recorder;
    let Some(main) = try_box(main) else {
        // SAFETY: just made; finished and freed at once, as an abandoned pass.
        unsafe {
            (*p).note_abandoned(AbandonReason::OutOfMemory);
            finish::finish(&*p);
            drop(Box::from_raw(p));
        }
        return None;
    };
    // SAFETY: as above.
    unsafe { (*p).check_in_main(Box::into_raw(main).cast()) };
    Some(p)
}

/// Profile, replay or backend for this pass of `entry`; the recorder of a profile. A
/// bound pass of a key with shape classes is left undecided: its first requests choose
/// the class, which then chooses so (`classify.rs`).
fn choose(entry: &'static KeyEntry, cfg: &Config, pass: &mut PassState) -> Option<Recorder> {
    if cfg.mode == Mode::Replay && pass.bound && entry.classes.classed() {
        pass.undecided = true;
        return None;
    }
    choose_for(entry, cfg, pass)
}

/// [`choose`] for `entry` itself (a key, or the class an undecided pass belongs to).
pub(crate) fn choose_for(
    entry: &'static KeyEntry,
    cfg: &Config,
    pass: &mut PassState,
) -> Option<Recorder> {
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
    // Without one, every allocation misses with `NoSlab`. A key's shape classes take
    // turns on the slots' block their passes give back (`finish_replay`).
    if pass.bound {
        if let Some(inst) = s.take(Lend::for_pass(true, entry.has_shape_classes())) {
            pass.set_inst(inst);
        }
    }
    None
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

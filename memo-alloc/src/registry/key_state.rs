//! A key's life: its states and the only transitions between them.
//!
//! A key's state and its plan are one word ([`StateWord`]: a [`KeyState`], its tag in the
//! low bits of the plan pointer), changed only by one CAS from an expected state to the
//! next. So "planned without a plan" cannot be written, and a publication racing an
//! eviction cannot be lost: whichever CAS comes second fails and looks again.
//!
//! ```text
//!             begin_profile                 publish(q)
//!  Unplanned ───────────────> Profiling(-) ────────────> Planned(q) <──┐
//!      ^  <──────────────────────  │ abandon                │  │       │ abandon
//!      │                                                    │  │ mark_stale
//!      │ evict                       evict                  │  v       │
//!      └─────────────────────────────────────────────────── Stale(q) ──┤
//!                                                             │ begin_profile
//!                                        Profiling(q) <───────┘       │
//!                                          │ publish(r): Planned(r)   │
//!                                          │ evict: Profiling(-)  ────┘
//! ```
//!
//! While a key is re-profiled (`Profiling(q)`), other passes keep replaying `q`. A plan
//! loaded from a file is installed (`Unplanned` or `Planned(p)` to `Planned(q)`). What
//! each transition does besides (retiring the plan taken out, the divergence window, the
//! counters) is the key entry's (`key_entry.rs`); who moves a key along is the pass
//! (`pass::start`, `pass::finish`), the planner (`plan::job`) and the cache (`cache.rs`).

use std::fmt;
use std::ptr;

use serde::{Deserialize, Serialize};

use crate::replay::slab::pool::Slabs;
use crate::support::sync::{AtomicUsize, Ordering};

/// A key's state (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyState {
    /// No plan; the next admitted pass profiles.
    Unplanned,
    /// A pass is recording; the plan it will replace, if any, is still replayed.
    Profiling(*mut Slabs),
    /// Passes replay the plan.
    Planned(*mut Slabs),
    /// Replays of the plan diverged: the next pass re-profiles (others keep replaying).
    Stale(*mut Slabs),
}

const TAG_BITS: usize = 2;
const TAG_MASK: usize = (1 << TAG_BITS) - 1;

impl KeyState {
    fn encode(self) -> usize {
        let (ptr, tag) = match self {
            KeyState::Unplanned => (ptr::null_mut(), 0),
            KeyState::Profiling(p) => (p, 1),
            KeyState::Planned(p) => (p, 2),
            KeyState::Stale(p) => (p, 3),
        };
        debug_assert_eq!(ptr as usize & TAG_MASK, 0, "plans are aligned");
        ptr as usize | tag
    }

    fn decode(word: usize) -> KeyState {
        let p = (word & !TAG_MASK) as *mut Slabs;
        match word & TAG_MASK {
            0 => KeyState::Unplanned,
            1 => KeyState::Profiling(p),
            2 => KeyState::Planned(p),
            _ => KeyState::Stale(p),
        }
    }

    /// The plan this state holds, or null.
    pub(crate) fn plan(self) -> *mut Slabs {
        match self {
            KeyState::Unplanned => ptr::null_mut(),
            KeyState::Profiling(p) | KeyState::Planned(p) | KeyState::Stale(p) => p,
        }
    }

    /// The state as reports give it.
    pub(crate) fn plan_state(self) -> PlanState {
        match self {
            KeyState::Unplanned => PlanState::Unplanned,
            KeyState::Profiling(_) => PlanState::Profiling,
            KeyState::Planned(_) => PlanState::Planned,
            KeyState::Stale(_) => PlanState::Replan,
        }
    }
}

/// Where a pass key's plan stands, as [`crate::report`] gives it (the key's states of
/// the module documentation, without their plans). It serialises as its name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PlanState {
    /// No plan: the key's next admitted pass profiles.
    #[default]
    Unplanned,
    /// A pass of the key is profiled, or its profile is being planned; the key's other
    /// passes replay its previous plan, if it has one.
    Profiling,
    /// The key's passes replay its plan.
    Planned,
    /// Replays of the plan diverged: the key's next pass profiles it again (the others
    /// keep replaying it meanwhile).
    Replan,
}

impl PlanState {
    /// The state's name: `unplanned`, `profiling`, `planned` or `replan`.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanState::Unplanned => "unplanned",
            PlanState::Profiling => "profiling",
            PlanState::Planned => "planned",
            PlanState::Replan => "replan",
        }
    }
}

impl fmt::Display for PlanState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A key's state and plan, as one atomic word.
pub(crate) struct StateWord(AtomicUsize);

impl StateWord {
    /// `Unplanned`.
    pub(crate) fn new() -> StateWord {
        StateWord(AtomicUsize::new(KeyState::Unplanned.encode()))
    }

    /// The current state.
    pub(crate) fn get(&self) -> KeyState {
        KeyState::decode(self.0.load(Ordering::Acquire))
    }

    /// The one place the state changes: `from -> to` in one CAS; `false` (and no change)
    /// if the state is not `from`.
    fn transition(&self, from: KeyState, to: KeyState) -> bool {
        self.0
            .compare_exchange(
                from.encode(),
                to.encode(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// `Unplanned -> Profiling(-)` or `Stale(p) -> Profiling(p)`: this pass profiles.
    pub(crate) fn begin_profile(&self) -> bool {
        match self.get() {
            from @ KeyState::Unplanned => {
                self.transition(from, KeyState::Profiling(ptr::null_mut()))
            }
            from @ KeyState::Stale(p) => self.transition(from, KeyState::Profiling(p)),
            _ => false,
        }
    }

    /// `Profiling(p) -> Planned(new)`: the plan replaced (`p`, null: none); `Err(new)` if
    /// the key is not being profiled (only the profiling pass publishes: not reached).
    pub(crate) fn publish(&self, new: *mut Slabs) -> Result<*mut Slabs, *mut Slabs> {
        loop {
            let from = self.get();
            let KeyState::Profiling(old) = from else {
                return Err(new);
            };
            if self.transition(from, KeyState::Planned(new)) {
                return Ok(old);
            }
        }
    }

    /// A plan loaded from a file: `Unplanned -> Planned(new)`, or `Planned(p) ->
    /// Planned(new)` (a later file of the same key); the plan replaced (null: none).
    /// `Err(new)` in any other state (plans are loaded at the first pass, before any
    /// profile: not reached).
    pub(crate) fn install(&self, new: *mut Slabs) -> Result<*mut Slabs, *mut Slabs> {
        loop {
            let from = self.get();
            let old = match from {
                KeyState::Unplanned => ptr::null_mut(),
                KeyState::Planned(p) => p,
                _ => return Err(new),
            };
            if self.transition(from, KeyState::Planned(new)) {
                return Ok(old);
            }
        }
    }

    /// A profile given up: `Profiling(p) -> Planned(p)`, or `-> Unplanned` without a plan.
    pub(crate) fn abandon_profile(&self) {
        loop {
            let from = self.get();
            let KeyState::Profiling(p) = from else { return };
            let to = if p.is_null() {
                KeyState::Unplanned
            } else {
                KeyState::Planned(p)
            };
            if self.transition(from, to) {
                return;
            }
        }
    }

    /// `Planned(p) -> Stale(p)`: replays of `p` diverged.
    pub(crate) fn mark_stale(&self, p: *mut Slabs) -> bool {
        self.transition(KeyState::Planned(p), KeyState::Stale(p))
    }

    /// Takes the plan out of the key (`Planned(p)`/`Stale(p) -> Unplanned`,
    /// `Profiling(p) -> Profiling(-)`) and returns it; `None` if the key had none.
    pub(crate) fn evict(&self) -> Option<*mut Slabs> {
        loop {
            let from = self.get();
            let to = match from {
                KeyState::Planned(_) | KeyState::Stale(_) => KeyState::Unplanned,
                KeyState::Profiling(p) if !p.is_null() => KeyState::Profiling(ptr::null_mut()),
                _ => return None,
            };
            if self.transition(from, to) {
                return Some(from.plan());
            }
        }
    }
}

//! The plan registry: pass key to entry (`table.rs`: lock-free lookups in a fixed table),
//! each key's entry (`key_entry.rs`), its shape classes (`classes.rs`: signatures and a
//! class's state; `class_table.rs`: a key's classes found by signature), its life as a
//! state machine (`key_state.rs`), the window of replays that re-profiles it when they
//! diverge (`divergence.rs`), which keys keep plans (`cache.rs`), and the safe
//! reclamation of the plans taken out of keys (`reclaim.rs`).
//!
//! It may use `replay` (a key's plan is a compiled plan with its slab instances), `stats`
//! and `support`.

pub(crate) mod cache;
mod class_table;
mod classes;
mod divergence;
mod key_entry;
mod key_state;
pub(crate) mod reclaim;
mod table;

pub(crate) use classes::{close, Signature};
pub(crate) use key_entry::{now, KeyEntry, Summary, SUMMARIES};
pub(crate) use key_state::KeyState;
pub use key_state::PlanState;
pub(crate) use table::{class_entry, entry, find, for_each, lend_idle_blocks, totals, INSERT};

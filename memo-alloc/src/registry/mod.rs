//! The plan registry.

pub(crate) mod cache;
mod divergence;
mod key_entry;
mod key_state;
pub(crate) mod reclaim;
mod table;

pub(crate) use key_entry::{now, KeyEntry, Summary, SUMMARIES};
pub(crate) use key_state::KeyState;
pub(crate) use table::{entry, find, for_each, lend_idle_blocks, totals, INSERT};

//! Plumbing every other part uses: atomics and locks, fallible allocation, hashing.

pub(crate) mod fallible;
pub(crate) mod hash;
pub(crate) mod sync;
pub(crate) mod thread;

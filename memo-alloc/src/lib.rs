//! `memo-alloc`: the profiling `#[global_allocator]` of memomalloc.
//!
//! The first run of a *pass* (one request through a model, say) is profiled: every
//! allocation's size, alignment, lifetime and provenance is recorded. `memo-planner`
//! then places the pass's short-lived allocations in one slab, and later runs of the
//! pass are served from a slab by pointer arithmetic, without a heap lock.
//!
//! This crate is being built; see `docs/ARCHITECTURE.md` for the plan.

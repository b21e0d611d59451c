//! The trace and plan documents (`trace.rs`: versioned JSON and its checks, public as
//! `memo_alloc::trace`) and their files (`files.rs`: `MEMO_TRACE_DIR` output and
//! `MEMO_PLAN_DIR` input, public as `memo_alloc::files`).
//!
//! It may use `memory` (geometry, lane classes), `stats` (why a plan file is rejected)
//! and `support`.

pub mod files;
pub mod trace;

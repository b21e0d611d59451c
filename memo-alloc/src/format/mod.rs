//! Trace and plan documents, and their files.

pub mod files;
pub mod trace;

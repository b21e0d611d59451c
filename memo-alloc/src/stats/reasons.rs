//! Why things did not go the planned way: a replayed allocation that missed its slab
//! ([`MissReason`]), a profile given up ([`AbandonReason`]), a plan file not loaded
//! ([`PlanRejection`]). Each serialises as its name (`too_large`, `out_of_memory`, ...).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why an allocation inside a replayed pass was served by the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[repr(usize)]
pub enum MissReason {
    /// No slot was planned for this (scope, ordinal): an extra allocation or an unknown op.
    Unplanned = 0,
    /// The allocation escaped the profiled pass, so it is never planned; or its slot was
    /// demoted (its blocks kept outliving replayed passes, or the plan's overlap checks
    /// for it were too costly).
    Escaping = 1,
    /// The request is larger than the slot.
    TooLarge = 2,
    /// The request needs a stricter alignment than the slot has.
    Alignment = 3,
    /// A slot overlapping this one in address is still live (the program diverged).
    Overlap = 4,
    /// A realloc needed more room than its slot: moved to the backend.
    ReallocGrow = 5,
    /// The pass got no slab (pool full or no address space): all its allocations missed.
    NoSlab = 6,
}

/// Number of [`MissReason`]s.
pub const MISS_REASONS: usize = 7;

impl MissReason {
    /// Every reason, in counter order.
    pub const ALL: [MissReason; MISS_REASONS] = [
        MissReason::Unplanned,
        MissReason::Escaping,
        MissReason::TooLarge,
        MissReason::Alignment,
        MissReason::Overlap,
        MissReason::ReallocGrow,
        MissReason::NoSlab,
    ];

    /// Short name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            MissReason::Unplanned => "unplanned",
            MissReason::Escaping => "escaping",
            MissReason::TooLarge => "too_large",
            MissReason::Alignment => "alignment",
            MissReason::Overlap => "overlap",
            MissReason::ReallocGrow => "realloc_grow",
            MissReason::NoSlab => "no_slab",
        }
    }
}

/// Why a profile was given up before it was planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[repr(usize)]
pub enum AbandonReason {
    /// The backend failed an allocation, or the recorder's own memory could not grow.
    OutOfMemory = 0,
    /// The pass recorded more events or bytes than `Config::max_profile_events` /
    /// `Config::max_profile_bytes`.
    Bound = 1,
    /// The pass unwound (a panic).
    Panic = 2,
    /// The thread exited with the pass open (its guard was leaked).
    ThreadExit = 3,
    /// The planner's queue was full.
    PlannerBusy = 4,
    /// A pass's future was dropped before it completed.
    Cancelled = 5,
}

/// Number of [`AbandonReason`]s.
pub const ABANDON_REASONS: usize = 6;

impl AbandonReason {
    /// Every reason, in counter order.
    pub const ALL: [AbandonReason; ABANDON_REASONS] = [
        AbandonReason::OutOfMemory,
        AbandonReason::Bound,
        AbandonReason::Panic,
        AbandonReason::ThreadExit,
        AbandonReason::PlannerBusy,
        AbandonReason::Cancelled,
    ];

    /// Short name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            AbandonReason::OutOfMemory => "out_of_memory",
            AbandonReason::Bound => "bound",
            AbandonReason::Panic => "panic",
            AbandonReason::ThreadExit => "thread_exit",
            AbandonReason::PlannerBusy => "planner_busy",
            AbandonReason::Cancelled => "cancelled",
        }
    }
}

/// Why a plan file in `MEMO_PLAN_DIR` was not loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[repr(usize)]
pub enum PlanRejection {
    /// The file could not be read.
    Unreadable = 0,
    /// Not JSON, or not a document of the expected shape (a truncated file, say).
    Malformed = 1,
    /// Another format name or version.
    Unsupported = 2,
    /// A field out of bounds or inconsistent with the others.
    Invalid = 3,
    /// Two slots alive at the same time (by the lifetimes the file gives them) share
    /// addresses: replaying the plan would hand one block out twice.
    Overlapping = 4,
}

/// Number of [`PlanRejection`]s.
pub const PLAN_REJECTIONS: usize = 5;

impl PlanRejection {
    /// Every reason, in counter order.
    pub const ALL: [PlanRejection; PLAN_REJECTIONS] = [
        PlanRejection::Unreadable,
        PlanRejection::Malformed,
        PlanRejection::Unsupported,
        PlanRejection::Invalid,
        PlanRejection::Overlapping,
    ];

    /// Short name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            PlanRejection::Unreadable => "unreadable",
            PlanRejection::Malformed => "malformed",
            PlanRejection::Unsupported => "unsupported",
            PlanRejection::Invalid => "invalid",
            PlanRejection::Overlapping => "overlapping",
        }
    }
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for AbandonReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for PlanRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

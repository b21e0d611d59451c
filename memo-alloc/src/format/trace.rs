//! The trace of a profiled pass (or of a whole program) and the plan made from a pass, as
//! versioned JSON documents.
//!
//! A trace (`"format": "memomalloc-trace"`, `"version"` 1 or [`TRACE_VERSION`]) lists the
//! scope tree and every allocation: its tag, tagged pointer, size, alignment, kind, alloc and
//! free time (event counter ticks), scope and ordinal, realloc parent, whether it escaped
//! (outlived the pass, or the recording), and its call site when captured. Version 2 adds,
//! where they were recorded, real time and threads: each allocation's thread and monotonic
//! nanoseconds of its allocation and free ([`AllocWhen`]), and the trace's [`Recording`]
//! (its threads, the real time of each scope, and for a whole-program recording what was
//! recorded and how). A version 1 trace reads as a version 2 trace without them.
//!
//! A plan (`"format": "memomalloc-plan"`, `"version": 1`) lists the scope tree and one slot
//! per planned allocation key (scope, ordinal) with its offset, or none for allocations that
//! escaped. `MEMO_TRACE_DIR` receives both; `MEMO_PLAN_DIR` is read for plans; `MEMO_PROFILE`
//! writes a whole-program trace (see `Profiler`).

use serde::{Deserialize, Serialize};

/// Format name of trace documents.
pub const TRACE_FORMAT: &str = "memomalloc-trace";
/// Format name of plan documents.
pub const PLAN_FORMAT: &str = "memomalloc-plan";
/// Version of plan documents written by this build (readers accept it and reject others),
/// and the first version of trace documents.
pub const FORMAT_VERSION: u32 = 1;
/// Version of trace documents written by this build: version 1 with real time and threads
/// ([`AllocWhen`], [`Recording`]). Readers accept versions 1 to this one.
pub const TRACE_VERSION: u32 = 2;

/// Checks a document's format name and that its version lies in `versions`.
fn check_header(
    format: &str,
    expected: &str,
    version: u32,
    versions: std::ops::RangeInclusive<u32>,
) -> Result<(), String> {
    if format != expected {
        return Err(format!("format is {format:?}, expected {expected:?}"));
    }
    if !versions.contains(&version) {
        return Err(format!(
            "version {version} is not supported (expected {} to {})",
            versions.start(),
            versions.end()
        ));
    }
    Ok(())
}

/// Whether `version` is a trace version this build reads.
pub fn trace_version_supported(version: u32) -> bool {
    (FORMAT_VERSION..=TRACE_VERSION).contains(&version)
}

/// Checks that scope 0 is the pass, ids are indices, and every parent comes earlier.
fn check_scope_tree(scopes: &[TraceScope]) -> Result<(), String> {
    if scopes.first().is_none_or(|s| s.parent.is_some()) {
        return Err("scope 0 must be the pass (no parent)".into());
    }
    for (i, s) in scopes.iter().enumerate() {
        if s.id as usize != i {
            return Err(format!("scope #{i} has id {}", s.id));
        }
        if i > 0 && s.parent.is_none_or(|p| p as usize >= i) {
            return Err(format!("scope #{i} must have an earlier parent"));
        }
    }
    Ok(())
}

/// One scope of a pass: the pass itself (id 0, no parent) or an op.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceScope {
    /// Index in the pass's scope list.
    pub id: u32,
    /// Enclosing scope; `None` for the pass.
    pub parent: Option<u32>,
    /// The op name (the pass key for the root).
    pub name: String,
    /// How many same-named siblings were entered before this one under the same parent.
    pub occurrence: u32,
    /// Event time at which the scope was entered (0 for the pass); absent in traces
    /// written before scope times were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enter: Option<u64>,
    /// Event time at which the scope was exited (the pass's final time for the pass and
    /// for scopes still open at its end); absent in older traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<u64>,
}

/// How an allocation was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocKind {
    /// `GlobalAlloc::alloc`.
    Alloc,
    /// `GlobalAlloc::alloc_zeroed`.
    AllocZeroed,
    /// `GlobalAlloc::realloc`: continues the allocation `realloc_parent`.
    Realloc,
}

/// One allocation of a traced pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceAlloc {
    /// Index in the trace.
    pub id: u32,
    /// The 16-bit tag (the low bits of `id`).
    pub tag: u16,
    /// The tagged pointer, as an integer.
    pub ptr: u64,
    /// Requested size in bytes.
    pub size: u64,
    /// Requested alignment.
    pub align: u64,
    /// How it was made.
    pub kind: AllocKind,
    /// Event time of the allocation.
    pub alloc: u64,
    /// Event time of the free (or of the realloc that moved it); `None` if still live at
    /// pass end.
    pub free: Option<u64>,
    /// Innermost scope at the allocation.
    pub scope: u32,
    /// Ordinal among the allocations of that scope instance; `None` for reallocs.
    pub ordinal: Option<u32>,
    /// The allocation this realloc continues.
    pub realloc_parent: Option<u32>,
    /// Still live at pass end (or its free was not seen): never planned into a slab.
    pub escaping: bool,
    /// Resolved call-site frames, innermost first, when captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_site: Option<Vec<String>>,
    /// Its thread and real time, when recorded (trace version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<AllocWhen>,
}

/// Where and when in real time an allocation was made and freed (trace version 2).
/// Nanoseconds are of the monotonic clock, counted from the recording's start
/// ([`Recording::start_ns`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocWhen {
    /// The thread that made it (an index into [`Recording::threads`]).
    pub thread: u32,
    /// When it was made.
    pub ns: u64,
    /// The thread that freed it (or whose realloc moved it), when seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_thread: Option<u32>,
    /// When it was freed (or moved), when seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_ns: Option<u64>,
}

/// A thread of a recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceThread {
    /// Its index (what [`AllocWhen::thread`] names).
    pub id: u32,
    /// The operating system's thread id.
    pub tid: u64,
    /// Its name, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What a scope of a recording is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// The root of a whole-program recording.
    Program,
    /// A pass (the root of a pass trace; a `pass()` in a whole-program recording).
    Pass,
    /// An op scope (`op()`).
    #[default]
    Op,
    /// A helper context of a pass (`@<id>`).
    Helper,
}

/// The real time of one scope of a recording: the first time it was entered and the last
/// time it was left, and the thread that entered it first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeWhen {
    /// What the scope is.
    pub kind: ScopeKind,
    /// The thread that entered it first.
    pub thread: u32,
    /// When it was entered (ns from the recording's start).
    pub enter_ns: u64,
    /// When it was left (ns from the recording's start).
    pub exit_ns: u64,
}

/// How a whole program was recorded (`MEMO_PROFILE`, `Profiler`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WholeProgram {
    /// The process id.
    pub pid: u64,
    /// The command line.
    pub command: String,
    /// Call sites: 0 none, 1 every allocation's, `n` the allocation during which its
    /// thread's allocated bytes pass each multiple of `n` (so every allocation of at least
    /// `n` bytes).
    pub site_sample_bytes: u64,
    /// The recording stopped at its memory cap: events after `events` were not recorded,
    /// and what is live at the end was live when it stopped.
    pub truncated: bool,
    /// Events not recorded: past the cap, or while the trace was written.
    pub dropped_events: u64,
    /// Frees of blocks the recording never saw allocated (made before it started, or on a
    /// thread before it was observed): left out.
    pub unknown_frees: u64,
}

/// What a version 2 trace recorded beside the version 1 fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Recording {
    /// The monotonic clock (ns) at the recording's start: every `ns` is counted from it.
    pub start_ns: u64,
    /// Nanoseconds from the start to the end of the recording.
    pub duration_ns: u64,
    /// The threads, by index.
    pub threads: Vec<TraceThread>,
    /// The real time of every scope (by scope id), or empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<ScopeWhen>,
    /// Set for a whole-program recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<WholeProgram>,
}

/// A use of a live allocation recorded by `observe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceUse {
    /// Event time.
    pub time: u64,
    /// The allocation containing the observed pointer.
    pub allocation: u32,
    /// Offset of the observed pointer inside it.
    pub offset: u64,
}

/// A profiled pass, or a whole program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// Always [`TRACE_FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] or [`TRACE_VERSION`].
    pub version: u32,
    /// The pass key (the program's name for a whole-program recording).
    pub key: String,
    /// Number of events (the pass's final time).
    pub events: u64,
    /// The scope tree; `scopes[0]` is the pass (or the program).
    pub scopes: Vec<TraceScope>,
    /// Every allocation, in order.
    pub allocations: Vec<TraceAlloc>,
    /// Uses recorded by `observe`.
    #[serde(default)]
    pub uses: Vec<TraceUse>,
    /// Real time and threads, when recorded (trace version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<Recording>,
}

/// One logical buffer of a trace: a realloc chain from its first allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The chain's first allocation (its key: scope and ordinal).
    pub root: u32,
    /// Alloc time of the root.
    pub lower: u64,
    /// Free time of the last member (`None`: escaping).
    pub upper: Option<u64>,
    /// Largest size over the chain.
    pub size: u64,
    /// Largest alignment over the chain.
    pub align: u64,
    /// Whether any member escaped.
    pub escaping: bool,
}

impl Trace {
    /// Checks the document's header and internal consistency: the scope tree (scope 0 is
    /// the pass, every other scope has an earlier parent, scope times inside the pass),
    /// and every allocation (its index, scope, alignment, times and realloc parent). The
    /// error names the first inconsistency found.
    pub fn check(&self) -> Result<(), String> {
        check_header(
            &self.format,
            TRACE_FORMAT,
            self.version,
            FORMAT_VERSION..=TRACE_VERSION,
        )?;
        check_scope_tree(&self.scopes)?;
        self.check_recording()?;
        for (i, s) in self.scopes.iter().enumerate() {
            if let (Some(enter), Some(exit)) = (s.enter, s.exit) {
                if enter > exit || exit > self.events {
                    return Err(format!(
                        "scope #{i} ({:?}) is entered at {enter} and exited at {exit} in a pass of {} events",
                        s.name, self.events
                    ));
                }
            }
        }
        for (i, a) in self.allocations.iter().enumerate() {
            if a.id as usize != i {
                return Err(format!("allocation #{i} has id {}", a.id));
            }
            if a.scope as usize >= self.scopes.len() {
                return Err(format!(
                    "allocation #{i} refers to unknown scope {}",
                    a.scope
                ));
            }
            if !a.align.is_power_of_two() {
                return Err(format!(
                    "allocation #{i} has alignment {}, not a power of two",
                    a.align
                ));
            }
            if a.alloc >= self.events {
                return Err(format!(
                    "allocation #{i} is made at {} in a pass of {} events",
                    a.alloc, self.events
                ));
            }
            if let Some(free) = a.free {
                if free < a.alloc || free > self.events {
                    return Err(format!(
                        "allocation #{i} is made at {} and freed at {free} in a pass of {} events",
                        a.alloc, self.events
                    ));
                }
            }
            if let Some(p) = a.realloc_parent {
                if p as usize >= i {
                    return Err(format!(
                        "allocation #{i} continues allocation {p}, which is not an earlier one"
                    ));
                }
            }
        }
        for (i, u) in self.uses.iter().enumerate() {
            if u.allocation as usize >= self.allocations.len() {
                return Err(format!(
                    "use #{i} refers to unknown allocation {}",
                    u.allocation
                ));
            }
        }
        Ok(())
    }

    /// Checks the version 2 fields: every thread index names a thread, scope times are
    /// one per scope, and no free comes before its allocation.
    fn check_recording(&self) -> Result<(), String> {
        let threads = self.recording.as_ref().map_or(0, |r| r.threads.len());
        if let Some(r) = &self.recording {
            if !r.scopes.is_empty() && r.scopes.len() != self.scopes.len() {
                return Err(format!(
                    "recording.scopes has {} entries for {} scopes",
                    r.scopes.len(),
                    self.scopes.len()
                ));
            }
            if let Some(i) = r.scopes.iter().position(|s| s.thread as usize >= threads) {
                return Err(format!("recording.scopes[{i}] names an unknown thread"));
            }
            if let Some(i) = (0..r.threads.len()).find(|&i| r.threads[i].id as usize != i) {
                return Err(format!("thread #{i} has id {}", r.threads[i].id));
            }
        }
        for (i, a) in self.allocations.iter().enumerate() {
            let Some(w) = &a.when else { continue };
            let thread_ok = |t: u32| (t as usize) < threads;
            if !thread_ok(w.thread) || w.free_thread.is_some_and(|t| !thread_ok(t)) {
                return Err(format!("allocation #{i} names an unknown thread"));
            }
            if w.free_ns.is_some_and(|f| f < w.ns) {
                return Err(format!("allocation #{i} is freed before it is made"));
            }
        }
        Ok(())
    }

    /// Whether this trace records a whole program (not a pass).
    pub fn is_whole_program(&self) -> bool {
        self.recording.as_ref().is_some_and(|r| r.program.is_some())
    }

    /// The context of each scope: 0 for the pass's main context, `1 + k` for the scopes
    /// of its `k`-th helper context (a child of the pass named `@<id>`; see
    /// `PassHandle::enter`); and the number of contexts.
    pub fn contexts(&self) -> (Vec<u32>, u32) {
        contexts_of(&self.scopes)
    }
}

/// The context of each of `scopes` and the number of contexts (see [`Trace::contexts`]).
pub(crate) fn contexts_of(scopes: &[TraceScope]) -> (Vec<u32>, u32) {
    let mut of = vec![0u32; scopes.len()];
    let mut n = 1;
    for s in scopes {
        let c = match s.parent {
            None => 0,
            Some(0) if s.name.starts_with('@') => {
                n += 1;
                n - 1
            }
            Some(p) => of.get(p as usize).copied().unwrap_or(0),
        };
        if let Some(slot) = of.get_mut(s.id as usize) {
            *slot = c;
        }
    }
    (of, n)
}

/// What earlier profiles of a pass saw for one allocation key (merged into a new plan so
/// that plans converge: see `merge.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The smallest request.
    pub(crate) min: u64,
    /// The largest size (over the realloc chain).
    pub(crate) max: u64,
    /// The strictest alignment.
    pub(crate) align: u64,
}

pub use crate::memory::geometry::{plan_align, MAX_PLANNED_ALIGN};

/// One planned allocation key and where it goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanSlot {
    /// Scope of the allocation.
    pub scope: u32,
    /// Ordinal in that scope instance.
    pub ordinal: u32,
    /// Planned size (the largest over its realloc chain, and over the profiles merged
    /// into the plan).
    pub size: u64,
    /// The smallest size seen for this key over the merged profiles (absent: `size`).
    /// Replay matches a request to the slot when its size lies between the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size: Option<u64>,
    /// Planned alignment.
    pub align: u64,
    /// Offset in the slab; `None` when the allocation escaped the pass (served by the
    /// backend in replay).
    pub offset: Option<u64>,
    /// When the allocation was live in the profiled pass: `[alloc, free)` in the event
    /// clock of its context (absent: not known). A plan loaded from a file is checked
    /// with it: no two slots live at once may share an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<[u64; 2]>,
}

/// A plan document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFile {
    /// Always [`PLAN_FORMAT`].
    pub format: String,
    /// Always [`FORMAT_VERSION`].
    pub version: u32,
    /// The pass key.
    pub key: String,
    /// Strategy that made the plan.
    pub strategy: String,
    /// Slab height in bytes.
    pub height: u64,
    /// Offsets lower bound of the planned buffers.
    pub lower_bound: u64,
    /// Sum of the planned sizes (what a heap would hold with no reuse).
    pub naive: u64,
    /// The scope tree (as in the trace).
    pub scopes: Vec<TraceScope>,
    /// One slot per allocation key (requests served by lanes have none).
    pub slots: Vec<PlanSlot>,
    /// The size-class lanes, in a block of their own beside the slots' `height` (absent:
    /// none).
    #[serde(default, skip_serializing_if = "PlanLanes::is_none")]
    pub lanes: PlanLanes,
}

/// The lanes of a plan: requests of at most `max` bytes (size and alignment) take a cell
/// of their size class instead of a slot; class `k` (cells of `16 << k` bytes) has
/// `cells[k]` cells, laid out in the slab above the planned slots.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanLanes {
    /// The largest lane request: 0 (no lanes) or a power of two from 16 to 4096.
    pub max: u64,
    /// Cells per class, from 16 bytes up to `max` (fewer entries: no cells beyond).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<u32>,
    /// Lane requests of the profiled pass (a pass's work that no slot stands for).
    #[serde(default)]
    pub requests: u64,
    /// The lane requests that escaped the profiled pass: replay serves them from the
    /// backend, as it does every escaping allocation (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escapes: Vec<LaneEscape>,
}

/// A lane request that escaped its pass: the `ordinal`-th lane request (from 0) of scope
/// `scope`, of a `cell`-byte class. Replay counts each scope's lane requests and sends
/// this one to the backend when its class is `cell`'s (a request of another class there
/// means the pass went another way: it takes a cell as usual).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneEscape {
    /// The scope (an index into the plan's scopes).
    pub scope: u32,
    /// Its index among the scope's lane requests.
    pub ordinal: u32,
    /// The cell size of its class: a power of two from 16 to the lanes' `max`.
    pub cell: u64,
}

impl PlanLanes {
    /// No lanes: every request is matched to a slot.
    pub fn is_none(&self) -> bool {
        self.max == 0
    }

    /// Checks the bounds a slab can honour, for a plan of `scopes` scopes; the error
    /// names the field.
    fn check(&self, scopes: usize) -> Result<(), String> {
        if !crate::memory::lane_classes::valid_max(self.max) {
            return Err(format!(
                "lanes.max {} is not 0 or a power of two from 16 to 4096",
                self.max
            ));
        }
        if self.cells.len() > crate::memory::lane_classes::classes_below(self.max) {
            return Err(format!(
                "lanes.cells has {} classes, lanes of {} bytes have {}",
                self.cells.len(),
                self.max,
                crate::memory::lane_classes::classes_below(self.max)
            ));
        }
        if self.requests > MAX_LANE_REQUESTS {
            return Err(format!(
                "lanes.requests {} exceeds {MAX_LANE_REQUESTS}",
                self.requests
            ));
        }
        if let Some(k) = self
            .cells
            .iter()
            .position(|&c| c > crate::memory::lane_classes::MAX_CELLS)
        {
            return Err(format!(
                "lanes.cells[{k}] = {} exceeds {}",
                self.cells[k],
                crate::memory::lane_classes::MAX_CELLS
            ));
        }
        self.check_escapes(scopes)
    }

    /// Checks each escape's scope, ordinal and cell, and their order (by scope, then
    /// ordinal, each named once).
    fn check_escapes(&self, scopes: usize) -> Result<(), String> {
        let mut previous: Option<(u32, u32)> = None;
        for (i, e) in self.escapes.iter().enumerate() {
            if e.scope as usize >= scopes {
                return Err(format!(
                    "lanes.escapes[{i}] refers to unknown scope {}",
                    e.scope
                ));
            }
            if e.ordinal as u64 >= self.requests {
                return Err(format!(
                    "lanes.escapes[{i}] has ordinal {} in a plan of {} lane requests",
                    e.ordinal, self.requests
                ));
            }
            if !e.cell.is_power_of_two()
                || e.cell < crate::memory::lane_classes::cell_size(0)
                || e.cell > self.max
            {
                return Err(format!(
                    "lanes.escapes[{i}] has cell {}, not a lane class of at most {} bytes",
                    e.cell, self.max
                ));
            }
            if previous.is_some_and(|p| p >= (e.scope, e.ordinal)) {
                return Err(format!(
                    "lanes.escapes[{i}] is out of order (by scope, then ordinal, each once)"
                ));
            }
            previous = Some((e.scope, e.ordinal));
        }
        Ok(())
    }

    /// Bytes the cells take: the size of an instance's lane block.
    pub fn bytes(&self) -> u64 {
        (0..)
            .zip(&self.cells)
            .map(|(k, &c)| crate::memory::lane_classes::cell_size(k) * c as u64)
            .sum()
    }
}

impl PlanFile {
    /// Checks the document's header, its internal consistency and its bounds: scope
    /// occurrences and slot ordinals no larger than the document's own counts, sizes and
    /// alignments that a slab can honour, offsets inside the height, a height no slab
    /// exceeds ([`MAX_SLAB_HEIGHT`]). The error names the first field found wrong.
    pub fn check(&self) -> Result<(), String> {
        check_header(
            &self.format,
            PLAN_FORMAT,
            self.version,
            FORMAT_VERSION..=FORMAT_VERSION,
        )?;
        check_scope_tree(&self.scopes)?;
        if self.height > MAX_SLAB_HEIGHT {
            return Err(format!(
                "height {} exceeds the largest slab ({MAX_SLAB_HEIGHT} bytes)",
                self.height
            ));
        }
        self.lanes.check(self.scopes.len())?;
        // The cells take a block of their own (an instance's lane block).
        if self.lanes.bytes() > MAX_SLAB_HEIGHT {
            return Err(format!(
                "lanes of {} bytes exceed the largest slab ({MAX_SLAB_HEIGHT} bytes)",
                self.lanes.bytes()
            ));
        }
        for (i, s) in self.scopes.iter().enumerate() {
            if s.occurrence as usize >= self.scopes.len() {
                return Err(format!(
                    "scope #{i} has occurrence {} in a plan of {} scopes",
                    s.occurrence,
                    self.scopes.len()
                ));
            }
        }
        for (i, s) in self.slots.iter().enumerate() {
            if s.scope as usize >= self.scopes.len() {
                return Err(format!("slot #{i} refers to unknown scope {}", s.scope));
            }
            if s.ordinal as usize >= self.slots.len() {
                return Err(format!(
                    "slot #{i} has ordinal {} in a plan of {} slots",
                    s.ordinal,
                    self.slots.len()
                ));
            }
            if !s.align.is_power_of_two() || s.size == 0 {
                return Err(format!(
                    "slot #{i} has size {} and alignment {}",
                    s.size, s.align
                ));
            }
            if let Some(o) = s.offset {
                if s.align > MAX_PLANNED_ALIGN {
                    return Err(format!(
                        "slot #{i} is planned with alignment {}, above a slab base's {MAX_PLANNED_ALIGN}",
                        s.align
                    ));
                }
                if o % s.align != 0 || o.checked_add(s.size).is_none_or(|e| e > self.height) {
                    return Err(format!("slot #{i} at offset {o} does not fit the plan"));
                }
            }
        }
        Ok(())
    }
}

/// Most lane requests a plan may claim a pass makes (as many as slots it may have).
pub(crate) const MAX_LANE_REQUESTS: u64 = 1 << 24;

/// The largest slab height a plan may have (32 GiB): a plan document asking for more is
/// rejected rather than trusted.
pub const MAX_SLAB_HEIGHT: u64 = 1 << 35;

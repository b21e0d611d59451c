//! A profiled pass as the allocator keeps it: the recorder's own records (56 bytes an
//! allocation), the pass's scopes and uses, and the raw call-site frames.
//!
//! Planning reads a profile as it is (see `plan::document`). The trace document
//! ([`Trace`], 104 bytes an allocation and resolved call sites) is made from it only when
//! trace files are written, so planning a large pass does not hold a trace beside the
//! records it would be made from.

use std::collections::TryReserveError;

use crate::format::trace::{AllocKind, Trace, TraceAlloc, TraceScope, TraceUse};
use crate::format::trace::{TRACE_FORMAT, TRACE_VERSION};
use crate::profiling::lane_count::CountedLanes;
use crate::profiling::tag::TaggedPtr;

/// No index (scope parent, ordinal, realloc parent, call site).
pub(crate) const NONE: u32 = u32::MAX;
/// Free time of an allocation still live.
pub(crate) const LIVE: u64 = u64::MAX;
/// Frames kept per call site.
pub(crate) const FRAMES: usize = 12;

/// One allocation of a profiled pass.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    /// The tagged pointer (tag: the low 16 bits of the record's index).
    pub(crate) ptr: TaggedPtr,
    pub(crate) size: u64,
    /// Event time of the allocation.
    pub(crate) alloc: u64,
    /// Event time of the free (or of the realloc that moved it); [`LIVE`] if none.
    pub(crate) free: u64,
    pub(crate) scope: u32,
    /// Ordinal among the allocations of its scope instance; [`NONE`] for reallocs.
    pub(crate) ordinal: u32,
    /// The record a realloc continues; [`NONE`] otherwise.
    pub(crate) parent: u32,
    /// Index of the call site's first frame in [`Profile::frames`], or [`NONE`].
    pub(crate) site: u32,
    /// Alignment, log2.
    pub(crate) align_log2: u8,
    pub(crate) kind: AllocKind,
    /// The backend handed its address out again before we saw its free (freed on
    /// another thread): its lifetime is unknown, so it is treated as escaping.
    pub(crate) lost: bool,
}

// The planning of a large pass holds one per allocation.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Record>() == 56);

impl Record {
    /// The requested alignment.
    pub(crate) fn align(&self) -> u64 {
        1 << self.align_log2
    }

    /// Still live at pass end, or its free was not seen: never planned into a slab.
    pub(crate) fn escaping(&self) -> bool {
        self.free == LIVE || self.lost
    }

    /// The ordinal, for allocations that are not reallocs.
    pub(crate) fn ordinal(&self) -> Option<u32> {
        (self.ordinal != NONE).then_some(self.ordinal)
    }

    /// The record this realloc continues.
    pub(crate) fn parent(&self) -> Option<u32> {
        (self.parent != NONE).then_some(self.parent)
    }
}

/// The log2 of an alignment (a power of two in every profile; a trace read from
/// elsewhere may hold another value, taken as the next power of two).
pub(crate) fn align_log2(align: u64) -> u8 {
    align
        .max(1)
        .checked_next_power_of_two()
        .map_or(63, |a| a.trailing_zeros() as u8)
}

/// A profiled pass (see the module's documentation).
#[derive(Debug, Default)]
pub(crate) struct Profile {
    /// The pass key.
    pub(crate) key: String,
    /// Number of events (the pass's final time).
    pub(crate) events: u64,
    /// The scope tree; `scopes[0]` is the pass.
    pub(crate) scopes: Vec<TraceScope>,
    /// Every allocation, in order (index: id).
    pub(crate) records: Vec<Record>,
    /// Uses recorded by `observe`.
    pub(crate) uses: Vec<TraceUse>,
    /// Call-site instruction pointers, each site ended by a 0.
    pub(crate) frames: Vec<usize>,
    /// Requests the recorder counted for lanes instead of recording them (see
    /// `lane_count.rs`), over the contexts adopted.
    pub(crate) lanes: CountedLanes,
}

impl Profile {
    /// The trace document of the pass, call sites resolved to symbol names.
    pub(crate) fn to_trace(&self) -> Trace {
        let resolve_site = |site: u32| -> Option<Vec<String>> {
            let ips = self.frames.get(site as usize..)?;
            Some(resolve_frames(
                ips.iter().take_while(|&&ip| ip != 0).copied(),
            ))
        };
        let allocations = (0u32..)
            .zip(&self.records)
            .map(|(id, r)| TraceAlloc {
                id,
                tag: r.ptr.tag(),
                ptr: r.ptr.raw(),
                size: r.size,
                align: r.align(),
                kind: r.kind,
                alloc: r.alloc,
                free: (r.free != LIVE).then_some(r.free),
                scope: r.scope,
                ordinal: r.ordinal(),
                realloc_parent: r.parent(),
                escaping: r.escaping(),
                call_site: (r.site != NONE).then(|| resolve_site(r.site)).flatten(),
                when: None,
            })
            .collect();
        Trace {
            format: TRACE_FORMAT.to_string(),
            version: TRACE_VERSION,
            key: self.key.clone(),
            events: self.events,
            scopes: self.scopes.clone(),
            allocations,
            uses: self.uses.clone(),
            recording: None,
        }
    }

    /// The profile of a trace document (call sites are not kept: planning does not read
    /// them). An allocation's realloc parent counts only if it is an earlier allocation.
    pub(crate) fn from_trace(trace: &Trace) -> Profile {
        let records = (0u32..)
            .zip(&trace.allocations)
            .map(|(id, a)| Record {
                ptr: TaggedPtr::from_raw(a.ptr),
                size: a.size,
                alloc: a.alloc,
                free: a.free.unwrap_or(LIVE),
                scope: a.scope,
                ordinal: a.ordinal.unwrap_or(NONE),
                parent: a.realloc_parent.filter(|&p| p < id).unwrap_or(NONE),
                site: NONE,
                align_log2: align_log2(a.align),
                kind: a.kind,
                lost: a.escaping,
            })
            .collect();
        Profile {
            key: trace.key.clone(),
            events: trace.events,
            scopes: trace.scopes.clone(),
            records,
            uses: trace.uses.clone(),
            frames: Vec::new(),
            lanes: CountedLanes::default(),
        }
    }

    /// Appends the recording of helper context `helper` (a profile of its own, as its
    /// recorder made it) to this pass's profile: its scopes under the pass's scope
    /// `@<helper>` (made at the first recording of that helper; a helper entered again
    /// continues its sequence: ordinals and occurrences go on), its times after this
    /// profile's, its records' ids (and tags) after this profile's. Fails, with this
    /// profile unchanged, when room for the helper's records cannot be allocated.
    pub(crate) fn adopt_helper(
        &mut self,
        helper: u32,
        part: Profile,
    ) -> Result<(), TryReserveError> {
        self.scopes.try_reserve(part.scopes.len() + 1)?;
        self.records.try_reserve(part.records.len())?;
        self.uses.try_reserve(part.uses.len())?;
        self.frames.try_reserve(part.frames.len())?;
        let shift = self.events;
        let root = self.helper_root(helper, shift);
        let scope_of = self.adopt_scopes(root, &part.scopes, shift)?;
        let first = self.adopt_records(root, &scope_of, part.records, shift);
        self.frames.extend(part.frames);
        self.uses.extend(part.uses.into_iter().map(|u| TraceUse {
            time: u.time + shift,
            allocation: u.allocation + first,
            ..u
        }));
        self.events += part.events;
        self.lanes.adopt(part.lanes, &scope_of, root)?;
        if let Some(s) = self.scopes.get_mut(root as usize) {
            s.exit = Some(self.events);
        }
        if let Some(s) = self.scopes.first_mut() {
            s.exit = Some(self.events);
        }
        Ok(())
    }

    /// The scope `@<helper>` of the pass, made (entered at `shift`) at the first
    /// recording of that helper.
    fn helper_root(&mut self, helper: u32, shift: u64) -> u32 {
        let name = format!("@{helper}");
        let found = self
            .scopes
            .iter()
            .position(|s| s.parent == Some(0) && s.name == name);
        if let Some(i) = found {
            return i as u32;
        }
        let id = self.scopes.len() as u32;
        self.scopes.push(TraceScope {
            id,
            parent: Some(0),
            name,
            occurrence: 0,
            enter: Some(shift),
            exit: Some(shift),
        });
        id
    }

    /// Appends a helper's scopes under `root`, their times after `shift`, their
    /// occurrences going on where earlier recordings of the helper left them; returns
    /// this profile's scope of each of them.
    fn adopt_scopes(
        &mut self,
        root: u32,
        scopes: &[TraceScope],
        shift: u64,
    ) -> Result<Vec<u32>, TryReserveError> {
        let mut occurrences: std::collections::HashMap<(u32, String), u32> = Default::default();
        occurrences.try_reserve(self.scopes.len())?;
        for s in &self.scopes {
            if let Some(p) = s.parent {
                let n = occurrences.entry((p, s.name.clone())).or_insert(0);
                *n = (*n).max(s.occurrence + 1);
            }
        }
        let mut scope_of: Vec<u32> = Vec::new();
        scope_of.try_reserve_exact(scopes.len())?;
        for s in scopes {
            let Some(parent) = s.parent else {
                scope_of.push(root);
                continue;
            };
            let parent = scope_of.get(parent as usize).copied().unwrap_or(root);
            let occ = occurrences.entry((parent, s.name.clone())).or_insert(0);
            let id = self.scopes.len() as u32;
            self.scopes.push(TraceScope {
                id,
                parent: Some(parent),
                name: s.name.clone(),
                occurrence: *occ,
                enter: s.enter.map(|t| t + shift),
                exit: s.exit.map(|t| t + shift),
            });
            *occ += 1;
            scope_of.push(id);
        }
        Ok(scope_of)
    }

    /// Appends a helper's records (room reserved): their scopes mapped by `scope_of`,
    /// their times after `shift`, their ids (and tags, parents, call sites) after this
    /// profile's, the ordinals of `root`'s records after those of earlier recordings.
    /// Returns the id of the first.
    fn adopt_records(
        &mut self,
        root: u32,
        scope_of: &[u32],
        records: Vec<Record>,
        shift: u64,
    ) -> u32 {
        let root_ordinals = self
            .records
            .iter()
            .filter(|r| r.scope == root && r.ordinal != NONE)
            .count() as u32;
        let first = self.records.len() as u32;
        let first_frame = self.frames.len() as u32;
        let shifted = |v: u32, by: u32| if v == NONE { NONE } else { v + by };
        for (i, r) in (0u32..).zip(records) {
            let id = first + i;
            let scope = scope_of.get(r.scope as usize).copied().unwrap_or(root);
            self.records.push(Record {
                ptr: TaggedPtr::new(r.ptr.canonical(), id as u16),
                alloc: r.alloc + shift,
                free: if r.free == LIVE { LIVE } else { r.free + shift },
                scope,
                ordinal: shifted(r.ordinal, if scope == root { root_ordinals } else { 0 }),
                parent: shifted(r.parent, first),
                site: shifted(r.site, first_frame),
                ..r
            });
        }
        first
    }
}

/// Symbol names of the frames, skipping the allocator's own and std's allocation glue.
/// An address inside inlined code resolves to several names, the innermost first: each
/// is a frame of the call site (in a release build the program's own function is often
/// the outer name of an address whose innermost is `alloc::raw_vec`).
fn resolve_frames(ips: impl Iterator<Item = usize>) -> Vec<String> {
    keep_frames(ips.map(resolve_ip))
}

/// The symbol names of instruction pointer `ip`, the innermost first (its address when
/// it resolves to none).
pub(crate) fn resolve_ip(ip: usize) -> Vec<String> {
    let mut names = Vec::new();
    backtrace::resolve(ip as *mut std::ffi::c_void, |sym| {
        names.push(
            sym.name()
                .map_or_else(|| format!("{ip:#x}"), |n| format!("{n:#}")),
        );
    });
    if names.is_empty() {
        names.push(format!("{ip:#x}"));
    }
    names
}

/// The frames of a call site from the names of its instruction pointers (innermost
/// first): the allocator's own and std's allocation glue skipped, at most [`FRAMES`].
pub(crate) fn keep_frames(names: impl IntoIterator<Item = Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for names in names {
        for name in names {
            if !is_internal(&name, out.is_empty()) {
                out.push(name);
            }
            if out.len() >= FRAMES {
                return out;
            }
        }
    }
    out
}

/// Whether a frame is the allocator's own or std's allocation glue (`first`: no frame
/// kept yet).
fn is_internal(name: &str, first: bool) -> bool {
    let internal = [
        "memo_alloc::",
        "backtrace::",
        "__rust_",
        "__rustc::",
        "alloc::alloc::",
        "alloc::raw_vec",
        "<memo_alloc::",
    ]
    .iter()
    .any(|p| name.starts_with(p));
    // The allocator's thread-local access, above the first frame kept.
    internal || (first && name.starts_with("std::thread::local::"))
}

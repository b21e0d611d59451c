//! Compiles a [`PlanFile`] into the tables replay reads without locks or hashing on the
//! allocation path.
//!
//! - Scope nodes are renumbered so that the `k`-th same-named child of a scope is
//!   `base + k`: entering an op costs one hash lookup of `(parent, name)`.
//! - Each node owns a contiguous range of slots indexed by ordinal (`slot_ranges`); a slab
//!   instance keeps a [`Cursor`] per node over that range: an allocation's slot is the
//!   cursor's next one, or one found by re-synchronising (see `replay::matching`). Each slot
//!   carries the range of sizes seen for it across the profiles merged into the plan.
//!   A cursor also names the lookups of the ops the profile entered after its node
//!   ([`Ahead`]), which entering the node prefetches.
//! - Planned slots are grouped by start offset (*address groups*, sorted by offset): the
//!   groups cut the slab into elementary intervals, and each slot covers the run of them
//!   its range starts (`group..group_end`). An instance keeps one occupant word per group;
//!   a live slot's index is in the words of every group it covers, so slot `i` may be
//!   handed out exactly when those words are all empty (any live slot overlapping `i`
//!   covers the group at `i`'s start or one inside `i`'s range).
//! - A free finds its slot's first group by offset through a radix directory over the
//!   sorted group offsets ([`GroupIndex`]).
//!
//! A plan document may come from anywhere (`MEMO_PLAN_DIR`), so nothing in it is trusted:
//! every count is bounded before a table is sized from it, and every table is linear in
//! the document, but for the lanes' bitmaps: one bit per cell of a count the document
//! states, at most `lane_classes::MAX_CELLS` a class (at most 19 MB an instance). A hand-out and
//! a free touch one word per group the slot covers, which can be quadratic in a plan
//! whose slots overlap heavily in address (each slot over many others' starts); past a
//! linear budget, compilation *demotes* the most expensive slots (their allocations are
//! served by the backend), so that replaying any plan stays linear.

use std::collections::HashMap;
use std::fmt;

use crate::format::trace::{PlanFile, TraceScope};
use crate::memory::geometry::offset_align;
use crate::replay::skips::Skips;
use crate::replay::slab::cells::LaneLayout;
use crate::replay::slab::group_index::GroupIndex;
use crate::replay::state::{Ahead, Cursor, BACK, NO_SLOT};
use crate::support::hash::name_hash;
use crate::support::prefetch::prefetch;
use crate::support::sync::{AtomicU32, AtomicU8, Ordering};

/// Slot flag: planned into the slab.
pub(crate) const PLANNED: u8 = 1;
/// Slot flag: the allocation escaped the profiled pass.
pub(crate) const ESCAPING: u8 = 2;
/// Slot flag: planned, but served by the backend: its blocks kept outliving their passes,
/// or its overlap check was too costly.
pub(crate) const DEMOTED: u8 = 4;

/// An escaping slot matches requests from its smallest seen size divided by this to its
/// largest times this ([`Slot::seen`] gives back what the profiles saw).
const ESCAPING_SLACK: u64 = 2;

/// A slot whose blocks outlive two replayed passes this close (in the plan's pass ends)
/// is demoted.
const OUTLIVED_WINDOW: u32 = 8;
/// Most slots and scopes a plan may have.
const MAX_SLOTS: usize = 1 << 24;
const _: () = assert!(MAX_SLOTS < BACK as usize);
const MAX_SCOPES: usize = 1 << 22;

/// Why a plan document was not compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CompileError(pub(crate) String);

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, CompileError> {
    Err(CompileError(msg.into()))
}

/// One allocation key's slot: 32 bytes, two to a cache line. The replay path reads the
/// slots in order, and the table of a plan of hundreds of thousands of slots is larger
/// than the cache.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) offset: u64,
    /// Planned size: the largest seen for this key.
    pub(crate) size: u64,
    /// The smallest size seen for this key (requests between the two match it), capped
    /// at `u32::MAX`: a larger smallest size matches a little more widely, never a request
    /// larger than `size`.
    min_size: u32,
    /// The address groups the slot covers: `group..group_end` (at least one for a slot
    /// in the slab).
    pub(crate) group: u32,
    pub(crate) group_end: u32,
    /// [`PLANNED`], [`ESCAPING`], [`DEMOTED`] or 0 (no allocation had this key).
    /// `DEMOTED` is set at pass boundaries; the allocation path loads it relaxed.
    pub(crate) flags: AtomicU8,
    /// The planned alignment (log2): the strictest seen for this key.
    pub(crate) align_log2: u8,
    /// The largest alignment the slot's address is guaranteed to have (log2; its
    /// offset's, capped at the slab base alignment).
    max_align_log2: u8,
    /// The slot covers whole blocks of groups after the one it starts in (few do: see
    /// `hit::claim`), so that a hand-out need not work that out.
    pub(crate) spans_blocks: bool,
}

// Loom's atomics are larger; the layout matters for the real ones.
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Slot>() == 32);

impl Slot {
    fn empty() -> Slot {
        Slot {
            offset: 0,
            size: 0,
            min_size: 0,
            group: 0,
            group_end: 0,
            flags: AtomicU8::new(0),
            align_log2: 0,
            max_align_log2: 0,
            spans_blocks: false,
        }
    }

    /// The smallest request size that matches the slot.
    #[inline(always)]
    pub(crate) fn min_size(&self) -> u64 {
        self.min_size as u64
    }

    /// Whether a request of `size` bytes matches the slot: its size lies in the slot's
    /// seen range.
    #[inline(always)]
    pub(crate) fn matches(&self, size: u64) -> bool {
        size <= self.size && size >= self.min_size()
    }

    /// The largest alignment the slot's address is guaranteed to have.
    #[inline(always)]
    pub(crate) fn max_align(&self) -> u64 {
        1 << self.max_align_log2
    }

    fn flag_bits(&self) -> u8 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Whether the slot is handed out from the slab.
    fn in_slab(&self) -> bool {
        self.flag_bits() == PLANNED
    }

    /// The smallest and largest request sizes the profiles saw for the slot (an escaping
    /// slot matches a wider range, see [`ESCAPING_SLACK`]), for merging a re-profile.
    pub(crate) fn seen(&self) -> (u64, u64) {
        if self.flag_bits() & ESCAPING == 0 {
            return (self.min_size(), self.size);
        }
        let size = self.size / ESCAPING_SLACK;
        ((self.min_size() * ESCAPING_SLACK).min(size), size)
    }
}

#[derive(Clone, Debug, Default)]
struct ScopeGroup {
    hash: u64,
    parent: u32,
    name: Box<str>,
    base: u32,
    count: u32,
}

/// Replay tables of one plan.
#[derive(Debug)]
pub(crate) struct CompiledPlan {
    pub(crate) key: Box<str>,
    /// The bytes of an instance's slot block: the planned slots' height.
    pub(crate) height: u64,
    /// Where small requests go instead of slots, in an instance's lane block (see
    /// `cells.rs`).
    pub(crate) lanes: LaneLayout,
    nodes: u32,
    scope_groups: Vec<ScopeGroup>,
    cursors: Vec<Cursor>,
    pub(crate) slots: Vec<Slot>,
    /// Per slot: the plan's pass-end count when a replayed pass last ended with the slot
    /// live (0: never). Apart from the slots, which the allocation path reads.
    outlived_at: Box<[AtomicU32]>,
    group_index: GroupIndex,
    /// Replayed passes ended (the clock of `Slot::outlived_at`).
    pass_ends: AtomicU32,
    /// The lane requests that escaped the profiled pass, by node and lane ordinal.
    lane_escapes: Box<[LaneEscapeAt]>,
    /// Where replayed passes found their place again past planned slots they skipped.
    pub(crate) skips: Skips,
}

/// An escaping lane request of a compiled plan (see `trace::LaneEscape`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct LaneEscapeAt {
    node: u32,
    ordinal: u32,
    class: u8,
}

/// The scope tree renumbered: each `(parent, name)` group's occurrences are consecutive.
struct Scopes<'a> {
    /// Scope id in the document -> node id.
    node_of: Vec<u32>,
    /// Groups in order of first appearance: (document parent, name, base node, count).
    groups: Vec<(u32, &'a str, u32, u32)>,
    nodes: u32,
}

fn renumber_scopes(file: &PlanFile) -> Result<Scopes<'_>, CompileError> {
    let n_scopes = file.scopes.len();
    let mut group_of_scope = vec![u32::MAX; n_scopes];
    let mut groups: Vec<(u32, &str, u32, u32)> = Vec::new();
    let mut lookup: HashMap<(u32, &str), u32> = HashMap::new();
    for s in file.scopes.iter().skip(1) {
        let parent = s.parent.unwrap_or(0);
        let g = *lookup.entry((parent, s.name.as_str())).or_insert_with(|| {
            groups.push((parent, s.name.as_str(), 0, 0));
            groups.len() as u32 - 1
        });
        let e = &mut groups[g as usize];
        e.3 = e.3.max(s.occurrence + 1); // occurrence < n_scopes: checked by `PlanFile::check`
        group_of_scope[s.id as usize] = g;
    }
    // Occurrences are dense in a real trace (0..k for k same-named siblings), so the nodes
    // number exactly the scopes; a sparse document would ask for far larger tables.
    let mut next = 1u64;
    for g in &mut groups {
        g.2 = next as u32;
        next += g.3 as u64;
        if next > n_scopes as u64 {
            return err("scope occurrences are not numbered densely");
        }
    }
    let nodes = next as u32;
    let mut node_of = vec![0u32; n_scopes];
    let mut taken = vec![false; nodes as usize];
    for s in file.scopes.iter().skip(1) {
        let id = groups[group_of_scope[s.id as usize] as usize].2 + s.occurrence;
        if std::mem::replace(&mut taken[id as usize], true) {
            return err(format!(
                "scope {} repeats its parent, name and occurrence",
                s.id
            ));
        }
        node_of[s.id as usize] = id;
    }
    Ok(Scopes {
        node_of,
        groups,
        nodes,
    })
}

/// Links each node's cursor to the lookups of the ops the profile entered after it (the
/// document lists scopes in the order they were entered), so that entering an op can
/// prefetch them (`Ahead`): a pass streaming its tensors through the cache would otherwise
/// miss on each.
fn link_ahead(cursors: &mut [Cursor], file: &PlanFile, scopes: &Scopes<'_>, table: &[ScopeGroup]) {
    let order: Vec<&TraceScope> = file.scopes.iter().skip(1).collect();
    let node = |s: &TraceScope| scopes.node_of[s.id as usize];
    for (i, s) in order.iter().enumerate() {
        let mut ahead = Ahead::NONE;
        if let Some(next) = order.get(i + 1) {
            ahead.slot = cursors[node(next) as usize].start;
        }
        if let Some(far) = order.get(i + 2) {
            let parent = scopes.node_of[far.parent.unwrap_or(0) as usize];
            if let Some(g) = find_group(table, parent, &far.name) {
                (ahead.group, ahead.base) = (g as u32, table[g].base);
            }
            ahead.node = node(far);
        }
        cursors[node(s) as usize].ahead = ahead;
    }
}

/// The index in `table` of the `(parent, name)` group.
#[inline]
fn find_group(table: &[ScopeGroup], parent: u32, name: &str) -> Option<usize> {
    let hash = name_hash(parent, name);
    let mask = table.len() - 1;
    let mut i = hash as usize & mask;
    loop {
        let g = &table[i];
        if g.count == 0 {
            return None;
        }
        if g.hash == hash && g.parent == parent && &*g.name == name {
            return Some(i);
        }
        i = (i + 1) & mask;
    }
}

/// The plan's escaping lane requests by node (checked by `PlanFile::check`: known scopes,
/// lane classes of the plan), in order.
fn lane_escapes(file: &PlanFile, scopes: &Scopes<'_>) -> Box<[LaneEscapeAt]> {
    let mut escapes: Vec<LaneEscapeAt> = file
        .lanes
        .escapes
        .iter()
        .filter_map(|e| {
            Some(LaneEscapeAt {
                node: *scopes.node_of.get(e.scope as usize)?,
                ordinal: e.ordinal,
                class: crate::memory::lane_classes::class_of(e.cell, 1, file.lanes.max)? as u8,
            })
        })
        .collect();
    escapes.sort_unstable();
    escapes.into_boxed_slice()
}

/// Hash table of scope groups keyed by (renumbered parent, name).
fn scope_group_table(scopes: &Scopes<'_>) -> Vec<ScopeGroup> {
    let cap = (scopes.groups.len() * 2).next_power_of_two().max(8);
    let mut table = vec![ScopeGroup::default(); cap];
    for &(parent, name, base, count) in &scopes.groups {
        let parent = scopes.node_of[parent as usize];
        let hash = name_hash(parent, name);
        let mut i = hash as usize & (cap - 1);
        while table[i].count != 0 {
            i = (i + 1) & (cap - 1);
        }
        table[i] = ScopeGroup {
            hash,
            parent,
            name: name.into(),
            base,
            count,
        };
    }
    table
}

/// Slots indexed per node by ordinal, and each node's `(first, end)` slot range.
type SlotTable = (Vec<Slot>, Vec<(u32, u32)>);

/// The slots, indexed per node by ordinal, and each node's range.
fn slot_table(file: &PlanFile, scopes: &Scopes<'_>) -> Result<SlotTable, CompileError> {
    let mut slot_count = vec![0u32; scopes.nodes as usize];
    for s in &file.slots {
        let node = scopes.node_of[s.scope as usize] as usize;
        slot_count[node] = slot_count[node].max(s.ordinal + 1); // ordinal < slots: checked
    }
    // Ordinals are dense in a real plan; allow some slack, never a table far larger than
    // the document.
    let total: u64 = slot_count.iter().map(|&c| c as u64).sum();
    if total > 2 * file.slots.len() as u64 + scopes.nodes as u64 {
        return err("slot ordinals are not numbered densely");
    }
    let mut ranges = Vec::with_capacity(slot_count.len());
    let mut next = 0u32;
    for &c in &slot_count {
        ranges.push((next, next + c));
        next += c;
    }
    let mut slots: Vec<Slot> = (0..total).map(|_| Slot::empty()).collect();
    for s in &file.slots {
        let node = scopes.node_of[s.scope as usize] as usize;
        let slot = &mut slots[(ranges[node].0 + s.ordinal) as usize];
        if slot.flag_bits() != 0 {
            return err(format!(
                "two slots for scope {} ordinal {}",
                s.scope, s.ordinal
            ));
        }
        slot.size = s.size;
        let min_size = s.min_size.unwrap_or(s.size).clamp(1, s.size);
        slot.min_size = u32::try_from(min_size).unwrap_or(u32::MAX);
        slot.align_log2 = s.align.trailing_zeros() as u8; // a power of two: checked
        match s.offset {
            Some(o) => {
                slot.offset = o;
                slot.max_align_log2 = offset_align(o).trailing_zeros() as u8;
                slot.flags = AtomicU8::new(PLANNED);
            }
            None => {
                // Served by the backend whatever it matches: a smaller or larger block
                // of the same key (a decoding step's cache, shorter or longer than the
                // profiled step's) keeps the pass's place instead of missing.
                slot.min_size = (slot.min_size / ESCAPING_SLACK as u32).max(1);
                slot.size = s.size.saturating_mul(ESCAPING_SLACK);
                slot.flags = AtomicU8::new(ESCAPING);
            }
        }
    }
    Ok((slots, ranges))
}

/// Sorted distinct start offsets of the slots in the slab.
fn group_offsets(slots: &[Slot]) -> Vec<u64> {
    let mut offsets: Vec<u64> = slots
        .iter()
        .filter(|s| s.in_slab())
        .map(|s| s.offset)
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    offsets
}

/// Assigns each slot in the slab the run of groups its range covers.
fn assign_groups(slots: &mut [Slot], offsets: &[u64]) {
    for s in slots.iter_mut().filter(|s| s.in_slab()) {
        let g = offsets.partition_point(|&o| o < s.offset);
        s.group = g as u32;
        // `offsets[g] == offset < offset + size` (sizes are positive: `PlanFile::check`),
        // so the slot covers its own group at least.
        s.group_end = offsets
            .partition_point(|&o| o < s.offset + s.size)
            .max(g + 1) as u32;
        s.spans_blocks = !whole_blocks(s.group, s.group_end).is_empty();
    }
}

/// Groups per block of an instance's spanning words (`Instance::spanning`), log 2. A slot
/// over thousands of groups (a large tensor placed over a region of small ones) takes its
/// whole blocks with one word each, not one word per group. Under loom, blocks of 2
/// groups, so that its models reach whole blocks with a few slots.
#[cfg(not(loom))]
pub(crate) const BLOCK_SHIFT: u32 = 6;
#[cfg(loom)]
pub(crate) const BLOCK_SHIFT: u32 = 1;

/// The blocks of groups a slot over groups `group..group_end` covers whole, after the one
/// it starts in (empty for nearly all slots).
#[inline(always)]
pub(crate) fn whole_blocks(group: u32, group_end: u32) -> std::ops::Range<usize> {
    ((group as usize >> BLOCK_SHIFT) + 1)..(group_end as usize >> BLOCK_SHIFT)
}

/// Words one hand-out (and one free) of a slot touches: one per group it covers.
fn check_cost(slot: &Slot) -> u64 {
    (slot.group_end - slot.group) as u64
}

/// The check-word budget of a plan: linear in the allocations of a pass, its planned
/// slots and its lane requests (`requests`, which cost one word each).
fn check_budget(planned: usize, requests: u64) -> u64 {
    32 * (planned as u64 + requests) + 65_536
}

/// Demotes the costliest slots until the plan's total check cost fits the budget;
/// returns how many were demoted. Demoting a slot leaves the others' costs as they are
/// or smaller (their ranges may cover fewer groups once its start is gone).
fn demote_costly(slots: &mut [Slot], requests: u64) -> u64 {
    let planned = slots.iter().filter(|s| s.in_slab()).count();
    let costs: Vec<u64> = slots
        .iter()
        .map(|s| if s.in_slab() { check_cost(s) } else { 0 })
        .collect();
    let mut total: u64 = costs.iter().sum();
    let budget = check_budget(planned, requests);
    if total <= budget {
        return 0;
    }
    let mut order: Vec<u32> = (0..slots.len() as u32)
        .filter(|&i| costs[i as usize] > 0)
        .collect();
    order.sort_unstable_by_key(|&i| std::cmp::Reverse(costs[i as usize]));
    let mut demoted = 0;
    for i in order {
        if total <= budget {
            break;
        }
        slots[i as usize].flags = AtomicU8::new(PLANNED | DEMOTED);
        total -= costs[i as usize];
        demoted += 1;
    }
    demoted
}

/// The address groups of the slots in the slab (their offsets); each slot gets its run
/// of groups, after the costliest were demoted.
fn build_groups(slots: &mut [Slot], requests: u64) -> (Vec<u64>, u64) {
    let mut offsets = group_offsets(slots);
    assign_groups(slots, &offsets);
    let demoted = demote_costly(slots, requests);
    if demoted > 0 {
        offsets = group_offsets(slots);
        assign_groups(slots, &offsets);
    }
    debug_assert!(
        slots
            .iter()
            .filter(|s| s.in_slab())
            .map(check_cost)
            .sum::<u64>()
            <= check_budget(slots.len(), requests),
        "hand-outs stay within the check budget"
    );
    (offsets, demoted)
}

impl CompiledPlan {
    /// Builds the tables; rejects inconsistent or oversized documents before sizing any
    /// table from them.
    pub(crate) fn compile(file: &PlanFile) -> Result<CompiledPlan, CompileError> {
        if file.slots.len() > MAX_SLOTS || file.scopes.len() > MAX_SCOPES {
            return err(format!(
                "{} slots and {} scopes exceed the limits ({MAX_SLOTS}, {MAX_SCOPES})",
                file.slots.len(),
                file.scopes.len()
            ));
        }
        file.check().map_err(CompileError)?;
        let scopes = renumber_scopes(file)?;
        let scope_groups = scope_group_table(&scopes);
        let (mut slots, slot_ranges) = slot_table(file, &scopes)?;
        let lane_escapes = lane_escapes(file, &scopes);
        let mut cursors: Vec<Cursor> = slot_ranges
            .iter()
            .map(|&(next, end)| Cursor {
                next,
                start: next,
                end,
                pending: NO_SLOT,
                lanes: 0,
                escape: NO_SLOT,
                ahead: Ahead::NONE,
            })
            .collect();
        for e in lane_escapes.iter().rev() {
            cursors[e.node as usize].escape = e.ordinal; // the node's first, at the end
        }
        link_ahead(&mut cursors, file, &scopes, &scope_groups);
        let (group_offsets, _demoted) = build_groups(&mut slots, file.lanes.requests);
        let group_index = GroupIndex::new(&group_offsets);
        let outlived_at = slots.iter().map(|_| AtomicU32::new(0)).collect();
        let lanes = LaneLayout::new(file.lanes.max, &file.lanes.cells);
        Ok(CompiledPlan {
            key: file.key.as_str().into(),
            height: file.height,
            lanes,
            nodes: scopes.nodes,
            scope_groups,
            cursors,
            slots,
            outlived_at,
            group_index,
            pass_ends: AtomicU32::new(0),
            lane_escapes,
            skips: Skips::default(),
        })
    }

    /// Whether the profile saw lane requests escape (replay counts lane requests only
    /// then).
    #[inline(always)]
    pub(crate) fn lists_lane_escapes(&self) -> bool {
        !self.lane_escapes.is_empty()
    }

    /// Lane request `ordinal` of `node` was listed as escaping: whether it is of class
    /// `class` (as the profile's was), and the node's next escaping lane ordinal
    /// ([`NO_SLOT`]: none).
    pub(crate) fn lane_escape(&self, node: u32, ordinal: u32, class: usize) -> (bool, u32) {
        let escapes = &self.lane_escapes;
        let at = escapes.partition_point(|e| (e.node, e.ordinal) < (node, ordinal));
        let here = escapes
            .get(at)
            .filter(|e| (e.node, e.ordinal) == (node, ordinal));
        let next = escapes
            .get(at + here.is_some() as usize)
            .filter(|e| e.node == node)
            .map_or(NO_SLOT, |e| e.ordinal);
        (here.is_some_and(|e| e.class as usize == class), next)
    }

    /// Number of scope nodes (including the root, 0).
    pub(crate) fn nodes(&self) -> usize {
        self.nodes as usize
    }

    /// Number of address groups.
    pub(crate) fn groups(&self) -> usize {
        self.group_index.len()
    }

    /// The first node of the `(parent, name)` group and the group's size.
    #[inline]
    pub(crate) fn scope_group(&self, parent: u32, name: &str) -> Option<(u32, u32)> {
        let g = &self.scope_groups[find_group(&self.scope_groups, parent, name)?];
        Some((g.base, g.count))
    }

    /// Prefetches the plan's entries `ahead` names: the next op's first slot and the
    /// scope group of the op after it.
    #[inline(always)]
    pub(crate) fn prefetch_ahead(&self, ahead: &Ahead) {
        prefetch(&self.slots, ahead.slot);
        prefetch(&self.scope_groups, ahead.group);
    }

    /// The slot of `(node, ordinal)`, if the plan has one.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn slot_index(&self, node: u32, ordinal: u32) -> Option<u32> {
        let c = self.cursors.get(node as usize)?;
        (ordinal < c.end - c.next).then_some(c.next + ordinal)
    }

    /// The cursors an instance starts a pass with: each node at its first slot.
    pub(crate) fn initial_cursors(&self) -> &[Cursor] {
        &self.cursors
    }

    /// The address group starting exactly at `offset`.
    #[inline]
    pub(crate) fn group_at(&self, offset: u64) -> Option<u32> {
        self.group_index.group_at(offset)
    }

    /// Notes that a replayed pass ended; returns the pass-end clock for
    /// [`CompiledPlan::note_outlived`].
    pub(crate) fn note_pass_end(&self) -> u32 {
        self.pass_ends
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1)
            .max(1)
    }

    /// Notes that slot `index` was live when the replayed pass ending at `now` (from
    /// [`CompiledPlan::note_pass_end`]) ended; demotes the slot when its blocks outlived
    /// another pass in the last [`OUTLIVED_WINDOW`] pass ends. Returns whether it was
    /// demoted now. Runs at pass boundaries.
    pub(crate) fn note_outlived(&self, index: u32, now: u32) -> bool {
        let (Some(slot), Some(outlived_at)) = (
            self.slots.get(index as usize),
            self.outlived_at.get(index as usize),
        ) else {
            return false;
        };
        let before = outlived_at.swap(now, Ordering::Relaxed);
        if before != 0 && now.wrapping_sub(before) <= OUTLIVED_WINDOW {
            let flags = slot.flags.fetch_or(DEMOTED, Ordering::Relaxed);
            return flags & DEMOTED == 0;
        }
        false
    }

    /// Slots planned into the slab but served by the backend.
    pub(crate) fn demoted(&self) -> u64 {
        self.slots
            .iter()
            .filter(|s| s.flag_bits() & DEMOTED != 0)
            .count() as u64
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

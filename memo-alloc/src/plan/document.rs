//! From a profiled pass to a plan document: realloc chains folded into logical buffers,
//! one planner problem per context, one slot per allocation key.
//!
//! The allocator plans from its own [`Profile`], in place: chains are folded into their
//! first record, the slot keys and the problems are taken from the records, and the
//! records are given back before the strategy runs. While the strategy runs, planning
//! holds the problem (56 bytes a buffer) and the slot keys (40 bytes a key), and neither
//! a trace document nor the chains nor the records beside them. Tools plan a [`Trace`]
//! the same way, through the profile made from it.

use memo_planner::{align_up, Buffer, OffsetPlan, OffsetStrategy, Problem};

use crate::format::trace::{
    contexts_of, plan_align, Chain, PlanFile, PlanLanes, PlanSlot, Seen, Trace, FORMAT_VERSION,
    MAX_PLANNED_ALIGN, PLAN_FORMAT,
};
use crate::plan::lane_sizing::{lane_of, record_classes, size_lanes};
use crate::profiling::profile::{Profile, Record, LIVE, NONE};

impl Trace {
    /// Merges realloc chains into logical buffers, in root order.
    pub fn chains(&self) -> Vec<Chain> {
        Profile::from_trace(self).chains()
    }

    /// The planner problem of the pass: one buffer per non-escaping chain, with the
    /// alignment raised by [`plan_align`] and named by its chain's root. Also returns the
    /// chain of each buffer.
    pub fn to_problem(&self) -> (Problem, Vec<Chain>) {
        let chains: Vec<Chain> = self
            .chains()
            .into_iter()
            .filter(|c| plannable(c.escaping, c.align))
            .collect();
        let buffers = chains
            .iter()
            .map(|c| buffer(c.root.to_string(), c.lower, c.upper, c.size, c.align))
            .collect();
        // Every field is valid (see `buffer`); an error here would be a bug.
        (Problem::new(buffers).unwrap_or_default(), chains)
    }
}

impl PlanFile {
    /// Plans a trace with `strategy`.
    pub fn from_trace(trace: &Trace, strategy: OffsetStrategy) -> PlanFile {
        PlanFile::from_trace_seen(trace, strategy, &[])
    }

    /// Plans a trace with `strategy`, each allocation key widened to what earlier
    /// profiles saw for it (`seen`, by root allocation).
    pub(crate) fn from_trace_seen(
        trace: &Trace,
        strategy: OffsetStrategy,
        seen: &[Option<Seen>],
    ) -> PlanFile {
        let no_lanes = PlanLanes::default();
        build(Profile::from_trace(trace), strategy, seen, &no_lanes, drop)
    }
}

impl Profile {
    /// Merges realloc chains into logical buffers, in root order.
    pub(crate) fn chains(&self) -> Vec<Chain> {
        let mut records = self.records.clone();
        fold_chains(&mut records);
        (0u32..)
            .zip(&records)
            .filter(|(_, r)| r.parent == NONE)
            .map(|(root, r)| Chain {
                root,
                lower: r.alloc,
                upper: (r.free != LIVE).then_some(r.free),
                size: r.size,
                align: r.align(),
                escaping: r.escaping(),
            })
            .collect()
    }
}

/// Folds every realloc chain into its first record (its root): the largest size and
/// alignment over the chain, the last free ([`LIVE`] if any member is live), lost if any
/// member is. Afterwards the roots are the records with no parent.
fn fold_chains(records: &mut [Record]) {
    let mut root_of: Vec<u32> = Vec::with_capacity(records.len());
    for i in 0..records.len() {
        let root = match records[i].parent() {
            Some(p) if (p as usize) < i => root_of[p as usize],
            _ => {
                records[i].parent = NONE;
                i as u32
            }
        };
        root_of.push(root);
        if root as usize != i {
            let m = records[i];
            let r = &mut records[root as usize];
            r.size = r.size.max(m.size);
            r.align_log2 = r.align_log2.max(m.align_log2);
            r.free = r.free.max(m.free); // `LIVE` is the largest time
            r.lost |= m.lost;
        }
    }
}

/// Whether a chain is planned into the slab: it does not escape the pass, and a slab can
/// honour its alignment.
fn plannable(escaping: bool, align: u64) -> bool {
    !escaping && align <= MAX_PLANNED_ALIGN
}

/// A planner buffer for a logical buffer of `size` bytes (at least 1) with alignment
/// `align` raised by [`plan_align`], alive from `lower` to `upper` (at least one step).
fn buffer(id: String, lower: u64, upper: Option<u64>, size: u64, align: u64) -> Buffer {
    let upper = upper.unwrap_or(lower + 1).max(lower + 1);
    Buffer::new(id, lower, upper, size.max(1)).with_align(plan_align(align, size))
}

/// Offset of a slot with none yet (or none at all: not planned).
const UNPLANNED: u64 = u64::MAX;

/// One slot's key while the plan is made: its root record, scope and ordinal, the
/// smallest request seen for it, and its chain's planned size, alignment, lifetime (its
/// buffer's, when planned) and offset.
struct SlotKey {
    root: u32,
    scope: u32,
    ordinal: u32,
    align_log2: u8,
    min: u64,
    size: u64,
    lifetime: Option<[u64; 2]>,
    offset: u64,
}

/// The planner problem of one context and the root record of each of its buffers.
struct ContextProblem {
    problem: Problem,
    roots: Vec<u32>,
}

/// Plans a profile with `strategy`, each allocation key widened to what earlier profiles
/// saw for it (`seen`, by root record). Each context (the main one, each helper) is
/// planned on its own and the regions stacked: contexts run concurrently in replay, so
/// their slots never share addresses. Requests of at most `lanes.max` bytes take lane
/// cells, not slots: the plan has at least `lanes.cells` of them (an earlier plan's, so
/// that plans converge). The profile's records, read, go to `give_back` (the allocator
/// keeps small buffers spare for its next profiles) before the strategy runs.
pub(crate) fn build(
    mut profile: Profile,
    strategy: OffsetStrategy,
    seen: &[Option<Seen>],
    lanes: &PlanLanes,
    give_back: impl FnOnce(Vec<Record>),
) -> PlanFile {
    let lane = record_classes(&profile.records, lanes.max);
    let mut keys = slot_keys(&profile, seen, &lane);
    fold_chains(&mut profile.records);
    let lanes = size_lanes(&profile, &lane, lanes);
    widen_roots(&mut profile.records, seen);
    let problems = context_problems(&mut profile, &mut keys, &lane);
    let Profile {
        key,
        scopes,
        records,
        ..
    } = profile;
    give_back(records);
    let Placed {
        height,
        lower_bound,
        naive,
    } = place(problems, strategy, &mut keys);
    let slots = keys
        .into_iter()
        .map(|k| PlanSlot {
            scope: k.scope,
            ordinal: k.ordinal,
            min_size: (k.min < k.size).then_some(k.min),
            size: k.size,
            align: 1 << k.align_log2,
            offset: Some(k.offset).filter(|&o| o != UNPLANNED),
            lifetime: k.lifetime.filter(|_| k.offset != UNPLANNED),
        })
        .collect();
    PlanFile {
        format: PLAN_FORMAT.to_string(),
        version: FORMAT_VERSION,
        key,
        strategy: strategy.name().to_string(),
        height,
        lower_bound,
        naive,
        scopes,
        slots,
        lanes,
    }
}

/// What earlier profiles saw for `root`'s key.
fn seen_at(seen: &[Option<Seen>], root: u32) -> Option<Seen> {
    seen.get(root as usize).copied().flatten()
}

/// One key per record with an ordinal (every allocation but reallocs) that takes no lane
/// cell, in root order, its smallest request taken now: the request that takes a slot is
/// its chain's first, whose size the fold then raises. Sizes, alignments and offsets come
/// later. Ordinals count the scope's requests that take slots: replay matches only those
/// to its sequence.
fn slot_keys(profile: &Profile, seen: &[Option<Seen>], lane: &[u8]) -> Vec<SlotKey> {
    let mut lanes_before = vec![
        0u32;
        if lane.is_empty() {
            0
        } else {
            profile.scopes.len()
        }
    ];
    (0u32..)
        .zip(&profile.records)
        .filter_map(|(root, r)| {
            let ordinal = r.ordinal()?;
            let before = lanes_before.get_mut(r.scope as usize);
            if lane_of(lane, root).is_some() {
                if let Some(n) = before {
                    *n += 1;
                }
                return None;
            }
            Some(SlotKey {
                root,
                scope: r.scope,
                ordinal: ordinal - before.map_or(0, |n| *n),
                align_log2: 0,
                min: seen_at(seen, root).map_or(r.size, |s| s.min.min(r.size)),
                size: 0,
                lifetime: None,
                offset: UNPLANNED,
            })
        })
        .collect()
}

/// Raises each folded chain's size and alignment to what earlier profiles saw for it.
fn widen_roots(records: &mut [Record], seen: &[Option<Seen>]) {
    for (root, r) in (0u32..).zip(records.iter_mut()) {
        if let Some(s) = seen_at(seen, root).filter(|_| r.parent == NONE) {
            r.size = r.size.max(s.max);
            r.align_log2 = r
                .align_log2
                .max(crate::profiling::profile::align_log2(s.align));
        }
    }
}

/// The height, lower bound and naive size of a plan's contexts stacked.
struct Placed {
    height: u64,
    lower_bound: u64,
    naive: u64,
}

/// Plans each context's problem with `strategy`, stacks them (each at its largest
/// alignment above the previous), and writes each planned chain's offset into its key.
fn place(problems: Vec<ContextProblem>, strategy: OffsetStrategy, keys: &mut [SlotKey]) -> Placed {
    let mut placed = Placed {
        height: 0,
        lower_bound: 0,
        naive: 0,
    };
    for ContextProblem { problem, roots } in problems {
        let plan: OffsetPlan = crate::plan::offsets::plan(strategy, &problem);
        let buffers = problem.buffers();
        let base = align_up(
            placed.height,
            buffers.iter().map(|b| b.align).max().unwrap_or(1),
        );
        for (&root, &off) in roots.iter().zip(&plan.offsets) {
            // Keys are in root order; a chain whose root has no ordinal has no slot.
            if let Ok(i) = keys.binary_search_by_key(&root, |k| k.root) {
                keys[i].offset = base + off;
            }
        }
        placed.height = base + plan.height(&problem);
        placed.lower_bound += memo_planner::offsets_lower_bound(&problem);
        placed.naive += buffers
            .iter()
            .map(|b| align_up(b.size, b.align))
            .sum::<u64>();
    }
    placed
}

/// Records read at a time while the problems are built, their pages given back after.
const CHUNK: usize = 1 << 16;

/// One problem per context with a chain to plan (folded: see [`fold_chains`]; chains
/// whose first request takes a lane cell are not planned), its buffers in root order,
/// unnamed (the allocator knows buffers by index: a name would cost a string a buffer);
/// and the planned size and alignment of each of `keys` (in root order). The records are
/// read from the last back, a chunk at a time, each chunk's pages given back once read:
/// the records (56 bytes an allocation) and the problems (56 bytes a buffer) are never
/// resident together.
fn context_problems(
    profile: &mut Profile,
    keys: &mut [SlotKey],
    lane: &[u8],
) -> Vec<ContextProblem> {
    let (context_of, contexts) = contexts_of(&profile.scopes);
    let context = |r: &Record| context_of.get(r.scope as usize).copied().unwrap_or(0) as usize;
    let keyed = |root: u32, r: &Record| r.ordinal().is_some() && lane_of(lane, root).is_none();
    let planned = |root: u32, r: &Record| {
        r.parent == NONE && plannable(r.escaping(), r.align()) && lane_of(lane, root).is_none()
    };
    let mut counts = vec![0usize; contexts as usize];
    for (root, r) in (0u32..).zip(&profile.records) {
        if planned(root, r) {
            counts[context(r)] += 1;
        }
    }
    let mut buffers: Vec<Vec<Buffer>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
    let mut roots: Vec<Vec<u32>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
    let mut next_key = keys.len();
    let records = &mut profile.records;
    while !records.is_empty() {
        let from = records.len().saturating_sub(CHUNK);
        for (i, r) in records[from..].iter().enumerate().rev() {
            let root = (from + i) as u32;
            if keyed(root, r) {
                next_key -= 1;
                let k = &mut keys[next_key];
                debug_assert_eq!(k.root, root, "keys are the records with an ordinal");
                k.size = r.size;
                k.align_log2 = plan_align(r.align(), r.size).trailing_zeros() as u8;
            }
            if planned(root, r) {
                let c = context(r);
                let b = buffer(String::new(), r.alloc, Some(r.free), r.size, r.align());
                if keyed(root, r) {
                    keys[next_key].lifetime = Some([b.lower, b.upper]);
                }
                buffers[c].push(b);
                roots[c].push(root);
            }
        }
        records.truncate(from);
        return_spare_pages(records);
    }
    buffers
        .into_iter()
        .zip(roots)
        .filter(|(b, _)| !b.is_empty())
        .map(|(mut buffers, mut roots)| {
            buffers.reverse();
            roots.reverse();
            // Every field is valid (see `buffer`); an error would be a bug, and the
            // context is then not planned.
            let problem = Problem::unnamed(buffers).unwrap_or_default();
            ContextProblem { problem, roots }
        })
        .collect()
}

/// Returns to the OS the whole pages of `v`'s spare capacity (they read as zero when
/// next touched; `v` never reads its spare capacity before writing it).
fn return_spare_pages<T>(v: &mut Vec<T>) {
    let start = v.as_mut_ptr().wrapping_add(v.len()).cast::<u8>();
    let end = v.as_mut_ptr().wrapping_add(v.capacity()).cast::<u8>();
    crate::memory::region::return_pages(start, end);
}

#[cfg(all(test, not(loom)))]
mod lane_tests;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::format::trace::{AllocKind, TraceAlloc, TraceScope, TRACE_FORMAT};
    use memo_planner::validate_offsets;
    use proptest::prelude::*;

    /// One allocation of a generated pass: its size, alignment (log2), lifetime in
    /// allocations (`None`: live at the end), and whether it continues (reallocs) the
    /// latest allocation still open, was lost, or runs on the helper context.
    type Op = (u64, u8, Option<u64>, bool, bool, bool);

    /// A pass of `ops`: allocation `i` at time `2i`, freed at an odd time after it; scope
    /// 0 is the pass, scope 1 (`@0`) a helper context, scope 2 an op of the pass.
    fn trace_of(ops: &[Op]) -> Trace {
        let n = ops.len() as u64;
        let mut allocations: Vec<TraceAlloc> = Vec::new();
        let mut ordinals = [0u32; 3];
        for (i, &(size, align_log2, life, realloc, lost, helper)) in ops.iter().enumerate() {
            let id = i as u32;
            let alloc = 2 * i as u64;
            let open = allocations
                .iter()
                .rposition(|a| a.free.is_none_or(|f| f > alloc) && !a.escaping);
            let parent = open.filter(|_| realloc);
            if let Some(p) = parent {
                allocations[p].free = Some(alloc);
            }
            let scope = match parent {
                Some(p) => allocations[p].scope,
                None if helper => 1,
                None => 2 * (i % 2) as u32,
            };
            let ordinal = parent.is_none().then(|| {
                ordinals[scope as usize] += 1;
                ordinals[scope as usize] - 1
            });
            let free = life.map(|l| (alloc + 1 + 2 * l).min(2 * n + 1));
            allocations.push(TraceAlloc {
                id,
                tag: id as u16,
                ptr: 0x10_0000 + 0x1000 * id as u64,
                size,
                align: 1 << align_log2,
                kind: if parent.is_some() {
                    AllocKind::Realloc
                } else {
                    AllocKind::Alloc
                },
                alloc,
                free,
                scope,
                ordinal,
                realloc_parent: parent.map(|p| p as u32),
                escaping: lost || free.is_none(),
                call_site: None,
                when: None,
            });
        }
        let scope = |id: u32, parent: Option<u32>, name: &str| TraceScope {
            id,
            parent,
            name: name.into(),
            occurrence: 0,
            enter: Some(0),
            exit: Some(2 * n + 2),
        };
        Trace {
            format: TRACE_FORMAT.into(),
            version: FORMAT_VERSION,
            key: "pass".into(),
            events: 2 * n + 2,
            scopes: vec![
                scope(0, None, "pass"),
                scope(1, Some(0), "@0"),
                scope(2, Some(0), "op"),
            ],
            allocations,
            uses: Vec::new(),
            recording: None,
        }
    }

    /// A logical buffer worked out afresh: the root of each allocation's realloc chain,
    /// and per root the chain's lifetime, largest size and alignment, and whether any
    /// member escaped.
    #[derive(Clone, Copy, Debug)]
    struct Expected {
        lower: u64,
        upper: u64,
        size: u64,
        align: u64,
        escaping: bool,
    }

    fn expected_chains(t: &Trace) -> (Vec<usize>, Vec<Option<Expected>>) {
        let mut root = vec![0usize; t.allocations.len()];
        let mut chains: Vec<Option<Expected>> = vec![None; t.allocations.len()];
        for (i, a) in t.allocations.iter().enumerate() {
            root[i] = a.realloc_parent.map_or(i, |p| root[p as usize]);
            let c = chains[root[i]].get_or_insert(Expected {
                lower: a.alloc,
                upper: 0,
                size: 0,
                align: 1,
                escaping: false,
            });
            c.upper = c.upper.max(a.free.unwrap_or(u64::MAX));
            c.size = c.size.max(a.size);
            c.align = c.align.max(a.align);
            c.escaping |= a.escaping || a.free.is_none();
        }
        (root, chains)
    }

    /// Checks `plan` against the chains of `t` worked out afresh: one slot per
    /// allocation with an ordinal, in order, sized by its chain (its own request the
    /// smallest), planned exactly when the chain stays inside the pass with an alignment
    /// a slab honours, aligned, inside the height; and no two planned chains that live at
    /// once, or run in different contexts, share a byte.
    fn check_plan(t: &Trace, plan: &PlanFile) -> Result<(), TestCaseError> {
        prop_assert_eq!(plan.check(), Ok(()));
        let (root, chains) = expected_chains(t);
        let keyed: Vec<usize> = (0..t.allocations.len())
            .filter(|&i| t.allocations[i].ordinal.is_some())
            .collect();
        prop_assert_eq!(plan.slots.len(), keyed.len());
        let mut placed = Vec::new();
        for (slot, &i) in plan.slots.iter().zip(&keyed) {
            let a = &t.allocations[i];
            let c = chains[root[i]].unwrap();
            prop_assert_eq!((slot.scope, Some(slot.ordinal)), (a.scope, a.ordinal));
            prop_assert_eq!(slot.size, c.size);
            prop_assert_eq!(slot.min_size, (a.size < c.size).then_some(a.size));
            prop_assert_eq!(slot.align, plan_align(c.align, c.size));
            let plannable = !c.escaping && c.align <= MAX_PLANNED_ALIGN;
            prop_assert_eq!(slot.offset.is_some(), plannable, "slot of allocation {}", i);
            if let Some(o) = slot.offset {
                prop_assert_eq!(o % slot.align, 0);
                placed.push((o, c, a.scope == 1));
            }
        }
        for (x, &(ox, cx, hx)) in placed.iter().enumerate() {
            for &(oy, cy, hy) in &placed[x + 1..] {
                let together = cx.lower < cy.upper && cy.lower < cx.upper;
                let apart = ox + cx.size <= oy || oy + cy.size <= ox;
                prop_assert!(
                    apart || (!together && hx == hy),
                    "{ox} {cx:?} / {oy} {cy:?}"
                );
            }
        }
        Ok(())
    }

    fn op() -> impl Strategy<Value = Op> {
        (
            1u64..5000,
            prop_oneof![8 => 0u8..7, 1 => 12u8..14],
            prop_oneof![6 => (0u64..12).prop_map(Some), 1 => Just(None)],
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.3),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 256 }))]

        /// Plans of generated passes (reallocs, escapes, lost frees, alignments past a
        /// slab's, a helper context) keep every key with its chain's size and never
        /// place two chains alive together on the same bytes.
        #[test]
        fn plans_keep_every_key_and_never_overlap(ops in prop::collection::vec(op(), 0..160)) {
            let t = trace_of(&ops);
            check_plan(&t, &PlanFile::from_trace(&t, OffsetStrategy::GreedyBySize))?;
            check_plan(&t, &PlanFile::from_trace(&t, OffsetStrategy::Best))?;
        }
    }

    /// A pass of several record chunks, with realloc chains that cross chunk boundaries,
    /// plans as the chains say: the records are read back to front a chunk at a time.
    #[test]
    #[cfg_attr(miri, ignore = "132,072 records: hours under Miri")]
    fn passes_of_several_chunks_plan_their_chains() {
        let n = 2 * CHUNK + 1000;
        // The records are read in chunks from the end: these begin chunks.
        let starts = [n - CHUNK, n - 2 * CHUNK];
        let ops: Vec<Op> = (0..n)
            .map(|i| {
                let size = 16 + (i as u64 * 7919) % 4000;
                // Allocations before a chunk's start (and every 97th) live long and are
                // continued, larger, by their successor.
                let parent = i % 97 == 0 || starts.contains(&(i + 1));
                let child = i % 97 == 1 || starts.contains(&i);
                let life = if parent { 3 } else { (i % 5) as u64 };
                let size = if child { 5000 + size } else { size };
                (size, (i % 4) as u8, Some(life), child, false, false)
            })
            .collect();
        let t = trace_of(&ops);
        let plan = PlanFile::from_trace(&t, OffsetStrategy::GreedyInOrder);
        let (root, chains) = expected_chains(&t);
        assert_eq!(plan.check(), Ok(()));
        let keyed = t.allocations.iter().filter(|a| a.ordinal.is_some());
        let mut buffers = Vec::new();
        let mut offsets = Vec::new();
        for (slot, a) in plan.slots.iter().zip(keyed) {
            let c = chains[root[a.id as usize]].unwrap();
            assert_eq!(
                (slot.size, slot.scope, Some(slot.ordinal)),
                (c.size, a.scope, a.ordinal)
            );
            let o = slot.offset.expect("every chain of this pass is planned");
            buffers.push(Buffer::new("", c.lower, c.upper, c.size).with_align(slot.align));
            offsets.push(o);
        }
        for start in starts {
            assert_eq!(t.allocations[start].realloc_parent, Some(start as u32 - 1));
        }
        let problem = Problem::unnamed(buffers).unwrap();
        let height = validate_offsets(&problem, &OffsetPlan { offsets }).unwrap();
        assert!(height <= plan.height);
    }
}

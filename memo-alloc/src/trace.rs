//! The trace of a profiled pass and the plan made from it, as versioned JSON documents.
//!
//! A trace (`"format": "memomalloc-trace"`, `"version": 1`) lists the pass's scope tree and
//! every allocation: its tag, tagged pointer, size, alignment, kind, alloc and free time
//! (event counter ticks), scope and ordinal, realloc parent, whether it escaped the pass,
//! and its call site when captured. A plan (`"format": "memomalloc-plan"`) lists the scope
//! tree and one slot per planned allocation key (scope, ordinal) with its offset, or none
//! for allocations that escaped. `MEMO_TRACE_DIR` receives both; `MEMO_PLAN_DIR` is read
//! for plans.

use serde::{Deserialize, Serialize};

use memo_planner::{align_up, Buffer, OffsetPlan, OffsetStrategy, Problem};

/// Format name of trace documents.
pub const TRACE_FORMAT: &str = "memomalloc-trace";
/// Format name of plan documents.
pub const PLAN_FORMAT: &str = "memomalloc-plan";
/// Version written by this build; readers accept it and reject others.
pub const FORMAT_VERSION: u32 = 1;

/// Checks a document's format name and version.
fn check_header(format: &str, expected: &str, version: u32) -> Result<(), String> {
    if format != expected {
        return Err(format!("format is {format:?}, expected {expected:?}"));
    }
    if version != FORMAT_VERSION {
        return Err(format!(
            "version {version} is not supported (expected {FORMAT_VERSION})"
        ));
    }
    Ok(())
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

/// A profiled pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// Always [`TRACE_FORMAT`].
    pub format: String,
    /// Always [`FORMAT_VERSION`].
    pub version: u32,
    /// The pass key.
    pub key: String,
    /// Number of events (the pass's final time).
    pub events: u64,
    /// The scope tree; `scopes[0]` is the pass.
    pub scopes: Vec<TraceScope>,
    /// Every allocation, in order.
    pub allocations: Vec<TraceAlloc>,
    /// Uses recorded by `observe`.
    #[serde(default)]
    pub uses: Vec<TraceUse>,
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
    /// Merges realloc chains into logical buffers, in root order.
    pub fn chains(&self) -> Vec<Chain> {
        let n = self.allocations.len();
        let mut root_of: Vec<u32> = (0..n as u32).collect();
        // The allocation an allocation continues, if an earlier one.
        let earlier_parent = |a: &TraceAlloc| a.realloc_parent.filter(|&p| p < a.id);
        // Exactly one chain per allocation that does not continue an earlier one: sized
        // up front, as a pass can hold hundreds of thousands.
        let roots = self
            .allocations
            .iter()
            .filter(|a| (a.id as usize) < n && earlier_parent(a).is_none())
            .count();
        let mut chains: Vec<Chain> = Vec::with_capacity(roots);
        let mut chain_of_root: Vec<u32> = vec![u32::MAX; n];
        for a in &self.allocations {
            let idx = a.id as usize;
            if idx >= n {
                continue;
            }
            let root = earlier_parent(a).map_or(a.id, |p| root_of[p as usize]);
            root_of[idx] = root;
            let c = chain_of_root[root as usize];
            if c == u32::MAX {
                chain_of_root[root as usize] = chains.len() as u32;
                chains.push(Chain {
                    root,
                    lower: a.alloc,
                    upper: a.free,
                    size: a.size,
                    align: a.align,
                    escaping: a.escaping,
                });
            } else {
                let ch = &mut chains[c as usize];
                ch.size = ch.size.max(a.size);
                ch.align = ch.align.max(a.align);
                ch.escaping |= a.escaping;
                ch.upper = match (ch.upper, a.free) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    _ => None,
                };
            }
        }
        for ch in &mut chains {
            if ch.upper.is_none() {
                ch.escaping = true;
            }
        }
        chains
    }

    /// Checks the document's header and internal consistency: the scope tree (scope 0 is
    /// the pass, every other scope has an earlier parent, scope times inside the pass),
    /// and every allocation (its index, scope, alignment, times and realloc parent). The
    /// error names the first inconsistency found.
    pub fn check(&self) -> Result<(), String> {
        check_header(&self.format, TRACE_FORMAT, self.version)?;
        check_scope_tree(&self.scopes)?;
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

    /// Appends the recording of helper context `helper` (a trace of its own, as its
    /// recorder made it) to this pass's trace: its scopes under the pass's scope
    /// `@<helper>` (made at the first recording of that helper; a helper entered again
    /// continues its sequence: ordinals and occurrences go on), its times after this
    /// trace's, its allocations' ids (and tags) after this trace's. Fails, with this trace
    /// unchanged, when room for the helper's records cannot be allocated.
    pub(crate) fn adopt_helper(
        &mut self,
        helper: u32,
        part: Trace,
    ) -> Result<(), std::collections::TryReserveError> {
        self.scopes.try_reserve(part.scopes.len() + 1)?;
        self.allocations.try_reserve(part.allocations.len())?;
        self.uses.try_reserve(part.uses.len())?;
        let shift = self.events;
        let name = format!("@{helper}");
        let root = match self
            .scopes
            .iter()
            .position(|s| s.parent == Some(0) && s.name == name)
        {
            Some(i) => i as u32,
            None => {
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
        };
        // Occurrences and ordinals continue where earlier recordings of this helper left.
        let mut occurrences: std::collections::HashMap<(u32, String), u32> = Default::default();
        occurrences.try_reserve(self.scopes.len())?;
        for s in &self.scopes {
            if let Some(p) = s.parent {
                let n = occurrences.entry((p, s.name.clone())).or_insert(0);
                *n = (*n).max(s.occurrence + 1);
            }
        }
        let root_ordinals = self
            .allocations
            .iter()
            .filter(|a| a.scope == root && a.ordinal.is_some())
            .count() as u32;
        let mut scope_of: Vec<u32> = Vec::new();
        scope_of.try_reserve_exact(part.scopes.len())?;
        for s in &part.scopes {
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
        let first = self.allocations.len() as u32;
        for a in part.allocations {
            let id = first + a.id;
            let scope = scope_of.get(a.scope as usize).copied().unwrap_or(root);
            let addr = crate::tag::TaggedPtr::from_raw(a.ptr).canonical();
            self.allocations.push(TraceAlloc {
                id,
                tag: id as u16,
                ptr: crate::tag::TaggedPtr::new(addr, id as u16).raw(),
                alloc: a.alloc + shift,
                free: a.free.map(|t| t + shift),
                scope,
                ordinal: a
                    .ordinal
                    .map(|o| if scope == root { o + root_ordinals } else { o }),
                realloc_parent: a.realloc_parent.map(|p| p + first),
                ..a
            });
        }
        self.uses.extend(part.uses.into_iter().map(|u| TraceUse {
            time: u.time + shift,
            allocation: u.allocation + first,
            ..u
        }));
        self.events += part.events;
        if let Some(s) = self.scopes.get_mut(root as usize) {
            s.exit = Some(self.events);
        }
        if let Some(s) = self.scopes.first_mut() {
            s.exit = Some(self.events);
        }
        Ok(())
    }

    /// The planner problem of the pass: one buffer per non-escaping chain, with the
    /// alignment raised by [`plan_align`]. Also returns the chain of each buffer.
    pub fn to_problem(&self) -> (Problem, Vec<Chain>) {
        self.to_problem_seen(&[])
    }

    /// As [`Trace::to_problem`], each chain widened to what earlier profiles saw for its
    /// key (`seen`, by root allocation; see [`Seen`]).
    pub(crate) fn to_problem_seen(&self, seen: &[Option<Seen>]) -> (Problem, Vec<Chain>) {
        let chains = self.planned_chains(seen, |_| true);
        (problem_of(&chains, true), chains)
    }

    /// The chains to plan (not escaping, plannable alignment), widened by `seen`, among
    /// those whose root `keep` accepts.
    fn planned_chains(&self, seen: &[Option<Seen>], keep: impl Fn(&Chain) -> bool) -> Vec<Chain> {
        self.chains()
            .into_iter()
            .map(|c| c.widened(seen))
            .filter(|c| c.plannable() && keep(c))
            .collect()
    }

    /// The context of each scope: 0 for the pass's main context, `1 + k` for the scopes
    /// of its `k`-th helper context (a child of the pass named `@<id>`; see
    /// `PassHandle::enter`); and the number of contexts.
    pub fn contexts(&self) -> (Vec<u32>, u32) {
        let mut of = vec![0u32; self.scopes.len()];
        let mut n = 1;
        for s in &self.scopes {
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
}

/// The planner problem of `chains`, each buffer named by its chain's root when `named`
/// (for tools; the allocator's own planning knows buffers by index, and a pass of 350,000
/// allocations would spend 11 MB on names).
fn problem_of<'a>(chains: impl IntoIterator<Item = &'a Chain>, named: bool) -> Problem {
    let buffers = chains
        .into_iter()
        .map(|c| {
            let upper = c.upper.unwrap_or(c.lower + 1).max(c.lower + 1);
            let id = if named {
                c.root.to_string()
            } else {
                String::new()
            };
            Buffer::new(id, c.lower, upper, c.size.max(1)).with_align(plan_align(c.align, c.size))
        })
        .collect();
    // Every field was made valid by the caller; an error here would be a bug, and the pass
    // is then simply not planned.
    if named {
        Problem::new(buffers).unwrap_or_default()
    } else {
        Problem::unnamed(buffers).unwrap_or_default()
    }
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

impl Chain {
    /// Whether the allocator plans the chain: it does not escape the pass and a slab can
    /// honour its alignment.
    fn plannable(&self) -> bool {
        !self.escaping && self.align <= MAX_PLANNED_ALIGN
    }

    /// The chain with its size and alignment raised to what `seen` holds for its root.
    fn widened(mut self, seen: &[Option<Seen>]) -> Chain {
        if let Some(Some(s)) = seen.get(self.root as usize) {
            self.size = self.size.max(s.max);
            self.align = self.align.max(s.align);
        }
        self
    }
}

pub use crate::geometry::{plan_align, MAX_PLANNED_ALIGN};

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
    /// One slot per allocation key.
    pub slots: Vec<PlanSlot>,
}

/// What planning needs of a trace: its chains (widened by what earlier profiles saw), the
/// context of each, and the key of each chain that has a slot.
struct PlanInputs {
    key: String,
    scopes: Vec<TraceScope>,
    /// By chain, in root order: the chain and its context.
    chains: Vec<(Chain, u32)>,
    contexts: u32,
    /// The chains with a slot (their root has an ordinal).
    keys: Vec<SlotKey>,
}

/// One slot's key: its chain (an index into `PlanInputs::chains`), its scope and ordinal,
/// and the smallest request seen for it.
struct SlotKey {
    chain: u32,
    scope: u32,
    ordinal: u32,
    min: u64,
}

impl PlanInputs {
    fn of(trace: &Trace, seen: &[Option<Seen>]) -> PlanInputs {
        let (context_of, contexts) = trace.contexts();
        let chains: Vec<(Chain, u32)> = trace
            .chains()
            .into_iter()
            .map(|c| {
                let c = c.widened(seen);
                let scope = trace.allocations[c.root as usize].scope as usize;
                (c, context_of.get(scope).copied().unwrap_or(0))
            })
            .collect();
        let keys = (0u32..)
            .zip(&chains)
            .filter_map(|(i, (c, _))| {
                let a = &trace.allocations[c.root as usize];
                // The request that takes the slot is the chain's first: for a realloc
                // chain, smaller than the planned size; earlier profiles may have seen
                // smaller ones.
                let earlier = seen.get(c.root as usize).copied().flatten();
                Some(SlotKey {
                    chain: i,
                    scope: a.scope,
                    ordinal: a.ordinal?,
                    min: earlier.map_or(a.size, |s| s.min.min(a.size)),
                })
            })
            .collect();
        PlanInputs {
            key: trace.key.clone(),
            scopes: trace.scopes.clone(),
            chains,
            contexts,
            keys,
        }
    }

    /// Plans each context (the main one, each helper) on its own and stacks the regions:
    /// contexts run concurrently in replay, so their slots never share addresses. Only
    /// the problem and the chains' indices are held beside the inputs while a strategy
    /// runs.
    fn plan(self, strategy: OffsetStrategy) -> PlanFile {
        // Offsets by chain (`UNPLANNED`: none).
        const UNPLANNED: u64 = u64::MAX;
        let mut offset_of_chain = vec![UNPLANNED; self.chains.len()];
        let (mut height, mut lower_bound, mut naive) = (0u64, 0u64, 0u64);
        for k in 0..self.contexts {
            let planned = || {
                (0u32..)
                    .zip(&self.chains)
                    .filter(move |(_, (c, ctx))| *ctx == k && c.plannable())
            };
            let indices: Vec<u32> = planned().map(|(i, _)| i).collect();
            if indices.is_empty() {
                continue;
            }
            let problem = problem_of(planned().map(|(_, (c, _))| c), false);
            let plan: OffsetPlan = crate::offsets::plan(strategy, &problem);
            let base = align_up(
                height,
                problem.buffers().iter().map(|b| b.align).max().unwrap_or(1),
            );
            for (&i, &off) in indices.iter().zip(&plan.offsets) {
                offset_of_chain[i as usize] = base + off;
            }
            height = base + plan.height(&problem);
            lower_bound += memo_planner::offsets_lower_bound(&problem);
            naive += problem
                .buffers()
                .iter()
                .map(|b| align_up(b.size, b.align))
                .sum::<u64>();
        }
        let slots = self
            .keys
            .iter()
            .map(|k| {
                let (c, _) = &self.chains[k.chain as usize];
                PlanSlot {
                    scope: k.scope,
                    ordinal: k.ordinal,
                    min_size: (k.min < c.size).then_some(k.min),
                    size: c.size,
                    align: plan_align(c.align, c.size),
                    offset: Some(offset_of_chain[k.chain as usize]).filter(|&o| o != UNPLANNED),
                }
            })
            .collect();
        PlanFile {
            format: PLAN_FORMAT.to_string(),
            version: FORMAT_VERSION,
            key: self.key,
            strategy: strategy.name().to_string(),
            height,
            lower_bound,
            naive,
            scopes: self.scopes,
            slots,
        }
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
        PlanInputs::of(trace, seen).plan(strategy)
    }

    /// As [`PlanFile::from_trace_seen`], dropping the trace before the strategy runs: a
    /// pass of 350,000 allocations takes 36 MB of trace, and what planning keeps of it
    /// (its chains and slot keys) about 24 MB.
    pub(crate) fn from_owned_trace_seen(
        trace: Trace,
        strategy: OffsetStrategy,
        seen: &[Option<Seen>],
    ) -> PlanFile {
        let inputs = PlanInputs::of(&trace, seen);
        drop(trace);
        inputs.plan(strategy)
    }

    /// Checks the document's header, its internal consistency and its bounds: scope
    /// occurrences and slot ordinals no larger than the document's own counts, sizes and
    /// alignments that a slab can honour, offsets inside the height, a height no slab
    /// exceeds ([`MAX_SLAB_HEIGHT`]). The error names the first field found wrong.
    pub fn check(&self) -> Result<(), String> {
        check_header(&self.format, PLAN_FORMAT, self.version)?;
        check_scope_tree(&self.scopes)?;
        if self.height > MAX_SLAB_HEIGHT {
            return Err(format!(
                "height {} exceeds the largest slab ({MAX_SLAB_HEIGHT} bytes)",
                self.height
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

/// The largest slab height a plan may have (32 GiB): a plan document asking for more is
/// rejected rather than trusted.
pub const MAX_SLAB_HEIGHT: u64 = 1 << 35;

//! Request programs replayed against a plan through memo-alloc's replay
//! (`memo_alloc::testing::replay::ReplayDriver`), every block checked by the shadow rules.
//!
//! A [`PlanSpec`] is a plan document described so that most arbitrary inputs make a
//! well-formed one (a scope tree, dense ordinals, aligned offsets inside the height;
//! slots may overlap in address: the overlap check must keep their blocks apart), and a
//! program is a list of [`Step`]s: requests near a slot's size in its scope or of any
//! size in any node, frees, reallocs, pass ends, and requests whose backend fails too.
//! Misses are served by the system allocator, as the allocator's backend would.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;

use arbitrary::Arbitrary;
use memo_alloc::testing::replay::ReplayDriver;
use memo_alloc::trace::{
    LaneEscape, PlanFile, PlanLanes, PlanSlot, TraceScope, FORMAT_VERSION, PLAN_FORMAT,
};

use crate::shadow::Live;

/// Most scopes, slots and steps a program has (the fuzzer's inputs stay small).
const MAX_SCOPES: usize = 24;
const MAX_SLOTS: usize = 256;
const MAX_STEPS: usize = 1024;
/// Names scopes take: few, so that siblings share names (occurrences).
const NAMES: [&str; 4] = ["a", "b", "conv", "relu"];

/// One scope: its parent among the earlier ones and its name.
#[derive(Arbitrary, Debug)]
pub struct ScopeSpec {
    parent: u8,
    name: u8,
}

/// One slot, in its scope's order.
#[derive(Arbitrary, Debug)]
pub struct SlotSpec {
    scope: u8,
    size: u16,
    /// How much smaller the smallest request seen was.
    smaller: Option<u16>,
    align_log2: u8,
    /// Offset in 16-byte units (`None`: the allocation escaped).
    offset: Option<u16>,
}

/// The lanes: bound `16 << (max_log2 % 9)` (or none), cells per class, escapes.
#[derive(Arbitrary, Debug)]
pub struct LaneSpec {
    max_log2: u8,
    cells: Vec<u8>,
    escapes: Vec<(u8, u8, u8)>,
}

/// A plan document in a form most inputs make well-formed.
#[derive(Arbitrary, Debug)]
pub struct PlanSpec {
    scopes: Vec<ScopeSpec>,
    slots: Vec<SlotSpec>,
    lanes: Option<LaneSpec>,
    /// Extra height above the highest slot, in 16-byte units.
    headroom: u8,
}

/// One step of a program.
#[derive(Arbitrary, Debug)]
pub enum Step {
    /// A request in slot `slot`'s scope, of its size plus `delta` (the node is set to the
    /// scope's).
    NearSlot { slot: u8, delta: i8, align_log2: u8 },
    /// A request of any size in the current node.
    Any { size: u16, align_log2: u8 },
    /// The same, with a backend that fails it too (a miss is undone).
    Failing { size: u16 },
    /// Requests from now on in node `node % (nodes + 1)` (the last: unknown to the plan).
    Node(u8),
    /// Frees the `k`-th live block (in address order), on the pass's thread for `k < 128`,
    /// else as from another thread.
    Free(u8),
    /// Reallocs the `k`-th live block to `size` bytes.
    Realloc(u8, u16),
    /// Ends the pass and starts the next (live blocks stay live).
    EndPass,
}

/// A plan and a program run against it.
#[derive(Arbitrary, Debug)]
pub struct Program {
    pub plan: PlanSpec,
    pub steps: Vec<Step>,
}

impl PlanSpec {
    /// The plan document.
    pub fn document(&self) -> PlanFile {
        let mut scopes = vec![scope(0, None, "pass".into(), 0)];
        let mut seen: HashMap<(u32, &str), u32> = HashMap::new();
        for (i, s) in (1..).zip(self.scopes.iter().take(MAX_SCOPES)) {
            let parent = s.parent as u32 % i;
            let name = NAMES[s.name as usize % NAMES.len()];
            let occurrence = seen.entry((parent, name)).or_insert(0);
            scopes.push(scope(i, Some(parent), name.into(), *occurrence));
            *occurrence += 1;
        }
        let mut ordinals = vec![0u32; scopes.len()];
        let slots: Vec<PlanSlot> = self
            .slots
            .iter()
            .take(MAX_SLOTS)
            .map(|s| {
                let scope = s.scope as u32 % scopes.len() as u32;
                let ordinal = ordinals[scope as usize];
                ordinals[scope as usize] += 1;
                let size = (s.size as u64).max(1);
                let align = 1u64 << (s.align_log2 % 13);
                PlanSlot {
                    scope,
                    ordinal,
                    size,
                    min_size: s.smaller.map(|d| size.saturating_sub(d as u64).max(1)),
                    align,
                    offset: s.offset.map(|o| (o as u64 * 16).next_multiple_of(align)),
                    // No lifetimes: the slots may overlap, and the shadow rules must hold
                    // whatever the plan says.
                    lifetime: None,
                }
            })
            .collect();
        let top = slots
            .iter()
            .filter_map(|s| Some(s.offset? + s.size))
            .max()
            .unwrap_or(0);
        PlanFile {
            format: PLAN_FORMAT.into(),
            version: FORMAT_VERSION,
            key: "fuzz".into(),
            strategy: "fuzz".into(),
            height: top + self.headroom as u64 * 16,
            lower_bound: 0,
            naive: slots.iter().map(|s| s.size).sum(),
            lanes: self
                .lanes
                .as_ref()
                .map_or_else(PlanLanes::default, |l| l.document(scopes.len() as u32)),
            scopes,
            slots,
        }
    }
}

impl LaneSpec {
    fn document(&self, scopes: u32) -> PlanLanes {
        let max = 16u64 << (self.max_log2 % 9);
        let classes = max.trailing_zeros() as usize - 3;
        let cells: Vec<u32> = self.cells.iter().take(classes).map(|&c| c as u32).collect();
        let requests = cells.iter().map(|&c| c as u64).sum::<u64>() + 1;
        let mut escapes: Vec<LaneEscape> = self
            .escapes
            .iter()
            .take(16)
            .map(|&(scope, ordinal, class)| LaneEscape {
                scope: scope as u32 % scopes,
                ordinal: ordinal as u32 % requests as u32,
                cell: 16 << (class as usize % classes),
            })
            .collect();
        escapes.sort_by_key(|e| (e.scope, e.ordinal));
        escapes.dedup_by_key(|e| (e.scope, e.ordinal));
        PlanLanes {
            max,
            cells,
            requests,
            escapes,
        }
    }
}

fn scope(id: u32, parent: Option<u32>, name: String, occurrence: u32) -> TraceScope {
    TraceScope {
        id,
        parent,
        name,
        occurrence,
        enter: None,
        exit: None,
    }
}

/// Where a live block came from.
#[derive(Clone, Copy)]
enum From {
    Slab,
    Backend,
}

/// A program's run: the driver, the live blocks and their layouts.
pub struct Run {
    driver: ReplayDriver,
    live: Live,
    layouts: HashMap<usize, (Layout, From)>,
    /// Each scope's node (as entering its op finds it), by scope id.
    nodes: Vec<Option<u32>>,
}

impl Run {
    /// Starts replaying `plan`; `None` when the plan is refused (the error is the
    /// compiler's answer, which the caller may check).
    pub fn new(plan: &PlanFile) -> Result<Run, String> {
        let driver = ReplayDriver::new(plan)?;
        let mut nodes: Vec<Option<u32>> = vec![Some(0)];
        for s in plan.scopes.iter().skip(1) {
            let parent = s
                .parent
                .and_then(|p| nodes.get(p as usize).copied().flatten());
            nodes.push(parent.and_then(|p| driver.node_of(p, &s.name, s.occurrence)));
        }
        Ok(Run {
            driver,
            live: Live::default(),
            layouts: HashMap::new(),
            nodes,
        })
    }

    /// Makes the next requests in scope `scope`'s node (an unknown node if it has none).
    pub fn enter_scope(&mut self, scope: u32) {
        let node = self.nodes.get(scope as usize).copied().flatten();
        self.driver.set_node(node.unwrap_or(u32::MAX));
    }

    /// A request: from the slab, else from the backend (`System`); `backend_fails`: the
    /// backend fails it too (nothing is allocated).
    pub fn alloc(&mut self, layout: Layout, backend_fails: bool) {
        let (p, from) = match self.driver.alloc(layout, backend_fails) {
            Ok(p) => {
                assert!(ReplayDriver::is_slab_pointer(p.as_ptr()));
                (p.as_ptr(), From::Slab)
            }
            Err(_) if backend_fails => return,
            // SAFETY: non-zero size.
            Err(_) => (unsafe { System.alloc(layout) }, From::Backend),
        };
        assert!(!p.is_null(), "the system allocator failed");
        // SAFETY: a fresh block of `layout`.
        unsafe { self.live.insert(p, layout.size(), layout.align()) };
        self.layouts.insert(p as usize, (layout, from));
    }

    /// Frees the `k`-th live block.
    pub fn free(&mut self, k: usize) {
        let Some(p) = self.nth(k) else { return };
        // SAFETY: a live block.
        unsafe { self.live.remove(p) };
        let (layout, from) = self.layouts.remove(&(p as usize)).expect("a live block");
        match from {
            // SAFETY: a live slab pointer of this driver. Half the frees are made as
            // from another thread (a lane cell is then not kept for the pass).
            From::Slab if k >= 128 => unsafe {
                self.driver
                    .free_elsewhere(std::ptr::NonNull::new_unchecked(p))
            },
            // SAFETY: as above.
            From::Slab => unsafe { self.driver.free(std::ptr::NonNull::new_unchecked(p)) },
            // SAFETY: a live block of `System`, of `layout`.
            From::Backend => unsafe { System.dealloc(p, layout) },
        }
    }

    /// Reallocs the `k`-th live block to `size` bytes, as `realloc` serves a slab pointer
    /// (in place, a larger lane cell, or the backend with the contents copied).
    pub fn realloc(&mut self, k: usize, size: usize) {
        let Some(p) = self.nth(k) else { return };
        let (layout, from) = self.layouts.remove(&(p as usize)).expect("a live block");
        let size = size.max(1);
        let new_layout = Layout::from_size_align(size, layout.align()).expect("a layout");
        // SAFETY: `p` is live with `layout`; each branch moves it as `realloc` would.
        let (q, from) = unsafe {
            match from {
                From::Slab => {
                    let p = std::ptr::NonNull::new_unchecked(p);
                    match self.driver.realloc(p, layout, size) {
                        Some(q) => (q.as_ptr(), From::Slab),
                        None => {
                            let q = System.alloc(new_layout);
                            assert!(!q.is_null(), "the system allocator failed");
                            std::ptr::copy_nonoverlapping(p.as_ptr(), q, layout.size().min(size));
                            self.driver.free(p);
                            (q, From::Backend)
                        }
                    }
                }
                From::Backend => (System.realloc(p, layout, size), From::Backend),
            }
        };
        assert!(!q.is_null(), "the system allocator failed");
        // SAFETY: `q` holds `size` bytes; `p` was registered.
        unsafe { self.live.moved(p, q, size, layout.align()) };
        self.layouts.insert(q as usize, (new_layout, from));
    }

    /// Ends the pass and starts the next.
    pub fn end_pass(&mut self) {
        self.driver.next_pass();
    }

    fn nth(&self, k: usize) -> Option<*mut u8> {
        let all = self.live.addresses();
        (!all.is_empty()).then(|| all[k % all.len()])
    }

    /// Runs one step.
    pub fn step(&mut self, plan: &PlanFile, step: &Step) {
        match *step {
            Step::NearSlot {
                slot,
                delta,
                align_log2,
            } => {
                let Some(s) = plan.slots.get(slot as usize % plan.slots.len().max(1)) else {
                    return;
                };
                self.enter_scope(s.scope);
                let size = (s.size as i64 + delta as i64).max(1) as usize;
                let align = 1usize << (align_log2 % 13).min(s.align.trailing_zeros() as u8 + 1);
                self.alloc(
                    Layout::from_size_align(size, align).expect("a layout"),
                    false,
                );
            }
            Step::Any { size, align_log2 } => {
                let align = 1usize << (align_log2 % 13);
                let layout = Layout::from_size_align((size as usize).max(1), align);
                self.alloc(layout.expect("a layout"), false);
            }
            Step::Failing { size } => {
                let layout = Layout::from_size_align((size as usize).max(1), 8);
                self.alloc(layout.expect("a layout"), true);
            }
            Step::Node(n) => {
                let node = n as u32 % (self.driver.nodes() + 1);
                self.driver.set_node(node);
            }
            Step::Free(k) => self.free(k as usize),
            Step::Realloc(k, size) => self.realloc(k as usize, size as usize),
            Step::EndPass => self.end_pass(),
        }
    }

    /// Frees every live block (their patterns checked) and drops the driver.
    pub fn finish(mut self) {
        while !self.live.is_empty() {
            self.free(0);
        }
    }
}

/// Runs `program`: its plan (refused plans end the run) and its steps, then frees
/// everything.
pub fn run(program: &Program) {
    let plan = program.plan.document();
    let Ok(mut run) = Run::new(&plan) else {
        return;
    };
    for step in program.steps.iter().take(MAX_STEPS) {
        run.step(&plan, step);
    }
    run.finish();
}

/// Replays `plan`'s own request sequence for two passes (each slot's size in its scope,
/// in the document's order; the first pass frees everything at its end, the second
/// frees every other block as it goes and the rest after its end), every block checked.
pub fn run_own_sequence(plan: &PlanFile) {
    let Ok(mut run) = Run::new(plan) else {
        return;
    };
    for pass in 0..2 {
        for (i, s) in plan.slots.iter().enumerate() {
            run.enter_scope(s.scope);
            let align = (s.align as usize).min(4096);
            let size = (s.size as usize).min(1 << 20);
            run.alloc(
                Layout::from_size_align(size, align).expect("a layout"),
                false,
            );
            if pass == 1 && i % 2 == 1 {
                run.free(i);
            }
        }
        if pass == 0 {
            while !run.live.is_empty() {
                run.free(0);
            }
        }
        run.end_pass();
    }
    run.finish();
}

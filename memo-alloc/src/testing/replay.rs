//! A plan's replay driven request by request, outside any pass: the fuzz target of the
//! matcher and tests feed it arbitrary request sequences against a plan document and
//! check what it hands out.
//!
//! [`ReplayDriver`] runs the allocator's own code: the plan document goes through
//! `PlanFile::check` and the plan compiler, a slab instance is taken from the plan's pool,
//! a request goes through `replay::hit::alloc` (the hit path, the lanes, the matching
//! rules and the overlap check), a free through the region's directory to
//! `replay::free::free`, a realloc through the slot's capacity and the lanes' move, and a
//! pass end puts the instance back as a replayed pass does (pinned while something of it
//! is live) and takes one again. What it does not run is the pass machinery around them:
//! the node of a request is set directly ([`ReplayDriver::set_node`]), and misses are
//! returned instead of being served by a backend.

use std::alloc::Layout;
use std::ptr::{self, NonNull};

use crate::format::trace::PlanFile;
use crate::memory::region;
use crate::replay::replayer::{ReplayContext, Replayer};
use crate::replay::slab::compile::CompiledPlan;
use crate::replay::slab::instance::Instance;
use crate::replay::slab::pool::{Lend, Slabs};
use crate::replay::{free, hit};
use crate::stats::{MissReason, PassCounters};

/// Slab instances a driver's plan may create: a pass holds one, and instances kept
/// pinned by blocks that outlived their pass are reused once this many exist.
const INSTANCES: usize = 8;

/// One replayed plan, its pool, and the instance of the pass running now (see the module
/// documentation). Single-threaded; every pointer it handed out must be freed through it
/// before it is dropped (a pointer still live then keeps the plan alive: it is leaked).
pub struct ReplayDriver {
    slabs: *mut Slabs,
    inst: *mut Instance,
    context: DriverContext,
}

/// What a pass's context holds for replay, without the pass.
struct DriverContext {
    replayer: Replayer,
    node: u32,
    counters: PassCounters,
}

impl ReplayContext for DriverContext {
    fn replayer(&mut self) -> &mut Replayer {
        &mut self.replayer
    }

    fn node(&self) -> u32 {
        self.node
    }

    fn counters(&mut self) -> &mut PassCounters {
        &mut self.counters
    }
}

impl ReplayDriver {
    /// Checks and compiles `plan` as a plan file is, and starts its first replayed pass;
    /// the error says why the plan was refused (or that memory ran out).
    pub fn new(plan: &PlanFile) -> Result<ReplayDriver, String> {
        let compiled = CompiledPlan::compile(plan).map_err(|e| e.to_string())?;
        let slabs = Slabs::new(compiled, INSTANCES).ok_or("out of memory")?;
        let slabs = Box::into_raw(slabs);
        let plan_ptr = {
            // SAFETY: just boxed; the plan stays at its place until the box is freed.
            unsafe { &raw const (*slabs).plan }
        };
        // SAFETY: no instance yet: the replayer hands out nothing.
        let replayer = unsafe { Replayer::new(ptr::null_mut(), plan_ptr) };
        let mut driver = ReplayDriver {
            slabs,
            inst: ptr::null_mut(),
            context: DriverContext {
                replayer,
                node: 0,
                counters: PassCounters::default(),
            },
        };
        driver.begin_pass();
        Ok(driver)
    }

    fn slabs(&self) -> &Slabs {
        // SAFETY: boxed in `new`, freed only in `drop`.
        unsafe { &*self.slabs }
    }

    /// The plan's scope nodes: a request made in node `nodes()` or above is in an op the
    /// plan does not know.
    pub fn nodes(&self) -> u32 {
        self.slabs().plan.nodes() as u32
    }

    /// The node of the `occurrence`-th scope named `name` under node `parent`, as entering
    /// that op finds it; `None` when the plan has no such scope.
    pub fn node_of(&self, parent: u32, name: &str, occurrence: u32) -> Option<u32> {
        let (base, count) = self.slabs().plan.scope_group(parent, name)?;
        (occurrence < count).then_some(base + occurrence)
    }

    /// Makes the next requests in scope node `node` (0: the pass's root).
    pub fn set_node(&mut self, node: u32) {
        self.context.node = node;
    }

    /// Whether the running pass holds a slab instance (without one, every request misses
    /// with `NoSlab`).
    pub fn has_slab(&self) -> bool {
        !self.inst.is_null()
    }

    /// A request of the running pass: a slab pointer, or the reason it missed. When
    /// `backend_fails`, a miss is undone as the allocator undoes a request the backend
    /// could not serve either.
    pub fn alloc(
        &mut self,
        layout: Layout,
        backend_fails: bool,
    ) -> Result<NonNull<u8>, MissReason> {
        if self.inst.is_null() {
            return Err(MissReason::NoSlab);
        }
        // SAFETY: the driver's context replays with the instance it holds.
        let got = unsafe { hit::alloc(&mut self.context, layout) };
        if got.is_err() && backend_fails {
            // SAFETY: right after the miss, for the same context.
            unsafe { hit::undo(&mut self.context.replayer) };
        }
        got.map(|p| NonNull::new(p).expect("a slab pointer is never null"))
    }

    /// Whether `p` lies in the slab region (a slab pointer: free it through the driver).
    pub fn is_slab_pointer(p: *const u8) -> bool {
        region::lookup(p.cast_mut()).is_some()
    }

    /// Frees slab pointer `p`, as `dealloc` does on the running pass's thread: a lane
    /// cell of the running pass's instance is kept for its next requests.
    ///
    /// # Safety
    /// `p` was handed out by this driver's [`ReplayDriver::alloc`] or
    /// [`ReplayDriver::realloc`] and not freed since.
    pub unsafe fn free(&mut self, p: NonNull<u8>) {
        let owner = region::lookup(p.as_ptr()).expect("a slab pointer");
        let replayer = &mut self.context.replayer;
        // SAFETY: a live pointer this driver handed out, and its chunk's owner; the
        // replayer is the running pass's.
        unsafe { free::free_from(owner, p.as_ptr(), || Some(replayer)) };
    }

    /// Frees slab pointer `p` as `dealloc` does on a thread outside the running pass.
    ///
    /// # Safety
    /// As [`ReplayDriver::free`].
    pub unsafe fn free_elsewhere(&mut self, p: NonNull<u8>) {
        let owner = region::lookup(p.as_ptr()).expect("a slab pointer");
        // SAFETY: a live pointer this driver handed out, and its chunk's owner.
        unsafe { free::free(owner, p.as_ptr()) };
    }

    /// A realloc of slab pointer `p` (of `layout`) to `new_size` bytes, as `realloc` serves
    /// it from the slab: in place when its slot or cell holds `new_size`, or moved to a
    /// larger lane cell of the running pass (its bytes copied, `p` freed). `None`: the
    /// allocator would move it to the backend (the caller then frees `p` through
    /// [`ReplayDriver::free`] after copying).
    ///
    /// # Safety
    /// As [`ReplayDriver::free`]; `layout` is `p`'s.
    pub unsafe fn realloc(
        &mut self,
        p: NonNull<u8>,
        layout: Layout,
        new_size: usize,
    ) -> Option<NonNull<u8>> {
        let owner = region::lookup(p.as_ptr()).expect("a slab pointer");
        // SAFETY: a live pointer this driver handed out.
        if new_size as u64 <= unsafe { free::capacity(owner, p.as_ptr()) } {
            return Some(p);
        }
        if self.inst.is_null() {
            return None;
        }
        // SAFETY: as above; the replayer is the running pass's; `new_size` exceeds the
        // capacity.
        let moved = unsafe {
            free::lane_grow(
                &mut self.context.replayer,
                owner,
                p.as_ptr(),
                layout,
                new_size,
            )
        };
        moved.and_then(NonNull::new)
    }

    /// Ends the running pass and starts the next one, as a replayed pass bound to a
    /// thread does: the instance goes back to the pool (pinned if something of it is
    /// live) and the next pass takes one (the same, or another when it is pinned).
    pub fn next_pass(&mut self) {
        self.end_pass();
        self.begin_pass();
    }

    fn begin_pass(&mut self) {
        let slabs = self.slabs();
        slabs.register();
        let inst = slabs.take(Lend::Nothing).unwrap_or(ptr::null_mut());
        self.inst = inst;
        // SAFETY: the plan is the driver's; the instance (if any) is held until `end_pass`.
        self.context.replayer = unsafe { Replayer::new(inst, &raw const (*self.slabs).plan) };
        self.context.counters = PassCounters::default();
    }

    fn end_pass(&mut self) {
        let inst = std::mem::replace(&mut self.inst, ptr::null_mut());
        self.context.replayer.detach();
        // SAFETY: the running pass registered and took `inst` (or none) from this pool;
        // it hands nothing out any more.
        unsafe { self.slabs().release(inst, false, Lend::Nothing) };
    }
}

impl Drop for ReplayDriver {
    fn drop(&mut self) {
        self.end_pass();
        if self.slabs().try_retire() {
            // SAFETY: boxed in `new`; every instance is dead with nothing live.
            drop(unsafe { Box::from_raw(self.slabs) });
        }
        // Otherwise something is still live in it: the plan is leaked, never freed under
        // a live pointer.
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::format::trace::{
        PlanFile, PlanLanes, PlanSlot, TraceScope, FORMAT_VERSION, PLAN_FORMAT,
    };

    /// A plan of one 64-byte slot and two 16-byte lane cells.
    fn two_cells() -> PlanFile {
        PlanFile {
            format: PLAN_FORMAT.into(),
            version: FORMAT_VERSION,
            key: "kept".into(),
            strategy: "test".into(),
            height: 64,
            lower_bound: 64,
            naive: 64,
            scopes: vec![TraceScope {
                id: 0,
                parent: None,
                name: "kept".into(),
                occurrence: 0,
                enter: None,
                exit: None,
            }],
            slots: vec![PlanSlot {
                scope: 0,
                ordinal: 0,
                size: 64,
                min_size: None,
                align: 16,
                offset: Some(0),
                lifetime: None,
            }],
            lanes: PlanLanes {
                max: 16,
                cells: vec![2],
                requests: 2,
                ..PlanLanes::default()
            },
        }
    }

    /// A lane cell freed on its pass's thread stays live in the bitmap, kept for the pass:
    /// its next request of the class takes it back, and the pass's end frees it. One freed
    /// elsewhere is free at once.
    #[test]
    fn a_cell_freed_in_its_pass_is_kept_until_the_pass_ends() {
        let mut d = ReplayDriver::new(&two_cells()).unwrap();
        let small = Layout::from_size_align(16, 8).unwrap();
        let a = d.alloc(small, false).unwrap();
        let b = d.alloc(small, false).unwrap();
        let inst = d.inst;
        // SAFETY: the running pass holds the instance; it lives as long as the driver.
        let live = || unsafe { (*inst).lanes.live() };
        assert_eq!(live(), 2);
        // SAFETY: live pointers of this driver, each freed once.
        unsafe { d.free(a) };
        assert_eq!(live(), 2, "kept for the pass");
        assert_eq!(d.alloc(small, false), Ok(a));
        // SAFETY: as above.
        unsafe { d.free_elsewhere(b) };
        assert_eq!(live(), 1, "freed elsewhere: free at once");
        // SAFETY: as above.
        unsafe { d.free(a) };
        assert_eq!(live(), 1);
        d.next_pass();
        assert_eq!(live(), 0, "the pass's end frees what it kept");
    }
}

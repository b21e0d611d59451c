//! Shared bookkeeping for the shared-objects strategies: which buffer lives in which
//! object, each object's size, and a lifetime index of the assigned buffers that answers
//! "which objects are busy at some time in a buffer's lifetime?" in
//! `O(log T + k)` (`k` = assigned buffers overlapping it), never by scanning all objects.

use crate::plan::SharedObjectsPlan;
use crate::problem::Problem;
use crate::time_index::TimeIndex;
use crate::timeline::Timeline;

/// Marker for a buffer that has no object yet.
pub(crate) const UNASSIGNED: usize = usize::MAX;

/// Objects under construction. Every object is created with a buffer in it, so ids are
/// compact and no object is ever empty.
#[derive(Clone, Debug)]
pub(crate) struct Objects {
    /// Object of each buffer, [`UNASSIGNED`] until assigned.
    pub ids: Vec<usize>,
    /// Size of each object: the largest size among its buffers.
    pub sizes: Vec<u64>,
    timeline: Timeline,
    index: TimeIndex,
    busy: Vec<u32>,
    epoch: u32,
}

impl Objects {
    /// No objects yet; `O(n log n)` for the timeline.
    pub fn new(problem: &Problem) -> Objects {
        let timeline = Timeline::new(problem);
        let index = TimeIndex::new(timeline.slots(), problem.len());
        Objects {
            ids: vec![UNASSIGNED; problem.len()],
            sizes: Vec::new(),
            timeline,
            index,
            busy: Vec::new(),
            epoch: 0,
        }
    }

    /// The problem's timeline (slots between consecutive endpoints).
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// Puts buffer `buf` (of size `size`) into a new object and returns its id.
    pub fn create(&mut self, buf: usize, size: u64) -> usize {
        let obj = self.sizes.len();
        self.sizes.push(size);
        self.busy.push(0);
        self.place(buf, obj);
        obj
    }

    /// Puts buffer `buf` (of size `size`) into object `obj`, growing it if needed. The
    /// caller has checked that `obj` is free during the buffer's lifetime.
    pub fn assign(&mut self, buf: usize, size: u64, obj: usize) {
        self.sizes[obj] = self.sizes[obj].max(size);
        self.place(buf, obj);
    }

    fn place(&mut self, buf: usize, obj: usize) {
        self.ids[buf] = obj;
        let (s, e) = self.timeline.span(buf);
        self.index.insert(buf, s, e);
    }

    /// Marks every object holding an assigned buffer that overlaps buffer `buf`'s lifetime;
    /// [`Objects::is_busy`] answers for these marks until the next call.
    pub fn mark_busy(&mut self, buf: usize) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.busy.iter_mut().for_each(|m| *m = 0);
            self.epoch = 1;
        }
        let (s, e) = self.timeline.span(buf);
        let (ids, busy, epoch) = (&self.ids, &mut self.busy, self.epoch);
        self.index.for_each_overlapping(s, e, |j| {
            if let Some(m) = ids.get(j).and_then(|&o| busy.get_mut(o)) {
                *m = epoch;
            }
        });
    }

    /// Whether `obj` was marked by the last [`Objects::mark_busy`].
    pub fn is_busy(&self, obj: usize) -> bool {
        self.busy[obj] == self.epoch
    }

    /// The finished plan. Every buffer must have been assigned.
    pub fn into_plan(self) -> SharedObjectsPlan {
        debug_assert!(self.ids.iter().all(|&o| o != UNASSIGNED));
        SharedObjectsPlan {
            object_ids: self.ids,
            object_sizes: self.sizes,
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Checks shared by the strategies' tests.
    use crate::bounds::shared_objects_lower_bound;
    use crate::plan::SharedObjectsPlan;
    use crate::problem::Problem;
    use crate::validate::{validate_offsets, validate_shared};

    /// Validates `plan` for `problem` (objects, bound, offsets) and returns its total.
    pub fn check(problem: &Problem, plan: &SharedObjectsPlan) -> Result<u64, String> {
        let total = validate_shared(problem, plan).map_err(|e| e.to_string())?;
        let bound = shared_objects_lower_bound(problem);
        if total < bound {
            return Err(format!("total {total} below the lower bound {bound}"));
        }
        validate_offsets(problem, &plan.to_offset_plan(problem)).map_err(|e| e.to_string())?;
        Ok(total)
    }
}

//! The packing in progress: offsets, minimum offsets, section totals, the unallocated
//! floor's witnesses and the cut counts, with a trail to undo placements.

use crate::max_add_tree::MaxAddTree;
use crate::problem::align_up;

use super::super::sweep::Sweep;
use super::{NONE, UNPLACED};

/// A change to undo when a placement is taken back.
enum Undo {
    MinOff(u32, u64),
    Witness(u32, u32),
}

/// What [`Packing::place`] found.
pub(super) struct Placement {
    /// The node survives the checks made while placing (its own top, the tops it pushes
    /// the conflicting buffers to, every section's floor, the sub-problem's level).
    pub fits: bool,
    /// The buffer placed conflicts with no unplaced buffer.
    pub hatless: bool,
}

/// The state a placement changes and [`Packing::unplace`] restores.
pub(super) struct Packing<'a> {
    sw: &'a Sweep,
    /// The capacity of the current probe.
    pub capacity: u64,
    /// Offset of each buffer, `UNPLACED` for unplaced ones.
    pub offsets: Vec<u64>,
    /// The lowest offset each unplaced buffer can still take (the highest top of the
    /// placed buffers it conflicts with, aligned).
    pub min_off: Vec<u64>,
    /// `min_off` of unplaced buffers, `u64::MAX` for placed ones (one load per member
    /// when a section looks for a new witness).
    eff: Vec<u64>,
    /// Per section, an unplaced member whose `min_offset` is at most `capacity - total`
    /// (so the section's floor plus its unplaced total fits), or `NONE` when the section
    /// has no unplaced member.
    witness: Vec<u32>,
    /// Per buffer, the number of sections it is the witness of (a buffer that is none's
    /// needs no look at its sections when it rises).
    witnessing: Vec<u32>,
    /// Unplaced total per section.
    total: Vec<u64>,
    /// Unplaced buffers crossing each cut (between sections `k` and `k + 1`).
    pub cuts: Vec<u32>,
    /// `total` as a range-maximum tree (the sub-problems' levels, the level and top rules).
    pub rem: MaxAddTree,
    trail: Vec<Undo>,
    /// Sections to rescan for a witness (stamped with `epoch`).
    stamp: Vec<u32>,
    epoch: u32,
    dirty: Vec<u32>,
    /// The cuts the last placement emptied.
    pub zero_cuts: Vec<u32>,
}

impl<'a> Packing<'a> {
    pub fn new(sw: &'a Sweep) -> Packing<'a> {
        let s = sw.sections();
        Packing {
            sw,
            capacity: 0,
            offsets: vec![UNPLACED; sw.n],
            min_off: vec![0; sw.n],
            eff: vec![0; sw.n],
            witness: vec![NONE; s],
            witnessing: vec![0; sw.n],
            total: sw.breadth.clone(),
            cuts: sw.cuts.clone(),
            rem: MaxAddTree::new(s),
            trail: Vec::new(),
            stamp: vec![0; s],
            epoch: 0,
            dirty: Vec::new(),
            zero_cuts: Vec::new(),
        }
    }

    /// Back to nothing placed.
    pub fn reset(&mut self) {
        let sw = self.sw;
        self.offsets.iter_mut().for_each(|x| *x = UNPLACED);
        self.min_off.iter_mut().for_each(|x| *x = 0);
        self.eff.iter_mut().for_each(|x| *x = 0);
        self.witnessing.iter_mut().for_each(|x| *x = 0);
        for (k, w) in self.witness.iter_mut().enumerate() {
            *w = sw.members(k).first().copied().unwrap_or(NONE);
            if *w != NONE {
                self.witnessing[*w as usize] += 1;
            }
        }
        self.total.clone_from(&sw.breadth);
        self.cuts.clone_from(&sw.cuts);
        self.rem.reset(&sw.breadth);
        self.trail.clear();
    }

    /// Whether some section or buffer alone exceeds the capacity.
    pub fn hopeless(&self) -> bool {
        let cap = self.capacity;
        self.sw.breadth.iter().any(|&t| t > cap) || self.sw.sizes.iter().any(|&s| s > cap)
    }

    pub fn is_placed(&self, i: usize) -> bool {
        self.offsets[i] != UNPLACED
    }

    /// Where [`Packing::unplace`] must roll the trail back to.
    pub fn mark(&self) -> usize {
        self.trail.len()
    }

    /// Places `i` at `o` in the sub-problem over sections `[lo, hi)`, pushing each
    /// conflicting unplaced buffer above it and gathering in `top_spans` the spans of those
    /// whose `min_offset` is now exactly its top (the candidates of the top rule). Fills
    /// `zero_cuts` with the cuts it emptied. The caller undoes the placement with
    /// [`Packing::unplace`] whether it fits or not.
    ///
    /// The unallocated floor of a section (the lowest `min_offset` of its unplaced
    /// buffers) plus its unplaced total must fit: the section keeps a *witness*, an
    /// unplaced member low enough, and is only rescanned when its witness is placed or
    /// moves too high. Deeper in the search totals only fall, so a witness stays good
    /// until then.
    pub fn place(
        &mut self,
        i: usize,
        o: u64,
        (lo, hi): (u32, u32),
        top_spans: &mut Vec<(u32, u32)>,
    ) -> Placement {
        let size = self.sw.sizes[i];
        self.offsets[i] = o;
        self.eff[i] = u64::MAX;
        self.next_epoch();
        self.dirty.clear();
        self.take_out(i, size);
        let (fits, hatless) = self.push_conflicts(i, o + size, top_spans);
        let mut fits = fits && o + size <= self.capacity;
        if fits {
            fits = self.rescan_witnesses();
        }
        if fits {
            // Every unplaced buffer of the sub-problem goes at or above `o`.
            fits = o.saturating_add(self.rem.max_in(lo as usize, hi as usize)) <= self.capacity;
        }
        Placement { fits, hatless }
    }

    fn next_epoch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.iter_mut().for_each(|x| *x = 0);
            self.epoch = 1;
        }
    }

    /// Takes `i` (of `size`) out of its sections' unplaced totals and out of the cuts it
    /// crosses; marks the sections it was the witness of.
    fn take_out(&mut self, i: usize, size: u64) {
        let (s, e) = self.sw.span[i];
        self.rem.add(s as usize, e as usize, -(size as i128));
        for k in s..e {
            self.total[k as usize] -= size;
            if self.witness[k as usize] == i as u32 {
                self.stamp[k as usize] = self.epoch;
                self.dirty.push(k);
            }
        }
        for k in s..e.saturating_sub(1) {
            self.cuts[k as usize] -= 1;
            if self.cuts[k as usize] == 0 {
                self.zero_cuts.push(k);
            }
        }
    }

    /// Raises the `min_offset` of every unplaced buffer conflicting with `i` to `top`
    /// (aligned); returns whether they all still fit under the capacity, and whether
    /// there was none. Marks the sections whose witness rose above their slack.
    fn push_conflicts(
        &mut self,
        i: usize,
        top: u64,
        top_spans: &mut Vec<(u32, u32)>,
    ) -> (bool, bool) {
        let sw = self.sw;
        let cap = self.capacity;
        let mut fits = true;
        let mut hatless = true;
        top_spans.clear();
        for &j in sw.conflicts(i) {
            let j = j as usize;
            if self.offsets[j] != UNPLACED {
                continue;
            }
            hatless = false;
            let need = align_up(top, sw.aligns[j]);
            let old = self.min_off[j];
            if need <= old {
                if old == top {
                    top_spans.push(sw.span[j]);
                }
                continue;
            }
            if need == top {
                top_spans.push(sw.span[j]);
            }
            if need + sw.sizes[j] > cap {
                fits = false;
            }
            self.trail.push(Undo::MinOff(j as u32, old));
            self.min_off[j] = need;
            self.eff[j] = need;
            if self.witnessing[j] == 0 {
                continue;
            }
            let (js, je) = sw.span[j];
            for k in js..je {
                let k = k as usize;
                if self.witness[k] == j as u32
                    && need > cap - self.total[k]
                    && self.stamp[k] != self.epoch
                {
                    self.stamp[k] = self.epoch;
                    self.dirty.push(k as u32);
                }
            }
        }
        (fits, hatless)
    }

    /// Finds a new witness for every marked section; false when one has none (its floor
    /// plus its unplaced total no longer fits).
    fn rescan_witnesses(&mut self) -> bool {
        let sw = self.sw;
        for d in 0..self.dirty.len() {
            let k = self.dirty[d] as usize;
            let old = self.witness[k];
            let w = if self.total[k] == 0 {
                NONE
            } else {
                let slack = self.capacity - self.total[k];
                match sw
                    .members(k)
                    .iter()
                    .find(|&&j| self.eff[j as usize] <= slack)
                {
                    Some(&j) => j,
                    None => return false,
                }
            };
            if w != old {
                self.trail.push(Undo::Witness(k as u32, old));
                self.set_witness(k, w);
            }
        }
        true
    }

    /// Takes back the placement of `i` (made when the trail was at `mark`).
    pub fn unplace(&mut self, i: usize, mark: usize) {
        let sw = self.sw;
        while self.trail.len() > mark {
            match self.trail.pop() {
                Some(Undo::MinOff(j, v)) => {
                    self.min_off[j as usize] = v;
                    self.eff[j as usize] = v;
                }
                Some(Undo::Witness(k, w)) => self.set_witness(k as usize, w),
                None => break,
            }
        }
        let size = sw.sizes[i];
        let (s, e) = sw.span[i];
        self.rem.add(s as usize, e as usize, size as i128);
        for k in s..e {
            self.total[k as usize] += size;
        }
        for k in s..e.saturating_sub(1) {
            self.cuts[k as usize] += 1;
        }
        self.zero_cuts.clear();
        self.offsets[i] = UNPLACED;
        self.eff[i] = self.min_off[i];
    }

    fn set_witness(&mut self, k: usize, w: u32) {
        let old = self.witness[k];
        if old != NONE {
            self.witnessing[old as usize] -= 1;
        }
        if w != NONE {
            self.witnessing[w as usize] += 1;
        }
        self.witness[k] = w;
    }

    /// The largest unplaced total of the sections `s..e`.
    pub fn largest_total(&self, s: u32, e: u32) -> u64 {
        self.total[s as usize..e as usize]
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
    }
}

//! Dynamic temporal decomposition: the sub-problems a search is split into, and the
//! ranked candidate lists of their nodes.

use super::super::order::{key, Facts, Preorder};
use super::super::sweep::Sweep;
use super::packing::Packing;
use super::Cand;
use crate::offsets::placer::merge_into;

/// A sub-problem: the sections `[lo, hi)` and the buffers unplaced when it was made.
pub(super) struct Part {
    pub lo: u32,
    pub hi: u32,
    pub buffers: Vec<u32>,
}

impl Part {
    pub fn sections(&self) -> (u32, u32) {
        (self.lo, self.hi)
    }
}

/// The sub-problems on the search's path, and spare candidate lists.
pub(super) struct Parts {
    parts: Vec<Part>,
    pool: Vec<Vec<Cand>>,
    /// Scratch of [`Parts::child_list`]: the candidates whose `min_offset` rose.
    risen: Vec<Cand>,
}

impl Parts {
    pub fn new() -> Parts {
        Parts {
            parts: Vec::new(),
            pool: Vec::new(),
            risen: Vec::new(),
        }
    }

    pub fn clear(&mut self) {
        self.parts.clear();
    }

    pub fn get(&self, part: u32) -> &Part {
        &self.parts[part as usize]
    }

    /// Splits the sections `[lo, hi)` at every cut that no unplaced buffer crosses (cut
    /// `k` separates sections `k` and `k + 1`) into sub-problems of the unplaced buffers
    /// of `buffers`; returns their range of indices.
    pub fn split(
        &mut self,
        sw: &Sweep,
        packing: &Packing,
        (lo, hi): (u32, u32),
        buffers: &[u32],
    ) -> (u32, u32) {
        let first = self.parts.len() as u32;
        let mut bounds = vec![lo];
        for k in lo..hi.saturating_sub(1) {
            if packing.cuts[k as usize] == 0 {
                bounds.push(k + 1);
            }
        }
        bounds.push(hi);
        bounds.dedup();
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); bounds.len() - 1];
        for &j in buffers {
            if packing.is_placed(j as usize) {
                continue;
            }
            let s = sw.span[j as usize].0;
            let g = bounds.partition_point(|&b| b <= s) - 1;
            groups[g].push(j);
        }
        for (g, list) in groups.into_iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            self.parts.push(Part {
                lo: bounds[g],
                hi: bounds[g + 1],
                buffers: list,
            });
        }
        (first, self.parts.len() as u32)
    }

    /// Splits the sub-problem `part` again after a placement emptied some of its cuts.
    pub fn split_again(&mut self, sw: &Sweep, packing: &Packing, part: u32) -> (u32, u32) {
        let sections = self.get(part).sections();
        let buffers = std::mem::take(&mut self.parts[part as usize].buffers);
        let range = self.split(sw, packing, sections, &buffers);
        self.parts[part as usize].buffers = buffers;
        range
    }

    /// Forgets the sub-problems from `first` on.
    pub fn truncate(&mut self, first: u32) {
        self.parts.truncate(first as usize);
    }

    /// The candidates of a sub-problem's root, ranked by `preorder` with the live section
    /// totals; `noise` gives each buffer its random key.
    pub fn root_list(
        &mut self,
        sw: &Sweep,
        packing: &Packing,
        part: u32,
        preorder: &Preorder,
        noise: impl Fn(usize) -> u64,
    ) -> Vec<Cand> {
        let key_of = |i: usize| -> [u128; 3] {
            let (s, e) = sw.span[i];
            let facts = Facts {
                width: sw.widths[i],
                size: sw.sizes[i],
                total: packing.largest_total(s, e),
                first: s,
                noise: noise(i),
            };
            key(preorder, &facts)
        };
        let p = &self.parts[part as usize];
        let mut keyed: Vec<([u128; 3], u32)> =
            p.buffers.iter().map(|&i| (key_of(i as usize), i)).collect();
        keyed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut list = self.pool.pop().unwrap_or_default();
        list.clear();
        list.extend(
            keyed
                .iter()
                .enumerate()
                .map(|(r, &(_, i))| (packing.min_off[i as usize], r as u32, i)),
        );
        list.sort_unstable();
        list
    }

    /// The candidates of a child: the parent's unplaced ones with their new offsets, in
    /// order. Offsets only rise from parent to child, and only for the buffers in conflict
    /// with the one placed: the others keep their order, the risen ones are sorted apart
    /// and merged in.
    pub fn child_list(&mut self, packing: &Packing, parent: &[Cand]) -> Vec<Cand> {
        let mut kept = self.pool.pop().unwrap_or_default();
        kept.clear();
        self.risen.clear();
        for &(o, r, i) in parent {
            if packing.is_placed(i as usize) {
                continue;
            }
            match packing.min_off[i as usize] {
                m if m == o => kept.push((o, r, i)),
                m => self.risen.push((m, r, i)),
            }
        }
        if self.risen.is_empty() {
            return kept;
        }
        self.risen.sort_unstable();
        let mut list = self.pool.pop().unwrap_or_default();
        list.clear();
        merge_into(&kept, &self.risen, &mut list);
        self.pool.push(kept);
        list
    }

    /// Keeps a finished node's list for a later one.
    pub fn recycle(&mut self, list: Vec<Cand>) {
        self.pool.push(list);
    }
}

/// The dominance bound of a node: no placement at or above the lowest top its unplaced
/// candidates can reach.
pub(super) fn dominance_bound(sw: &Sweep, list: &[Cand]) -> u64 {
    list.iter()
        .map(|&(o, _, i)| o.saturating_add(sw.sizes[i as usize]))
        .min()
        .unwrap_or(u64::MAX)
}

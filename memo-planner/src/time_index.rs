//! A dynamic index of placed buffers by lifetime, answering "which placed buffers are alive
//! at some time in `[s, e)`?" in `O(log T + k)`.
//!
//! It is a segment tree over slots. A buffer is stored at the `O(log T)` canonical nodes
//! that tile its span (`cover`), and at every node whose subtree holds one of those
//! (`within`). A query walks the canonical nodes of its own span: at nodes it covers fully
//! it takes `within` (every buffer meeting the node's range), at nodes it only crosses it
//! takes `cover` (buffers spanning the whole node). Nothing reported is a false positive;
//! a buffer met through several nodes is reported once, thanks to a stamp per buffer.

/// Lifetime index over `slots` time slots for buffers numbered `0..n`.
#[derive(Clone, Debug)]
pub struct TimeIndex {
    slots: usize,
    cover: Vec<Vec<u32>>,
    within: Vec<Vec<u32>>,
    stamp: Vec<u32>,
    epoch: u32,
}

impl TimeIndex {
    /// An empty index for buffers `0..n` over `slots` slots.
    pub fn new(slots: usize, n: usize) -> TimeIndex {
        let size = 2 * slots.max(1).next_power_of_two();
        TimeIndex {
            slots: slots.max(1),
            cover: vec![Vec::new(); size],
            within: vec![Vec::new(); size],
            stamp: vec![0; n],
            epoch: 0,
        }
    }

    /// Adds buffer `id`, alive in slots `[s, e)`.
    pub fn insert(&mut self, id: usize, s: usize, e: usize) {
        if s < e {
            self.insert_at(1, 0, self.slots, s, e, id as u32);
        }
    }

    fn insert_at(&mut self, node: usize, nl: usize, nr: usize, s: usize, e: usize, id: u32) {
        if e <= nl || nr <= s {
            return;
        }
        self.within[node].push(id);
        if s <= nl && nr <= e {
            self.cover[node].push(id);
            return;
        }
        let mid = (nl + nr) / 2;
        self.insert_at(2 * node, nl, mid, s, e, id);
        self.insert_at(2 * node + 1, mid, nr, s, e, id);
    }

    /// Calls `f` once for every buffer alive in some slot of `[s, e)`.
    pub fn for_each_overlapping(&mut self, s: usize, e: usize, mut f: impl FnMut(usize)) {
        if s >= e {
            return;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.iter_mut().for_each(|x| *x = 0);
            self.epoch = 1;
        }
        self.query(1, 0, self.slots, s, e, &mut f);
    }

    fn query(
        &mut self,
        node: usize,
        nl: usize,
        nr: usize,
        s: usize,
        e: usize,
        f: &mut impl FnMut(usize),
    ) {
        if e <= nl || nr <= s {
            return;
        }
        let epoch = self.epoch;
        if s <= nl && nr <= e {
            for &id in &self.within[node] {
                let st = &mut self.stamp[id as usize];
                if *st != epoch {
                    *st = epoch;
                    f(id as usize);
                }
            }
            return;
        }
        for &id in &self.cover[node] {
            let st = &mut self.stamp[id as usize];
            if *st != epoch {
                *st = epoch;
                f(id as usize);
            }
        }
        let mid = (nl + nr) / 2;
        self.query(2 * node, nl, mid, s, e, f);
        self.query(2 * node + 1, mid, nr, s, e, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn reports_exactly_the_overlapping_buffers(
            spans in proptest::collection::vec((0usize..40, 1usize..15), 1..60),
            queries in proptest::collection::vec((0usize..40, 1usize..15), 1..20),
        ) {
            let slots = 60;
            let mut index = TimeIndex::new(slots, spans.len());
            for (i, &(s, len)) in spans.iter().enumerate() {
                index.insert(i, s, (s + len).min(slots));
            }
            for &(qs, qlen) in &queries {
                let qe = (qs + qlen).min(slots);
                let mut got = Vec::new();
                index.for_each_overlapping(qs, qe, |i| got.push(i));
                got.sort_unstable();
                let want: Vec<usize> = spans.iter().enumerate()
                    .filter(|(_, &(s, len))| s < qe && qs < (s + len).min(slots))
                    .map(|(i, _)| i).collect();
                proptest::prop_assert_eq!(got, want);
            }
        }
    }
}

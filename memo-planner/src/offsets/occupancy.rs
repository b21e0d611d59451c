//! Occupied address space over time, for best-fit placement.
//!
//! Best fit (Pisarchyk & Lee, Algorithm 3) only needs the *union* of the address ranges of
//! the placed buffers that conflict with the new one: its gaps are the candidates. So
//! instead of listing conflicting buffers (`O(k)` per query, and `k` runs into the
//! thousands on dense compiler traces), a segment tree over time slots keeps, per node,
//! merged address intervals:
//! - `cover[node]`: the union over buffers whose span covers the node's whole slot range;
//! - `within[node]`: the union over buffers alive somewhere in the node's slot range.
//!
//! The union over the buffers alive somewhere in `[s, e)` is the union of `within` at the
//! canonical nodes of `[s, e)` and of `cover` at the nodes the query only crosses. Packed
//! buffers merge into few intervals, so queries cost about the number of *holes* near the
//! new buffer, not the number of its conflicts.

/// Disjoint, non-adjacent address intervals `[start, end)`, sorted by start.
#[derive(Clone, Debug, Default)]
pub(crate) struct IntervalSet {
    runs: Vec<(u64, u64)>,
}

impl IntervalSet {
    /// Adds `[a, b)`, merging with overlapping and touching intervals.
    pub(crate) fn insert(&mut self, a: u64, b: u64) {
        // First run that ends at or after `a` (it may touch or overlap).
        let i = self.runs.partition_point(|&(_, e)| e < a);
        // Runs starting at or before `b` from `i` on merge with `[a, b)`.
        let mut j = i;
        let (mut lo, mut hi) = (a, b);
        while j < self.runs.len() && self.runs[j].0 <= b {
            lo = lo.min(self.runs[j].0);
            hi = hi.max(self.runs[j].1);
            j += 1;
        }
        if i == j {
            self.runs.insert(i, (lo, hi));
        } else {
            self.runs[i] = (lo, hi);
            self.runs.drain(i + 1..j);
        }
    }

    pub(crate) fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }
}

/// Per-slot-range unions of placed buffers' address ranges.
#[derive(Clone, Debug)]
pub(crate) struct Occupancy {
    slots: usize,
    cover: Vec<IntervalSet>,
    within: Vec<IntervalSet>,
}

impl Occupancy {
    pub(crate) fn new(slots: usize) -> Occupancy {
        let size = 2 * slots.max(1).next_power_of_two();
        Occupancy {
            slots: slots.max(1),
            cover: vec![IntervalSet::default(); size],
            within: vec![IntervalSet::default(); size],
        }
    }

    /// Marks `[a, b)` occupied during slots `[s, e)`.
    pub(crate) fn insert(&mut self, s: usize, e: usize, a: u64, b: u64) {
        if s < e && a < b {
            self.insert_at(1, 0, self.slots, s, e, a, b);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_at(&mut self, node: usize, nl: usize, nr: usize, s: usize, e: usize, a: u64, b: u64) {
        if e <= nl || nr <= s {
            return;
        }
        self.within[node].insert(a, b);
        if s <= nl && nr <= e {
            self.cover[node].insert(a, b);
            return;
        }
        let mid = (nl + nr) / 2;
        self.insert_at(2 * node, nl, mid, s, e, a, b);
        self.insert_at(2 * node + 1, mid, nr, s, e, a, b);
    }

    /// Appends to `out` intervals whose union is the address space occupied at some slot of
    /// `[s, e)` (unsorted, possibly overlapping).
    pub(crate) fn collect(&self, s: usize, e: usize, out: &mut Vec<(u64, u64)>) {
        if s < e {
            self.collect_at(1, 0, self.slots, s, e, out);
        }
    }

    fn collect_at(
        &self,
        node: usize,
        nl: usize,
        nr: usize,
        s: usize,
        e: usize,
        out: &mut Vec<(u64, u64)>,
    ) {
        if e <= nl || nr <= s {
            return;
        }
        if s <= nl && nr <= e {
            out.extend_from_slice(self.within[node].runs());
            return;
        }
        out.extend_from_slice(self.cover[node].runs());
        let mid = (nl + nr) / 2;
        self.collect_at(2 * node, nl, mid, s, e, out);
        self.collect_at(2 * node + 1, mid, nr, s, e, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_set_merges_overlapping_and_touching_runs() {
        let mut s = IntervalSet::default();
        s.insert(10, 20);
        s.insert(30, 40);
        s.insert(50, 60);
        assert_eq!(s.runs(), &[(10, 20), (30, 40), (50, 60)]);
        s.insert(20, 30);
        assert_eq!(s.runs(), &[(10, 40), (50, 60)]);
        s.insert(0, 5);
        s.insert(45, 70);
        assert_eq!(s.runs(), &[(0, 5), (10, 40), (45, 70)]);
        s.insert(3, 100);
        assert_eq!(s.runs(), &[(0, 100)]);
    }

    fn union(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        let mut s = IntervalSet::default();
        v.sort_unstable();
        for (a, b) in v {
            s.insert(a, b);
        }
        s.runs().to_vec()
    }

    proptest::proptest! {
        #[test]
        fn collect_is_the_union_of_overlapping_buffers(
            bufs in proptest::collection::vec((0usize..30, 1usize..12, 0u64..200, 1u64..40), 0..50),
            q in (0usize..30, 1usize..12),
        ) {
            let slots = 40;
            let mut occ = Occupancy::new(slots);
            for &(s, len, a, size) in &bufs {
                occ.insert(s, (s + len).min(slots), a, a + size);
            }
            let (qs, qe) = (q.0, (q.0 + q.1).min(slots));
            let mut got = Vec::new();
            occ.collect(qs, qe, &mut got);
            let want: Vec<(u64, u64)> = bufs.iter()
                .filter(|&&(s, len, _, _)| s < qe && qs < (s + len).min(slots))
                .map(|&(_, _, a, size)| (a, a + size)).collect();
            proptest::prop_assert_eq!(union(got), union(want));
        }
    }
}

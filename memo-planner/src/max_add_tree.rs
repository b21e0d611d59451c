//! A segment tree over time slots with range add and global maximum: the live count per
//! slot for the positional maximums, the remaining breadth per slot for the exact search.

/// Values over slots `0..n`, all starting at 0.
#[derive(Clone, Debug)]
pub(crate) struct MaxAddTree {
    n: usize,
    max: Vec<i128>,
    add: Vec<i128>,
}

impl MaxAddTree {
    pub(crate) fn new(n: usize) -> MaxAddTree {
        let n = n.max(1);
        MaxAddTree {
            n,
            max: vec![0; 4 * n],
            add: vec![0; 4 * n],
        }
    }

    /// Sets slot `k` to `values[k]` (and every other slot to 0).
    pub(crate) fn reset(&mut self, values: &[u64]) {
        self.max.iter_mut().for_each(|x| *x = 0);
        self.add.iter_mut().for_each(|x| *x = 0);
        for (k, &v) in values.iter().enumerate() {
            self.add(k, k + 1, v as i128);
        }
    }

    /// Adds `v` to every slot of `[l, r)`.
    pub(crate) fn add(&mut self, l: usize, r: usize, v: i128) {
        if l < r {
            self.update(1, 0, self.n, l, r, v);
        }
    }

    fn update(&mut self, node: usize, nl: usize, nr: usize, l: usize, r: usize, v: i128) {
        if r <= nl || nr <= l {
            return;
        }
        if l <= nl && nr <= r {
            self.max[node] += v;
            self.add[node] += v;
            return;
        }
        let mid = (nl + nr) / 2;
        self.update(2 * node, nl, mid, l, r, v);
        self.update(2 * node + 1, mid, nr, l, r, v);
        self.max[node] = self.add[node] + self.max[2 * node].max(self.max[2 * node + 1]);
    }

    /// The maximum over all slots, or 0 if every slot is 0 or below.
    pub(crate) fn max(&self) -> u64 {
        self.max[1].max(0) as u64
    }
}

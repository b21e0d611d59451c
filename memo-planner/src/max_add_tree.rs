//! A segment tree over time slots with range add and global maximum: the live count per
//! slot for the positional maximums, the remaining breadth per section for the exact search
//! (whose sub-problems ask for the maximum over a range).

/// Values over slots `0..n`, all starting at 0.
///
/// A complete binary tree over `n` rounded up to a power of two (the padding slots stay
/// 0): node `v` has children `2v` and `2v + 1`, the slots are the leaves from `n`. Each
/// node keeps what was added to its whole range (`add`) and the maximum over its range
/// counting only its own and its descendants' adds (`max`), so a slot's value is the sum
/// of `add` on its path to the root.
#[derive(Clone, Debug)]
pub(crate) struct MaxAddTree {
    n: usize,
    max: Vec<i128>,
    add: Vec<i128>,
}

impl MaxAddTree {
    pub(crate) fn new(n: usize) -> MaxAddTree {
        let n = n.max(1).next_power_of_two();
        MaxAddTree {
            n,
            max: vec![0; 2 * n],
            add: vec![0; 2 * n],
        }
    }

    /// Sets slot `k` to `values[k]` (and every other slot to 0).
    pub(crate) fn reset(&mut self, values: &[u64]) {
        self.max.iter_mut().for_each(|x| *x = 0);
        self.add.iter_mut().for_each(|x| *x = 0);
        for (k, &v) in values.iter().enumerate().take(self.n) {
            self.max[self.n + k] = v as i128;
            self.add[self.n + k] = v as i128;
        }
        for v in (1..self.n).rev() {
            self.max[v] = self.max[2 * v].max(self.max[2 * v + 1]);
        }
    }

    /// Adds `v` to every slot of `[l, r)`: to the `O(log n)` nodes tiling the range,
    /// bottom up, then the maximums above the range's two ends are recomputed.
    pub(crate) fn add(&mut self, l: usize, r: usize, v: i128) {
        let r = r.min(self.n);
        if l >= r {
            return;
        }
        let (mut a, mut b) = (l + self.n, r + self.n);
        let (first, last) = (a, b - 1);
        while a < b {
            if a & 1 == 1 {
                self.max[a] += v;
                self.add[a] += v;
                a += 1;
            }
            if b & 1 == 1 {
                b -= 1;
                self.max[b] += v;
                self.add[b] += v;
            }
            a >>= 1;
            b >>= 1;
        }
        self.pull(first >> 1, last >> 1);
    }

    /// Recomputes the maximums of the nodes `a` and `b` and of their ancestors.
    fn pull(&mut self, mut a: usize, mut b: usize) {
        while a != b {
            self.recompute(a);
            self.recompute(b);
            a >>= 1;
            b >>= 1;
        }
        while a >= 1 {
            self.recompute(a);
            a >>= 1;
        }
    }

    fn recompute(&mut self, v: usize) {
        let below = self.max[2 * v].max(self.max[2 * v + 1]);
        self.max[v] = self.add[v] + below;
    }

    /// The maximum over all slots, or 0 if every slot is 0 or below.
    pub(crate) fn max(&self) -> u64 {
        self.max[1].max(0) as u64
    }

    /// The maximum over the slots of `[l, r)`, or 0 if they are all 0 or below (or the
    /// range is empty).
    pub(crate) fn max_in(&self, l: usize, r: usize) -> u64 {
        if l >= r {
            return 0;
        }
        self.query(1, 0, self.n, l, r.min(self.n)).max(0) as u64
    }

    /// Calls `f` on every slot of `[l, r)` whose value is above `threshold`, in order,
    /// until `f` returns `false`; returns whether it never did. Costs `O(log n)` per slot
    /// reported plus `O(log n)`.
    pub(crate) fn all_above(
        &self,
        l: usize,
        r: usize,
        threshold: i128,
        f: &mut impl FnMut(usize) -> bool,
    ) -> bool {
        l >= r || self.visit(1, 0, self.n, l, r.min(self.n), threshold, f)
    }

    #[allow(clippy::too_many_arguments)]
    fn visit(
        &self,
        node: usize,
        nl: usize,
        nr: usize,
        l: usize,
        r: usize,
        threshold: i128,
        f: &mut impl FnMut(usize) -> bool,
    ) -> bool {
        if r <= nl || nr <= l || self.max[node] <= threshold {
            return true;
        }
        if nr - nl == 1 {
            return f(nl);
        }
        let mid = (nl + nr) / 2;
        let t = threshold - self.add[node];
        self.visit(2 * node, nl, mid, l, r, t, f) && self.visit(2 * node + 1, mid, nr, l, r, t, f)
    }

    fn query(&self, node: usize, nl: usize, nr: usize, l: usize, r: usize) -> i128 {
        if r <= nl || nr <= l {
            return i128::MIN / 2;
        }
        if l <= nl && nr <= r {
            return self.max[node];
        }
        let mid = (nl + nr) / 2;
        let below =
            self.query(2 * node, nl, mid, l, r)
                .max(self.query(2 * node + 1, mid, nr, l, r));
        self.add[node] + below
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_maximum_matches_a_plain_array() {
        let mut rng = crate::rng::Rng::new(3);
        let n = 37;
        let mut tree = MaxAddTree::new(n);
        let mut plain = vec![0i128; n];
        for _ in 0..500 {
            let l = rng.below(n as u64) as usize;
            let r = l + rng.below((n - l) as u64 + 1) as usize;
            let v = rng.below(100) as i128 - 40;
            tree.add(l, r, v);
            plain[l..r].iter_mut().for_each(|x| *x += v);
            let (a, b) = (
                rng.below(n as u64) as usize,
                rng.below(n as u64 + 1) as usize,
            );
            let want = plain[a.min(b)..a.max(b)]
                .iter()
                .copied()
                .max()
                .unwrap_or(0)
                .max(0);
            assert_eq!(tree.max_in(a.min(b), a.max(b)) as i128, want);
            let t = rng.below(200) as i128 - 60;
            let mut got = Vec::new();
            tree.all_above(a.min(b), a.max(b), t, &mut |k| {
                got.push(k);
                true
            });
            let above: Vec<usize> = (a.min(b)..a.max(b)).filter(|&k| plain[k] > t).collect();
            assert_eq!(got, above);
            assert_eq!(
                tree.max() as i128,
                plain.iter().copied().max().unwrap().max(0)
            );
        }
    }
}

//! The static structure the exact search works on: sections, spans, conflicts and cuts.
//!
//! A *section* is a maximal set of buffers alive together: the buffers alive just before
//! one of the distinct `upper` times (as in MiniMalloc's sweep, sections end where a
//! buffer ends). Two buffers conflict exactly when they share a section, and every buffer
//! lives in a contiguous range of sections, its *span*. The *cut* between sections `k` and
//! `k + 1` counts the buffers alive in both; where a cut is zero, the two sides are
//! independent problems.

use crate::problem::Problem;

/// Sections, spans, conflicts and cuts of one problem. Built in `O(n log n + pairs +
/// sum of span lengths)`.
pub(crate) struct Sweep {
    /// Number of buffers.
    pub n: usize,
    pub sizes: Vec<u64>,
    pub aligns: Vec<u64>,
    /// `upper - lower` of each buffer.
    pub widths: Vec<u64>,
    /// Sections `[first, end)` of each buffer.
    pub span: Vec<(u32, u32)>,
    /// Members of section `s`: `members[member_start[s]..member_start[s + 1]]`.
    pub member_start: Vec<u32>,
    pub members: Vec<u32>,
    /// Conflicting buffers of `i`: `adj[adj_start[i]..adj_start[i + 1]]`.
    pub adj_start: Vec<u32>,
    pub adj: Vec<u32>,
    /// Total size alive in each section.
    pub breadth: Vec<u64>,
    /// Buffers alive in both section `k` and `k + 1`, for `k < sections - 1`.
    pub cuts: Vec<u32>,
    /// Buffers with the same lifetime, size and alignment as an earlier one point to the
    /// previous such buffer (`u32::MAX` for none): identical buffers are interchangeable.
    pub twin_before: Vec<u32>,
    /// Every offset of a canonical packing is a multiple of this (see [`granule`]).
    pub granule: u64,
}

impl Sweep {
    /// The sweep of `problem`, or `None` when more than `max_pairs` pairs of buffers
    /// conflict (the conflict lists would take too much memory).
    pub fn new(problem: &Problem, max_pairs: u64) -> Option<Sweep> {
        let b = problem.buffers();
        let n = b.len();
        let (sections, span) = section_spans(problem);
        if conflicting_pairs(&span, sections) > max_pairs {
            return None;
        }
        let (member_start, members, breadth) = section_members(problem, &span, sections);
        let (adj_start, adj) = conflicts(&span, &member_start, &members);
        Some(Sweep {
            n,
            sizes: b.iter().map(|x| x.size).collect(),
            aligns: b.iter().map(|x| x.align).collect(),
            widths: b.iter().map(|x| x.upper - x.lower).collect(),
            cuts: cuts(&span, sections),
            span,
            member_start,
            members,
            adj_start,
            adj,
            breadth,
            twin_before: twins(problem),
            granule: granule(problem),
        })
    }

    /// Number of sections.
    pub fn sections(&self) -> usize {
        self.breadth.len()
    }

    /// The members of section `s`.
    pub fn members(&self, s: usize) -> &[u32] {
        &self.members[self.member_start[s] as usize..self.member_start[s + 1] as usize]
    }

    /// The buffers that conflict with `i`.
    pub fn conflicts(&self, i: usize) -> &[u32] {
        &self.adj[self.adj_start[i] as usize..self.adj_start[i + 1] as usize]
    }
}

/// The granule of heights: every offset of a canonical packing, and so every height the
/// search can find, is a multiple of it. It divides every size, and every alignment that
/// does not already divide it (an offset rounded up to such an alignment stays a
/// multiple of the granule).
pub(crate) fn granule(problem: &Problem) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let b = problem.buffers();
    let mut g = b.iter().fold(0, |g, x| gcd(g, x.size));
    loop {
        let next = b
            .iter()
            .filter(|x| g % x.align != 0)
            .fold(g, |g, x| gcd(g, x.align));
        if next == g {
            return g.max(1);
        }
        g = next;
    }
}

/// The number of sections and each buffer's span of sections: buffer `i` is in section
/// `k` iff `lower < ends[k] <= upper`, with `ends` the distinct ends in order.
fn section_spans(problem: &Problem) -> (usize, Vec<(u32, u32)>) {
    let mut ends: Vec<u64> = problem.buffers().iter().map(|x| x.upper).collect();
    ends.sort_unstable();
    ends.dedup();
    let span = problem
        .buffers()
        .iter()
        .map(|x| {
            let s = ends.partition_point(|&u| u <= x.lower) as u32;
            let e = ends.partition_point(|&u| u <= x.upper) as u32;
            (s, e)
        })
        .collect();
    (ends.len(), span)
}

/// The pairs of buffers alive together, counted before anything quadratic is built. Each
/// pair is counted once, in the first section of the buffer that starts later (or, for
/// equal starts, between the arrivals of that section).
fn conflicting_pairs(span: &[(u32, u32)], sections: usize) -> u64 {
    let mut pairs = 0u64;
    let mut delta = vec![0i64; sections + 1];
    let mut arrivals = vec![0u64; sections + 1];
    for &(s, e) in span {
        delta[s as usize] += 1;
        delta[e as usize] -= 1;
        arrivals[s as usize] += 1;
    }
    let mut alive = 0i64;
    for k in 0..sections {
        alive += delta[k];
        let a = arrivals[k];
        let old = alive as u64 - a;
        pairs += a * old + a * a.saturating_sub(1) / 2;
    }
    pairs
}

/// Each section's members (`members[member_start[k]..member_start[k + 1]]`) and its
/// breadth (the members' total size).
fn section_members(
    problem: &Problem,
    span: &[(u32, u32)],
    sections: usize,
) -> (Vec<u32>, Vec<u32>, Vec<u64>) {
    let mut member_start = vec![0u32; sections + 1];
    for &(s, e) in span {
        for k in s..e {
            member_start[k as usize + 1] += 1;
        }
    }
    for k in 0..sections {
        member_start[k + 1] += member_start[k];
    }
    let mut fill = member_start.clone();
    let mut members = vec![0u32; member_start[sections] as usize];
    let mut breadth = vec![0u64; sections];
    for (i, &(s, e)) in span.iter().enumerate() {
        for k in s..e {
            members[fill[k as usize] as usize] = i as u32;
            fill[k as usize] += 1;
            breadth[k as usize] += problem.buffers()[i].size;
        }
    }
    (member_start, members, breadth)
}

/// The conflict lists (`adj[adj_start[i]..adj_start[i + 1]]`): `i` meets `j` iff `j` is a
/// member of `i`'s first section or `j` starts inside `i`'s span (after that section).
fn conflicts(span: &[(u32, u32)], member_start: &[u32], members: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let n = span.len();
    let mut by_start: Vec<u32> = (0..n as u32).collect();
    by_start.sort_by_key(|&i| span[i as usize].0);
    let mut adj_lists: Vec<Vec<u32>> = vec![Vec::new(); n];
    for i in 0..n {
        let (s, e) = span[i];
        for &j in &members[member_start[s as usize] as usize..member_start[s as usize + 1] as usize]
        {
            if j as usize != i {
                adj_lists[i].push(j);
            }
        }
        let lo = by_start.partition_point(|&j| span[j as usize].0 <= s);
        let hi = by_start.partition_point(|&j| span[j as usize].0 < e);
        adj_lists[i].extend_from_slice(&by_start[lo..hi]);
    }
    let mut adj_start = Vec::with_capacity(n + 1);
    let mut adj = Vec::new();
    adj_start.push(0u32);
    for list in adj_lists {
        adj.extend(list);
        adj_start.push(adj.len() as u32);
    }
    (adj_start, adj)
}

/// Buffers alive in both section `k` and `k + 1`, for each `k < sections - 1`.
fn cuts(span: &[(u32, u32)], sections: usize) -> Vec<u32> {
    let mut cuts = vec![0u32; sections.saturating_sub(1)];
    for &(s, e) in span {
        for k in s..e.saturating_sub(1) {
            cuts[k as usize] += 1;
        }
    }
    cuts
}

/// For each buffer, the previous buffer with the same lifetime, size and alignment
/// (`u32::MAX` for none).
fn twins(problem: &Problem) -> Vec<u32> {
    let mut twin_before = vec![u32::MAX; problem.len()];
    let mut seen = std::collections::HashMap::new();
    for (i, x) in problem.buffers().iter().enumerate() {
        let key = (x.lower, x.upper, x.size, x.align);
        if let Some(prev) = seen.insert(key, i as u32) {
            twin_before[i] = prev;
        }
    }
    twin_before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_the_cliques_and_conflicts_are_exact() {
        let mut rng = crate::rng::Rng::new(5);
        for _ in 0..50 {
            let n = 1 + rng.below(40) as usize;
            let p = Problem::new(
                (0..n)
                    .map(|i| {
                        let l = rng.below(30);
                        crate::problem::Buffer::new(
                            i.to_string(),
                            l,
                            l + 1 + rng.below(8),
                            1 + rng.below(9),
                        )
                    })
                    .collect(),
            )
            .unwrap();
            let sw = Sweep::new(&p, u64::MAX).unwrap();
            let b = p.buffers();
            let mut pairs = 0;
            for i in 0..n {
                let mut got: Vec<u32> = sw.conflicts(i).to_vec();
                got.sort_unstable();
                let want: Vec<u32> = (0..n)
                    .filter(|&j| j != i && b[i].conflicts_with(&b[j]))
                    .map(|j| j as u32)
                    .collect();
                assert_eq!(got, want);
                pairs += want.len();
            }
            assert!(Sweep::new(&p, (pairs / 2) as u64).is_some());
            if pairs > 0 {
                assert!(Sweep::new(&p, (pairs / 2 - 1) as u64).is_none());
            }
            assert_eq!(
                sw.breadth.iter().max().copied().unwrap_or(0),
                crate::offsets_lower_bound(&p)
            );
        }
    }
}

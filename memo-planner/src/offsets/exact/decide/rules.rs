//! The level and top rules: sections with no room left for a gap need a buffer at the
//! current level, or on top of the buffer just placed, and the buffers that can go there
//! must hold pairwise disjoint spans covering all of them.

use super::super::sweep::Sweep;
use super::packing::Packing;
use super::Cand;

/// Scratch space of the two rules.
pub(super) struct Rules {
    /// Sections covered by a candidate at the current level (stamped with `cover_epoch`).
    cover: Vec<u32>,
    cover_epoch: u32,
    /// The sections that need a buffer at the level (or on top).
    need: Vec<u32>,
    /// Spans of the candidates at the current level.
    level_spans: Vec<(u32, u32)>,
    /// Which section boundaries a disjoint choice reaches (see [`disjoint_cover`]).
    reach: Vec<bool>,
    /// Spans of the buffers that can go on top of the last one placed (gathered by
    /// [`Packing::place`]).
    pub top_spans: Vec<(u32, u32)>,
}

impl Rules {
    pub fn new(sections: usize) -> Rules {
        Rules {
            cover: vec![0; sections],
            cover_epoch: 0,
            need: Vec::new(),
            level_spans: Vec::new(),
            reach: Vec::new(),
            top_spans: Vec::new(),
        }
    }

    /// The *top rule*, after placing a buffer over the sections `[s, e)` with its top at
    /// `top`: every unplaced buffer alive there goes at or above `top`, so a section whose
    /// unplaced total leaves less than a granule above `top` needs a buffer exactly at
    /// `top`. Those buffers (the conflicting ones whose `min_offset` is `top`, gathered in
    /// `top_spans` by [`Packing::place`]) must hold pairwise disjoint spans covering every
    /// such section. The level rule's disjoint choice, on top of the buffer just placed
    /// (a single section is the unallocated floor's case).
    pub fn top_covered(
        &mut self,
        packing: &Packing,
        granule: u64,
        (s, e): (u32, u32),
        top: u64,
    ) -> bool {
        let threshold = packing.capacity as i128 - top as i128 - granule as i128;
        let threshold = threshold.max(0);
        let need = &mut self.need;
        need.clear();
        packing
            .rem
            .all_above(s as usize, e as usize, threshold, &mut |k| {
                need.push(k as u32);
                true
            });
        self.need.len() < 2 || disjoint_cover(&self.need, &mut self.top_spans, &mut self.reach)
    }

    /// The *level rule*, for the child that placed a buffer at `o` in the sub-problem over
    /// sections `[lo, hi)` (its candidates after `list[from..]` are the ones ranked after
    /// it). Every later placement in this sub-problem goes at `o` (only a buffer whose
    /// `min_offset` is `o` and that is ranked after the one placed: a buffer below `o` can
    /// only rise above it) or at `o + granule` or higher. So a section whose unplaced total
    /// does not fit above `o + granule` *needs* a buffer at `o`. Buffers at one offset
    /// never share a section, so the candidates at `o` must hold a set of disjoint spans
    /// covering every section in need; without one, the child fails (first each section
    /// alone, then the disjoint choice, by [`disjoint_cover`]). On tight instances (slack
    /// under a granule, as in exact tilings) this finds the dead end at once instead of
    /// after every other section at this level was filled.
    pub fn level_filled(
        &mut self,
        sw: &Sweep,
        packing: &Packing,
        (lo, hi): (u32, u32),
        o: u64,
        later: &[Cand],
    ) -> bool {
        let (lo, hi) = (lo as usize, hi as usize);
        let threshold = (packing.capacity as i128 - o as i128 - sw.granule as i128).max(0);
        if packing.rem.max_in(lo, hi) as i128 <= threshold {
            return true;
        }
        let epoch = self.stamp_level(sw, packing, o, later);
        let (cover, need) = (&self.cover, &mut self.need);
        need.clear();
        let each_covered = packing.rem.all_above(lo, hi, threshold, &mut |k| {
            need.push(k as u32);
            cover[k] == epoch
        });
        each_covered
            && (self.need.len() < 2
                || disjoint_cover(&self.need, &mut self.level_spans, &mut self.reach))
    }

    /// Gathers the spans of the candidates of `later` that can still go at exactly `o`
    /// into `level_spans` and stamps the sections they cover; returns the stamp.
    fn stamp_level(&mut self, sw: &Sweep, packing: &Packing, o: u64, later: &[Cand]) -> u32 {
        self.cover_epoch = self.cover_epoch.wrapping_add(1);
        if self.cover_epoch == 0 {
            self.cover.iter_mut().for_each(|x| *x = 0);
            self.cover_epoch = 1;
        }
        let epoch = self.cover_epoch;
        self.level_spans.clear();
        for &(m, _, c) in later {
            if m != o {
                break; // sorted by offset
            }
            let c = c as usize;
            if packing.is_placed(c) || packing.min_off[c] != o {
                continue;
            }
            let (s, e) = sw.span[c];
            self.level_spans.push((s, e));
            for k in s..e {
                self.cover[k as usize] = epoch;
            }
        }
        epoch
    }
}

/// Whether some of `spans` (section ranges `[s, e)`), pairwise disjoint, cover every
/// section of `need` (ascending, each inside some span). A sweep over section boundaries:
/// boundary `p` is reached when the sections in need below it are covered by disjoint
/// spans ending at or before it. `O(sections spanned + spans log spans)`.
fn disjoint_cover(need: &[u32], spans: &mut [(u32, u32)], reach: &mut Vec<bool>) -> bool {
    let a = spans.iter().map(|x| x.0).min().unwrap_or(0);
    let b = spans.iter().map(|x| x.1).max().unwrap_or(0);
    if need.first().is_none_or(|&k| k < a) || need.last().is_none_or(|&k| k >= b) {
        return need.is_empty();
    }
    spans.sort_unstable_by_key(|x| x.1);
    reach.clear();
    reach.resize((b - a + 1) as usize, false);
    reach[0] = true;
    let (mut next_need, mut next_span) = (0, 0);
    for p in a..b {
        let i = (p - a) as usize;
        let needed = need.get(next_need) == Some(&p);
        if needed {
            next_need += 1;
        }
        let mut r = reach[i] && !needed;
        while next_span < spans.len() && spans[next_span].1 == p + 1 {
            r |= reach[(spans[next_span].0 - a) as usize];
            next_span += 1;
        }
        reach[i + 1] = r;
    }
    reach[(b - a) as usize]
}

#[cfg(test)]
mod tests {
    use super::disjoint_cover;

    #[test]
    fn disjoint_cover_needs_spans_that_do_not_overlap() {
        let mut reach = Vec::new();
        let mut check = |need: &[u32], spans: &[(u32, u32)]| {
            disjoint_cover(need, &mut spans.to_vec(), &mut reach)
        };
        // Each section is covered, but only by overlapping spans.
        assert!(!check(&[1, 2, 3], &[(1, 3), (2, 4)]));
        assert!(check(&[1, 2, 3], &[(1, 3), (2, 4), (3, 4)]));
        assert!(check(&[1, 3], &[(0, 2), (1, 4), (3, 5)]));
        // A section not in need may stay uncovered between the chosen spans.
        assert!(check(&[0, 4], &[(0, 2), (1, 5), (4, 6)]));
        assert!(!check(&[0, 5], &[(0, 5), (3, 6)]));
        assert!(check(&[0, 4], &[(0, 5), (3, 6)]));
        assert!(check(&[], &[]));
        assert!(!check(&[7], &[(0, 2)]));
    }
}

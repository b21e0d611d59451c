//! Shapes that vary under one key: BERT-base's encoder at a sequence length drawn, pass
//! after pass, from [`LENGTHS`], all under one pass key, as a user who has not read about
//! buckets writes it (`lengths[:bN]`). The draw is a function of the pass number, so
//! every allocator sees the same sequence of lengths.

use super::graph::Graph;
use super::nets;

/// The sequence lengths a pass is drawn from.
pub const LENGTHS: [usize; 4] = [40, 72, 96, 128];

/// The variable-length encoder workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LengthsSpec {
    /// Sequences encoded together (batch size).
    pub batch: usize,
}

impl LengthsSpec {
    /// Parses what follows `lengths` (`""` or `:bN`).
    pub fn parse(s: &str) -> Result<LengthsSpec, String> {
        let mut spec = LengthsSpec { batch: 1 };
        for p in s.split(':').filter(|p| !p.is_empty()) {
            match p.strip_prefix('b').map(str::parse::<usize>) {
                Some(Ok(b)) if b > 0 => spec.batch = b,
                _ => return Err(format!("bad {p:?} in workload \"lengths{s}\" (want bN)")),
            }
        }
        Ok(spec)
    }

    /// The canonical name.
    pub fn name(&self) -> String {
        format!("lengths:b{}", self.batch)
    }

    /// The encoder's graph at each of [`LENGTHS`], in that order.
    pub fn graphs(&self) -> Vec<Graph> {
        LENGTHS
            .iter()
            .map(|&seq| nets::bert_base(self.batch, seq))
            .collect()
    }
}

/// The index in [`LENGTHS`] of pass number `pass`'s length (a fixed pseudo-random draw).
pub fn length_index(pass: u64) -> usize {
    let mut z = pass.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) % LENGTHS.len() as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_round_trip() {
        assert_eq!(LengthsSpec::parse("").unwrap().name(), "lengths:b1");
        assert_eq!(LengthsSpec::parse(":b2").unwrap().name(), "lengths:b2");
        assert!(LengthsSpec::parse(":b0").is_err());
        assert!(LengthsSpec::parse(":s3").is_err());
    }

    #[test]
    fn every_length_is_drawn_and_the_draw_is_fixed() {
        let draws: Vec<usize> = (0..64).map(length_index).collect();
        for i in 0..LENGTHS.len() {
            assert!(draws.contains(&i), "{i} in {draws:?}");
        }
        assert_eq!(draws, (0..64).map(length_index).collect::<Vec<_>>());
        let g = LengthsSpec { batch: 1 }.graphs();
        assert_eq!(g.len(), LENGTHS.len());
        assert_eq!(g[0].shapes[g[0].inputs[0]], [1, 40]);
    }
}

//! Problems with known answers, and random problems, for tests and benchmarks.
//!
//! The hand-checked cases come from `data/tflite-cases.md` (TFLite's planner tests,
//! inclusive op intervals converted to half-open) and `data/other-test-vectors.md`
//! (minimalloc, XLA). [`dnn_trace`] generates DNN-shaped traces of any size. The problem
//! files themselves (minimalloc's and idealloc's) are in [`DATA`].

use crate::problem::{Buffer, Problem};
use crate::rng::Rng;

/// The crate's `data` directory: minimalloc's and idealloc's problem files and the test
/// vectors (its `README.md` names each file's origin and licence).
pub const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data");

/// Builds a problem from TFLite usage records `(size, first_task, last_task)`, whose ends
/// are inclusive; ids are the record indices.
pub fn tflite_records(records: &[(u64, u64, u64)]) -> Problem {
    Problem::new(
        records
            .iter()
            .enumerate()
            .map(|(i, &(size, first, last))| Buffer::new(i.to_string(), first, last + 1, size))
            .collect(),
    )
    .expect("valid TFLite records")
}

/// TFLite `ChainRecords`: lower bounds 96 (both families).
pub fn tflite_chain() -> Problem {
    tflite_records(&[(16, 0, 1), (8, 1, 2), (64, 2, 3), (32, 3, 4), (8, 4, 5)])
}

/// TFLite `ComplexRecords`: offsets lower bound 96, shared-objects lower bound 112.
pub fn tflite_complex() -> Problem {
    tflite_records(&[
        (32, 0, 1),
        (32, 1, 4),
        (8, 2, 5),
        (16, 3, 5),
        (8, 4, 5),
        (64, 5, 7),
        (8, 6, 8),
        (8, 7, 8),
        (16, 8, 9),
    ])
}

/// The minimalloc README example: fits in 12 (offsets 8, 8, 4, 4, 0 is one optimum).
pub fn minimalloc_example() -> Problem {
    Problem::new(vec![
        Buffer::new("b1", 0, 3, 4),
        Buffer::new("b2", 3, 9, 4),
        Buffer::new("b3", 0, 9, 4),
        Buffer::new("b4", 9, 21, 4),
        Buffer::new("b5", 0, 21, 4),
    ])
    .expect("valid example")
}

/// minimalloc's `InfeasibleTricky`: max load 4, optimum 5.
pub fn minimalloc_tricky() -> Problem {
    let v = [
        (0, 1, 3),
        (0, 3, 1),
        (4, 5, 3),
        (2, 5, 1),
        (1, 2, 2),
        (3, 4, 2),
        (1, 4, 1),
    ];
    Problem::new(
        v.iter()
            .enumerate()
            .map(|(i, &(l, u, s))| Buffer::new(i.to_string(), l, u, s))
            .collect(),
    )
    .expect("valid")
}

/// XLA heap-simulator cases `(name, problem, expected offsets, expected heap size)` for
/// size-descending best fit. (XLA's `DecreasingSizeWithAlignment` uses alignment 20, which
/// is not a power of two, so it is not a valid problem here.)
pub fn xla_cases() -> Vec<(&'static str, Problem, Vec<u64>, u64)> {
    let mk = |v: &[(&str, u64, u64, u64)], align: u64| {
        Problem::new(
            v.iter()
                .map(|&(id, f, l, s)| Buffer::new(id, f, l + 1, s).with_align(align))
                .collect(),
        )
        .expect("valid")
    };
    vec![
        (
            "DecreasingSize",
            mk(
                &[
                    ("a", 0, 4, 10),
                    ("b", 1, 5, 30),
                    ("c", 2, 6, 20),
                    ("d", 3, 7, 40),
                ],
                1,
            ),
            vec![90, 40, 70, 0],
            100,
        ),
        (
            "BestFit",
            mk(
                &[
                    ("a", 0, 3, 10),
                    ("b", 1, 6, 20),
                    ("c", 2, 7, 40),
                    ("d", 4, 8, 30),
                    ("e", 5, 9, 50),
                ],
                1,
            ),
            vec![90, 120, 50, 90, 0],
            140,
        ),
    ]
}

/// A DNN-shaped trace of `n` buffers: a chain of ops, each producing an activation that
/// lives a few ops (longer for skip connections), plus short-lived workspaces and small
/// shape vectors, and a few weights alive throughout. Sizes span bytes to megabytes.
pub fn dnn_trace(n: usize, seed: u64) -> Problem {
    let mut rng = Rng::new(seed);
    let mut buffers = Vec::with_capacity(n);
    let mut t = 0u64;
    let n_long = (n / 200).max(1);
    let horizon = (n as u64) * 2 + 8;
    while buffers.len() < n {
        let id = buffers.len();
        let kind = rng.below(100);
        let (life, size) = if buffers.len() < n_long {
            (horizon, 1 << (12 + rng.below(8)))
        } else if kind < 45 {
            // Activation: lives until a few ops later; sometimes a skip connection.
            let life = if rng.below(10) == 0 {
                8 + rng.below(40)
            } else {
                2 + rng.below(4)
            };
            (life, 4 * (1 + rng.below(64)) * (1 << rng.below(14)))
        } else if kind < 70 {
            (1, 64 * (1 + rng.below(1 << 12))) // workspace within one op
        } else {
            (1 + rng.below(3), 8 * (1 + rng.below(8))) // shapes, strides, indices
        };
        buffers.push(Buffer::new(id.to_string(), t, t + life, size));
        if rng.below(3) == 0 {
            t += 1;
        }
    }
    Problem::new(buffers).expect("generated trace is valid")
}

/// An instance that tiles the time x address plane exactly: the rectangle `[0, 2n) x [0,
/// height)` cut by random guillotine cuts into `n` buffers (the piece with the largest
/// area is cut next, across time or across addresses, at a random point). Every moment
/// has load `height`, so the optimum equals the lower bound, with no slack anywhere:
/// one misplaced buffer leaves a hole that nothing can fill.
pub fn exact_plane(n: usize, height: u64, seed: u64) -> Problem {
    let mut rng = Rng::new(seed);
    let width = 2 * n.max(1) as u64;
    // (lower, upper, bottom, top)
    let mut pieces = vec![(0u64, width, 0u64, height.max(1))];
    while pieces.len() < n {
        let area = |p: &(u64, u64, u64, u64)| (p.1 - p.0) as u128 * (p.3 - p.2) as u128;
        let k = (0..pieces.len())
            .max_by_key(|&k| (area(&pieces[k]), std::cmp::Reverse(k)))
            .expect("a piece");
        let (l, u, b, t) = pieces[k];
        let across_time = if u - l < 2 {
            false
        } else if t - b < 2 {
            true
        } else {
            rng.below(2) == 0
        };
        if across_time {
            let m = l + 1 + rng.below(u - l - 1);
            pieces[k] = (l, m, b, t);
            pieces.push((m, u, b, t));
        } else if t - b >= 2 {
            let m = b + 1 + rng.below(t - b - 1);
            pieces[k] = (l, u, b, m);
            pieces.push((l, u, m, t));
        } else {
            break; // every piece is a unit square
        }
    }
    Problem::new(
        pieces
            .iter()
            .enumerate()
            .map(|(i, &(l, u, b, t))| Buffer::new(i.to_string(), l, u, t - b))
            .collect(),
    )
    .expect("generated tiling is valid")
}

#[cfg(test)]
pub(crate) mod strategies {
    //! proptest strategies for random problems.
    use super::*;
    use proptest::prelude::*;

    /// Random problems of up to `max_n` buffers with small times, sizes and alignments, so
    /// that conflicts, ties and touching lifetimes are common.
    pub fn problem(max_n: usize) -> impl Strategy<Value = Problem> {
        proptest::collection::vec((0u64..24, 1u64..12, 1u64..64, 0u32..4), 0..max_n).prop_map(|v| {
            Problem::new(
                v.into_iter()
                    .enumerate()
                    .map(|(i, (l, len, s, a))| {
                        Buffer::new(i.to_string(), l, l + len, s).with_align(if a == 3 {
                            8
                        } else {
                            1
                        })
                    })
                    .collect(),
            )
            .expect("valid")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_plane_tiles_the_plane() {
        for seed in 0..5 {
            let p = exact_plane(60, 1000, seed);
            assert_eq!(p.len(), 60);
            assert_eq!(crate::offsets_lower_bound(&p), 1000);
            let t = crate::timeline::Timeline::new(&p);
            assert!(t.breadths(&p).iter().all(|&b| b == 1000), "seed {seed}");
            assert_eq!(p, exact_plane(60, 1000, seed));
        }
    }

    #[test]
    fn dnn_trace_is_deterministic_and_sized() {
        let a = dnn_trace(1000, 7);
        assert_eq!(a.len(), 1000);
        assert_eq!(a, dnn_trace(1000, 7));
        assert_ne!(a, dnn_trace(1000, 8));
    }
}

//! The model the service runs: memo-bench's BERT-base encoder (the `bert` workload's graph,
//! interpreted by [`crate::engine`] without op scopes, as a real engine runs) at the
//! request's sequence length, with one pass key per sequence-length bucket.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use memo_alloc::Buckets;

use crate::engine::{checksum, Compute, Divergence, GraphRunner};
use crate::workloads::graph::Graph;
use crate::workloads::nets;

/// What one inference computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inference {
    /// Tokens in the request.
    pub tokens: usize,
    /// The bucket (largest sequence length) whose plan served it.
    pub bucket: usize,
    /// Digest of the outputs and of every op's output (identical under every allocator).
    pub checksum: u64,
}

/// The model, its buckets and a cache of graphs by sequence length.
pub struct Model {
    /// The bucket bounds, ascending; the largest is the longest request accepted.
    bounds: Vec<usize>,
    /// `bert/seq<=<bound>` for each bound.
    keys: Vec<String>,
    compute: Compute,
    graphs: Mutex<HashMap<usize, Arc<Graph>>>,
}

impl Model {
    /// A model accepting up to the largest of `bounds` tokens (at least one bound, each
    /// at least 1), with `compute` per byte (see [`Compute::from_scale`]).
    ///
    /// ```
    /// use memo_bench::service::model::Model;
    /// let m = Model::new(&[64, 32], 0.0).unwrap();
    /// assert_eq!(m.key(20), Some("bert/seq<=32"));
    /// assert_eq!(m.key(33), Some("bert/seq<=64"));
    /// assert_eq!(m.key(65), None);
    /// ```
    pub fn new(bounds: &[usize], compute: f64) -> Result<Model, String> {
        let mut bounds = bounds.to_vec();
        bounds.sort_unstable();
        bounds.dedup();
        if bounds.is_empty() || bounds[0] == 0 {
            return Err("buckets: give one or more sequence lengths, each at least 1".into());
        }
        let buckets = Buckets::list(bounds.iter().map(|&b| b as u64));
        let keys = bounds
            .iter()
            .map(|&b| buckets.key("bert/seq", b as u64))
            .collect();
        Ok(Model {
            bounds,
            keys,
            compute: Compute::from_scale(compute),
            graphs: Mutex::new(HashMap::new()),
        })
    }

    /// The bucket bounds, ascending.
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    /// The longest request accepted.
    pub fn max_tokens(&self) -> usize {
        *self.bounds.last().expect("at least one bucket")
    }

    /// The pass key of a request of `tokens` tokens; `None` beyond the largest bucket.
    pub fn key(&self, tokens: usize) -> Option<&str> {
        self.bucket_index(tokens).map(|i| self.keys[i].as_str())
    }

    /// Which bucket holds a request of `tokens` tokens; `None` beyond the largest.
    fn bucket_index(&self, tokens: usize) -> Option<usize> {
        let i = self.bounds.partition_point(|&b| b < tokens);
        (tokens > 0 && i < self.bounds.len()).then_some(i)
    }

    /// The graph of a sequence of `tokens` tokens, built once (call it outside passes: the
    /// cached graph outlives them).
    pub fn graph(&self, tokens: usize) -> Arc<Graph> {
        let mut graphs = self.graphs.lock().unwrap_or_else(PoisonError::into_inner);
        graphs
            .entry(tokens)
            .or_insert_with(|| Arc::new(nets::bert_base(1, tokens)))
            .clone()
    }

    /// Runs one inference of `body` (whitespace-separated token ids, already counted:
    /// `tokens` of them) on `graph`. Everything it allocates is freed before it returns,
    /// so inside a pass all of it can be planned.
    pub fn infer(&self, graph: &Graph, body: &[u8], tokens: usize) -> Inference {
        let mut ids: Vec<u32> = Vec::with_capacity(tokens);
        ids.extend(token_ids(body));
        let runner = GraphRunner::new(graph, self.compute);
        let (outputs, digest) = runner.run_digest(false, Divergence::default());
        let mut sum = checksum(&outputs) ^ digest;
        for &id in &ids {
            sum = (sum ^ u64::from(id)).wrapping_mul(0x100_0000_01b3);
        }
        Inference {
            tokens,
            bucket: self.bucket_index(tokens).map_or(tokens, |i| self.bounds[i]),
            checksum: sum,
        }
    }
}

/// The token ids of a request body: whitespace-separated decimal numbers (a word that is
/// not one counts as id 0). Allocates nothing.
pub fn token_ids(body: &[u8]) -> impl Iterator<Item = u32> + '_ {
    body.split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| {
            w.iter()
                .try_fold(0u32, |n, &d| {
                    d.is_ascii_digit()
                        .then(|| n.wrapping_mul(10).wrapping_add(u32::from(d - b'0')))
                })
                .unwrap_or(0)
        })
}

/// A request body of `tokens` token ids (deterministic in `seed`).
///
/// ```
/// let body = memo_bench::service::model::request_body(3, 7);
/// assert_eq!(memo_bench::service::model::token_ids(&body).count(), 3);
/// ```
pub fn request_body(tokens: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(tokens * 6);
    let mut x = seed | 1;
    for i in 0..tokens {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice((x % 30_522).to_string().as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_ids_parse_numbers_and_count_words() {
        let ids: Vec<u32> = token_ids(b"  12 7\n3x 40 ").collect();
        assert_eq!(ids, vec![12, 7, 0, 40]);
    }

    #[test]
    fn an_inference_is_deterministic_and_depends_on_its_tokens() {
        let m = Model::new(&[8], 0.0).unwrap();
        let g = m.graph(5);
        let a = m.infer(&g, b"1 2 3 4 5", 5);
        assert_eq!(a, m.infer(&g, b"1 2 3 4 5", 5));
        assert_ne!(a.checksum, m.infer(&g, b"1 2 3 4 6", 5).checksum);
        assert_eq!(a.bucket, 8);
    }
}

//! One thread's decoding requests through the interpreter (see
//! [`crate::workloads::decode`]): the prefill's graph, then each step's over the KV cache
//! the previous position left. In the step form the cache outlives each pass (held here
//! between passes) and is replaced, and so freed, inside the next pass; in the request
//! form it lives inside the pass.

use std::cell::RefCell;
use std::rc::Rc;

use super::{checksum, input_tensor, Compute, GraphRunner, Tensor};
use crate::workloads::decode::DecodeForm;
use crate::workloads::graph::Graph;

/// A thread's decoding state over a workload's graphs.
pub struct DecodeRunner<'g> {
    form: DecodeForm,
    prefill: GraphRunner<'g>,
    steps: Vec<GraphRunner<'g>>,
    /// The step's input token ids (`[batch, 1]`), made once.
    token: Rc<Tensor>,
    /// Step form: every layer's keys and values after the last pass's position.
    cache: RefCell<Vec<Rc<Tensor>>>,
}

impl<'g> DecodeRunner<'g> {
    /// Prepares a thread: the prompt's token ids (the prefill's input) and a step's.
    pub fn new(
        form: DecodeForm,
        prefill: &'g Graph,
        steps: &'g [Graph],
        compute: Compute,
    ) -> DecodeRunner<'g> {
        let token = steps.first().map_or_else(
            || input_tensor(prefill, 0, compute),
            |g| input_tensor(g, 0, compute),
        );
        DecodeRunner {
            form,
            prefill: GraphRunner::new(prefill, compute),
            steps: steps
                .iter()
                .map(|g| GraphRunner::without_inputs(g, compute))
                .collect(),
            token,
            cache: RefCell::new(Vec::new()),
        }
    }

    /// Runs pass number `pass`: in the step form the position `pass` has in its request,
    /// in the request form a whole request. Returns the logits that escape the pass and a
    /// digest of everything it computed.
    pub fn run(&self, pass: u64, scopes: bool) -> (Vec<Rc<Tensor>>, u64) {
        match self.form {
            DecodeForm::Step => {
                let at = self.form.position(pass, self.steps.len());
                let mut cache = self.cache.borrow_mut();
                let (logits, new_cache, digest) = self.position(at, &cache, scopes);
                *cache = new_cache; // the previous position's cache is freed here
                (vec![logits], digest)
            }
            DecodeForm::Request => {
                let (mut logits, mut cache, mut digest) = self.position(0, &[], scopes);
                for at in 1..=self.steps.len() {
                    let (l, c, d) = self.position(at, &cache, scopes);
                    digest = mix(mix(digest, d), checksum(&[logits]));
                    (logits, cache) = (l, c);
                }
                (vec![logits], digest)
            }
        }
    }

    /// Position `at` of a request (0: the prefill) over `cache`: its logits, the new
    /// cache and the digest.
    fn position(
        &self,
        at: usize,
        cache: &[Rc<Tensor>],
        scopes: bool,
    ) -> (Rc<Tensor>, Vec<Rc<Tensor>>, u64) {
        let (mut out, digest) = if at == 0 {
            self.prefill.run_digest(scopes, Default::default())
        } else {
            let inputs: Vec<Rc<Tensor>> = std::iter::once(Rc::clone(&self.token))
                .chain(cache.iter().cloned())
                .collect();
            self.steps[at - 1].run_with(&inputs, scopes)
        };
        let logits = out.remove(0);
        (logits, out, digest)
    }
}

fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x100_0000_01b3)
}

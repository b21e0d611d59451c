//! The real engine's decoder: candle-transformers' `llama2_c` Llama with llama2.c's 15M
//! configuration, decoding greedily (each step's token is the argmax of the last logits)
//! with the model's own KV cache, in the two forms of `crate::workloads::decode`: a
//! request's positions one per pass (the cache outlives each pass, held by the thread's
//! [`Decoding`]) or a whole request per pass.

use std::cell::RefCell;

use candle_core::{DType, Device, IndexOp, Result, Tensor, D};
use candle_transformers::models::llama2_c::{Cache, Config, Llama};

use super::weights::{seed, uniform, SyntheticWeights};
use crate::workloads::candle::CandleSpec;
use crate::workloads::decode::DecodeForm;

/// The decoder's configuration: llama2.c's `stories15M` (6 layers, dimension 288, 6 heads,
/// 32,000 tokens, 256 positions).
pub fn config() -> Config {
    Config::tiny_15m()
}

/// Loads the decoder over synthetic weights.
pub fn load() -> Result<Llama> {
    Llama::load(SyntheticWeights::var_builder(), config())
}

/// One thread's requests: its prompt, and in the step form the request in progress.
pub struct Decoding {
    form: DecodeForm,
    steps: usize,
    /// The prompt's token ids, `(batch, prompt)`.
    prompt: Tensor,
    /// Step form: the cache and the next token after the last pass's position.
    state: RefCell<Option<(Cache, Tensor)>>,
}

impl Decoding {
    /// A thread's prompt (token ids spread over the vocabulary), made outside any pass.
    pub fn new(spec: &CandleSpec) -> Result<Decoding> {
        let (b, s) = (spec.batch, spec.size);
        let vocab = config().vocab_size as u64;
        let ids: Vec<u32> = uniform(seed("prompt", &[b, s]), b * s)
            .into_iter()
            .map(|u| (((u + 1.0) * 0.5 * vocab as f32) as u64).min(vocab - 1) as u32)
            .collect();
        Ok(Decoding {
            form: spec.form,
            steps: spec.steps,
            prompt: Tensor::from_vec(ids, (b, s), &Device::Cpu)?,
            state: RefCell::new(None),
        })
    }

    /// Pass number `pass` (numbered from 0 on this thread): a position of a request, or a
    /// whole request. Returns the last position's logits, `(batch, vocab)`.
    pub fn pass(&self, model: &Llama, pass: u64) -> Result<Tensor> {
        match self.form {
            DecodeForm::Step => {
                let at = self.form.position(pass, self.steps);
                let mut state = self.state.borrow_mut();
                let (logits, next) = match (at, state.take()) {
                    (0, _) | (_, None) => self.prefill(model)?,
                    (at, Some((cache, token))) => self.step(model, at, cache, &token)?,
                };
                *state = Some(next);
                Ok(logits)
            }
            DecodeForm::Request => {
                let (mut logits, mut next) = self.prefill(model)?;
                for at in 1..=self.steps {
                    let (cache, token) = next;
                    (logits, next) = self.step(model, at, cache, &token)?;
                }
                Ok(logits)
            }
        }
    }

    /// The prompt through a fresh cache: the last position's logits, the cache and the
    /// first generated token.
    fn prefill(&self, model: &Llama) -> Result<(Tensor, (Cache, Tensor))> {
        let mut cache = Cache::new(true, &model.config, SyntheticWeights::var_builder())?;
        let logits = model.forward(&self.prompt, 0, &mut cache)?;
        let last = logits.i((.., logits.dim(1)? - 1, ..))?;
        let token = greedy(&last)?;
        Ok((last, (cache, token)))
    }

    /// Step `at` (1-based) of the request: the token after `at - 1` generated ones.
    fn step(
        &self,
        model: &Llama,
        at: usize,
        mut cache: Cache,
        token: &Tensor,
    ) -> Result<(Tensor, (Cache, Tensor))> {
        let position = self.prompt.dim(1)? + at - 1;
        let logits = model.forward(token, position, &mut cache)?.i((.., 0, ..))?;
        let next = greedy(&logits)?;
        Ok((logits, (cache, next)))
    }
}

/// The most likely next token of each request, `(batch, 1)`.
fn greedy(logits: &Tensor) -> Result<Tensor> {
    logits.argmax(D::Minus1)?.to_dtype(DType::U32)?.unsqueeze(1)
}

//! The real-engine workload family (feature `engine`): models of candle-transformers run by
//! candle's CPU backend on synthetic weights, as a new user would run them under
//! memomalloc: one `memo_alloc::pass` around each forward pass, no op scopes.
//!
//! candle keeps its default intra-op threading: matrix products (`gemm`) and convolutions
//! run on rayon's global pool, whose size is candle's and rayon's default (the number of
//! CPUs, or `RAYON_NUM_THREADS`). Those pool threads allocate on the pass's behalf;
//! [`crate::pass_count`] counts them.
//!
//! candle 0.11 asks for its thread count at every op ([`candle_core::utils::get_num_threads`]),
//! and without `RAYON_NUM_THREADS` it finds the machine's cores anew each time (on Linux by
//! reading the CPU mask and `/proc/cpuinfo`): on MobileNetV4-small at 1 thread that took about
//! three quarters of a forward pass, the same under every allocator. So the harness starts
//! each engine cell with `RAYON_NUM_THREADS` set to the count candle would find
//! ([`child_env`]): the same threading, and the model's own work left to measure.

pub mod decoder;
pub mod models;
pub mod weights;

use candle_core::{DType, Tensor};

use crate::workloads::candle::CandleSpec;
use models::{Input, Model};

/// The environment variable and value an engine cell's child runs with: `RAYON_NUM_THREADS`
/// set to candle's default thread count (its physical cores), or `None` when the caller set
/// `RAYON_NUM_THREADS` (the child inherits it). Found once per process.
///
/// On a machine with several hardware threads per core, rayon's own pools (sized by default
/// by hardware threads) then have one thread per core, as candle's do.
pub fn child_env() -> Option<(&'static str, String)> {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if std::env::var_os("RAYON_NUM_THREADS").is_some() {
        return None;
    }
    let n = *THREADS.get_or_init(candle_core::utils::get_num_threads);
    Some(("RAYON_NUM_THREADS", n.to_string()))
}

/// A loaded model and its spec (built once per cell, shared by the request threads).
pub struct Engine {
    /// What runs.
    pub spec: CandleSpec,
    model: Model,
}

impl Engine {
    /// Loads the model of `spec` over synthetic weights.
    pub fn load(spec: CandleSpec) -> Result<Engine, String> {
        let model = Model::load(spec.model).map_err(|e| format!("candle:{}: {e}", spec.name()))?;
        Ok(Engine { spec, model })
    }

    /// A request thread's input (the same values on every thread).
    pub fn input(&self) -> Input {
        Input::new(&self.spec).expect("the input of a valid spec builds")
    }

    /// Pass number `pass` of a request thread (numbered from 0; a decoder's position in
    /// its request follows from it); panics if candle fails (a benchmark cell cannot go
    /// on).
    pub fn forward(&self, input: &Input, pass: u64) -> Tensor {
        self.model
            .forward(input, pass)
            .unwrap_or_else(|e| panic!("candle:{}: forward failed: {e}", self.spec.name()))
    }
}

/// The output's values, as `f32`, in row-major order.
pub fn values(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32)
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f32>())
        .expect("an f32-convertible output")
}

/// Digest of an output: its shape and the bits of every value (any change shows).
pub fn digest(t: &Tensor) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |v: u64| h = (h ^ v).wrapping_mul(0x100_0000_01b3);
    for &d in t.dims() {
        eat(d as u64);
    }
    for v in values(t) {
        eat(u64::from(v.to_bits()));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::candle::CandleModel;
    use crate::workloads::decode::DecodeForm;

    fn small(model: CandleModel) -> CandleSpec {
        let mut spec = CandleSpec::parse(model.name()).unwrap();
        spec.size = match model {
            CandleModel::BertMini => 16,
            CandleModel::Llama2c => 8,
            _ => 64,
        };
        spec.steps = spec.steps.min(3);
        spec
    }

    #[test]
    fn an_engine_cell_names_candles_thread_count_unless_the_caller_did() {
        let env = crate::harness::engine_env("candle:resnet18");
        if std::env::var_os("RAYON_NUM_THREADS").is_some() {
            assert_eq!(env, None);
        } else {
            let n = candle_core::utils::get_num_threads();
            assert_eq!(env, Some(("RAYON_NUM_THREADS", n.to_string())));
        }
        assert_eq!(crate::harness::engine_env("resnet50"), None);
        assert_eq!(crate::harness::engine_env("lengths"), None);
    }

    #[test]
    fn every_model_runs_to_a_finite_varied_output_with_a_stable_digest() {
        for model in CandleModel::ALL {
            let spec = small(model);
            let engine = Engine::load(spec).unwrap();
            let (a, b) = (engine.input(), engine.input());
            let out = engine.forward(&a, 0);
            let vocab = decoder::config().vocab_size;
            let want: &[usize] = match model {
                CandleModel::BertMini => &[1, 16, 256],
                CandleModel::Llama2c => &[1, vocab],
                _ => &[1, models::CLASSES],
            };
            assert_eq!(out.dims(), want, "{model:?}");
            let v = values(&out);
            assert!(v.iter().all(|x| x.is_finite()), "{model:?}");
            let (lo, hi) = v
                .iter()
                .fold((f32::MAX, f32::MIN), |(l, h), &x| (l.min(x), h.max(x)));
            assert!(
                hi - lo > 1e-3,
                "{model:?}: output nearly constant {lo}..{hi}"
            );
            // Same digest from another input instance and another pass.
            let d = digest(&out);
            assert_eq!(d, digest(&engine.forward(&b, 0)), "{model:?}");
            assert_eq!(d, digest(&engine.forward(&a, 0)), "{model:?}");
            // A fresh load (another process) computes the same.
            assert_eq!(d, digest(&Engine::load(spec).unwrap().forward(&a, 0)));
        }
    }

    #[test]
    fn a_request_decoded_a_step_per_pass_ends_where_the_whole_request_does() {
        let step = small(CandleModel::Llama2c);
        assert_eq!((step.form, step.steps), (DecodeForm::Step, 3));
        let request = CandleSpec {
            form: DecodeForm::Request,
            ..step
        };
        let (stepper, whole) = (Engine::load(step).unwrap(), Engine::load(request).unwrap());
        let input = stepper.input();
        let per_pass: Vec<u64> = (0..=4)
            .map(|p| digest(&stepper.forward(&input, p)))
            .collect();
        // Each pass decodes another position: the prefill, then steps 1 to 3.
        for w in per_pass[..4].windows(2) {
            assert_ne!(w[0], w[1], "{per_pass:x?}");
        }
        // The last step's logits are the whole request's.
        let whole_input = whole.input();
        assert_eq!(per_pass[3], digest(&whole.forward(&whole_input, 0)));
        assert_eq!(per_pass[3], digest(&whole.forward(&whole_input, 1)));
        // Pass 4 starts the next request with its prefill.
        assert_eq!(per_pass[4], per_pass[0]);
    }
}

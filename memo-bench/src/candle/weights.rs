//! Synthetic weights: a candle `VarBuilder` backend that makes every parameter from a hash
//! of its name and shape, so models load without a checkpoint and every process (every
//! allocator) gets bit-identical weights.
//!
//! Values are scaled so activations stay finite and away from zero through deep stacks:
//! matrices and kernels (rank >= 2) are uniform with variance `2 / fan_in` (He
//! initialisation, `fan_in` = elements per output row); normalisation scales and running
//! variances are uniform in `[0.9, 1.1]`; biases and running means in `[-0.05, 0.05]`.
//!
//! Like a real checkpoint, the backend holds only tensors with a parameter leaf name
//! (`weight`, `bias`, `running_mean`, `running_var`) and a non-empty shape: a model that
//! probes for an optional tensor (MobileNetV4's `layer_scale.gamma`, a depthwise
//! convolution of kernel size 0) finds none, as it would in the published conv-small
//! checkpoint.

use candle_core::{DType, Device, Result, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};

/// Leaf names of the parameters the backend holds.
const LEAVES: [&str; 4] = ["weight", "bias", "running_mean", "running_var"];

/// The backend (stateless: a tensor is a function of its name and shape).
#[derive(Clone, Copy, Debug, Default)]
pub struct SyntheticWeights;

impl SyntheticWeights {
    /// A `VarBuilder` over synthetic weights, in `f32` on the CPU.
    pub fn var_builder() -> VarBuilder<'static> {
        VarBuilder::from_backend(Box::new(SyntheticWeights), DType::F32, Device::Cpu)
    }
}

fn leaf(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// FNV-1a over bytes, continuing from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// A splitmix64 stream: `n` values uniform in `[-1, 1)`, as `f32`.
pub fn uniform(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            // 24 random bits -> [0, 1) exactly representable in f32, then [-1, 1).
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Seed of a named value stream (weights, inputs).
pub fn seed(name: &str, dims: &[usize]) -> u64 {
    let mut h = fnv(0xcbf2_9ce4_8422_2325, name.as_bytes());
    for &d in dims {
        h = fnv(h, &(d as u64).to_le_bytes());
    }
    h
}

/// The values of parameter `name` of shape `dims` (see the module documentation).
pub fn values(name: &str, dims: &[usize]) -> Vec<f32> {
    let n: usize = dims.iter().product();
    let u = uniform(seed(name, dims), n);
    let (center, half_width) = match leaf(name) {
        "running_var" => (1.0, 0.1),
        "running_mean" | "bias" => (0.0, 0.05),
        _ if dims.len() < 2 => (1.0, 0.1),
        _ => {
            let fan_in = (n / dims[0].max(1)).max(1) as f32;
            // Uniform on [-a, a] has variance a^2 / 3.
            (0.0, (6.0 / fan_in).sqrt())
        }
    };
    u.into_iter().map(|x| center + half_width * x).collect()
}

impl SimpleBackend for SyntheticWeights {
    fn get(&self, s: Shape, name: &str, _: Init, dtype: DType, dev: &Device) -> Result<Tensor> {
        if !LEAVES.contains(&leaf(name)) || s.elem_count() == 0 {
            candle_core::bail!("no synthetic tensor {name} of shape {s:?}")
        }
        Tensor::from_vec(values(name, s.dims()), s, dev)?.to_dtype(dtype)
    }

    fn get_unchecked(&self, name: &str, _: DType, _: &Device) -> Result<Tensor> {
        candle_core::bail!("synthetic weights need a shape: {name}")
    }

    fn contains_tensor(&self, name: &str) -> bool {
        LEAVES.contains(&leaf(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_deterministic_scaled_and_name_dependent() {
        let a = values("layer1.0.conv1.weight", &[64, 64, 3, 3]);
        assert_eq!(a, values("layer1.0.conv1.weight", &[64, 64, 3, 3]));
        assert_ne!(a, values("layer1.0.conv2.weight", &[64, 64, 3, 3]));
        let var = a.iter().map(|x| x * x).sum::<f32>() / a.len() as f32;
        let want = 2.0 / (64.0 * 9.0);
        assert!((var / want - 1.0).abs() < 0.05, "{var} vs {want}");
        assert!(values("bn1.running_var", &[64])
            .iter()
            .all(|&v| (0.9..=1.1).contains(&v)));
        assert!(values("fc.bias", &[10]).iter().all(|&v| v.abs() <= 0.05));
    }

    #[test]
    fn the_backend_holds_parameters_only() {
        let vb = SyntheticWeights::var_builder();
        assert!(vb.get(4, "bn.weight").is_ok());
        assert!(vb.get(4, "layer_scale.gamma").is_err());
        assert!(vb.get((4, 1, 0, 0), "dw_start.conv.weight").is_err());
        assert!(vb.contains_tensor("LayerNorm.weight"));
        assert!(!vb.contains_tensor("bert"));
        let t = vb.pp("fc").get((3, 5), "weight").unwrap();
        assert_eq!(t.dims(), &[3, 5]);
        assert_eq!(
            t.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            values("fc.weight", &[3, 5])
        );
    }
}

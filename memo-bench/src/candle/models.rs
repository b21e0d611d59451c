//! The models, built with candle-transformers' own code over synthetic weights, their
//! fixed inputs, and one pass each (a forward, or a decoder's position or request).

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::Func;
use candle_transformers::models::efficientnet::{EfficientNet, MBConvConfig};
use candle_transformers::models::llama2_c::Llama;
use candle_transformers::models::{bert, mobilenetv4, resnet};

use super::decoder::{self, Decoding};
use super::weights::{seed, uniform, SyntheticWeights};
use crate::workloads::candle::{CandleModel, CandleSpec};

/// Classes of the image classifiers' heads (ImageNet's).
pub const CLASSES: usize = 1000;

/// A loaded model, shared by every request thread of a cell.
pub enum Model {
    /// An image classifier (MobileNetV4-small, ResNet-18, EfficientNet-B0): a `Func` over
    /// an NCHW batch.
    Vision(Func<'static>),
    /// A BERT encoder (returns the last hidden states).
    Bert(Box<bert::BertModel>),
    /// A decoder (llama2.c's Llama; returns the last position's logits).
    Decoder(Box<Llama>),
}

/// One request's input, made once per thread outside any pass.
pub enum Input {
    /// An image batch `(batch, 3, size, size)`.
    Images(Tensor),
    /// Token ids and token type ids, both `(batch, size)`.
    Tokens {
        /// Token ids.
        ids: Tensor,
        /// Token type ids (all 0: one segment).
        types: Tensor,
    },
    /// A decoder's prompt and the thread's request in progress.
    Decoding(Decoding),
}

/// BERT-mini's configuration (google's L-4, H-256, A-4 BERT).
pub fn bert_mini() -> bert::Config {
    bert::Config {
        vocab_size: 30522,
        hidden_size: 256,
        num_hidden_layers: 4,
        num_attention_heads: 4,
        intermediate_size: 1024,
        hidden_act: bert::HiddenAct::Gelu,
        hidden_dropout_prob: 0.1,
        max_position_embeddings: 512,
        type_vocab_size: 2,
        initializer_range: 0.02,
        layer_norm_eps: 1e-12,
        pad_token_id: 0,
        position_embedding_type: bert::PositionEmbeddingType::Absolute,
        use_cache: true,
        classifier_dropout: None,
        model_type: Some("bert".to_string()),
    }
}

impl Model {
    /// Builds `model` over synthetic weights.
    pub fn load(model: CandleModel) -> Result<Model> {
        let vb = SyntheticWeights::var_builder();
        Ok(match model {
            CandleModel::MobileNetV4Small => Model::Vision(mobilenetv4::mobilenetv4(
                &mobilenetv4::Config::small(),
                CLASSES,
                vb,
            )?),
            CandleModel::ResNet18 => Model::Vision(resnet::resnet18(CLASSES, vb)?),
            CandleModel::BertMini => {
                Model::Bert(Box::new(bert::BertModel::load(vb, &bert_mini())?))
            }
            CandleModel::EfficientNetB0 => {
                let net = EfficientNet::new(vb, MBConvConfig::b0(), CLASSES)?;
                Model::Vision(Func::new(move |x| net.forward(x)))
            }
            CandleModel::Llama2c => Model::Decoder(Box::new(decoder::load()?)),
        })
    }

    /// Pass number `pass` of a thread (numbered from 0): one forward, or a decoder's
    /// position of a request or whole request.
    pub fn forward(&self, input: &Input, pass: u64) -> Result<Tensor> {
        match (self, input) {
            (Model::Vision(f), Input::Images(x)) => f.forward(x),
            (Model::Bert(m), Input::Tokens { ids, types }) => m.forward(ids, types, None),
            (Model::Decoder(m), Input::Decoding(d)) => d.pass(m, pass),
            _ => candle_core::bail!("input does not fit the model"),
        }
    }
}

impl Input {
    /// The fixed input of `spec`: images uniform in `[-1, 1)`, or token ids spread over
    /// the vocabulary (a decoder's prompt).
    pub fn new(spec: &CandleSpec) -> Result<Input> {
        let (b, s) = (spec.batch, spec.size);
        Ok(match spec.model {
            CandleModel::Llama2c => Input::Decoding(Decoding::new(spec)?),
            CandleModel::BertMini => {
                let vocab = bert_mini().vocab_size as u64;
                let ids: Vec<u32> = uniform(seed("input_ids", &[b, s]), b * s)
                    .into_iter()
                    .map(|u| (((u + 1.0) * 0.5 * vocab as f32) as u64).min(vocab - 1) as u32)
                    .collect();
                Input::Tokens {
                    ids: Tensor::from_vec(ids, (b, s), &Device::Cpu)?,
                    types: Tensor::zeros((b, s), DType::U32, &Device::Cpu)?,
                }
            }
            _ => {
                let dims = [b, 3, s, s];
                Input::Images(Tensor::from_vec(
                    uniform(seed("image", &dims), dims.iter().product()),
                    &dims[..],
                    &Device::Cpu,
                )?)
            }
        })
    }
}

//! Names of the real-engine workloads: models of candle-transformers (the pure-Rust
//! engine candle) run on synthetic weights. Only the names live here, so that specs parse
//! in every build; running them needs the `engine` feature (see `crate::candle`).

use super::decode::DecodeForm;

/// A model of candle-transformers' own code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CandleModel {
    /// MobileNetV4-small (`candle_transformers::models::mobilenetv4`, `Config::small()`),
    /// 1000 classes (size: image side).
    MobileNetV4Small,
    /// ResNet-18 (`candle_transformers::models::resnet::resnet18`), 1000 classes (size:
    /// image side).
    ResNet18,
    /// BERT-mini: `candle_transformers::models::bert::BertModel` with 4 layers, hidden size
    /// 256, 4 heads, intermediate size 1024 (size: sequence length).
    BertMini,
    /// EfficientNet-B0 (`candle_transformers::models::efficientnet`), 1000 classes (size:
    /// image side).
    EfficientNetB0,
    /// A Llama 2 decoder (`candle_transformers::models::llama2_c`, the configuration of
    /// llama2.c's 15M-parameter model) decoding greedily with its KV cache (size: prompt
    /// tokens; steps and form as in `crate::workloads::decode`).
    Llama2c,
}

impl CandleModel {
    /// Every model.
    pub const ALL: [CandleModel; 5] = [
        CandleModel::MobileNetV4Small,
        CandleModel::ResNet18,
        CandleModel::BertMini,
        CandleModel::EfficientNetB0,
        CandleModel::Llama2c,
    ];

    /// Name in workload specs (after `candle:`).
    pub fn name(self) -> &'static str {
        match self {
            CandleModel::MobileNetV4Small => "mobilenetv4",
            CandleModel::ResNet18 => "resnet18",
            CandleModel::BertMini => "bert-mini",
            CandleModel::EfficientNetB0 => "efficientnet-b0",
            CandleModel::Llama2c => "llama2c",
        }
    }

    /// Default size: 224-pixel images, 128-token sequences, 32-token prompts.
    pub fn default_size(self) -> usize {
        match self {
            CandleModel::BertMini => 128,
            CandleModel::Llama2c => 32,
            _ => 224,
        }
    }

    /// Whether the model decodes (takes steps and a form).
    pub fn decodes(self) -> bool {
        self == CandleModel::Llama2c
    }

    /// The most tokens a request may reach: BERT-mini's position embeddings, llama2.c's
    /// 15M model's sequence length.
    pub fn max_tokens(self) -> Option<usize> {
        match self {
            CandleModel::BertMini => Some(512),
            CandleModel::Llama2c => Some(256),
            _ => None,
        }
    }
}

/// Default decoding steps of a `candle:llama2c` request.
pub const DEFAULT_STEPS: usize = 16;

/// A real-engine workload: a model at a batch size and an input size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CandleSpec {
    /// The model.
    pub model: CandleModel,
    /// Batch size.
    pub batch: usize,
    /// Image side, sequence length or prompt length.
    pub size: usize,
    /// Decoding steps after the prompt (decoders; 0 for the others).
    pub steps: usize,
    /// How a decoder's requests map to passes (decoders; `Request` for the others, whose
    /// pass is a whole forward).
    pub form: DecodeForm,
}

impl CandleSpec {
    /// Parses what follows `candle:`: `model[:bN][:sM]` (e.g. `mobilenetv4`,
    /// `bert-mini:b1:s64`); a decoder also takes `:nK` (steps) and `:step` or `:request`
    /// (e.g. `llama2c:s32:n16:request`; default `step`).
    pub fn parse(s: &str) -> Result<CandleSpec, String> {
        let mut parts = s.split(':');
        let name = parts.next().unwrap_or_default();
        let model = CandleModel::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = CandleModel::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown candle model {name:?} in \"candle:{s}\" (one of {})",
                    known.join(", ")
                )
            })?;
        let decodes = model.decodes();
        let mut spec = CandleSpec {
            model,
            batch: 1,
            size: model.default_size(),
            steps: if decodes { DEFAULT_STEPS } else { 0 },
            form: if decodes {
                DecodeForm::Step
            } else {
                DecodeForm::Request
            },
        };
        for p in parts {
            if let (true, Some(form)) = (decodes, DecodeForm::parse(p)) {
                spec.form = form;
                continue;
            }
            let (k, v) = p.split_at(1.min(p.len()));
            match (k, v.parse::<usize>()) {
                ("b", Ok(v)) if v > 0 => spec.batch = v,
                ("s", Ok(v)) if v > 0 => spec.size = v,
                ("n", Ok(v)) if v > 0 && decodes => spec.steps = v,
                _ => {
                    let want = if decodes {
                        "bN, sM, nK, step or request"
                    } else {
                        "bN or sM"
                    };
                    return Err(format!(
                        "bad {p:?} in workload \"candle:{s}\" (want {want})"
                    ));
                }
            }
        }
        spec.check().map_err(|e| format!("candle:{s}: {e}"))?;
        Ok(spec)
    }

    /// Refuses a spec beyond its model's limits.
    pub fn check(&self) -> Result<(), String> {
        match self.model.max_tokens() {
            Some(max) if self.size + self.steps > max => Err(format!(
                "{} takes at most {max} tokens{}",
                self.model.name(),
                if self.model.decodes() {
                    " (prompt and steps)"
                } else {
                    " (its position embeddings)"
                }
            )),
            _ => Ok(()),
        }
    }

    /// The canonical name, without the `candle:` prefix.
    pub fn name(&self) -> String {
        let mut name = format!("{}:b{}:s{}", self.model.name(), self.batch, self.size);
        if self.model.decodes() {
            name += &format!(":n{}:{}", self.steps, self.form.name());
        }
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_defaults_and_round_trip() {
        let s = CandleSpec::parse("mobilenetv4").unwrap();
        assert_eq!(s.name(), "mobilenetv4:b1:s224");
        assert_eq!(CandleSpec::parse("bert-mini").unwrap().size, 128);
        for name in [
            "resnet18:b2:s64",
            "bert-mini:b1:s32",
            "efficientnet-b0:b1:s224",
            "llama2c:b1:s32:n16:step",
            "llama2c:b2:s8:n4:request",
        ] {
            assert_eq!(CandleSpec::parse(name).unwrap().name(), name);
        }
        let l = CandleSpec::parse("llama2c:request").unwrap();
        assert_eq!((l.size, l.steps, l.form), (32, 16, DecodeForm::Request));
        assert!(CandleSpec::parse("vgg16").is_err());
        assert!(CandleSpec::parse("resnet18:x3").is_err());
        assert!(CandleSpec::parse("resnet18:b0").is_err());
        assert!(CandleSpec::parse("bert-mini:s1024").is_err());
        // Steps and forms belong to decoders.
        assert!(CandleSpec::parse("resnet18:n4").is_err());
        assert!(CandleSpec::parse("resnet18:step").is_err());
        let err = CandleSpec::parse("llama2c:s250:n16").unwrap_err();
        assert!(err.contains("256"), "{err}");
    }
}

//! Names of the real-engine workloads: models of candle-transformers (the pure-Rust
//! engine candle) run on synthetic weights. Only the names live here, so that specs parse
//! in every build; running them needs the `engine` feature (see `crate::candle`).

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
}

impl CandleModel {
    /// Every model.
    pub const ALL: [CandleModel; 3] = [
        CandleModel::MobileNetV4Small,
        CandleModel::ResNet18,
        CandleModel::BertMini,
    ];

    /// Name in workload specs (after `candle:`).
    pub fn name(self) -> &'static str {
        match self {
            CandleModel::MobileNetV4Small => "mobilenetv4",
            CandleModel::ResNet18 => "resnet18",
            CandleModel::BertMini => "bert-mini",
        }
    }

    /// Default size: 224-pixel images, 128-token sequences.
    pub fn default_size(self) -> usize {
        match self {
            CandleModel::BertMini => 128,
            _ => 224,
        }
    }
}

/// A real-engine workload: a model at a batch size and an input size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CandleSpec {
    /// The model.
    pub model: CandleModel,
    /// Batch size.
    pub batch: usize,
    /// Image side or sequence length.
    pub size: usize,
}

impl CandleSpec {
    /// Parses what follows `candle:`: `model[:bN][:sM]` (e.g. `mobilenetv4`,
    /// `bert-mini:b1:s64`).
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
        let mut spec = CandleSpec {
            model,
            batch: 1,
            size: model.default_size(),
        };
        for p in parts {
            let (k, v) = p.split_at(1.min(p.len()));
            match (k, v.parse::<usize>()) {
                ("b", Ok(v)) if v > 0 => spec.batch = v,
                ("s", Ok(v)) if v > 0 => spec.size = v,
                _ => {
                    return Err(format!(
                        "bad {p:?} in workload \"candle:{s}\" (want bN or sM)"
                    ))
                }
            }
        }
        if model == CandleModel::BertMini && spec.size > 512 {
            return Err(format!(
                "candle:{s}: BERT-mini takes at most 512 tokens (its position embeddings)"
            ));
        }
        Ok(spec)
    }

    /// The canonical name, without the `candle:` prefix.
    pub fn name(&self) -> String {
        format!("{}:b{}:s{}", self.model.name(), self.batch, self.size)
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
        for name in ["resnet18:b2:s64", "bert-mini:b1:s32"] {
            assert_eq!(CandleSpec::parse(name).unwrap().name(), name);
        }
        assert!(CandleSpec::parse("vgg16").is_err());
        assert!(CandleSpec::parse("resnet18:x3").is_err());
        assert!(CandleSpec::parse("resnet18:b0").is_err());
        assert!(CandleSpec::parse("bert-mini:s1024").is_err());
    }
}

//! Workload specs: the architectures, their variants, and the names a spec is written
//! as on the command line (`resnet50:b1:s128+noscope`, `decode:step`, `lengths`,
//! `trace:<file>`, `candle:<model>`).

use std::path::PathBuf;

use super::candle::{CandleModel, CandleSpec};
use super::decode::{DecodeForm, DecodeSpec};
use super::graph::Graph;
use super::lengths::{LengthsSpec, LENGTHS};
use super::nets;

/// An architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Net {
    /// MobileNet v1 (size: image side).
    MobileNetV1,
    /// MobileNet v2 (size: image side).
    MobileNetV2,
    /// ResNet-50 (size: image side).
    ResNet50,
    /// Inception v3 (size: image side).
    InceptionV3,
    /// BERT-base encoder (size: sequence length).
    Bert,
    /// GPT-2-small decoding step (size: tokens in the KV cache).
    Gpt2,
}

impl Net {
    /// Every architecture.
    pub const ALL: [Net; 6] = [
        Net::MobileNetV1,
        Net::MobileNetV2,
        Net::ResNet50,
        Net::InceptionV3,
        Net::Bert,
        Net::Gpt2,
    ];

    /// Name used in workload specs.
    pub fn name(self) -> &'static str {
        match self {
            Net::MobileNetV1 => "mobilenet_v1",
            Net::MobileNetV2 => "mobilenet_v2",
            Net::ResNet50 => "resnet50",
            Net::InceptionV3 => "inception_v3",
            Net::Bert => "bert",
            Net::Gpt2 => "gpt2",
        }
    }

    /// Builds the graph of one pass.
    pub fn graph(self, batch: usize, size: usize) -> Graph {
        match self {
            Net::MobileNetV1 => nets::mobilenet_v1(batch, size),
            Net::MobileNetV2 => nets::mobilenet_v2(batch, size),
            Net::ResNet50 => nets::resnet50(batch, size),
            Net::InceptionV3 => nets::inception_v3(batch, size),
            Net::Bert => nets::bert_base(batch, size),
            Net::Gpt2 => nets::gpt2_decode(batch, size),
        }
    }
}

/// How passes use memo-alloc's API and whether they diverge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Op scopes around every op (as a user would write them).
    Scoped,
    /// No op scopes: allocations are matched by their order in the pass.
    NoScopes,
    /// Op scopes, and every fourth pass skips an elementwise op and grows one output.
    Divergent,
    /// Op scopes, and each kernel's temporaries are built on helper threads (rayon's global
    /// pool, two tasks per temporary), which memo cells carry into the pass
    /// (`memo_alloc::current()` and `PassHandle::in_scope`, keyed by the task's index).
    Helpers,
}

impl Variant {
    /// Every variant.
    pub const ALL: [Variant; 4] = [
        Variant::Scoped,
        Variant::NoScopes,
        Variant::Divergent,
        Variant::Helpers,
    ];

    /// Suffix in workload names (`""`, `"+noscope"`, `"+divergent"`, `"+helpers"`).
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Scoped => "",
            Variant::NoScopes => "+noscope",
            Variant::Divergent => "+divergent",
            Variant::Helpers => "+helpers",
        }
    }
}

/// A workload: what a cell runs on each thread, pass after pass.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Spec {
    /// A built-in architecture.
    Net {
        /// The architecture.
        net: Net,
        /// Batch size.
        batch: usize,
        /// Image side, sequence length or cached tokens.
        size: usize,
        /// Variant.
        variant: Variant,
    },
    /// LLM decoding: GPT-2-small's prefill and steps, in one of two forms.
    Decode(DecodeSpec),
    /// BERT-base's encoder at a sequence length drawn per pass, under one key.
    Lengths(LengthsSpec),
    /// A trace recorded by memo-alloc.
    Trace(PathBuf),
    /// A model of the candle engine (needs the `engine` feature to run).
    Candle(CandleSpec),
}

/// The workload names [`Spec::parse`] knows, for error messages and `--help`.
pub fn valid_names() -> String {
    let nets: Vec<&str> = Net::ALL.iter().map(|n| n.name()).collect();
    let variants: Vec<&str> = Variant::ALL[1..].iter().map(|v| v.suffix()).collect();
    let models: Vec<&str> = CandleModel::ALL.iter().map(|m| m.name()).collect();
    let forms: Vec<&str> = DecodeForm::ALL.iter().map(|f| f.name()).collect();
    format!(
        "net[:bN][:sM][{}] with net one of {}; decode:{}[:bN][:sP][:nK]; lengths[:bN]; trace:<file>; candle:model[:bN][:sM] with model one of {}",
        variants.join("|"),
        nets.join(", "),
        forms.join("|"),
        models.join(", ")
    )
}

/// Warm-up passes per thread of a workload whose passes are alike (see
/// [`Spec::default_warmup`]).
pub const DEFAULT_WARMUP: u64 = 3;

impl Spec {
    /// Warm-up passes per thread when `--warmup` is not given: [`DEFAULT_WARMUP`], or
    /// one cycle of the workload's shapes where its passes differ by design, so that its
    /// measured passes are of a program past its start: a whole request (the prefill and
    /// every step) for a decoder run a step per pass, and four passes per length on the
    /// average for `lengths`.
    pub fn default_warmup(&self) -> u64 {
        match self {
            Spec::Decode(d) if d.form == DecodeForm::Step => d.steps as u64 + 1,
            Spec::Candle(c) if c.steps > 0 && c.form == DecodeForm::Step => c.steps as u64 + 1,
            Spec::Lengths(_) => 4 * LENGTHS.len() as u64,
            _ => DEFAULT_WARMUP,
        }
    }

    /// Parses `net:bN:sM[+noscope|+divergent|+helpers]` (e.g. `resnet50:b1:s128`),
    /// `decode:form[:bN][:sP][:nK]` (e.g. `decode:step`), `lengths[:bN]`, `trace:<path>`
    /// or `candle:model[:bN][:sM]` (e.g. `candle:mobilenetv4`).
    pub fn parse(s: &str) -> Result<Spec, String> {
        if let Some(l) = s.strip_prefix("lengths") {
            if l.is_empty() || l.starts_with(':') {
                return Ok(Spec::Lengths(LengthsSpec::parse(l)?));
            }
        }
        if let Some(d) = s.strip_prefix("decode:") {
            return Ok(Spec::Decode(DecodeSpec::parse(d)?));
        }
        if let Some(path) = s.strip_prefix("trace:") {
            return Ok(Spec::Trace(PathBuf::from(path)));
        }
        if let Some(model) = s.strip_prefix("candle:") {
            return Ok(Spec::Candle(CandleSpec::parse(model)?));
        }
        let (base, variant) = Variant::ALL[1..]
            .iter()
            .find_map(|&v| s.strip_suffix(v.suffix()).map(|b| (b, v)))
            .unwrap_or((s, Variant::Scoped));
        let mut parts = base.split(':');
        let name = parts.next().unwrap_or_default();
        let net = Net::ALL
            .into_iter()
            .find(|n| n.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown workload {name:?} in {s:?} (want {})",
                    valid_names()
                )
            })?;
        let mut batch = 1;
        let mut size = default_size(net);
        for p in parts {
            let (k, v) = p.split_at(1.min(p.len()));
            let v: usize = v
                .parse()
                .map_err(|_| format!("bad {p:?} in workload {s:?} (want bN or sN)"))?;
            match k {
                "b" if v > 0 => batch = v,
                "s" if v > 0 => size = v,
                _ => return Err(format!("bad {p:?} in workload {s:?} (want bN or sN)")),
            }
        }
        Ok(Spec::Net {
            net,
            batch,
            size,
            variant,
        })
    }

    /// Parses `s` as [`Spec::parse`] does and checks that this build can run it: a trace
    /// file exists, a candle model needs the `engine` feature.
    pub fn parse_runnable(s: &str) -> Result<Spec, String> {
        let spec = Spec::parse(s)?;
        match &spec {
            Spec::Trace(p) if !p.is_file() => Err(format!("{s}: no trace file {}", p.display())),
            Spec::Candle(c) if !cfg!(feature = "engine") => Err(needs_engine(c)),
            _ => Ok(spec),
        }
    }

    /// The canonical name (what [`Spec::parse`] reads back).
    pub fn name(&self) -> String {
        match self {
            Spec::Net {
                net,
                batch,
                size,
                variant,
            } => format!("{}:b{batch}:s{size}{}", net.name(), variant.suffix()),
            Spec::Decode(d) => format!("decode:{}", d.name()),
            Spec::Lengths(l) => l.name(),
            Spec::Trace(p) => format!("trace:{}", p.display()),
            Spec::Candle(c) => format!("candle:{}", c.name()),
        }
    }

    /// The pass key memo-alloc sees (leaked once per process: keys are `&'static str`).
    pub fn key(&self) -> &'static str {
        Box::leak(self.name().into_boxed_str())
    }

    /// Whether the passes use op scopes (never for the real engine: a new user drops one
    /// pass around the forward and nothing else).
    pub fn scopes(&self) -> bool {
        !matches!(
            self,
            Spec::Net {
                variant: Variant::NoScopes,
                ..
            } | Spec::Candle(_)
        )
    }

    /// Whether every pass makes the same allocations as the first, in the same order
    /// with the same lifetimes: not for `+divergent`, nor for decoding a step per pass
    /// (each step's cache is longer), nor for lengths drawn per pass, nor for the real engine, whose first forward builds
    /// lazy state later passes reuse. The `static` allocator serves
    /// only such workloads (elsewhere its unchecked slots would overlap live data), and
    /// memo's ratio to it is reported only for them.
    pub fn repeats_exactly(&self) -> bool {
        !matches!(
            self,
            Spec::Net {
                variant: Variant::Divergent,
                ..
            } | Spec::Decode(DecodeSpec {
                form: DecodeForm::Step,
                ..
            }) | Spec::Lengths(_)
                | Spec::Candle(_)
        )
    }
}

/// The refusal of a candle workload in a build without the `engine` feature.
pub fn needs_engine(c: &CandleSpec) -> String {
    format!(
        "candle:{} needs memo-bench built with --features engine",
        c.name()
    )
}

/// Default size per architecture.
pub fn default_size(net: Net) -> usize {
    match net {
        Net::Bert => 128,
        Net::Gpt2 => 256,
        _ => 224,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip() {
        for s in [
            "resnet50:b4:s128",
            "bert:b1:s64+noscope",
            "gpt2:b2:s32+divergent",
            "decode:request:b1:s16:n4",
            "lengths:b2",
        ] {
            assert_eq!(Spec::parse(s).unwrap().name(), s);
        }
        assert_eq!(Spec::parse("resnet50").unwrap().name(), "resnet50:b1:s224");
        assert!(Spec::parse("vgg16").is_err());
        assert!(Spec::parse("resnet50:x3").is_err());
        assert!(!Spec::parse("bert+noscope").unwrap().scopes());
        let c = Spec::parse("candle:resnet18").unwrap();
        assert_eq!(c.name(), "candle:resnet18:b1:s224");
        assert_eq!(Spec::parse(&c.name()).unwrap(), c);
        assert!(!c.scopes());
        assert!(Spec::parse("candle:vgg16").is_err());
    }

    #[test]
    fn an_unknown_workload_is_refused_with_the_valid_names() {
        let err = Spec::parse("vgg16:b1").unwrap_err();
        for name in [
            "vgg16",
            "mobilenet_v1",
            "gpt2",
            "+helpers",
            "trace:",
            "bert-mini",
            "decode:step|request",
            "lengths",
        ] {
            assert!(err.contains(name), "{name} in {err}");
        }
        let err = Spec::parse_runnable("trace:/nonexistent/x.trace.json").unwrap_err();
        assert!(err.contains("no trace file"), "{err}");
    }

    #[cfg(not(feature = "engine"))]
    #[test]
    fn candle_workloads_say_they_need_the_feature() {
        let err = Spec::parse_runnable("candle:mobilenetv4").unwrap_err();
        assert!(err.contains("--features engine"), "{err}");
    }

    #[test]
    fn static_serves_only_workloads_that_repeat_exactly() {
        for (w, repeats) in [
            ("resnet50:b1:s32", true),
            ("resnet50:b1:s32+noscope", true),
            ("resnet50:b1:s32+helpers", true),
            ("trace:/tmp/x.trace.json", true),
            ("resnet50:b1:s32+divergent", false),
            ("decode:request:b1:s8:n2", true),
            ("decode:step:b1:s8:n2", false),
            ("lengths", false),
            // The engine's first forward makes one-time allocations: static, serving the
            // i-th allocation of a later pass from the first pass's i-th slot, would hand
            // out slots that overlap live data.
            ("candle:mobilenetv4", false),
        ] {
            assert_eq!(Spec::parse(w).unwrap().repeats_exactly(), repeats, "{w}");
        }
    }
}

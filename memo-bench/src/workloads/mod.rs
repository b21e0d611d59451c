//! The built-in workloads: DNN-shaped passes of real architectures at a batch size and an
//! input size, in three variants, plus workloads read from memo-alloc traces, plus (with
//! the `engine` feature) models of a real engine, candle.

pub mod builder;
pub mod candle;
pub mod graph;
pub mod nets;

use std::path::PathBuf;

use crate::engine::trace::TraceProgram;
use crate::engine::{checksum, Compute, Divergence, GraphRunner};
use crate::pass_count;
use candle::CandleSpec;
use graph::{Graph, OpKind};

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
    /// Suffix in workload names (`""`, `"+noscope"`, `"+divergent"`).
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
    /// A trace recorded by memo-alloc.
    Trace(PathBuf),
    /// A model of the candle engine (needs the `engine` feature to build).
    Candle(CandleSpec),
}

impl Spec {
    /// Parses `net:bN:sM[+noscope|+divergent|+helpers]` (e.g. `resnet50:b1:s128`), `trace:<path>`
    /// or `candle:model[:bN][:sM]` (e.g. `candle:mobilenetv4`).
    pub fn parse(s: &str) -> Result<Spec, String> {
        if let Some(path) = s.strip_prefix("trace:") {
            return Ok(Spec::Trace(PathBuf::from(path)));
        }
        if let Some(model) = s.strip_prefix("candle:") {
            return Ok(Spec::Candle(CandleSpec::parse(model)?));
        }
        let (base, variant) = if let Some(b) = s.strip_suffix("+noscope") {
            (b, Variant::NoScopes)
        } else if let Some(b) = s.strip_suffix("+divergent") {
            (b, Variant::Divergent)
        } else if let Some(b) = s.strip_suffix("+helpers") {
            (b, Variant::Helpers)
        } else {
            (s, Variant::Scoped)
        };
        let mut parts = base.split(':');
        let name = parts.next().unwrap_or_default();
        let net = Net::ALL
            .into_iter()
            .find(|n| n.name() == name)
            .ok_or_else(|| format!("unknown workload {name:?} in {s:?}"))?;
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

    /// The canonical name (what [`Spec::parse`] reads back).
    pub fn name(&self) -> String {
        match self {
            Spec::Net {
                net,
                batch,
                size,
                variant,
            } => format!("{}:b{batch}:s{size}{}", net.name(), variant.suffix()),
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
    /// with the same lifetimes: not for `+divergent`, nor for the real engine, whose
    /// first forward builds lazy state later passes reuse. The `static` allocator serves
    /// only such workloads (elsewhere its unchecked slots would overlap live data), and
    /// memo's ratio to it is reported only for them.
    pub fn repeats_exactly(&self) -> bool {
        !matches!(
            self,
            Spec::Net {
                variant: Variant::Divergent,
                ..
            } | Spec::Candle(_)
        )
    }

    /// Builds the workload.
    pub fn build(&self) -> Result<Workload, String> {
        match self {
            Spec::Net {
                net,
                batch,
                size,
                variant,
            } => Ok(Workload::Graph {
                graph: net.graph(*batch, *size),
                divergent: *variant == Variant::Divergent,
                helpers: *variant == Variant::Helpers,
            }),
            Spec::Trace(p) => {
                let trace = memo_alloc::files::read_trace(p)?;
                Ok(Workload::Trace(TraceProgram::new(&trace)?))
            }
            #[cfg(feature = "engine")]
            Spec::Candle(c) => Ok(Workload::Candle(crate::candle::Engine::load(*c)?)),
            #[cfg(not(feature = "engine"))]
            Spec::Candle(c) => Err(format!(
                "candle:{} needs memo-bench built with --features engine",
                c.name()
            )),
        }
    }
}

/// Default size per architecture.
pub fn default_size(net: Net) -> usize {
    match net {
        Net::Bert => 128,
        Net::Gpt2 => 256,
        _ => 224,
    }
}

/// A built workload.
pub enum Workload {
    /// A built-in architecture's graph.
    Graph {
        /// The pass.
        graph: Graph,
        /// Every fourth pass diverges.
        divergent: bool,
        /// Kernels build their temporaries on helper threads.
        helpers: bool,
    },
    /// A recorded trace.
    Trace(TraceProgram),
    /// A model of the candle engine.
    #[cfg(feature = "engine")]
    Candle(crate::candle::Engine),
}

impl Workload {
    /// Allocations and bytes of one pass, as modelled; `(0, 0)` for the real engine, whose
    /// allocations are measured instead (memo cells count them, see
    /// [`crate::pass_count`]).
    pub fn allocation_profile(&self) -> (u64, u64) {
        match self {
            Workload::Graph { graph, .. } => graph.allocation_profile(),
            Workload::Trace(t) => (t.buffers as u64, t.bytes),
            #[cfg(feature = "engine")]
            Workload::Candle(_) => (0, 0),
        }
    }

    /// The divergence of pass number `pass` (none unless the workload is divergent).
    pub fn divergence(&self, pass: u64) -> Divergence {
        let Workload::Graph {
            graph,
            divergent: true,
            ..
        } = self
        else {
            return Divergence::default();
        };
        if pass % 4 != 3 {
            return Divergence::default();
        }
        let unary: Vec<usize> = (0..graph.ops.len())
            .filter(|&i| graph.ops[i].kind == OpKind::Unary && graph.ops[i].inputs.len() == 1)
            .collect();
        let k = (pass / 4) as usize;
        Divergence {
            skip: (!unary.is_empty()).then(|| unary[(k * 7919) % unary.len()]),
            grow: Some((k * 104_729 + 13) % graph.ops.len()),
        }
    }
}

/// Per-thread runner of a workload.
pub enum Runner<'w> {
    /// Graph interpreter with this thread's inputs.
    Graph(GraphRunner<'w>, &'w Workload),
    /// Trace program.
    Trace(&'w TraceProgram),
    /// The real engine with this thread's input.
    #[cfg(feature = "engine")]
    Candle(&'w crate::candle::Engine, crate::candle::models::Input),
}

impl<'w> Runner<'w> {
    /// Prepares a thread (allocates its inputs, outside any pass).
    pub fn new(w: &'w Workload, compute: Compute) -> Runner<'w> {
        match w {
            Workload::Graph { graph, helpers, .. } => {
                Runner::Graph(GraphRunner::new(graph, compute).with_helpers(*helpers), w)
            }
            Workload::Trace(t) => Runner::Trace(t),
            #[cfg(feature = "engine")]
            Workload::Candle(e) => Runner::Candle(e, e.input()),
        }
    }

    /// Runs pass number `pass`, inside `memo_alloc::pass(key)` when `key` is given (memo
    /// cells), with op scopes when `scopes`. The outputs escape the pass; the checksum is
    /// taken and they are dropped after it ends.
    pub fn run(&self, pass: u64, key: Option<&'static str>, scopes: bool) -> u64 {
        self.run_started(pass, key, scopes, || {})
    }

    /// As [`Runner::run`], calling `started` inside the pass before its first allocation
    /// (memo-alloc has then taken the pass's slab instance).
    pub fn run_started(
        &self,
        pass: u64,
        key: Option<&'static str>,
        scopes: bool,
        started: impl FnOnce(),
    ) -> u64 {
        match self {
            Runner::Graph(r, w) => {
                let div = w.divergence(pass);
                let (out, digest) = in_pass(key, started, || r.run_digest(scopes, div));
                checksum(&out) ^ digest
            }
            #[cfg(feature = "engine")]
            Runner::Candle(e, input) => {
                let out = in_pass(key, started, || e.forward(input));
                crate::candle::digest(&out)
            }
            Runner::Trace(t) => {
                let (out, sum) = in_pass(key, started, || t.run(scopes));
                let mut c = sum;
                for b in &out {
                    c = c.wrapping_mul(31).wrapping_add(b.read());
                }
                c
            }
        }
    }
}

/// Runs `f` inside `memo_alloc::pass(key)` when `key` is given (memo cells), counted by
/// [`pass_count`] from just after the pass starts to just before it ends; in a `static`
/// cell, inside an arena pass ([`crate::arena`]). `started` runs first inside the pass.
fn in_pass<R>(key: Option<&'static str>, started: impl FnOnce(), f: impl FnOnce() -> R) -> R {
    let _arena =
        (crate::alloc::selected() == crate::alloc::Allocator::Static).then(crate::arena::pass);
    let _pass = key.map(memo_alloc::pass);
    started();
    let _mark = key.map(|_| pass_count::enter());
    f()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// Small instances of every architecture.
    fn small() -> Vec<Spec> {
        Net::ALL
            .into_iter()
            .map(|net| {
                let size = match net {
                    Net::Bert => 16,
                    Net::Gpt2 => 8,
                    _ => 32,
                };
                Spec::Net {
                    net,
                    batch: 2,
                    size,
                    variant: Variant::Scoped,
                }
            })
            .collect()
    }

    #[test]
    fn specs_round_trip() {
        for s in [
            "resnet50:b4:s128",
            "bert:b1:s64+noscope",
            "gpt2:b2:s32+divergent",
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

    #[cfg(not(feature = "engine"))]
    #[test]
    fn candle_workloads_say_they_need_the_feature() {
        let err = Spec::parse("candle:mobilenetv4").unwrap().build().err();
        assert!(err.unwrap().contains("--features engine"));
    }

    #[test]
    fn every_intermediate_tensor_is_freed_once_after_its_last_use() {
        for spec in small() {
            let Workload::Graph { graph, .. } = spec.build().unwrap() else {
                unreachable!()
            };
            let frees = graph.frees_after();
            let mut freed = vec![0; graph.shapes.len()];
            for (i, f) in frees.iter().enumerate() {
                for &t in f {
                    freed[t] += 1;
                    // No later op reads a freed tensor.
                    assert!(graph.ops[i + 1..].iter().all(|o| !o.inputs.contains(&t)));
                }
            }
            for (t, &n) in freed.iter().enumerate() {
                let kept = graph.inputs.contains(&t) || graph.outputs.contains(&t);
                assert_eq!(n, usize::from(!kept), "{}: tensor {t}", spec.name());
            }
        }
    }

    #[test]
    fn helper_threads_compute_the_same_pass_every_time() {
        let spec = Spec::parse("resnet50:b1:s32+helpers").unwrap();
        assert_eq!(spec.name(), "resnet50:b1:s32+helpers");
        let w = spec.build().unwrap();
        let Workload::Graph { graph, helpers, .. } = &w else {
            unreachable!()
        };
        assert!(*helpers);
        assert!(graph.ops.iter().any(|o| !o.temps.is_empty()));
        let r = GraphRunner::new(graph, Compute::from_scale(0.0)).with_helpers(true);
        let (a, left) = r.run_counted(true, Divergence::default());
        assert_eq!(left, 0);
        for _ in 0..3 {
            let (b, _) = r.run_counted(true, Divergence::default());
            assert_eq!(checksum(&a), checksum(&b));
        }
        // Another thread's runner, its tasks scheduled otherwise, agrees.
        let other = std::thread::scope(|s| {
            s.spawn(|| Runner::new(&w, Compute::from_scale(0.0)).run(0, None, true))
                .join()
                .unwrap()
        });
        assert_eq!(
            other,
            Runner::new(&w, Compute::from_scale(0.0)).run(0, None, true)
        );
    }

    #[test]
    fn passes_are_deterministic_and_leave_only_outputs() {
        for compute in [0.0, 1.0, 3.0] {
            for spec in small() {
                let w = spec.build().unwrap();
                let Workload::Graph { graph, .. } = &w else {
                    unreachable!()
                };
                let r = GraphRunner::new(graph, Compute::from_scale(compute));
                let (a, left_a) = r.run_counted(true, Divergence::default());
                let (b, left_b) = r.run_counted(false, Divergence::default());
                assert_eq!((left_a, left_b), (0, 0), "{}", spec.name());
                assert_eq!(a.len(), graph.outputs.len());
                // The interpreter holds no reference to the outputs any more.
                assert!(a.iter().all(|t| Rc::strong_count(t) == 1));
                assert_eq!(checksum(&a), checksum(&b), "{}", spec.name());
                // A fresh runner (another thread) computes the same.
                let r2 = Runner::new(&w, Compute::from_scale(compute));
                assert_eq!(
                    r2.run(0, None, true),
                    Runner::new(&w, Compute::from_scale(compute)).run(0, None, false)
                );
            }
        }
    }

    #[test]
    fn memo_passes_and_scopes_are_harmless_under_another_global_allocator() {
        // The unit-test binary runs on glibc (no MEMO_BENCH_ALLOCATOR): memo-alloc's pass
        // and op guards then record nothing and change nothing.
        let spec = Spec::parse("mobilenet_v2:b1:s32").unwrap();
        let w = spec.build().unwrap();
        let r = Runner::new(&w, Compute::from_scale(1.0));
        let plain = r.run(0, None, false);
        for p in 0..3 {
            assert_eq!(r.run(p, Some(spec.key()), true), plain);
        }
        let rep = memo_alloc::report(&spec.name()).expect("the key was seen");
        assert_eq!(
            rep.allocations, 0,
            "nothing is recorded through another allocator"
        );
    }

    #[test]
    fn divergent_passes_differ_and_repeat() {
        let spec = Spec::parse("resnet50:b1:s32+divergent").unwrap();
        let w = spec.build().unwrap();
        assert_eq!(w.divergence(0), Divergence::default());
        let d = w.divergence(3);
        assert!(d.skip.is_some() && d.grow.is_some());
        assert_eq!(d, w.divergence(3));
        let r = Runner::new(&w, Compute::from_scale(1.0));
        let (c0, c3) = (r.run(0, None, true), r.run(3, None, true));
        assert_ne!(c0, c3);
        assert_eq!(c3, r.run(3, None, true));
        assert_eq!(c0, r.run(4, None, true));
        if let Workload::Graph { graph, .. } = &w {
            let (_, left) = GraphRunner::new(graph, Compute::from_scale(1.0)).run_counted(true, d);
            assert_eq!(left, 0);
        }
    }

    #[test]
    fn static_serves_only_workloads_that_repeat_exactly() {
        for (w, repeats) in [
            ("resnet50:b1:s32", true),
            ("resnet50:b1:s32+noscope", true),
            ("resnet50:b1:s32+helpers", true),
            ("trace:/tmp/x.trace.json", true),
            ("resnet50:b1:s32+divergent", false),
            // The engine's first forward makes one-time allocations: static, serving the
            // i-th allocation of a later pass from the first pass's i-th slot, crashed on it.
            ("candle:mobilenetv4", false),
        ] {
            assert_eq!(Spec::parse(w).unwrap().repeats_exactly(), repeats, "{w}");
        }
    }

    #[test]
    fn allocation_profiles_span_real_networks() {
        // Table 3.1 of the thesis: hundreds to tens of thousands of allocations, MBs to
        // hundreds of MBs per pass.
        let mut counts = Vec::new();
        for s in [
            "mobilenet_v1:b1:s224",
            "inception_v3:b8:s224",
            "bert:b8:s128",
        ] {
            let (n, bytes) = Spec::parse(s)
                .unwrap()
                .build()
                .unwrap()
                .allocation_profile();
            assert!(bytes > 1 << 20, "{s}: {bytes}");
            counts.push(n);
        }
        assert!(counts.iter().any(|&n| n < 1000), "{counts:?}");
        assert!(counts.iter().any(|&n| n > 3000), "{counts:?}");
    }
}

//! The command line's contract: the values `--format` and `--allocators` take, workloads
//! refused before any cell runs, options that belong to one command only.

use clap::{CommandFactory, Parser, ValueEnum};

use super::selection::{schedule, workloads, Selection};
use super::{Args, Cmd};
use crate::alloc::Allocator;
use crate::report::Format;
use crate::workloads::candle::CandleModel;
use crate::workloads::{Net, Spec};

fn parse(args: &[&str]) -> Result<Args, String> {
    Args::try_parse_from(std::iter::once("memo-bench").chain(args.iter().copied()))
        .map_err(|e| e.to_string())
}

#[test]
fn format_takes_memos_values() {
    assert_eq!(parse(&[]).unwrap().run.format, Format::Text);
    assert_eq!(
        parse(&["--format", "json"]).unwrap().run.format,
        Format::Json
    );
    assert_eq!(
        parse(&["--format", "text"]).unwrap().run.format,
        Format::Text
    );
    let err = parse(&["--format", "table"]).unwrap_err();
    assert!(err.contains("text") && err.contains("json"), "{err}");
    let Some(Cmd::Service(s)) = parse(&["service", "--format", "json"]).unwrap().command else {
        panic!("service parses");
    };
    assert_eq!(s.format, Format::Json);
}

#[test]
fn allocators_are_named_as_in_the_report() {
    for a in Allocator::ALL {
        let value = a.to_possible_value().expect("every allocator is a value");
        assert_eq!(value.get_name(), a.name());
    }
    let args = parse(&["--allocators", "memo,jemalloc-tuned,memo-slots"]).unwrap();
    assert_eq!(
        args.run.allocators,
        [
            Allocator::Memo,
            Allocator::JemallocTuned,
            Allocator::MemoSlots
        ]
    );
}

#[test]
fn an_unknown_allocator_is_refused_with_the_valid_names() {
    let err = parse(&["--allocators", "memo,tcmalloc"]).unwrap_err();
    for name in ["tcmalloc", "glibc", "mimalloc", "memo-jemalloc", "static"] {
        assert!(err.contains(name), "{name} in {err}");
    }
    let err = parse(&["service", "--allocators", "tcmalloc"]).unwrap_err();
    assert!(err.contains("jemalloc"), "{err}");
}

#[test]
fn an_unknown_workload_is_refused_with_the_valid_names() {
    let err = parse(&["--workloads", "resnet50,vgg16"]).unwrap_err();
    for name in [
        "vgg16",
        "mobilenet_v2",
        "inception_v3",
        "trace:",
        "mobilenetv4",
    ] {
        assert!(err.contains(name), "{name} in {err}");
    }
    assert!(parse(&["list", "--workloads", "vgg16"]).is_err());
    let err = parse(&["--workloads", "trace:/nonexistent/a.trace.json"]).unwrap_err();
    assert!(err.contains("no trace file"), "{err}");
    if !cfg!(feature = "engine") {
        let err = parse(&["--workloads", "candle:resnet18"]).unwrap_err();
        assert!(err.contains("--features engine"), "{err}");
    }
}

#[test]
fn a_crossed_candle_workload_beyond_its_model_is_refused_before_any_cell() {
    // Built directly: without the engine feature the command line refuses candle first.
    let sel = Selection {
        workloads: vec![Spec::parse("candle:bert-mini").unwrap()],
        size: vec![64, 1024],
        ..Selection::default()
    };
    let err = workloads(&sel).unwrap_err();
    assert!(err.contains("512"), "{err}");
}

#[test]
fn the_benchmarks_options_are_refused_with_a_subcommand() {
    for args in [
        &["--allocators", "memo", "service"][..],
        &["--quick", "service"],
        &["--workloads", "bert", "list"],
        &["--format", "json", "service"],
    ] {
        assert!(parse(args).is_err(), "{args:?}");
    }
    for args in [
        &["service", "--workloads", "bert"][..],
        &["service", "--threads", "2"],
        &["service", "--no-traces"],
        &["list", "--allocators", "memo"],
    ] {
        let err = parse(args).unwrap_err();
        assert!(err.contains("unexpected argument"), "{args:?}: {err}");
    }
    // Each takes its own.
    assert!(parse(&["service", "--quick", "--clients", "1,4"]).is_ok());
    assert!(parse(&["list", "--quick", "--batch", "2"]).is_ok());
}

#[test]
fn the_help_names_every_workload() {
    let help = Args::command().render_long_help().to_string();
    for net in Net::ALL {
        assert!(help.contains(net.name()), "{}", net.name());
    }
    for model in CandleModel::ALL {
        assert!(help.contains(model.name()), "{}", model.name());
    }
}

#[test]
fn workloads_cross_batches_and_sizes() {
    let args = parse(&[
        "--workloads",
        "resnet50+noscope,resnet50:b1:s64+noscope",
        "--batch",
        "1,2",
        "--size",
        "64",
    ])
    .unwrap();
    assert_eq!(
        workloads(&args.run.selection).unwrap(),
        ["resnet50:b1:s64+noscope", "resnet50:b2:s64+noscope"]
    );
    let quick = schedule(&parse(&["--quick"]).unwrap().run).unwrap();
    assert_eq!(quick.groups.len(), 3 * 2);
    assert_eq!(quick.allocators, Allocator::defaults());
    // The default run: 9 workloads at 4 thread counts, and the compute sweep.
    assert_eq!(
        schedule(&parse(&[]).unwrap().run).unwrap().groups.len(),
        9 * 4 + 2
    );
    assert!(schedule(&parse(&["--threads", "0"]).unwrap().run).is_err());
}

#[test]
fn workloads_whose_passes_differ_warm_up_for_a_cycle_of_their_shapes() {
    let warmups = |args: &[&str]| -> Vec<(String, u64)> {
        let s = schedule(&parse(args).unwrap().run).unwrap();
        s.groups
            .iter()
            .map(|g| (g.workload.clone(), g.warmup))
            .collect()
    };
    let w = warmups(&[
        "--workloads",
        "resnet50,decode:step:n8,decode:request,lengths",
        "--threads",
        "1",
    ]);
    assert_eq!(
        w.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
        [3, 9, 3, 16],
        "{w:?}"
    );
    // `--warmup` wins.
    let w = warmups(&[
        "--workloads",
        "decode:step",
        "--threads",
        "1",
        "--warmup",
        "2",
    ]);
    assert_eq!(w[0].1, 2);
}

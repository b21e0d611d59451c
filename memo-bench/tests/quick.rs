//! Runs tiny cells for every allocator through the real parent/child harness (the debug
//! binary) and checks the JSON report's shape, the checksums, the heap maps and the trace
//! workload.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The default allocators: all but `memo-slots` and the `memo-<backend>` row of memo's
/// default backend (jemalloc), which is `memo` itself.
const ALLOCATORS: [&str; 8] = [
    "glibc",
    "jemalloc",
    "jemalloc-tuned",
    "mimalloc",
    "memo",
    "memo-glibc",
    "memo-mimalloc",
    "static",
];

fn bench(args: &[&str]) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memo-bench"));
    cmd.args(args)
        .args([
            "--format",
            "json",
            "--no-progress",
            "--passes",
            "3",
            "--warmup",
            "2",
            "--reps",
            "1",
        ])
        .env_remove("MEMO_BENCH_ALLOCATOR");
    serde_json::from_str(&stdout_of(&mut cmd)).expect("JSON on stdout")
}

/// Runs `cmd`, asserts it succeeded, and returns its stdout.
fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().expect("memo-bench runs");
    assert!(
        out.status.success(),
        "memo-bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn check_cells(v: &Value, workload: &str, threads: &[u64]) {
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), ALLOCATORS.len() * threads.len());
    for c in cells {
        for k in [
            "workload",
            "allocator",
            "threads",
            "p50_us",
            "p99_us",
            "passes_per_sec",
            "peak_rss_bytes",
            "slab_share_pass_thread",
            "slab_share_all_threads",
        ] {
            assert!(c.get(k).is_some(), "missing {k} in {c}");
        }
        assert_eq!(c["workload"], workload);
        let a = c["allocator"].as_str().unwrap();
        assert!(ALLOCATORS.contains(&a), "{a}");
        assert!(threads.contains(&c["threads"].as_u64().unwrap()));
        assert!(c["p50_us"].as_f64().unwrap() > 0.0);
        assert!(c["p99_us"].as_f64().unwrap() >= c["p50_us"].as_f64().unwrap());
        assert!(c["passes_per_sec"].as_f64().unwrap() > 0.0);
        let peak = c["peak_rss_bytes"].as_u64().unwrap();
        assert!(peak > 0);
        if cfg!(target_os = "linux") {
            // The measured passes' own peak, within the whole process's.
            let measured = c["measured_peak_rss_bytes"]
                .as_u64()
                .expect("Linux resets peaks");
            assert!(measured > 0 && measured <= peak, "{measured} of {peak}");
        }
        let memo_only = [
            "slab_share_pass_thread",
            "slab_share_all_threads",
            "pass_thread_allocations_per_pass",
            "helper_allocations_per_pass",
        ];
        if a.starts_with("memo") {
            for k in &memo_only[..2] {
                let share = c[k].as_f64().expect("memo cells have slab shares");
                assert!((0.0..=1.0).contains(&share), "{k} {share}");
            }
            assert!(c["pass_thread_allocations_per_pass"].as_f64().unwrap() > 0.0);
        } else {
            for k in memo_only {
                assert!(c[k].is_null(), "{a}: {k} {}", c[k]);
            }
        }
    }
    for a in ALLOCATORS {
        for &t in threads {
            assert!(cells
                .iter()
                .any(|c| c["allocator"] == a && c["threads"].as_u64() == Some(t)));
        }
    }
    assert_eq!(v["checksums_agree"], true, "{}", v["checksum_mismatches"]);
    assert_eq!(v["jemalloc_tuned_verified"], true);
    check_intervals(v);
}

/// Every cell but memo's has its ratios to memo with intervals around them and a verdict;
/// the report counts the verdicts.
fn check_intervals(v: &Value) {
    assert_eq!(v["reps"], 1);
    for c in v["cells"].as_array().unwrap() {
        assert!(c["cpu_p50_us"].as_f64().unwrap() > 0.0, "{c}");
        if c["allocator"] == "memo" {
            assert!(c["vs_memo"].is_null());
            continue;
        }
        for k in ["p50", "mean", "cpu_p50", "cpu_mean"] {
            let r = &c["vs_memo"][k];
            let (lo, ratio, hi) = (r["lo"].as_f64(), r["ratio"].as_f64(), r["hi"].as_f64());
            assert!(lo <= ratio && ratio <= hi, "{k}: {r}");
            assert!(["ahead", "level", "behind"].contains(&r["verdict"].as_str().unwrap()));
        }
    }
    let counted: u64 = v["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["statistic"] == "p50")
        .map(|c| {
            c["ahead"].as_u64().unwrap()
                + c["level"].as_u64().unwrap()
                + c["behind"].as_u64().unwrap()
        })
        .sum();
    let compared = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["allocator"] != "memo")
        .count();
    assert_eq!(counted, compared as u64);
}

#[test]
fn quick_cells_for_every_allocator() {
    let dir = tempdir("quick");
    let report = dir.to_str().unwrap();
    let w = "resnet50:b1:s32";
    let v = bench(&["--workloads", w, "--threads", "1,2", "--report-dir", report]);
    check_cells(&v, w, &[1, 2]);
    // memomalloc served nearly everything from slabs; the model's allocation count is
    // what memo-alloc profiled.
    let memo = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["allocator"] == "memo")
        .unwrap();
    assert!(
        memo["slab_share_pass_thread"].as_f64().unwrap() > 0.9,
        "{memo}"
    );
    assert_eq!(memo["profiled_allocations"], memo["allocations_per_pass"]);
    // The interpreter runs on the pass's thread alone: memo-bench's own count of the
    // allocations made during passes is the model's, nothing happens on other threads,
    // and both slab shares agree.
    assert_eq!(
        memo["pass_thread_allocations_per_pass"].as_f64(),
        memo["allocations_per_pass"].as_f64(),
        "{memo}"
    );
    assert_eq!(memo["helper_allocations_per_pass"].as_f64(), Some(0.0));
    assert_eq!(
        memo["slab_share_all_threads"], memo["slab_share_pass_thread"],
        "{memo}"
    );

    // Report directory: JSON, table, ratio plot, heap map, the trace.
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(saved["cells"], v["cells"]);
    assert!(dir.join("table.txt").exists());
    let svg = std::fs::read_to_string(dir.join("ratio-resnet50_b1_s32.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
    let heapmap = std::fs::read_to_string(dir.join("heapmap-resnet50_b1_s32.svg")).unwrap();
    assert!(heapmap.contains("<svg"));
    let trace = dir.join("traces").join("resnet50_b1_s32.1.trace.json");
    assert!(trace.exists());

    // The recorded trace as a workload, every allocator.
    let tw = format!("trace:{}", trace.display());
    let dir2 = tempdir("trace");
    let v = bench(&[
        "--workloads",
        &tw,
        "--threads",
        "1",
        "--report-dir",
        dir2.to_str().unwrap(),
    ]);
    check_cells(&v, &tw, &[1]);
}

#[test]
fn divergent_unscoped_and_decoding_workloads_agree_across_allocators() {
    for w in [
        "mobilenet_v2:b1:s32+divergent",
        "bert:b1:s8+noscope",
        "decode:step:b1:s4:n2",
        "decode:request:b1:s4:n2",
    ] {
        let v = bench(&["--workloads", w, "--threads", "1", "--no-report"]);
        check_cells(&v, w, &[1]);
    }
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("memo-bench-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The real engine (feature `engine`): small inputs, three allocators, 1 and 2 threads.
#[cfg(feature = "engine")]
#[test]
fn candle_models_agree_across_allocators_and_show_their_helper_threads() {
    let workloads = ["candle:resnet18:b1:s32", "candle:bert-mini:b1:s16"];
    let v = bench(&[
        "--workloads",
        &workloads.join(","),
        "--threads",
        "1,2",
        "--allocators",
        "glibc,jemalloc,memo",
        "--no-report",
    ]);
    assert_eq!(v["checksums_agree"], true, "{}", v["checksum_mismatches"]);
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), workloads.len() * 2 * 3);
    for c in cells.iter().filter(|c| c["allocator"] == "memo") {
        for k in ["slab_share_pass_thread", "slab_share_all_threads"] {
            let share = c[k].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&share), "{k}: {c}");
        }
        assert!(c["pass_thread_allocations_per_pass"].as_f64().unwrap() > 100.0);
        assert!(c["profiled_allocations"].as_u64().unwrap() > 100);
        // candle runs every convolution on rayon's pool: those allocations are made on
        // other threads than the pass's, and memo-bench counts them.
        if c["workload"] == workloads[0] {
            assert!(
                c["helper_allocations_per_pass"].as_f64().unwrap() > 0.0,
                "{c}"
            );
        }
    }
}

/// Runs one cell in a child process, as the parent does, and returns its JSON report.
fn child(allocator: &str, spec: &str) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memo-bench"));
    cmd.args(["child", spec])
        .env("MEMO_BENCH_ALLOCATOR", allocator)
        .env_remove("MEMO_TRACE_DIR");
    let stdout = stdout_of(&mut cmd);
    let line = stdout.lines().last().expect("a JSON line");
    serde_json::from_str(line).expect("JSON cell result")
}

#[test]
fn measured_passes_start_with_a_warm_instance_per_thread() {
    // The settling passes of all threads hold their instances at once, so the measured
    // passes (concurrent) start with one warm instance per thread. Were one settling pass
    // to end before the other began, both would warm the same instance and the first
    // concurrent measured pass would fault a new one in. Eight runs, as the two threads'
    // timing varies from run to run.
    for _ in 0..8 {
        let v = child(
            "memo",
            r#"{"workload":"mobilenet_v1:b1:s16","allocator":"memo","threads":2,"warmup":2,"passes":2,"compute":0.0}"#,
        );
        let instances = v["memo"]["instances_at_start"]
            .as_u64()
            .expect("memo counters");
        assert!(instances >= 2, "{instances} instances for 2 threads: {v}");
    }
}

#[test]
fn an_unknown_allocator_or_workload_is_refused_before_any_cell_runs() {
    for (args, names) in [
        (
            &["--allocators", "memo,tcmalloc"][..],
            &["tcmalloc", "glibc", "memo-slots"][..],
        ),
        (
            &["--workloads", "resnet50:b1:s32,vgg16"],
            &["vgg16", "mobilenet_v1", "trace:<file>"],
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_memo-bench"))
            .args(args)
            .args(["--no-progress", "--no-report"])
            .output()
            .expect("memo-bench runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "no cell ran: {args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        for name in names {
            assert!(err.contains(name), "{name} in {err}");
        }
    }
}

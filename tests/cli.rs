//! The `memo` command line on good and bad inputs.

use std::path::PathBuf;
use std::process::{Command, Output};

fn memo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memo"))
        .args(args)
        .output()
        .expect("run memo")
}

fn tmp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memo-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const EXAMPLE: &str = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n";

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "memo failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn plan_json_has_the_contract_fields() {
    let f = tmp("ex.csv", EXAMPLE);
    let v: serde_json::Value = serde_json::from_str(&stdout(&memo(&[
        "plan",
        f.to_str().unwrap(),
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(v["strategy"], "best");
    assert_eq!(v["family"], "offsets");
    assert_eq!(v["total"], 12);
    assert_eq!(v["lower_bound"], 12);
    assert_eq!(v["offsets"].as_array().unwrap().len(), 5);
    let s: serde_json::Value = serde_json::from_str(&stdout(&memo(&[
        "plan",
        f.to_str().unwrap(),
        "--shared",
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(s["family"], "shared_objects");
    assert_eq!(s["objects"].as_array().unwrap().len(), 5);
    assert_eq!(s["total"], 12);
}

#[test]
fn plan_csv_round_trips_through_the_reader() {
    let f = tmp("ex2.csv", EXAMPLE);
    let out = stdout(&memo(&[
        "plan",
        f.to_str().unwrap(),
        "--strategy",
        "greedy-by-size",
        "--format",
        "csv",
    ]));
    assert!(out.starts_with("id,lower,upper,size,offset\n"), "{out}");
    let (problem, plan) = memo_planner::format::parse_problem_csv(&out, "out.csv").unwrap();
    let plan = plan.expect("offset column");
    assert_eq!(memo_planner::validate_offsets(&problem, &plan), Ok(12));
}

#[test]
fn plan_text_is_a_table_and_output_file_works() {
    let f = tmp("ex3.csv", EXAMPLE);
    let out = f.with_extension("txt");
    stdout(&memo(&[
        "plan",
        f.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("lower bound  12 B (0.00 MiB)   ratio 1.0000"),
        "{text}"
    );
    assert!(text.contains("id  lower  upper  size  offset"), "{text}");
}

#[test]
fn compare_json_lists_every_strategy() {
    let f = tmp("ex4.csv", EXAMPLE);
    let v: serde_json::Value = serde_json::from_str(&stdout(&memo(&[
        "compare",
        f.to_str().unwrap(),
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(v["buffers"], 5);
    assert_eq!(v["naive"], 20);
    assert_eq!(v["lower_bound"]["offsets"], 12);
    for s in memo_planner::OffsetStrategy::ALL {
        assert!(
            v["offsets"][s.name()]["total"].as_u64().unwrap() >= 12,
            "{s}"
        );
        assert!(v["offsets"][s.name()]["millis"].is_number());
    }
    for s in memo_planner::SharedObjectStrategy::ALL {
        assert!(
            v["shared_objects"][s.name()]["total"].as_u64().unwrap() >= 12,
            "{s}"
        );
    }
}

#[test]
fn compare_text_on_resnet50() {
    let f = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/memo-planner/data/idealloc/somas_tensors/resnet50.csv"
    );
    let out = stdout(&memo(&["compare", f]));
    assert!(out.contains("1,042 buffers"), "{out}");
    assert!(
        out.contains("offsets 1,515,472,556 B (1,445.27 MiB)"),
        "{out}"
    );
    assert!(out.contains("min-cost-flow"), "{out}");
}

#[test]
fn heapmap_writes_an_svg() {
    let f = tmp("ex5.csv", EXAMPLE);
    let svg = f.with_extension("svg");
    stdout(&memo(&[
        "heapmap",
        f.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<svg") || text.starts_with("<?xml"),
        "{}",
        &text[..80.min(text.len())]
    );
    assert!(text.matches("<rect").count() >= 5);
}

#[test]
fn bad_inputs_fail_with_file_line_and_field() {
    let cases = [
        (
            "missing.csv",
            "id,lower,size\na,0,4\n",
            "missing.csv:1: field \"upper\"",
        ),
        (
            "nan.csv",
            "id,lower,upper,size\na,0,3,4x\n",
            "nan.csv:2: field \"size\"",
        ),
        (
            "empty-life.csv",
            "id,lower,upper,size\na,3,3,4\n",
            "empty-life.csv:2: field \"upper\"",
        ),
        (
            "zero.csv",
            "id,lower,upper,size\na,0,3,0\n",
            "zero.csv:2: field \"size\"",
        ),
        (
            "neg.csv",
            "id,lower,upper,size\na,0,3,-4\n",
            "neg.csv:2: field \"size\"",
        ),
        (
            "dup.csv",
            "id,lower,upper,size\na,0,3,4\na,1,3,4\n",
            "dup.csv:3: field \"id\"",
        ),
        (
            "align.csv",
            "id,lower,upper,size,alignment\na,0,3,4,3\n",
            "align.csv:2: field \"alignment\"",
        ),
        ("empty.csv", "", "empty.csv:1: empty file"),
    ];
    for (name, text, want) in cases {
        let f = tmp(name, text);
        let o = memo(&["plan", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(o.stdout.is_empty(), "{name}: no plan on bad input");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{name}: {err}");
    }
    let o = memo(&["plan", "/nonexistent/x.csv"]);
    assert_eq!(o.status.code(), Some(2));
    let f = tmp("ok.csv", EXAMPLE);
    let o = memo(&["plan", f.to_str().unwrap(), "--strategy", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("invalid value 'nope' for '--strategy <NAME>'"),
        "{err}"
    );
    assert!(err.contains("min-cost-flow"), "the names are listed: {err}");
    let o = memo(&[
        "plan",
        f.to_str().unwrap(),
        "--shared",
        "--strategy",
        "strip-packing",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "strip-packing is not a shared-objects strategy"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("\"strip-packing\" is not a shared-objects (--shared) strategy"),
        "{err}"
    );
    assert!(err.contains("greedy-by-size-improved"), "{err}");
}

/// A small valid trace: op `a` makes two buffers, op `b` one that is realloc'd, the pass
/// one that escapes.
const TRACE: &str = r#"{"format":"memomalloc-trace","version":1,"key":"k","events":12,
"scopes":[{"id":0,"parent":null,"name":"k","occurrence":0,"enter":0,"exit":12},
 {"id":1,"parent":0,"name":"a","occurrence":0,"enter":0,"exit":4},
 {"id":2,"parent":0,"name":"b","occurrence":0,"enter":5,"exit":10}],
"allocations":[
 {"id":0,"tag":0,"ptr":4096,"size":64,"align":8,"kind":"alloc","alloc":1,"free":3,"scope":1,"ordinal":0,"realloc_parent":null,"escaping":false},
 {"id":1,"tag":1,"ptr":8192,"size":100,"align":8,"kind":"alloc_zeroed","alloc":2,"free":9,"scope":1,"ordinal":1,"realloc_parent":null,"escaping":false},
 {"id":2,"tag":2,"ptr":12288,"size":1000,"align":8,"kind":"alloc","alloc":6,"free":7,"scope":2,"ordinal":0,"realloc_parent":null,"escaping":false},
 {"id":3,"tag":3,"ptr":16384,"size":2000,"align":8,"kind":"realloc","alloc":7,"free":8,"scope":2,"ordinal":null,"realloc_parent":2,"escaping":false},
 {"id":4,"tag":4,"ptr":20480,"size":10,"align":8,"kind":"alloc","alloc":11,"free":null,"scope":0,"ordinal":1,"realloc_parent":null,"escaping":true}]}"#;

#[test]
fn stats_reports_a_trace_in_text_and_json() {
    let f = tmp("k.trace.json", TRACE);
    let text = stdout(&memo(&["stats", f.to_str().unwrap()]));
    for needle in [
        "pass          k: 12 events, 2 op instances (scope times recorded)",
        "allocations   4 buffers, 2,174 B",
        "peak live (all allocations)  2,100  at event 7",
        "short-lived (freed in their op)",
        "  b  ",
        "call sites    not captured",
    ] {
        assert!(text.contains(needle), "{needle:?} not in\n{text}");
    }
    let v: serde_json::Value = serde_json::from_str(&stdout(&memo(&[
        "stats",
        f.to_str().unwrap(),
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(v["allocations"], 4);
    assert_eq!(v["memory"]["peak_live"], 2100);
    assert_eq!(v["shares"]["escaping"]["count"], 1);
    assert_eq!(v["shares"]["reallocated"]["bytes"], 2000);
    assert_eq!(v["ops"][0]["op"], "b");
    assert_eq!(v["lifetime_ops"][1]["count"], 1);
}

#[test]
fn export_writes_dhat_perfetto_and_csv() {
    let f = tmp("k2.trace.json", TRACE);
    let dir = f.parent().unwrap();
    let (d, p, c) = (
        dir.join("k.dhat.json"),
        dir.join("k.perfetto.json"),
        dir.join("k.csv"),
    );
    let said = stdout(&memo(&[
        "export",
        f.to_str().unwrap(),
        "--dhat",
        d.to_str().unwrap(),
        "--perfetto",
        p.to_str().unwrap(),
        "--csv",
        c.to_str().unwrap(),
    ]));
    assert!(said.contains("3 program points"), "{said}");
    let dhat: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&d).unwrap()).unwrap();
    assert_eq!(dhat["ftbl"][0], "[root]");
    assert_eq!(dhat["tg"], 7);
    let perfetto: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(
        memomalloc::study::perfetto::check_balanced(&perfetto),
        Ok(2)
    );
    let csv = std::fs::read_to_string(&c).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3, "{csv}");
    // The exported problem plans like the trace itself.
    let a = stdout(&memo(&["plan", c.to_str().unwrap(), "--format", "json"]));
    let b = stdout(&memo(&["plan", f.to_str().unwrap(), "--format", "json"]));
    let total = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap()["total"].clone();
    assert_eq!(total(&a), total(&b));
}

#[test]
fn export_writes_folded_stacks_that_sum_to_the_allocated_bytes_and_a_flame_graph() {
    let f = tmp("k5.trace.json", TRACE);
    let out = f.parent().unwrap().join("k5.folded");
    let svg = f.parent().unwrap().join("k5.svg");
    let said = stdout(&memo(&[
        "export",
        f.to_str().unwrap(),
        "--folded",
        out.to_str().unwrap(),
        "--flamegraph",
        svg.to_str().unwrap(),
    ]));
    assert!(said.contains("stacks"), "{said}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let text = std::fs::read_to_string(&out).unwrap();
    let trace: serde_json::Value = serde_json::from_str(TRACE).unwrap();
    let allocated: u64 = trace["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["size"].as_u64().unwrap())
        .sum();
    let folded: u64 = text
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(folded, allocated, "{text}");
    assert!(text.lines().all(|l| l.starts_with("[pass] ")), "{text}");
}

#[test]
fn export_writes_a_pprof_profile_of_the_allocated_totals_and_the_peak() {
    let f = tmp("k6.trace.json", TRACE);
    let out = f.parent().unwrap().join("k6.pb.gz");
    let said = stdout(&memo(&[
        "export",
        f.to_str().unwrap(),
        "--pprof",
        out.to_str().unwrap(),
    ]));
    assert!(
        said.contains("pprof ") && said.contains("3 stacks"),
        "{said}"
    );
    let p = memomalloc::study::pprof::decode(&std::fs::read(&out).unwrap()).unwrap();
    let sum = |v: usize| p.sample.iter().map(|s| s.value[v]).sum::<i64>();
    let trace: serde_json::Value = serde_json::from_str(TRACE).unwrap();
    let records = trace["allocations"].as_array().unwrap();
    let allocated: i64 = records.iter().map(|a| a["size"].as_i64().unwrap()).sum();
    assert_eq!(sum(0), records.len() as i64);
    assert_eq!(sum(1), allocated);
    let stats = json(&["stats", f.to_str().unwrap(), "--format", "json"]);
    assert_eq!(sum(3), stats["memory"]["peak_live"].as_i64().unwrap());
    let at_peak = stats["peak_live_set"].as_array().unwrap();
    let blocks: i64 = at_peak
        .iter()
        .map(|g| g["allocations"].as_i64().unwrap())
        .sum();
    assert_eq!(sum(2), blocks);
}

#[test]
fn export_writes_any_subset_of_its_files_in_one_command() {
    let f = tmp("k7.trace.json", TRACE);
    let dir = f.parent().unwrap().join("k7");
    std::fs::create_dir_all(&dir).unwrap();
    let flags = [
        ("--pprof", "k.pb.gz"),
        ("--folded", "k.folded"),
        ("--flamegraph", "k.svg"),
        ("--dhat", "k.dhat.json"),
        ("--perfetto", "k.perfetto.json"),
        ("--csv", "k.csv"),
    ];
    let subsets: [&[usize]; 4] = [&[0, 1, 2, 3, 4, 5], &[0], &[0, 1, 2], &[5, 3, 0]];
    for subset in subsets {
        for (_, name) in flags {
            let _ = std::fs::remove_file(dir.join(name));
        }
        let mut args = vec!["export".to_string(), f.to_str().unwrap().to_string()];
        for &i in subset {
            args.push(flags[i].0.to_string());
            args.push(dir.join(flags[i].1).to_str().unwrap().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let said = stdout(&memo(&args));
        assert_eq!(said.lines().count(), subset.len(), "{said}");
        for (i, (flag, name)) in flags.iter().enumerate() {
            let written = dir.join(name).exists();
            assert_eq!(written, subset.contains(&i), "{flag} in {subset:?}");
        }
    }
}

#[test]
fn diff_compares_two_traces_by_op_largest_change_first() {
    // B: op a's first buffer grows from 64 to 512 B; the pass's own buffer is gone and op
    // c (new) makes 50 B.
    let b_trace = TRACE
        .replace(r#""size":64,"#, r#""size":512,"#)
        .replace(
            r#"{"id":2,"parent":0,"name":"b","occurrence":0,"enter":5,"exit":10}],"#,
            r#"{"id":2,"parent":0,"name":"b","occurrence":0,"enter":5,"exit":10},
 {"id":3,"parent":0,"name":"c","occurrence":0,"enter":10,"exit":12}],"#,
        )
        .replace(
            r#""size":10,"align":8,"kind":"alloc","alloc":11,"free":null,"scope":0"#,
            r#""size":50,"align":8,"kind":"alloc","alloc":11,"free":null,"scope":3"#,
        );
    let a = tmp("diff-a.trace.json", TRACE);
    let b = tmp("diff-b.trace.json", &b_trace);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let v = json(&["diff", a, b, "--format", "json"]);
    assert_eq!(v["input_a"], a);
    assert_eq!(v["a"]["totals"]["bytes"], 3174);
    assert_eq!(v["b"]["totals"]["bytes"], 3662);
    assert_eq!(v["delta"]["bytes"], 488);
    let rows: Vec<(String, String, i64)> = v["by_op"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["group"].as_str().unwrap().to_string(),
                r["present"].as_str().unwrap().to_string(),
                r["delta"]["bytes"].as_i64().unwrap(),
            )
        })
        .collect();
    let rows: Vec<(&str, &str, i64)> = rows
        .iter()
        .map(|(g, p, d)| (g.as_str(), p.as_str(), *d))
        .collect();
    assert_eq!(
        rows,
        [
            ("a", "both", 448),
            ("c", "b_only", 50),
            ("(k)", "a_only", -10),
            ("b", "both", 0)
        ]
    );
    assert_eq!(v["by_op"][0]["a"]["peak_live_bytes"], 100);
    assert_eq!(v["by_call_site"][0]["group"], "?");
    let text = stdout(&memo(&["diff", a, b]));
    for needle in [
        "A  ",
        "B - A  0 allocations, +488 bytes, 0 bytes live at the peak",
        "by op, the largest change first",
        "by call site: not captured in either trace",
    ] {
        assert!(text.contains(needle), "{needle:?} not in\n{text}");
    }
    let first_row = text.lines().find(|l| l.starts_with("  a ")).unwrap();
    assert!(first_row.contains("+448"), "{text}");
    // A malformed trace names the file and what is wrong.
    let bad = tmp("diff-bad.trace.json", &TRACE[..TRACE.len() / 2]);
    for format in ["text", "json"] {
        let o = memo(&["diff", a, bad.to_str().unwrap(), "--format", format]);
        assert_eq!(o.status.code(), Some(2));
        assert!(o.stdout.is_empty());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("diff-bad.trace.json: not a valid memomalloc trace: EOF"),
            "{err}"
        );
    }
}

#[test]
fn bad_traces_fail_with_the_file_and_what_is_wrong() {
    let truncated = &TRACE[..TRACE.len() / 2];
    let cases = [
        (
            "truncated.trace.json",
            truncated.to_string(),
            "truncated.trace.json: not a valid memomalloc trace: EOF",
        ),
        (
            "scope.trace.json",
            TRACE.replace(r#""scope":2,"ordinal":0"#, r#""scope":9,"ordinal":0"#),
            "scope.trace.json: not a valid memomalloc trace: allocation #2 refers to unknown scope 9",
        ),
        (
            "time.trace.json",
            TRACE.replace(r#""alloc":6,"free":7"#, r#""alloc":6,"free":5"#),
            "allocation #2 is made at 6 and freed at 5",
        ),
        (
            "parent.trace.json",
            TRACE.replace(r#""realloc_parent":2"#, r#""realloc_parent":3"#),
            "allocation #3 continues allocation 3, which is not an earlier one",
        ),
        (
            "version.trace.json",
            TRACE.replace(r#""version":1"#, r#""version":7"#),
            "version 7 is not supported",
        ),
        (
            "problem.csv",
            EXAMPLE.to_string(),
            "problem.csv: not a valid memomalloc trace",
        ),
    ];
    for (name, text, want) in &cases {
        let f = tmp(name, text);
        for args in [
            vec!["stats", f.to_str().unwrap()],
            vec!["export", f.to_str().unwrap(), "--csv", "/dev/null"],
        ] {
            let o = memo(&args);
            assert_eq!(o.status.code(), Some(2), "{name} {args:?}");
            assert!(o.stdout.is_empty(), "{name}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains(want), "{name}: {err}");
        }
    }
    // The planner commands check traces too.
    let f = tmp("scope2.trace.json", &cases[1].1);
    for cmd in ["plan", "compare"] {
        let o = memo(&[cmd, f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("unknown scope 9"));
    }
    let o = memo(&["stats", "/nonexistent/x.trace.json"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read the file"));
    let ok = tmp("k3.trace.json", TRACE);
    let o = memo(&["export", ok.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "export needs an output");
    let o = memo(&[
        "export",
        ok.to_str().unwrap(),
        "--dhat",
        "/nonexistent/d.json",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/d.json: cannot write"));
}

/// minimalloc's `InfeasibleTricky`: max load 4, optimum 5.
const TRICKY: &str =
    "id,lower,upper,size\n0,0,1,3\n1,0,3,1\n2,4,5,3\n3,2,5,1\n4,1,2,2\n5,3,4,2\n6,1,4,1\n";

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout(&memo(args))).unwrap()
}

/// The exit status and the JSON document printed, whatever the status.
fn status_and_json(args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let o = memo(args);
    let doc = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: {e}; stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), doc)
}

#[test]
fn exact_says_whether_its_plan_is_proven_optimal() {
    let f = tmp("tricky.csv", TRICKY);
    let f = f.to_str().unwrap();
    let v = json(&["plan", f, "--strategy", "exact", "--format", "json"]);
    assert_eq!(v["strategy"], "exact");
    assert_eq!(v["total"], 5);
    assert_eq!(v["lower_bound"], 4);
    // The search proved 4 infeasible, so 5 is optimal.
    assert_eq!(v["proven_lower_bound"], 5);
    assert_eq!(v["optimal"], true);
    assert!(v["nodes"].as_u64().is_some());
    // Other strategies say so too, from the lower bound alone.
    let v = json(&["plan", f, "--strategy", "naive", "--format", "json"]);
    assert_eq!(v["optimal"], false);
    let text = stdout(&memo(&[
        "plan",
        f,
        "--strategy",
        "exact",
        "--time-limit",
        "5",
    ]));
    assert!(text.contains("optimal      yes (proven)"), "{text}");
}

#[test]
fn exact_decides_a_capacity() {
    let f = tmp("tricky2.csv", TRICKY);
    let f = f.to_str().unwrap();
    let at = |cap: &str| {
        status_and_json(&[
            "plan",
            f,
            "--strategy",
            "exact",
            "--capacity",
            cap,
            "--format",
            "json",
        ])
    };
    let (code, v) = at("5");
    assert_eq!(code, Some(0));
    assert_eq!(v["status"], "feasible");
    assert_eq!(v["total"], 5);
    assert_eq!(v["offsets"].as_array().unwrap().len(), 7);
    // No plan at 4 or 3: the result failed (exit 1), and the document says why.
    for cap in ["4", "3"] {
        let (code, v) = at(cap);
        assert_eq!(code, Some(1), "{cap}");
        assert_eq!(v["status"], "infeasible", "{cap}");
        assert!(v.get("offsets").is_none(), "{cap}");
    }
    // No plan to print as CSV: the same exit status, nothing on standard output.
    let o = memo(&[
        "plan",
        f,
        "--strategy",
        "exact",
        "--capacity",
        "4",
        "--format",
        "csv",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no plan at capacity 4: infeasible"));
    let o = memo(&["plan", f, "--strategy", "exact", "--capacity", "4"]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("status       infeasible"), "{text}");
    // The flags belong to exact.
    for args in [
        &["plan", f, "--capacity", "5"][..],
        &["plan", f, "--strategy", "best", "--time-limit", "1"][..],
        &["plan", f, "--strategy", "exact", "--time-limit=-1"][..],
        &["plan", f, "--strategy", "exact", "--time-limit", "nan"][..],
        &[
            "plan",
            f,
            "--shared",
            "--strategy",
            "exact",
            "--capacity",
            "5",
        ][..],
    ] {
        let o = memo(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

const SUBCOMMANDS: [&str; 6] = ["plan", "compare", "heapmap", "stats", "export", "diff"];

#[test]
fn help_names_every_subcommand_strategy_and_exit_status() {
    let help = stdout(&memo(&["--help"]));
    let about = help.lines().next().unwrap();
    for cmd in SUBCOMMANDS {
        assert!(about.contains(cmd), "{cmd} not in the about text: {about}");
    }
    for cmd in ["plan", "heapmap"] {
        let help = stdout(&memo(&[cmd, "--help"]));
        for name in memo_planner::OffsetStrategy::ALL.map(|s| s.name()) {
            assert!(
                help.contains(&format!("- {name}:")),
                "{cmd}: {name}\n{help}"
            );
        }
        for name in memo_planner::SharedObjectStrategy::ALL.map(|s| s.name()) {
            assert!(
                help.contains(&format!("- {name}:")),
                "{cmd}: {name}\n{help}"
            );
        }
        assert!(
            help.contains("- strip-packing:           offsets only"),
            "{help}"
        );
        assert!(
            help.contains("- min-cost-flow:           shared objects only (with --shared)"),
            "{help}"
        );
    }
    for cmd in std::iter::once(None).chain(SUBCOMMANDS.map(Some)) {
        let args: Vec<&str> = cmd.into_iter().chain(["--help"]).collect();
        let help = stdout(&memo(&args));
        for code in [
            "  0  success",
            "  1  the command ran",
            "  2  usage error or bad file",
        ] {
            assert!(help.contains(code), "{args:?}: {code:?} not in\n{help}");
        }
    }
}

#[test]
fn a_format_a_subcommand_cannot_write_is_refused_before_any_work() {
    // The input does not exist: refused for its format, the file was never opened.
    for cmd in ["compare", "stats"] {
        let o = memo(&[cmd, "/nonexistent/input", "--format", "csv"]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        assert!(o.stdout.is_empty(), "{cmd}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("invalid value 'csv' for '--format <FORMAT>'"),
            "{cmd}: {err}"
        );
        assert!(
            err.contains("[possible values: text, json]"),
            "{cmd}: {err}"
        );
        assert!(!err.contains("cannot read"), "{cmd}: {err}");
    }
    // So are flags that do not go together, and a strategy of the other family.
    let f = tmp("before-work.csv", EXAMPLE);
    let f = f.to_str().unwrap();
    for args in [
        &["plan", "/nonexistent/input", "--capacity", "5"][..],
        &[
            "plan",
            "/nonexistent/input",
            "--shared",
            "--strategy",
            "best",
        ][..],
        &[
            "heapmap",
            "/nonexistent/input",
            "--strategy",
            "min-cost-flow",
            "-o",
            "/dev/null",
        ][..],
    ] {
        let o = memo(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("cannot read"), "{args:?}: {err}");
        assert!(err.contains("Usage: memo "), "{args:?}: {err}");
    }
    let o = memo(&["plan", f, "--format", "csv"]);
    assert_eq!(o.status.code(), Some(0), "plan writes csv");
}

#[test]
fn exit_status_is_0_2_or_1_in_every_format() {
    let ok = tmp("status-ok.csv", EXAMPLE);
    let tricky = tmp("status-tricky.csv", TRICKY);
    let bad = tmp("status-bad.csv", "id,lower,upper,size\na,0,3,4x\n");
    let bad_trace = tmp("status-bad.trace.json", &TRACE[..TRACE.len() / 2]);
    let (ok, tricky, bad, bad_trace) = (
        ok.to_str().unwrap(),
        tricky.to_str().unwrap(),
        bad.to_str().unwrap(),
        bad_trace.to_str().unwrap(),
    );
    let exact = ["--strategy", "exact", "--capacity"];
    for format in ["text", "json", "csv"] {
        let plan = |input: &str, more: &[&str]| {
            let mut args = vec!["plan", input, "--format", format];
            args.extend_from_slice(more);
            memo(&args)
        };
        let cases = [
            ("a plan", plan(ok, &[]), 0),
            (
                "a plan at its capacity",
                plan(tricky, &[&exact[..], &["5"]].concat()),
                0,
            ),
            (
                "no plan at a capacity",
                plan(tricky, &[&exact[..], &["4"]].concat()),
                1,
            ),
            ("a malformed CSV", plan(bad, &[]), 2),
            ("a malformed trace", plan(bad_trace, &[]), 2),
            ("a missing file", plan("/nonexistent/x.csv", &[]), 2),
            ("an unknown flag", plan(ok, &["--nope"]), 2),
            (
                "an unwritable output",
                plan(ok, &["-o", "/nonexistent/out"]),
                2,
            ),
        ];
        for (what, o, code) in cases {
            assert_eq!(
                o.status.code(),
                Some(code),
                "{format}, {what}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            if code == 2 {
                assert!(o.stdout.is_empty(), "{format}, {what}");
            }
        }
    }
    for format in ["text", "json"] {
        for cmd in ["compare", "stats"] {
            let input = if cmd == "stats" { bad_trace } else { bad };
            let o = memo(&[cmd, input, "--format", format]);
            assert_eq!(o.status.code(), Some(2), "{cmd} {format}");
            assert!(o.stdout.is_empty(), "{cmd} {format}");
        }
    }
}

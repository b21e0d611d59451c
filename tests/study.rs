//! Studies of a REAL recorded trace: this test binary runs under memo-alloc, records a
//! small multi-op pass with call sites, and checks what `memo stats` and `memo export`
//! make of it: the DHAT file against every field the viewer requires (and, when node and
//! valgrind are installed, against valgrind's own `dh_view.js` parser), the Perfetto file
//! for balanced slices, the CSV against the planner's reader, the pprof profile against
//! the trace's totals and peak.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use memo_alloc::trace::Trace;
use memo_alloc::{configure, op, pass, Config, Mode};
use memomalloc::study::{dhat, perfetto, pprof, Study};
use serde_json::Value;

#[global_allocator]
static ALLOC: memo_alloc::MemoAlloc = memo_alloc::MemoAlloc::system();

fn work_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("memo-study-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[inline(never)]
fn scale(x: &[f32], k: f32) -> Vec<f32> {
    x.iter().map(|v| v * k).collect()
}

#[inline(never)]
fn relu(x: &[f32]) -> Vec<f32> {
    x.iter().map(|v| v.max(0.0)).collect()
}

/// One pass: ops `prep` (a growing vector), then 3 × `block` { `scale`, `relu`, scratch
/// buffers }, then `head`, whose output escapes.
fn program(input: &[f32]) -> Vec<f32> {
    let _pass = pass("study-test");
    let mut x = {
        let _op = op("prep");
        let mut v = Vec::new();
        for &a in input {
            v.push(a - 0.5);
        }
        v
    };
    for i in 0..3 {
        let _op = op("block");
        let y = {
            let _op = op("scale");
            let tmp = vec![0u8; 4096 + 1024 * i];
            let y = scale(&x, 1.5);
            drop(tmp);
            y
        };
        x = {
            let _op = op("relu");
            relu(&y)
        };
    }
    let _op = op("head");
    x.iter().rev().copied().collect()
}

/// Records the trace once per process (configure must precede the first pass).
fn recorded() -> &'static PathBuf {
    static TRACE: OnceLock<PathBuf> = OnceLock::new();
    TRACE.get_or_init(|| {
        let dir = work_dir().join("traces");
        let ok = configure(
            Config::default()
                .with_mode(Mode::Profile)
                .with_trace_dir(dir.clone())
                .with_backtrace(true),
        );
        assert!(ok, "memo-alloc was configured before the test");
        let input: Vec<f32> = (0..1000).map(|i| (i % 7) as f32 / 7.0).collect();
        let out = program(&input);
        assert_eq!(out.len(), 1000);
        // The trace is written by memo-alloc's planner thread.
        assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(
            60
        )));
        let path = dir.join("study-test.1.trace.json");
        assert!(path.exists(), "no trace at {}", path.display());
        path
    })
}

fn trace() -> Trace {
    memo_alloc::files::read_trace(recorded()).unwrap()
}

fn memo(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memo"))
        .args(args)
        .output()
        .expect("run memo")
}

#[test]
fn the_recorded_trace_has_scope_times_and_call_sites() {
    let t = trace();
    t.check().unwrap();
    // pass, prep, 3 × (block, scale, relu), head.
    assert_eq!(t.scopes.len(), 1 + 1 + 9 + 1);
    for s in &t.scopes {
        let (enter, exit) = (s.enter.unwrap(), s.exit.unwrap());
        assert!(enter < exit || s.parent.is_none(), "{s:?}");
        if let Some(p) = s.parent {
            let ps = &t.scopes[p as usize];
            assert!(
                ps.enter.unwrap() <= enter && exit <= ps.exit.unwrap(),
                "{s:?}"
            );
        }
    }
    // Every allocation happens inside its scope's span.
    for a in &t.allocations {
        let s = &t.scopes[a.scope as usize];
        assert!(s.enter.unwrap() <= a.alloc && a.alloc <= s.exit.unwrap());
    }
    assert!(t.allocations.iter().any(|a| a.realloc_parent.is_some()));
    assert!(t.allocations.iter().any(|a| a.escaping));
    assert!(t.allocations.iter().all(|a| a.call_site.is_some()));
    let s = Study::of(&t);
    assert_eq!(s.op_instances, 11);
    assert!(s.shares.short_lived.count >= 3, "{:?}", s.shares);
    assert_eq!(s.shares.escaping.count, 1);
    assert_eq!(s.shares.reallocated.count, 1);
    assert!(s.memory.lower_bound <= s.memory.height);
    assert!(s.memory.peak_live_planned <= s.memory.lower_bound);
    assert!(s.call_sites_captured && !s.call_sites.is_empty());
    let ops: HashSet<&str> = s.ops.iter().map(|r| r.op.as_str()).collect();
    for o in ["prep", "block/scale", "block/relu", "head"] {
        assert!(ops.contains(o), "{o} missing from {ops:?}");
    }
}

/// Every field `buildTree()`/`checkPP()` of dh_view.js requires, plus the uniqueness of
/// frame lists.
fn check_dhat(d: &Value) {
    for k in [
        "dhatFileVersion",
        "mode",
        "verb",
        "bklt",
        "bkacc",
        "tu",
        "Mtu",
        "cmd",
        "pid",
        "te",
        "pps",
        "ftbl",
    ] {
        assert!(d.get(k).is_some(), "missing {k}");
    }
    assert_eq!(d["dhatFileVersion"], 2);
    assert_eq!(d["bklt"], true);
    assert!(d["tg"].is_u64() && d["tuth"].is_u64());
    assert!(d["tg"].as_u64() <= d["te"].as_u64());
    let ftbl = d["ftbl"].as_array().unwrap();
    assert_eq!(ftbl[0], "[root]");
    assert!(ftbl.iter().all(Value::is_string));
    let pps = d["pps"].as_array().unwrap();
    assert!(!pps.is_empty());
    let mut seen = HashSet::new();
    for pp in pps {
        for k in [
            "tb", "tbk", "tl", "mb", "mbk", "gb", "gbk", "eb", "ebk", "fs",
        ] {
            assert!(pp.get(k).is_some(), "pp lacks {k}: {pp}");
        }
        let fs: Vec<u64> = pp["fs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_u64().unwrap())
            .collect();
        assert!(!fs.is_empty());
        assert!(fs.iter().all(|&f| f > 0 && (f as usize) < ftbl.len()));
        assert!(seen.insert(fs.clone()), "repeated frame list {fs:?}");
        let n = |k: &str| pp[k].as_u64().unwrap();
        assert!(n("mb") <= n("tb") && n("gb") <= n("mb") && n("eb") <= n("tb"));
        assert!(n("mbk") <= n("tbk") && n("gbk") <= n("tbk") && n("ebk") <= n("tbk"));
    }
}

#[test]
fn dhat_export_of_a_recorded_trace_has_every_viewer_field() {
    let t = trace();
    let d = dhat::to_dhat(&t, "test");
    check_dhat(&d);
    // All blocks are there, each op has a pseudo-frame, and call sites are frames too.
    let total: u64 = d["pps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tbk"].as_u64().unwrap())
        .sum();
    assert_eq!(total, t.allocations.len() as u64);
    let ftbl: Vec<&str> = d["ftbl"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for f in [
        "[pass] study-test",
        "[op] prep",
        "[op] block",
        "[op] scale",
        "[op] relu",
        "[op] head",
    ] {
        assert!(ftbl.contains(&f), "{f} not in {ftbl:?}");
    }
    assert!(
        ftbl.iter()
            .any(|f| f.contains("relu") && !f.starts_with('[')),
        "no call-site frame: {ftbl:?}"
    );
    // The CLI writes the same document.
    let out = work_dir().join("cli.dhat.json");
    let o = memo(&[
        "export",
        recorded().to_str().unwrap(),
        "--dhat",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cli: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    check_dhat(&cli);
    assert_eq!(cli["pps"], d["pps"]);
}

/// valgrind's dh_view.js, if installed.
fn dh_view_js() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DH_VIEW_JS") {
        return Some(PathBuf::from(p));
    }
    let known = [
        "/usr/libexec/valgrind/dh_view.js",
        "/usr/lib/valgrind/dh_view.js",
        "/usr/local/libexec/valgrind/dh_view.js",
        "/usr/local/lib/valgrind/dh_view.js",
    ];
    if let Some(p) = known.iter().map(PathBuf::from).find(|p| p.exists()) {
        return Some(p);
    }
    let out = Command::new("dpkg")
        .args(["-L", "valgrind"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.ends_with("/dh_view.js"))
        .map(PathBuf::from)
}

/// Runs dh_view.js's own `buildTree()` (which calls `checkPP()` on every program point)
/// on `data` under node, with a stub DOM; returns its totals or the error it threw.
const DRIVER: &str = r#"
"use strict";
const fs = require("fs");
const vm = require("vm");
const [src, dataPath] = process.argv.slice(2);
const el = () => ({ appendChild() {}, setAttribute() {}, style: {}, childNodes: [],
                    classList: { add() {}, remove() {}, contains() { return false; } } });
const ctx = { console, performance: { now: () => 0 }, window: {},
              document: { title: "", body: el(), createElement: el, createTextNode: el,
                          location: { search: "" } },
              __data: fs.readFileSync(dataPath, "utf8"), __result: null };
vm.createContext(ctx);
const driver = `
gSelect = { childNodes: gSelectData.map(() => ({ label: "", disabled: false, selected: false })),
            selectedIndex: Math.max(0, gSelectData.findIndex(d => d.isDefault)) };
gData = JSON.parse(__data);
buildTree();
__result = { totalBytes: gRoot._totalBytes, totalBlocks: gRoot._totalBlocks,
             totalLifetimes: gRoot._totalLifetimes, atTGmaxBytes: gRoot._atTGmaxBytes,
             atTEndBytes: gRoot._atTEndBytes };
`;
try {
  vm.runInContext(fs.readFileSync(src, "utf8") + "\n" + driver, ctx);
  console.log(JSON.stringify(ctx.__result));
} catch (e) {
  console.error("dh_view.js rejected the file: " + e.message);
  process.exit(3);
}
"#;

fn run_dh_view(node: &str, js: &Path, data: &Value, name: &str) -> Result<Value, String> {
    let dir = work_dir();
    let driver = dir.join("dh_view_driver.js");
    std::fs::write(&driver, DRIVER).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, serde_json::to_string(data).unwrap()).unwrap();
    let o = Command::new(node)
        .arg(&driver)
        .arg(js)
        .arg(&file)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    serde_json::from_slice(&o.stdout).map_err(|e| e.to_string())
}

#[test]
fn dh_view_js_loads_the_dhat_export() {
    let node_ok = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node_ok {
        eprintln!("SKIPPED dh_view_js_loads_the_dhat_export: node is not installed");
        return;
    }
    let Some(js) = dh_view_js().filter(|p| p.exists()) else {
        eprintln!(
            "SKIPPED dh_view_js_loads_the_dhat_export: valgrind's dh_view.js not found \
             (install valgrind or set DH_VIEW_JS)"
        );
        return;
    };
    let t = trace();
    let d = dhat::to_dhat(&t, "test");
    let totals = run_dh_view("node", &js, &d, "viewer.dhat.json").unwrap();
    let sum = |k: &str| -> u64 {
        d["pps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[k].as_u64().unwrap())
            .sum()
    };
    assert_eq!(totals["totalBytes"].as_u64(), Some(sum("tb")));
    assert_eq!(totals["totalBlocks"].as_u64(), Some(sum("tbk")));
    assert_eq!(totals["totalLifetimes"].as_u64(), Some(sum("tl")));
    assert_eq!(totals["atTGmaxBytes"].as_u64(), Some(sum("gb")));
    assert_eq!(totals["atTEndBytes"].as_u64(), Some(sum("eb")));

    // The harness does catch what the viewer rejects.
    let mut dup = d.clone();
    let first = dup["pps"][0].clone();
    dup["pps"].as_array_mut().unwrap().push(first);
    let e = run_dh_view("node", &js, &dup, "dup.dhat.json").unwrap_err();
    assert!(e.contains("repeated location"), "{e}");
    let mut no_tuth = d.clone();
    no_tuth.as_object_mut().unwrap().remove("tuth");
    let e = run_dh_view("node", &js, &no_tuth, "no_tuth.dhat.json").unwrap_err();
    assert!(e.contains("missing a field: tuth"), "{e}");
}

#[test]
fn perfetto_export_is_trace_event_json_with_balanced_slices() {
    let t = trace();
    let out = work_dir().join("cli.perfetto.json");
    let o = memo(&[
        "export",
        recorded().to_str().unwrap(),
        "--perfetto",
        out.to_str().unwrap(),
        "--largest",
        "3",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let events = d["traceEvents"].as_array().unwrap();
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(["M", "X", "B", "E", "C", "i"].contains(&ph), "{e}");
        assert!(e["pid"].is_u64(), "{e}");
        if ph != "M" {
            assert!(e["ts"].is_u64() && e["name"].is_string(), "{e}");
        }
    }
    // One slice per op instance, balanced and nested.
    assert_eq!(perfetto::check_balanced(&d), Ok(t.scopes.len() - 1));
    assert_eq!(events.iter().filter(|e| e["ph"] == "i").count(), 3);
    let counter: Vec<u64> = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| e["args"]["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(counter.iter().max(), Some(&Study::of(&t).memory.peak_live));
}

#[test]
fn csv_export_reads_back_as_the_planned_problem() {
    let t = trace();
    let out = work_dir().join("cli.csv");
    let o = memo(&[
        "export",
        recorded().to_str().unwrap(),
        "--csv",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let (problem, _) = memo_planner::format::parse_problem_csv(&text, "cli.csv").unwrap();
    assert_eq!(problem, t.to_problem().0);
    // And the planner commands accept the trace itself.
    for args in [
        vec!["plan", recorded().to_str().unwrap(), "--format", "json"],
        vec!["compare", recorded().to_str().unwrap(), "--format", "json"],
    ] {
        let o = memo(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["buffers"], problem.len());
    }
}

#[test]
fn stats_and_heapmap_of_the_recorded_trace() {
    let o = memo(&["stats", recorded().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    for needle in [
        "pass          study-test",
        "offsets lower bound",
        "best plan height",
        "short-lived",
        "block/scale",
        "top 10 call sites by bytes",
    ] {
        assert!(text.contains(needle), "{needle:?} not in\n{text}");
    }
    let o = memo(&["stats", recorded().to_str().unwrap(), "--format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["key"], "study-test");
    assert!(v["ops"].as_array().unwrap().len() >= 4);
    let svg = work_dir().join("heap.svg");
    let o = memo(&[
        "heapmap",
        recorded().to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(svg).unwrap();
    // Coloured by op: the planned buffers' ops are in the legend (head's output escapes).
    for op in ["block/scale", "block/relu", "prep"] {
        assert!(svg.contains(&format!(">{op}<")), "{op} not in the legend");
    }
    assert!(svg.contains("coloured by op"));
}

#[test]
fn pprof_export_of_a_recorded_trace_sums_to_its_calls_and_peak() {
    let out = work_dir().join("study.pb.gz");
    let o = memo(&[
        "export",
        recorded().to_str().unwrap(),
        "--pprof",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = pprof::decode(&std::fs::read(&out).unwrap()).unwrap();
    let s = Study::of(&trace());
    let sum = |v: usize| p.sample.iter().map(|x| x.value[v]).sum::<i64>();
    let calls = s.calls.alloc + s.calls.alloc_zeroed + s.calls.realloc;
    assert_eq!(sum(0), calls as i64);
    assert_eq!(sum(1), s.calls.bytes as i64);
    assert_eq!(sum(3), s.memory.peak_live as i64);
    // Every record has call-site frames: every stack's leaf is one of them, and its root
    // is the pass.
    let name = |id: u64| {
        let l = p.location.iter().find(|l| l.id == id).unwrap();
        let f = p.function.iter().find(|f| f.id == l.line[0].function_id);
        p.string_table[f.unwrap().name as usize].clone()
    };
    for x in &p.sample {
        let leaf = name(x.location_id[0]);
        assert!(!leaf.starts_with('['), "{leaf}");
        assert_eq!(name(*x.location_id.last().unwrap()), "[pass] study-test");
    }
}

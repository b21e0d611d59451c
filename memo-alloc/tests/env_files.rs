//! Environment settings and files, with `MemoAlloc` as this binary's global allocator.
//!
//! Settings are read once, at a process's first pass, so every scenario runs in a child
//! process: this test binary re-runs itself (`--ignored --exact child_*`) with the
//! variables set. The `child_*` tests do nothing unless `MEMO_TEST_CHILD` is set.
//!
//! What this proves:
//! - `MEMO_TRACE_DIR`: a profiled pass writes `<key>.<n>.trace.json` and `.plan.json`, and
//!   `memo_alloc::files::read_trace`/`read_plan` read them back with the right tags, sizes,
//!   alignments, alloc/free times, scopes, ordinals, realloc parents and escapes; the plan
//!   places every non-escaping allocation key, aligned, inside its height.
//! - `MEMO_PLAN_DIR`: a plan written by one process is loaded by another, whose passes of
//!   that key replay from the first pass on, without profiling.
//! - `MEMO_MODE=off` runs passes on the backend; `MEMO_MODE=profile` profiles every pass
//!   (one trace file each) and never replays; `MEMO_MODE=replay` profiles once, then replays.
//! - `MEMO_BACKTRACE=1` records resolved call sites that name the allocating function;
//!   without it, none are recorded.
//! - Passes of one key profiled at the same time on several threads (`MEMO_MODE=profile`)
//!   each write their own `<key>.<n>` files, numbered 1..=N without gaps or collisions.
//! - A `fork` while another thread runs the process's first pass (registering the fork
//!   handlers and loading `MEMO_PLAN_DIR`) leaves a child that can run passes instead of
//!   one that waits forever on the copied, never-finishing setup.

mod common;

use std::alloc::Layout;
use std::path::{Path, PathBuf};
use std::process::Command;

use memo_alloc::trace::AllocKind;
use memo_alloc::{MemoAlloc, PlanState};

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

/// A fresh, empty directory for one scenario.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memo-env-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the ignored test `name` of this binary in a child process with `env` set and
/// asserts it passed.
fn run_child(name: &str, env: &[(&str, &Path)]) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args([
        "--ignored",
        "--exact",
        name,
        "--test-threads=1",
        "--nocapture",
    ]);
    for var in [
        "MEMO_MODE",
        "MEMO_TRACE_DIR",
        "MEMO_PLAN_DIR",
        "MEMO_BACKTRACE",
        "MEMO_STRATEGY",
        "MEMO_MAX_PLANS",
        "MEMO_LANES",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("MEMO_TEST_CHILD", "1");
    cmd.env("MEMO_PLANNER", "inline");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child {name} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn is_child() -> bool {
    std::env::var_os("MEMO_TEST_CHILD").is_some()
}

/// The traced workload: an op with a 100-byte buffer, an inner op with a 64-aligned
/// block and a growing (reallocated) Vec, and an output that escapes the pass.
#[inline(never)]
fn traced_pass(key: &'static str) -> Vec<u8> {
    let _pass = memo_alloc::pass(key);
    let _outer = memo_alloc::op("outer");
    let a = std::hint::black_box(vec![0u8; 100]);
    {
        let _inner = memo_alloc::op("inner");
        let layout = Layout::from_size_align(200, 64).unwrap();
        // SAFETY: non-zero size; freed below with the same layout.
        unsafe {
            // Through black_box: a release build removes an allocation whose pointer
            // does not escape.
            let p = std::hint::black_box(std::alloc::alloc(layout));
            assert!(!p.is_null());
            p.write_bytes(9, 200);
            std::alloc::dealloc(p, layout);
        }
        let mut v: Vec<u32> = Vec::with_capacity(3);
        for i in 0..40 {
            v.push(i);
        }
        std::hint::black_box(&v);
    }
    drop(a);
    std::hint::black_box(vec![7u8; 333]) // escapes
}

#[test]
#[ignore = "child process of trace_dir_gets_trace_and_plan_documents"]
fn child_trace() {
    if !is_child() {
        return;
    }
    let out = traced_pass("env trace/1");
    assert_eq!(out.len(), 333);
}

/// Without lanes (`MEMO_LANES=0`): every allocation key gets a slot.
#[test]
fn trace_dir_gets_trace_and_plan_documents() {
    let dir = scratch("trace");
    run_child(
        "child_trace",
        &[("MEMO_TRACE_DIR", &dir), ("MEMO_LANES", Path::new("0"))],
    );
    let stem = memo_alloc::files::file_stem("env trace/1");
    assert_eq!(stem, "env_trace_1");
    let t = memo_alloc::files::read_trace(&dir.join(format!("{stem}.1.trace.json"))).unwrap();
    let plan = memo_alloc::files::read_plan(&dir.join(format!("{stem}.1.plan.json"))).unwrap();
    assert_eq!(t.key, "env trace/1");
    assert_eq!(plan.key, "env trace/1");
    // Scopes: the pass, outer, inner.
    let scope_named = |name: &str| {
        t.scopes
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no scope {name}: {:?}", t.scopes))
            .id
    };
    let (outer, inner) = (scope_named("outer"), scope_named("inner"));
    assert_eq!(t.scopes[0].parent, None);
    assert_eq!(t.scopes[outer as usize].parent, Some(0));
    assert_eq!(t.scopes[inner as usize].parent, Some(outer));
    for (i, a) in t.allocations.iter().enumerate() {
        assert_eq!(a.id as usize, i);
        assert_eq!(a.tag, i as u16, "the tag is the low 16 bits of the id");
        assert_eq!(
            a.ptr >> 48,
            a.tag as u64,
            "the trace stores tagged pointers"
        );
        assert!(a.free.is_none_or(|f| f > a.alloc), "{a:?}");
        assert!(a.alloc < t.events);
    }
    let find = |size: u64| {
        t.allocations
            .iter()
            .find(|a| a.size == size)
            .unwrap_or_else(|| panic!("no allocation of {size} bytes: {:?}", t.allocations))
    };
    let a = find(100);
    assert_eq!((a.scope, a.ordinal, a.align), (outer, Some(0), 1));
    assert_eq!(a.kind, AllocKind::AllocZeroed, "vec![0; n] is alloc_zeroed");
    assert!(!a.escaping && a.realloc_parent.is_none());
    let aligned = find(200);
    assert_eq!(
        (aligned.scope, aligned.ordinal, aligned.align),
        (inner, Some(0), 64)
    );
    assert_eq!(aligned.kind, AllocKind::Alloc);
    assert!(aligned.free.unwrap() == aligned.alloc + 1, "{aligned:?}");
    // The Vec: 12 bytes, then reallocs chained by realloc_parent.
    let root = find(12);
    assert_eq!((root.scope, root.ordinal, root.align), (inner, Some(1), 4));
    let mut chain = vec![root];
    while let Some(next) = t
        .allocations
        .iter()
        .find(|a| a.realloc_parent == Some(chain.last().unwrap().id))
    {
        chain.push(next);
    }
    assert!(chain.len() >= 3, "{chain:?}");
    for w in chain.windows(2) {
        assert_eq!(w[1].kind, AllocKind::Realloc);
        assert_eq!(w[1].ordinal, None);
        assert_eq!(w[1].scope, inner);
        assert!(w[1].size > w[0].size);
        assert_eq!(w[0].free, Some(w[1].alloc), "a realloc ends its parent");
    }
    assert!(chain.last().unwrap().size >= 160);
    assert!(chain.iter().all(|c| !c.escaping));
    let out = find(333);
    assert!(out.escaping && out.free.is_none(), "{out:?}");
    assert_eq!((out.scope, out.ordinal), (outer, Some(1)));
    assert!(t.allocations.iter().all(|a| a.call_site.is_none()));
    // The plan: one slot per allocation key; the escaping one has no offset.
    assert_eq!(plan.slots.len(), 4, "{:?}", plan.slots);
    for s in &plan.slots {
        let escaping = s.scope == outer && s.ordinal == 1;
        assert_eq!(s.offset.is_none(), escaping, "{s:?}");
        if let Some(o) = s.offset {
            assert_eq!(o % s.align, 0);
            assert!(o + s.size <= plan.height);
        }
    }
    let vec_slot = plan
        .slots
        .iter()
        .find(|s| s.scope == inner && s.ordinal == 1)
        .unwrap();
    assert_eq!(
        vec_slot.size,
        chain.last().unwrap().size,
        "a chain is planned at its largest size"
    );
    assert!(plan.height >= plan.lower_bound && plan.lower_bound >= 100 + 200);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With lanes of 256 bytes, the trace still holds every allocation, and the plan gives
/// slots only to the requests above 256 bytes; the others are counted into its lanes.
#[test]
fn trace_dir_plans_small_requests_into_lanes() {
    let dir = scratch("trace-lanes");
    run_child(
        "child_trace_lanes",
        &[("MEMO_TRACE_DIR", &dir), ("MEMO_LANES", Path::new("256"))],
    );
    let stem = memo_alloc::files::file_stem("env trace/lanes");
    let t = memo_alloc::files::read_trace(&dir.join(format!("{stem}.1.trace.json"))).unwrap();
    let plan = memo_alloc::files::read_plan(&dir.join(format!("{stem}.1.plan.json"))).unwrap();
    assert!(t
        .allocations
        .iter()
        .any(|a| a.size == 100 && a.ordinal == Some(0)));
    let outer = t.scopes.iter().find(|s| s.name == "outer").unwrap().id;
    // The escaping 333 bytes is the outer op's only request above the lanes: ordinal 0.
    assert_eq!(plan.slots.len(), 1, "{:?}", plan.slots);
    let s = &plan.slots[0];
    assert_eq!(
        (s.scope, s.ordinal, s.size, s.offset),
        (outer, 0, 333, None)
    );
    // 100 bytes (class 128), 200 bytes aligned to 64 (256) and the Vec's 12 (16), whose
    // chain grows through the cells of 32, 64, 128 (beside the 100 bytes: two of that
    // class live at once) and 256 bytes (192: the 200 were freed before).
    assert_eq!(plan.lanes.max, 256);
    assert_eq!(plan.lanes.requests, 3, "{:?}", plan.lanes);
    assert_eq!(plan.lanes.cells, vec![1, 1, 1, 2, 1], "{:?}", plan.lanes);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "child process of trace_dir_plans_small_requests_into_lanes"]
fn child_trace_lanes() {
    if !is_child() {
        return;
    }
    assert_eq!(traced_pass("env trace/lanes").len(), 333);
}

/// The workload of the plan-directory scenario.
fn plan_pass() -> u64 {
    let _pass = memo_alloc::pass("env-plan");
    let a: Vec<u64> = {
        let _op = memo_alloc::op("make");
        (0..500).collect()
    };
    let b: Vec<u64> = {
        let _op = memo_alloc::op("double");
        a.iter().map(|x| x * 2).collect()
    };
    drop(a);
    b.iter().sum()
}

#[test]
#[ignore = "child process of plan_dir_skips_profiling"]
fn child_plan_write() {
    if !is_child() {
        return;
    }
    assert_eq!(plan_pass(), 249_500);
    let r = memo_alloc::report("env-plan").unwrap();
    assert_eq!(r.passes_profiled, 1);
}

#[test]
#[ignore = "child process of plan_dir_skips_profiling"]
fn child_plan_load() {
    if !is_child() {
        return;
    }
    for _ in 0..3 {
        assert_eq!(plan_pass(), 249_500);
    }
    let r = memo_alloc::report("env-plan").unwrap();
    assert_eq!(
        r.passes_profiled, 0,
        "the loaded plan skips profiling: {r:?}"
    );
    assert_eq!(r.passes_replayed, 3, "{r:?}");
    assert_eq!(r.slab_hits, 3 * 2, "{r:?}");
    assert_eq!(r.state, PlanState::Planned);
    assert_eq!(r.misses_by_reason.total(), 0, "{r:?}");
}

#[test]
fn plan_dir_skips_profiling() {
    let dir = scratch("plan");
    run_child("child_plan_write", &[("MEMO_TRACE_DIR", &dir)]);
    assert!(dir.join("env-plan.1.plan.json").exists());
    run_child("child_plan_load", &[("MEMO_PLAN_DIR", &dir)]);
    let _ = std::fs::remove_dir_all(&dir);
}

fn mode_pass(key: &'static str, n: usize) {
    for i in 0..n {
        let _pass = memo_alloc::pass(key);
        let v: Vec<usize> = (i..100 + i).collect();
        assert_eq!(v.iter().sum::<usize>(), (i..100 + i).sum::<usize>());
    }
}

#[test]
#[ignore = "child process of mode_variable"]
fn child_mode() {
    if !is_child() {
        return;
    }
    mode_pass("env-mode", 4);
    let s = memo_alloc::stats();
    let r = memo_alloc::report("env-mode");
    match std::env::var("MEMO_MODE").as_deref() {
        Ok("off") => {
            assert_eq!((s.passes_profiled, s.passes_replayed), (0, 0), "{s:?}");
            assert_eq!(s.passes_backend, 4, "{s:?}");
            assert_eq!(s.slab_hits, 0);
            assert!(r.as_ref().is_none_or(|r| r.passes_profiled == 0), "{r:?}");
        }
        Ok("profile") => {
            assert_eq!((s.passes_profiled, s.passes_replayed), (4, 0), "{s:?}");
            let r = r.unwrap();
            assert_eq!(r.passes_profiled, 4);
            assert_eq!(
                r.state,
                PlanState::Unplanned,
                "profile mode never plans: {r:?}"
            );
            assert_eq!(s.plans, 0);
        }
        Ok("replay") => {
            assert_eq!((s.passes_profiled, s.passes_replayed), (1, 3), "{s:?}");
            assert!(s.slab_hits >= 3);
            assert_eq!(r.unwrap().state, PlanState::Planned);
        }
        other => panic!("unexpected MEMO_MODE {other:?}"),
    }
}

#[test]
fn mode_variable() {
    for mode in ["off", "profile", "replay"] {
        let dir = scratch(&format!("mode-{mode}"));
        run_child(
            "child_mode",
            &[("MEMO_MODE", Path::new(mode)), ("MEMO_TRACE_DIR", &dir)],
        );
        let mut traces: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".trace.json"))
            .collect();
        traces.sort();
        let expected: Vec<String> = match mode {
            "off" => vec![],
            "profile" => (1..=4)
                .map(|n| format!("env-mode.{n}.trace.json"))
                .collect(),
            _ => vec!["env-mode.1.trace.json".to_string()],
        };
        assert_eq!(traces, expected, "MEMO_MODE={mode}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[inline(never)]
fn allocating_call_site_marker() -> Vec<u8> {
    std::hint::black_box(vec![3u8; 4321])
}

#[test]
#[ignore = "child process of backtrace_variable"]
fn child_backtrace() {
    if !is_child() {
        return;
    }
    let _pass = memo_alloc::pass("env-bt");
    drop(allocating_call_site_marker());
}

#[test]
fn backtrace_variable() {
    let dir = scratch("bt");
    run_child(
        "child_backtrace",
        &[("MEMO_TRACE_DIR", &dir), ("MEMO_BACKTRACE", Path::new("1"))],
    );
    let t = memo_alloc::files::read_trace(&dir.join("env-bt.1.trace.json")).unwrap();
    let a = t.allocations.iter().find(|a| a.size == 4321).unwrap();
    let site = a
        .call_site
        .as_ref()
        .expect("MEMO_BACKTRACE=1 records call sites");
    assert!(!site.is_empty());
    assert!(
        site.iter()
            .any(|f| f.contains("allocating_call_site_marker")),
        "{site:#?}"
    );
    assert!(
        site.iter().all(|f| !f.starts_with("memo_alloc::")),
        "the allocator's own frames are skipped: {site:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "child process of concurrent_profiles_write_distinct_files"]
fn child_concurrent_profiles() {
    if !is_child() {
        return;
    }
    const THREADS: usize = 8;
    let inside = std::sync::Arc::new(std::sync::Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let inside = inside.clone();
            std::thread::spawn(move || {
                for p in 0..4 {
                    let _pass = memo_alloc::pass("env-concurrent");
                    let v: Vec<u64> = (0..(100 + t * 10 + p) as u64).collect();
                    inside.wait(); // every thread is inside a profiled pass
                    assert_eq!(v.len(), 100 + t * 10 + p);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let r = memo_alloc::report("env-concurrent").unwrap();
    assert_eq!(r.passes_profiled, 32, "{r:?}");
}

/// In `MEMO_MODE=profile`, passes of one key profiled at the same time on several threads
/// each write their own numbered trace and plan.
#[test]
fn concurrent_profiles_write_distinct_files() {
    let dir = scratch("concurrent");
    run_child(
        "child_concurrent_profiles",
        &[
            ("MEMO_TRACE_DIR", &dir),
            ("MEMO_MODE", Path::new("profile")),
        ],
    );
    let mut sizes = Vec::new();
    for n in 1..=32 {
        let t = memo_alloc::files::read_trace(&dir.join(format!("env-concurrent.{n}.trace.json")))
            .unwrap_or_else(|e| panic!("trace {n}: {e}"));
        memo_alloc::files::read_plan(&dir.join(format!("env-concurrent.{n}.plan.json")))
            .unwrap_or_else(|e| panic!("plan {n}: {e}"));
        sizes.push(t.allocations[0].size);
    }
    sizes.sort_unstable();
    let mut expected: Vec<u64> = (0..8u64)
        .flat_map(|t| (0..4u64).map(move |p| 8 * (100 + t * 10 + p)))
        .collect();
    expected.sort_unstable();
    assert_eq!(sizes, expected, "each pass's trace, once");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "child process of fork_during_first_pass_setup"]
fn child_fork_during_init() {
    if is_child() {
        fork_during_init(|| {
            // SAFETY: the child runs a pass and _exits.
            unsafe { libc::fork() }
        });
    }
}

#[test]
#[ignore = "child process of a_fork_that_misses_the_handlers_runs_on_the_backend"]
fn child_clone_during_init() {
    if is_child() {
        // A `clone` runs none of the fork handlers: the child is the copy a `fork` makes
        // when the handlers are registered after it read their list (and, unlike
        // `fork`, none of glibc's: so only while the setup runs, not beside the
        // parent's passes, whose locks the child could inherit taken).
        fork_while_loading(|| {
            let flags = libc::SIGCHLD as libc::c_long;
            // SAFETY: a copy of the process, as `fork` makes (no shared memory, the
            // parent signalled at the exit); the child runs a pass and _exits.
            let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) };
            pid as libc::pid_t
        });
    }
}

/// Forks with `fork` while another thread runs the process's first pass, until it is
/// done (and 3 times at least); each child runs a pass and must exit within 20 s.
fn fork_during_init(fork: impl Fn() -> libc::pid_t) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static DONE: AtomicBool = AtomicBool::new(false);
    // The process's first pass: loads every plan of MEMO_PLAN_DIR (slow, on purpose).
    let first = std::thread::spawn(|| {
        assert_eq!(plan_pass(), 249_500);
        DONE.store(true, Ordering::SeqCst);
    });
    let mut forks = 0;
    while !DONE.load(Ordering::SeqCst) || forks < 3 {
        fork_a_pass(&fork, forks);
        forks += 1;
    }
    first.join().unwrap();
    eprintln!("forked {forks} times during the first pass's setup");
}

/// Forks with `fork` once the setup of the process's first pass (on another thread) loads
/// plans, while it has loaded fewer than a quarter of them: the fork handlers are
/// registered by then, and the setup is still running.
fn fork_while_loading(fork: impl Fn() -> libc::pid_t) {
    let first = std::thread::spawn(|| assert_eq!(plan_pass(), 249_500));
    let loaded = || memo_alloc::stats().plan_files_loaded;
    while loaded() == 0 {
        std::hint::spin_loop();
    }
    let mut forks = 0;
    while loaded() < 100 && forks < 3 {
        fork_a_pass(&fork, forks);
        forks += 1;
    }
    first.join().unwrap();
    assert!(forks > 0, "the setup loaded plans too fast");
    eprintln!("forked {forks} times while the setup loaded plans");
}

/// Forks with `fork`; the child runs a pass and must exit within 20 s.
fn fork_a_pass(fork: &impl Fn() -> libc::pid_t, n: usize) {
    let pid = fork();
    assert!(pid >= 0);
    if pid == 0 {
        let ok = std::panic::catch_unwind(|| {
            let _p = memo_alloc::pass("env-fork-child");
            let v: Vec<u32> = (0..1000).collect();
            assert_eq!(v[999], 999);
        })
        .is_ok();
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let status = common::wait_bounded(pid, 20).unwrap_or_else(|e| panic!("fork #{n}: {e}"));
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "fork #{n}: status {status:#x}"
    );
}

/// A directory of 401 plans (slow to load), made by a child process that profiles.
fn many_plans(name: &str) -> PathBuf {
    let dir = scratch(name);
    run_child("child_plan_write", &[("MEMO_TRACE_DIR", &dir)]);
    let text = std::fs::read_to_string(dir.join("env-plan.1.plan.json")).unwrap();
    for i in 0..400 {
        let other = text.replace("\"env-plan\"", &format!("\"env-plan-{i}\""));
        std::fs::write(dir.join(format!("env-plan-{i}.1.plan.json")), other).unwrap();
    }
    dir
}

/// A fork while another thread runs the process's first pass (which registers the fork
/// handlers and loads `MEMO_PLAN_DIR`) leaves a child that can run passes.
#[test]
fn fork_during_first_pass_setup() {
    let dir = many_plans("fork-init");
    run_child("child_fork_during_init", &[("MEMO_PLAN_DIR", &dir)]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A child copied from the process with none of the fork handlers run, while another
/// thread runs the first pass's setup (as when that thread registers the handlers after
/// `fork` read their list), runs its passes on the backend instead of waiting forever
/// for a setup it does not have.
#[test]
fn a_fork_that_misses_the_handlers_runs_on_the_backend() {
    let dir = many_plans("clone-init");
    run_child("child_clone_during_init", &[("MEMO_PLAN_DIR", &dir)]);
    let _ = std::fs::remove_dir_all(&dir);
}

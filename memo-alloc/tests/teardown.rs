//! The process ends, or its plan files change, while the allocator is at work: a panic or
//! `std::process::exit` while the planner thread plans (the profiles already submitted
//! still reach their files, complete), and plan files read while they are being written
//! (a partial file is rejected cleanly; the allocator's own files are never seen partial).
//! Each case runs in a child process of its own.

mod common;

use std::hint::black_box;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{is_child, scratch};
use memo_alloc::{MemoAlloc, PlanRejection};

#[global_allocator]
static A: MemoAlloc = MemoAlloc::system();

/// Runs the ignored test `name` of this binary in a child with `env` (see
/// [`common::child_command`]), whatever its outcome.
fn spawn_child(name: &str, env: &[(&str, &Path)]) -> Output {
    let mut cmd = common::child_command(name);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn the test binary")
}

/// A pass whose plan takes a while to make: `n` blocks of assorted sizes and lifetimes.
fn slow_to_plan(key: &str, n: usize) {
    let _p = memo_alloc::pass(key);
    let mut held: Vec<Vec<u8>> = Vec::new();
    for i in 0..n {
        held.push(black_box(vec![i as u8; 300 + (i * 7919) % 5000]));
        if i % 3 == 0 {
            held.swap_remove((i * 31) % held.len());
        }
    }
    black_box(&held);
}

/// The plan files in `dir`, each read and checked as `MEMO_PLAN_DIR` would.
fn plan_files(dir: &Path) -> Vec<(PathBuf, Result<(), String>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.to_string_lossy().ends_with(".plan.json"));
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let checked = memo_alloc::files::read_plan(&p).map(|_| ());
            (p, checked)
        })
        .collect()
}

/// Asserts that the profiled keys `keys` each have one complete, valid plan file in
/// `dir`, and nothing else is there but their traces.
fn assert_files_complete(dir: &Path, keys: &[&str]) {
    let plans = plan_files(dir);
    for key in keys {
        let mine: Vec<_> = plans
            .iter()
            .filter(|(p, _)| p.file_name().unwrap().to_string_lossy().starts_with(key))
            .collect();
        assert_eq!(mine.len(), 1, "{key}: {plans:?}");
        assert!(mine[0].1.is_ok(), "{key}: {:?}", mine[0]);
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "partial files left: {leftovers:?}");
}

#[test]
fn a_panic_while_the_planner_plans_ends_the_process_with_its_plans_written() {
    let dir = scratch("panic-planning");
    let out = spawn_child(
        "child_panic_while_planning",
        &[
            ("MEMO_PLANNER", Path::new("background")),
            ("MEMO_TRACE_DIR", &dir),
        ],
    );
    // The test failed with its panic (libtest's exit code), not a signal or an abort.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "{stderr}");
    assert_eq!(out.status.code(), Some(101), "{stderr}");
    assert!(stderr.contains("the program panics"), "{stderr}");
    assert_files_complete(&dir, &["teardown-a", "teardown-b"]);
}

#[test]
#[ignore = "child process"]
fn child_panic_while_planning() {
    if !is_child() {
        return;
    }
    slow_to_plan("teardown-a", 1_000);
    slow_to_plan("teardown-b", 1_000);
    // Both profiles are queued or being planned; the program panics inside a pass.
    let _p = memo_alloc::pass("teardown-c");
    let _v = vec![1u8; 4096];
    panic!("the program panics");
}

#[test]
fn exit_inside_a_pass_while_the_planner_plans_writes_every_submitted_plan() {
    let dir = scratch("exit-planning");
    let out = spawn_child(
        "child_exit_while_planning",
        &[
            ("MEMO_PLANNER", Path::new("background")),
            ("MEMO_TRACE_DIR", &dir),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert_files_complete(&dir, &["teardown-a", "teardown-b"]);
}

#[test]
#[ignore = "child process"]
fn child_exit_while_planning() {
    if !is_child() {
        return;
    }
    // Plans of 1,000 buffers: still planned when the process exits right after, and
    // planned well inside the exit's 10 s wait on a loaded machine.
    slow_to_plan("teardown-a", 1_000);
    slow_to_plan("teardown-b", 1_000);
    // Exits from inside an open pass: its guard never drops.
    let _p = memo_alloc::pass("teardown-c");
    let _v = vec![1u8; 4096];
    std::process::exit(7);
}

/// A plan file of key `teardown-load` as a profiled pass writes it.
fn a_real_plan_file(dir: &Path) -> Vec<u8> {
    let out = spawn_child(
        "child_write_plan",
        &[
            ("MEMO_PLANNER", Path::new("inline")),
            ("MEMO_TRACE_DIR", dir),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let plans = plan_files(dir);
    assert_eq!(plans.len(), 1, "{plans:?}");
    std::fs::read(&plans[0].0).unwrap()
}

#[test]
#[ignore = "child process"]
fn child_write_plan() {
    if is_child() {
        slow_to_plan("teardown-load", 500);
    }
}

#[test]
fn a_plan_file_cut_short_is_rejected_cleanly() {
    let full = a_real_plan_file(&scratch("cut-source"));
    for cut in [1, full.len() / 3, full.len() / 2, full.len() - 1] {
        let dir = scratch("cut");
        std::fs::write(dir.join("teardown-load.1.plan.json"), &full[..cut]).unwrap();
        let out = spawn_child("child_load_plan", &[("MEMO_PLAN_DIR", &dir)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "cut at {cut}: {stderr}");
        let warnings = stderr.lines().filter(|l| l.starts_with("memomalloc:"));
        assert_eq!(warnings.count(), 1, "cut at {cut}: {stderr}");
        assert!(stderr.contains("loaded 0 rejected malformed"), "{stderr}");
    }
}

/// Loads the plan directory (at its first pass), runs passes of the key, and says what
/// was loaded: `loaded N rejected REASON...`.
#[test]
#[ignore = "child process"]
fn child_load_plan() {
    if !is_child() {
        return;
    }
    for _ in 0..3 {
        slow_to_plan("teardown-load", 500);
        assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(
            60
        )));
    }
    let s = memo_alloc::stats();
    let rejected: Vec<&str> = PlanRejection::ALL
        .iter()
        .filter(|&&r| s.plan_files_rejected_for(r) > 0)
        .map(|r| r.name())
        .collect();
    eprintln!(
        "loaded {} rejected {}",
        s.plan_files_loaded,
        rejected.join(",")
    );
    assert_eq!(s.plan_files_loaded + s.plan_files_rejected_total(), 1);
    let r = memo_alloc::report("teardown-load").unwrap();
    // Loaded, the plan replays at once; rejected, the key is profiled and replays after.
    assert!(r.slab_hits > 0, "{r:?}");
}

#[test]
fn a_plan_file_rewritten_in_place_while_processes_load_it_never_crashes_them() {
    let full = a_real_plan_file(&scratch("rewrite-source"));
    let dir = scratch("rewrite");
    let path = dir.join("teardown-load.1.plan.json");
    std::fs::write(&path, &full).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Rewrites the file in place, a piece at a time: readers see it empty, partial or
    // whole.
    let writer = {
        let (stop, path, full) = (stop.clone(), path.clone(), full.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            while !stop.load(Ordering::Relaxed) {
                let mut f = std::fs::File::create(&path).unwrap();
                for piece in full.chunks(full.len() / 8 + 1) {
                    f.write_all(piece).unwrap();
                    f.flush().unwrap();
                    std::thread::yield_now();
                }
            }
        })
    };
    let mut outcomes = Vec::new();
    for _ in 0..6 {
        let out = spawn_child("child_load_plan", &[("MEMO_PLAN_DIR", &dir)]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with("loaded"))
            .unwrap_or("");
        outcomes.push(line.to_owned());
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    for o in &outcomes {
        assert!(
            o == "loaded 1 rejected " || o == "loaded 0 rejected malformed",
            "{outcomes:?}"
        );
    }
}

#[test]
fn plan_files_the_allocator_writes_are_never_seen_partial() {
    let dir = scratch("atomic-writes");
    let stop = Arc::new(AtomicBool::new(false));
    // A process profiling every pass writes a plan file of the key per pass.
    let writer = {
        let (stop, dir) = (stop.clone(), dir.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let out = spawn_child(
                    "child_write_plans",
                    &[
                        ("MEMO_MODE", Path::new("profile")),
                        ("MEMO_PLANNER", Path::new("inline")),
                        ("MEMO_TRACE_DIR", &dir),
                    ],
                );
                assert!(out.status.success(), "{out:?}");
            }
        })
    };
    while plan_files(&dir).is_empty() {
        std::thread::yield_now();
    }
    for _ in 0..4 {
        let out = spawn_child("child_load_plans", &[("MEMO_PLAN_DIR", &dir)]);
        assert!(out.status.success(), "{out:?}");
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}

#[test]
#[ignore = "child process"]
fn child_write_plans() {
    if is_child() {
        for _ in 0..4 {
            slow_to_plan("teardown-load", 500);
        }
    }
}

#[test]
#[ignore = "child process"]
fn child_load_plans() {
    if !is_child() {
        return;
    }
    slow_to_plan("teardown-load", 500);
    let s = memo_alloc::stats();
    assert_eq!(s.plan_files_rejected_total(), 0, "{s:?}");
    assert!(s.plan_files_loaded > 0, "{s:?}");
}

#[test]
fn threads_ending_inside_open_passes_leave_nothing_behind() {
    let out = spawn_child(
        "child_threads_ending_in_passes",
        &[("MEMO_PLANNER", Path::new("inline"))],
    );
    assert!(out.status.success(), "{out:?}");
}

/// One pass of `key` holding a few blocks, its guard leaked on `leak`.
fn open_pass(key: &str, leak: bool) {
    let p = memo_alloc::pass(key);
    let held: Vec<Vec<u8>> = (0..8).map(|i| black_box(vec![i as u8; 2000 + i])).collect();
    black_box(&held);
    drop(held);
    if leak {
        std::mem::forget(p);
    }
}

#[test]
#[ignore = "child process"]
fn child_threads_ending_in_passes() {
    if !is_child() {
        return;
    }
    const THREADS: u64 = 48;
    open_pass("ends-in-replay", false); // profiled and planned
    for round in 0..THREADS {
        std::thread::spawn(move || {
            // A pass of a planned key, or of one whose profiles every exit cuts short.
            let key = ["ends-in-replay", "ends-in-profile"][(round % 2) as usize];
            open_pass(key, true);
        })
        .join()
        .unwrap();
    }
    open_pass("ends-in-replay", false);
    let r = memo_alloc::report("ends-in-replay").unwrap();
    // Each thread's pass was ended at its exit and its instance given back: one instance
    // serves them all, nothing of them is live, and none of it counts as divergence.
    assert_eq!(r.passes_replayed, THREADS / 2 + 1, "{r:?}");
    assert_eq!(r.replays_abandoned, THREADS / 2, "{r:?}");
    assert_eq!((r.slab_instances, r.instances_pinned), (1, 0), "{r:?}");
    assert_eq!(r.misses_by_reason.total(), 0, "{r:?}");
    assert_eq!(r.state, memo_alloc::PlanState::Planned, "{r:?}");
    // Profiles cut short by a thread's exit are abandoned: never left profiling.
    let r = memo_alloc::report("ends-in-profile").unwrap();
    assert_ne!(r.state, memo_alloc::PlanState::Profiling, "{r:?}");
    assert_eq!(
        r.passes_replayed + r.passes_profiled + r.passes_backend,
        THREADS / 2,
        "{r:?}"
    );
    let s = memo_alloc::stats();
    assert_eq!((s.retired_plans, s.instances_pinned), (0, 0), "{s:?}");
}

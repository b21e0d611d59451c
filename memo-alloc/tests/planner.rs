//! Planning off the request's thread: a profiled pass returns before its plan is made;
//! meanwhile the key's passes run on the backend (or its previous plan); the plan is
//! published when ready; a full queue abandons the profile; a forked child plans what
//! was queued with a planner thread of its own.

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{is_child, run_child};
use memo_alloc::testing::pause_planner;
use memo_alloc::{AbandonReason, MemoAlloc};

#[global_allocator]
static A: MemoAlloc = MemoAlloc::system();

fn body(n: usize) -> u64 {
    let v: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 64 + i % 7]).collect();
    v.iter().map(|b| b[0] as u64).sum()
}

fn pass(key: &'static str) {
    let _p = memo_alloc::pass(key);
    black_box(body(50));
}

const WAIT: Duration = Duration::from_secs(60);

#[test]
fn the_profiled_pass_does_not_wait_for_its_plan() {
    run_child("child_background", &[("MEMO_PLANNER", "background")]);
}

#[test]
#[ignore = "child process"]
fn child_background() {
    if !is_child() {
        return;
    }
    const KEY: &str = "bg";
    pause_planner(true);
    pass(KEY); // profiled; its plan waits in the queue
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!((r.state, r.passes_profiled), ("profiling", 1), "{r:?}");
    assert!(!memo_alloc::wait_for_plans(Duration::from_millis(50)));
    for _ in 0..3 {
        pass(KEY); // on the backend, not recorded
    }
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!((r.passes_profiled, r.passes_backend), (1, 3), "{r:?}");
    pause_planner(false);
    assert!(memo_alloc::wait_for_plans(WAIT));
    pass(KEY);
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!((r.state, r.passes_replayed), ("planned", 1), "{r:?}");
    assert!(r.slab_hits >= 50, "{r:?}");
}

#[test]
fn a_full_queue_abandons_the_profile() {
    run_child("child_full_queue", &[("MEMO_PLANNER", "background")]);
}

#[test]
#[ignore = "child process"]
fn child_full_queue() {
    if !is_child() {
        return;
    }
    const KEYS: [&str; 10] = ["q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9"];
    pass("warm-up"); // starts the planner thread
    assert!(memo_alloc::wait_for_plans(WAIT));
    pause_planner(true);
    for key in KEYS {
        pass(key);
    }
    let s = memo_alloc::stats();
    // The queue holds 8; the last two are abandoned.
    assert_eq!(
        s.profiles_abandoned[AbandonReason::PlannerBusy as usize],
        2,
        "{s:?}"
    );
    pause_planner(false);
    assert!(memo_alloc::wait_for_plans(WAIT));
    for key in KEYS {
        pass(key);
    }
    assert!(memo_alloc::wait_for_plans(WAIT));
    for key in KEYS {
        pass(key);
        let r = memo_alloc::report(key).unwrap();
        assert_eq!(r.state, "planned", "{r:?}");
        assert!(r.passes_replayed >= 1, "{r:?}");
    }
}

#[test]
fn a_forked_child_plans_with_a_planner_of_its_own() {
    run_child("child_fork_planner", &[("MEMO_PLANNER", "background")]);
}

#[test]
#[ignore = "child process"]
fn child_fork_planner() {
    if !is_child() {
        return;
    }
    pass("fork-warm-up");
    assert!(memo_alloc::wait_for_plans(WAIT));
    pause_planner(true);
    pass("queued-at-fork"); // waits in the queue when the process forks
                            // SAFETY: the child runs passes and exits with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        pause_planner(false); // the child's own planner thread is not paused
        let ok = std::panic::catch_unwind(|| {
            pass("child-own");
            assert!(memo_alloc::wait_for_plans(WAIT));
            for key in ["queued-at-fork", "child-own"] {
                pass(key);
                let r = memo_alloc::report(key).unwrap();
                assert_eq!(r.state, "planned", "{r:?}");
                assert!(r.passes_replayed >= 1, "{r:?}");
            }
        })
        .is_ok();
        // SAFETY: ends the child without the parent's atexit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let status = common::wait_bounded(pid, 60).expect("the child exits");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status:#x}"
    );
    pause_planner(false);
    assert!(memo_alloc::wait_for_plans(WAIT));
}

#[test]
fn a_program_that_exits_after_its_pass_still_writes_its_files() {
    let dir = std::env::temp_dir().join(format!("memo-exit-drain-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_exit_after_pass",
            "--test-threads=1",
        ])
        .env("MEMO_TEST_CHILD", "1")
        .env("MEMO_PLANNER", "background")
        .env("MEMO_TRACE_DIR", &dir)
        .output()
        .expect("spawn the test binary");
    assert!(out.status.success(), "{out:?}");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().ends_with(".plan.json")),
        "files written before the exit: {files:?}"
    );
}

#[test]
#[ignore = "child process"]
fn child_exit_after_pass() {
    if !is_child() {
        return;
    }
    {
        let _p = memo_alloc::pass("exit-drain");
        black_box(body(3_000)); // a plan that takes a while to make
    }
    // Exits at once, while the planner thread is still at work: `exit` runs the hook.
    std::process::exit(0);
}

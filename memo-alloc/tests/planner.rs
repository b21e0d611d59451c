//! Planning off the request's thread: a profiled pass returns before its plan is made;
//! meanwhile the key's passes run on the backend (or its previous plan); the plan is
//! published when ready; a full queue abandons the profile; a forked child plans what
//! was queued with a planner thread of its own.

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{is_child, run_child};
use memo_alloc::testing::pause_planner;
use memo_alloc::{AbandonReason, MemoAlloc, PlanState};

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

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
    assert_eq!(
        (r.state, r.passes_profiled),
        (PlanState::Profiling, 1),
        "{r:?}"
    );
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
    assert_eq!(
        (r.state, r.passes_replayed),
        (PlanState::Planned, 1),
        "{r:?}"
    );
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
        assert_eq!(r.state, PlanState::Planned, "{r:?}");
        assert!(r.passes_replayed >= 1, "{r:?}");
    }
}

/// Resident bytes of this process.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// A pass that ran on the backend while its key was being planned frees its memory after
/// the plan's publication (which trims the backend's heaps): the thread's arena would
/// keep it resident for good, as the key's passes now run on slabs (with several request
/// threads, each keeps a pass's working set in its arena).
/// The end of such a pass has the planner trim the heaps again.
#[test]
fn a_pass_on_the_backend_gives_its_memory_back_once_the_plan_is_published() {
    // The trim is glibc's `malloc_trim`: jemalloc and mimalloc give free memory back by
    // their own policies (decay, delayed purge), which this test does not time.
    if common::Backend::name() != "system" {
        return;
    }
    run_child("child_backend_trim", &[("MEMO_PLANNER", "background")]);
}

#[test]
#[ignore = "child process"]
fn child_backend_trim() {
    if !is_child() {
        return;
    }
    const KEY: &str = "trim";
    const BLOCKS: usize = 2048; // 8 MiB of 4 KiB blocks
    pause_planner(true);
    pass(KEY); // profiled; its plan waits in the queue
    let (allocated, published) = (
        std::sync::Arc::new(std::sync::Barrier::new(2)),
        std::sync::Arc::new(std::sync::Barrier::new(2)),
    );
    let (a, p) = (allocated.clone(), published.clone());
    let other = std::thread::spawn(move || {
        let guard = memo_alloc::pass(KEY); // on the backend: no plan yet
        let blocks: Vec<Vec<u8>> = (0..BLOCKS).map(|i| vec![i as u8; 4096]).collect();
        // Above the blocks in the thread's arena: glibc then cannot trim them by itself.
        let fence = black_box(vec![1u8; 64]);
        a.wait();
        p.wait();
        drop(black_box(blocks));
        drop(guard); // the pass ends after its key's plan was published
        fence
    });
    allocated.wait();
    pause_planner(false);
    assert!(memo_alloc::wait_for_plans(WAIT));
    assert_eq!(memo_alloc::report(KEY).unwrap().state, PlanState::Planned);
    let live = resident();
    published.wait();
    let fence = other.join().unwrap();
    assert!(memo_alloc::wait_for_plans(WAIT));
    let after = resident();
    drop(fence);
    assert!(
        after + (4 << 20) < live,
        "resident {} MiB with the blocks live, {} MiB after they were freed",
        live >> 20,
        after >> 20
    );
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
                assert_eq!(r.state, PlanState::Planned, "{r:?}");
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

/// A plan that panics (a bug in planning) gives its profile up: the planner thread goes
/// on, the key goes back to unplanned and is profiled, planned and replayed later, and
/// nothing waits for the lost plan.
#[test]
fn a_panic_while_planning_gives_the_profile_up() {
    let stderr = run_child("child_planning_panic", &[("MEMO_PLANNER", "background")]);
    assert!(stderr.contains("its profile is given up"), "{stderr}");
}

#[test]
#[ignore = "child process"]
fn child_planning_panic() {
    if !is_child() {
        return;
    }
    const KEY: &str = "panics";
    memo_alloc::testing::panic_next_plan();
    pass(KEY); // profiled; its plan panics on the planner thread
    assert!(
        memo_alloc::wait_for_plans(Duration::from_secs(10)),
        "the planner is idle again"
    );
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(
        (r.state, r.passes_profiled),
        (PlanState::Unplanned, 1),
        "{r:?}"
    );
    pass(KEY); // profiled again
    assert!(memo_alloc::wait_for_plans(WAIT));
    pass(KEY);
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(
        (r.state, r.passes_replayed),
        (PlanState::Planned, 1),
        "{r:?}"
    );
}

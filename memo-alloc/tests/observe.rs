//! Whole-program recording and heap counters, with `MemoAlloc` as this binary's global
//! allocator. The tests run in parallel (cargo test's default): each heap tracker counts
//! its own thread; the profiler tests take turns (one recording at a time).
//!
//! What this proves:
//! - A `Profiler` records every thread's allocations with their thread, real time and op
//!   scope, and what was live at its end as escaping; the trace reads back and checks.
//! - Call sites are sampled as documented (every allocation with an interval of 1).
//! - Heap trackers count what their thread allocated while open, nest, and are not
//!   disturbed by other tests allocating in parallel; a replayed pass shows its slab share.

use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;

use memo_alloc::{files, HeapTracker, MemoAlloc, Profiler, ProfilerOptions};

#[global_allocator]
static A: MemoAlloc = MemoAlloc::system();

/// One recording at a time.
static RECORDING: Mutex<()> = Mutex::new(());

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("memo-observe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn a_profiler_records_every_thread_with_scopes_and_time() {
    let _turn = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp("two-threads.json");
    let profiler =
        Profiler::start_with(&path, ProfilerOptions::default().with_site_sample_bytes(1));
    assert!(profiler.is_recording());
    let kept: Vec<u8> = {
        let _op = memo_alloc::op("main-work");
        let v = black_box(vec![7u8; 3000]);
        drop(black_box(vec![1u8; 5000]));
        v
    };
    std::thread::Builder::new()
        .name("helper".into())
        .spawn(|| {
            let _op = memo_alloc::op("helper-work");
            drop(black_box(vec![0u64; 1000])); // 8000 bytes
        })
        .unwrap()
        .join()
        .unwrap();
    let written = profiler.finish().expect("written");
    assert!(written.threads >= 2);
    let trace = files::read_trace(&path).expect("reads back");
    trace.check().expect("checks");
    assert!(trace.is_whole_program());
    let rec = trace.recording.as_ref().unwrap();
    let find = |size: u64| {
        trace
            .allocations
            .iter()
            .find(|a| a.size == size)
            .unwrap_or_else(|| panic!("no allocation of {size} bytes"))
    };
    let scope_name =
        |a: &memo_alloc::trace::TraceAlloc| trace.scopes[a.scope as usize].name.clone();
    let (kept_a, temp_a, helper_a) = (find(3000), find(5000), find(8000));
    assert_eq!(scope_name(kept_a), "main-work");
    assert_eq!(scope_name(helper_a), "helper-work");
    assert!(kept_a.escaping && kept_a.free.is_none(), "live at the end");
    assert!(temp_a.free.is_some() && !temp_a.escaping);
    let (wk, wh) = (kept_a.when.unwrap(), helper_a.when.unwrap());
    assert_ne!(wk.thread, wh.thread);
    assert_eq!(
        rec.threads[wh.thread as usize].name.as_deref(),
        Some("helper")
    );
    assert!(wh.free_ns.unwrap() >= wh.ns && wh.ns <= rec.duration_ns);
    assert!(kept_a.call_site.as_ref().is_some_and(|f| !f.is_empty()));
    drop(kept);
}

/// A pass carried to other threads (a moved `Pass`, as an async task's, and a helper
/// context of a `PassHandle`) is the scope of what those threads allocate for it.
#[test]
fn passes_entered_on_other_threads_are_their_allocations_scopes() {
    let _turn = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp("carried.json");
    let profiler = Profiler::start(&path);
    let moved = memo_alloc::Pass::new("observe/moved");
    std::thread::spawn(move || {
        let _in = moved.enter();
        drop(black_box(vec![0u8; 7001]));
    })
    .join()
    .unwrap();
    {
        let _pass = memo_alloc::pass("observe/handled");
        let handle = memo_alloc::current().expect("inside a pass");
        std::thread::spawn(move || handle.in_scope(3, || drop(black_box(vec![0u8; 9001]))))
            .join()
            .unwrap();
    }
    profiler.finish().expect("written");
    let trace = files::read_trace(&path).expect("reads back");
    trace.check().expect("checks");
    let scope_of = |size: u64| {
        let a = trace
            .allocations
            .iter()
            .find(|a| a.size == size)
            .expect("recorded");
        trace.scopes[a.scope as usize].name.clone()
    };
    assert_eq!(scope_of(7001), "observe/moved");
    assert_eq!(scope_of(9001), "observe/handled");
}

#[test]
fn a_second_profiler_does_not_record_while_one_runs() {
    let _turn = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let first = Profiler::start(temp("first.json"));
    let second = Profiler::start(temp("second.json"));
    assert!(first.is_recording());
    assert!(!second.is_recording());
    assert!(second.finish().is_err());
    first.finish().expect("written");
}

#[test]
fn trackers_count_their_own_thread_in_parallel() {
    let handles: Vec<_> = (1..=4u64)
        .map(|k| {
            std::thread::spawn(move || {
                let t = HeapTracker::start();
                let blocks: Vec<Vec<u8>> = (0..k).map(|_| vec![0u8; 1000]).collect();
                let mid = t.stats();
                drop(blocks);
                let end = t.stats();
                (k, mid, end)
            })
        })
        .collect();
    for h in handles {
        let (k, mid, end) = h.join().unwrap();
        // The blocks, plus the outer Vec holding them.
        assert_eq!(mid.current_bytes, k * 1000 + k * 24, "tracker of {k}");
        assert_eq!(mid.current_blocks, k + 1);
        assert_eq!(end.current_bytes, 0);
        assert_eq!(end.peak_bytes, k * 1000 + k * 24);
        assert_eq!(end.allocations, k + 1);
        assert_eq!(end.frees, k + 1);
    }
}

#[test]
fn nested_trackers_see_what_was_allocated_while_they_were_open() {
    let outer = HeapTracker::start();
    let a = black_box(vec![0u8; 100]);
    let inner = HeapTracker::start();
    let b = black_box(vec![0u8; 50]);
    let (o, i) = (outer.stats(), inner.stats());
    assert_eq!((o.current_bytes, i.current_bytes), (150, 50));
    drop(a);
    drop(b);
    assert_eq!(outer.stats().current_bytes, 0);
    assert_eq!(inner.stats().peak_bytes, 50);
    drop(inner);
    assert!(memo_alloc::thread_heap().allocations >= 2);
    assert!(memo_alloc::process_heap().allocations >= 2);
}

#[test]
fn a_replayed_pass_counts_in_the_slab_share() {
    // A recording serves replayed passes from the backend: none may run meanwhile.
    let _turn = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let work = || {
        let _pass = memo_alloc::pass("observe-test/replay");
        let v = black_box(vec![1u8; 4096]);
        drop(v);
    };
    work(); // profiled
    assert!(memo_alloc::wait_for_plans(Duration::from_secs(10)));
    let t = HeapTracker::start();
    work(); // replayed
    let s = t.stats();
    assert_eq!(s.allocations, 1);
    assert_eq!(s.slab_share(), 1.0, "{s:?}");
    assert_eq!(s.peak_bytes, 0, "slab blocks are not heap");
}

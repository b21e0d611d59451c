use super::*;
use crate::study::tests::sample;
use memo_alloc::trace::{AllocWhen, Recording, TraceThread};

fn rows(groups: &[Group]) -> Vec<(&str, &str, u64, u64)> {
    groups
        .iter()
        .map(|g| (g.op.as_str(), g.site.as_str(), g.allocations, g.bytes))
        .collect()
}

#[test]
fn the_peak_live_set_is_what_is_live_at_the_first_peak() {
    // Live bytes peak at t 7: #1 (100 B in a, 2..9) and #3 (2000 B in b, 7..8); #2 ended
    // at 7 when the realloc moved it.
    let t = sample();
    assert_eq!(peak_time(&t), 7);
    assert_eq!(
        rows(&peak_live_set(&t)),
        [("b", "?", 1, 2000), ("a", "?", 1, 100)]
    );
}

#[test]
fn leaks_are_the_blocks_never_freed_grouped_by_call_site() {
    let mut t = sample();
    assert_eq!(rows(&leaks(&t)), [("(model)", "?", 1, 10)]);
    t.allocations[1].free = None; // 100 B in a, now never freed
    t.allocations[1].call_site = Some(vec!["app::load".into()]);
    assert_eq!(
        rows(&leaks(&t)),
        [("a", "app::load", 1, 100), ("(model)", "?", 1, 10)]
    );
}

#[test]
fn totals_carry_each_groups_bytes_at_the_peak() {
    let t = sample();
    let all = totals(&t);
    let got: Vec<(&str, u64, u64, u64)> = all
        .iter()
        .map(|g| (g.op.as_str(), g.allocations, g.bytes, g.peak_live_bytes))
        .collect();
    assert_eq!(
        got,
        [
            ("b", 2, 3000, 2000),
            ("a", 2, 164, 100),
            ("(model)", 1, 10, 0)
        ]
    );
}

#[test]
fn threads_break_a_whole_program_trace_down() {
    let mut t = sample();
    assert!(threads(&t).is_empty(), "a pass trace has no threads");
    t.recording = Some(Recording {
        threads: vec![
            TraceThread {
                id: 0,
                tid: 10,
                name: Some("main".into()),
            },
            TraceThread {
                id: 1,
                tid: 11,
                name: None,
            },
        ],
        ..Recording::default()
    });
    let when = |thread: u32, free_thread: Option<u32>| AllocWhen {
        thread,
        ns: 0,
        free_thread,
        free_ns: free_thread.map(|_| 1),
    };
    // #0, #4 on thread 0 (#4 leaks); #1, #2, #3 on thread 1, #1 freed by thread 0.
    let threads_of = [
        (0, Some(0)),
        (1, Some(0)),
        (1, Some(1)),
        (1, Some(1)),
        (0, None),
    ];
    for (a, (th, f)) in t.allocations.iter_mut().zip(threads_of) {
        a.when = Some(when(th, f));
    }
    let got: Vec<_> = threads(&t)
        .iter()
        .map(|r| {
            (
                r.thread,
                r.allocations,
                r.bytes,
                r.freed_elsewhere,
                r.leaked_bytes,
                r.peak_live_bytes,
            )
        })
        .collect();
    assert_eq!(got, [(1, 3, 3100, 1, 0, 2100), (0, 2, 74, 0, 10, 0)]);
}

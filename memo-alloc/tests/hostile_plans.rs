//! Plan files in `MEMO_PLAN_DIR` are not trusted: every field is checked against bounds
//! before anything is sized from it, loading is linear in the file, and a bad file is
//! rejected with one line on stderr naming the file and the reason; its key is profiled
//! afresh. Truncated files are rejected, and another program's valid plan loads.

mod common;

use std::hint::black_box;
use std::path::Path;

use common::{is_child, max_rss_bytes, run_child, scratch};
use memo_alloc::trace::{
    LaneEscape, PlanFile, PlanLanes, PlanSlot, TraceScope, FORMAT_VERSION, PLAN_FORMAT,
};
use memo_alloc::{MemoAlloc, PlanRejection, PlanState};

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

fn scope(id: u32, parent: Option<u32>, name: &str, occurrence: u32) -> TraceScope {
    TraceScope {
        id,
        parent,
        name: name.into(),
        occurrence,
        enter: None,
        exit: None,
    }
}

fn slot(scope: u32, ordinal: u32, size: u64, offset: u64) -> PlanSlot {
    PlanSlot {
        scope,
        ordinal,
        size,
        min_size: None,
        align: 16,
        offset: Some(offset),
        lifetime: None,
    }
}

/// A valid plan of `key`: two slots under an op.
fn plan(key: &str) -> PlanFile {
    PlanFile {
        format: PLAN_FORMAT.into(),
        version: FORMAT_VERSION,
        key: key.into(),
        strategy: "test".into(),
        height: 2048,
        lower_bound: 2048,
        naive: 2048,
        scopes: vec![scope(0, None, key, 0), scope(1, Some(0), "op", 0)],
        slots: vec![slot(1, 0, 1024, 0), slot(1, 1, 1024, 1024)],
        lanes: Default::default(),
    }
}

fn write(dir: &Path, name: &str, plan: &PlanFile) {
    std::fs::write(dir.join(name), serde_json::to_vec(plan).unwrap()).unwrap();
}

/// The pass the plans above are for.
fn run(key: &'static str) {
    let _p = memo_alloc::pass(key);
    let _o = memo_alloc::op("op");
    let a = black_box(vec![1u8; 1000]);
    let b = black_box(vec![2u8; 1000]);
    assert_eq!(a[999] as u32 + b[999] as u32, 3);
}

#[test]
fn hostile_plan_files_are_rejected_and_their_keys_profiled() {
    let dir = scratch("hostile");
    // An ordinal that would size a ~96 GB table.
    let mut p = plan("hostile-ordinal");
    p.slots[1].ordinal = 4_000_000_000;
    write(&dir, "hostile-ordinal.1.plan.json", &p);
    // An occurrence of u32::MAX (it must neither overflow nor poison the loader).
    let mut p = plan("hostile-occurrence");
    p.scopes[1].occurrence = u32::MAX;
    write(&dir, "hostile-occurrence.1.plan.json", &p);
    // A slot past the height, and a height past any slab.
    let mut p = plan("hostile-offset");
    p.slots[1].offset = Some(2040);
    write(&dir, "hostile-offset.1.plan.json", &p);
    let mut p = plan("hostile-height");
    p.height = u64::MAX;
    write(&dir, "hostile-height.1.plan.json", &p);
    // Another format version.
    let mut p = plan("hostile-version");
    p.version = 99;
    write(&dir, "hostile-version.1.plan.json", &p);
    // A truncated file.
    let text = serde_json::to_vec(&plan("hostile-truncated")).unwrap();
    std::fs::write(
        dir.join("hostile-truncated.1.plan.json"),
        &text[..text.len() / 2],
    )
    .unwrap();
    // 2 MB of slots nested in address: quadratic overlap checks if trusted.
    let n = 20_000u32;
    let top = 16 * n as u64 + 16;
    let mut p = plan("hostile-overlap");
    p.scopes.truncate(1);
    p.height = top;
    p.slots = (0..n)
        .map(|i| slot(0, i, top - 16 * i as u64, 16 * i as u64))
        .collect();
    write(&dir, "hostile-overlap.1.plan.json", &p);
    // Lanes: a bound that is no size class, a class of 2^25 cells (a 4 MB bitmap from a
    // few bytes of document), and cells past the largest slab.
    let mut p = plan("hostile-lanes-max");
    p.lanes = PlanLanes {
        max: 48,
        cells: vec![1, 1],
        requests: 2,
        ..PlanLanes::default()
    };
    write(&dir, "hostile-lanes-max.1.plan.json", &p);
    let mut p = plan("hostile-lanes-cells");
    p.lanes = PlanLanes {
        max: 64,
        cells: vec![1 << 25],
        requests: 2,
        ..PlanLanes::default()
    };
    write(&dir, "hostile-lanes-cells.1.plan.json", &p);
    let mut p = plan("hostile-lanes-height");
    p.lanes = PlanLanes {
        max: 4096,
        cells: vec![0, 0, 0, 0, 0, 0, 0, 0, 1 << 24],
        requests: 2,
        ..PlanLanes::default()
    };
    write(&dir, "hostile-lanes-height.1.plan.json", &p);
    // An escaping lane request of a scope the plan does not have.
    let mut p = plan("hostile-lanes-escape");
    p.lanes = PlanLanes {
        max: 64,
        cells: vec![1],
        requests: 2,
        escapes: vec![LaneEscape {
            scope: 99,
            ordinal: 0,
            cell: 16,
        }],
    };
    write(&dir, "hostile-lanes-escape.1.plan.json", &p);
    // Another program's valid plan.
    write(&dir, "elsewhere.3.plan.json", &plan("another-program"));
    let stderr = run_child("child_hostile", &[("MEMO_PLAN_DIR", dir.to_str().unwrap())]);
    let rejections: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("memomalloc: rejected plan file"))
        .collect();
    assert_eq!(rejections.len(), 10, "one line per bad file:\n{stderr}");
    for (file, reason) in [
        ("hostile-ordinal.1.plan.json", "ordinal"),
        ("hostile-occurrence.1.plan.json", "occurrence"),
        ("hostile-offset.1.plan.json", "does not fit"),
        ("hostile-height.1.plan.json", "height"),
        ("hostile-version.1.plan.json", "version"),
        ("hostile-truncated.1.plan.json", "EOF"),
        ("hostile-lanes-max.1.plan.json", "lanes.max 48"),
        ("hostile-lanes-cells.1.plan.json", "lanes.cells[0]"),
        ("hostile-lanes-height.1.plan.json", "lanes of"),
        (
            "hostile-lanes-escape.1.plan.json",
            "lanes.escapes[0] refers to unknown scope 99",
        ),
    ] {
        assert!(
            rejections
                .iter()
                .any(|l| l.contains(file) && l.contains(reason)),
            "{file} rejected for {reason}:\n{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "child process"]
fn child_hostile() {
    if !is_child() {
        return;
    }
    run("hostile-ordinal"); // the first pass loads the plans
    let s = memo_alloc::stats();
    assert!(
        max_rss_bytes() < 400 << 20,
        "loading took {} MiB",
        max_rss_bytes() >> 20
    );
    assert_eq!(s.plan_files_loaded, 2, "{s:?}");
    assert_eq!(
        s.plan_files_rejected[PlanRejection::Invalid as usize],
        8,
        "{s:?}"
    );
    assert_eq!(
        s.plan_files_rejected[PlanRejection::Unsupported as usize],
        1,
        "{s:?}"
    );
    assert_eq!(
        s.plan_files_rejected[PlanRejection::Malformed as usize],
        1,
        "{s:?}"
    );
    // Rejected keys are profiled afresh, on this thread and on others (the loader did not
    // panic and poison anything).
    for _ in 0..2 {
        run("hostile-ordinal");
    }
    std::thread::spawn(|| {
        for _ in 0..3 {
            run("hostile-occurrence");
        }
    })
    .join()
    .unwrap();
    for key in ["hostile-ordinal", "hostile-occurrence"] {
        let r = memo_alloc::report(key).unwrap();
        assert_eq!(r.passes_profiled, 1, "{r:?}");
        assert!(r.passes_replayed >= 2 && r.slab_hits >= 4, "{r:?}");
    }
    // The overlapping plan loaded with its costliest slots demoted, and replays.
    for _ in 0..3 {
        let _p = memo_alloc::pass("hostile-overlap");
        black_box(vec![0u8; 100]);
    }
    let r = memo_alloc::report("hostile-overlap").unwrap();
    assert_eq!(r.passes_profiled, 0, "{r:?}");
    assert!(r.slots_demoted > 0, "{r:?}");
    // Another program's plan is there for its key.
    let r = memo_alloc::report("another-program").unwrap();
    assert_eq!(r.state, PlanState::Planned, "{r:?}");
}

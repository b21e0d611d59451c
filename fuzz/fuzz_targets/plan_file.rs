//! Plan files as `MEMO_PLAN_DIR` loads them: the input is written as the one plan file of
//! a directory and loaded by the allocator's loader (size bound, JSON, header, bounds
//! checks, compile, install). A plan the loader accepts is then replayed with its own
//! request sequence under the shadow rules. Rejections are answers; a panic or a crash is
//! a failure.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use memo_alloc::trace::PlanFile;
use memomalloc_fuzz::program::run_own_sequence;

/// This process's plan directory.
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("memo-fuzz-plans-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let path = dir().join("fuzz.1.plan.json");
    std::fs::write(&path, data).expect("a writable scratch directory");
    let loaded = memo_alloc::testing::load_plans(dir(), 8);
    memo_alloc::testing::reclaim_retired();
    if loaded == 1 {
        let plan: PlanFile = serde_json::from_slice(data).expect("the loader parsed it");
        run_own_sequence(&plan);
    }
});

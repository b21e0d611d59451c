//! Hooks for this crate's own tests and the workspace's fuzz targets (not part of the
//! contract; hidden from the docs).

pub mod replay;

pub use crate::support::sync::LockId;

/// Installs `hook`, called with the lock's id right after any lock of the allocator is
/// taken (at pass boundaries), by the thread that took it: a test can park a thread inside
/// a critical section (for example to fork while it is there). `None` removes it.
pub fn set_lock_hook(hook: Option<fn(LockId)>) {
    crate::support::sync::set_lock_hook(hook);
}

/// Makes the next plan panic: the planner gives that profile up and goes on.
pub fn panic_next_plan() {
    crate::plan::job::PANIC_NEXT_PLAN.store(true, std::sync::atomic::Ordering::Release);
}

/// Pauses (`true`) or resumes the planner thread before its next job: a test can then
/// observe a key whose profile is queued. `wait_for_plans` does not return while paused
/// with jobs queued.
pub fn pause_planner(paused: bool) {
    crate::plan::worker::PAUSED.store(paused, std::sync::atomic::Ordering::Release);
}

/// Plans `problem` as the allocator's planner does (`best` within the allocator's budget,
/// see `offsets.rs`), so a test can measure what planning costs.
pub fn plan_offsets(
    strategy: memo_planner::OffsetStrategy,
    problem: &memo_planner::Problem,
) -> memo_planner::OffsetPlan {
    crate::plan::offsets::plan(strategy, problem)
}

/// As [`plan_offsets`], with the step of the allocator's budget that made the plan:
/// `"named"` (a strategy other than `best`), `"sweep"`, `"by-size"`, `"strip-packing"`,
/// `"portfolio"` or `"exact"` (see `offsets.rs`).
pub fn plan_offsets_routed(
    strategy: memo_planner::OffsetStrategy,
    problem: &memo_planner::Problem,
) -> (memo_planner::OffsetPlan, &'static str) {
    use crate::plan::offsets::Route;
    let (plan, route) = crate::plan::offsets::plan_routed(strategy, problem);
    let name = match route {
        Route::Named => "named",
        Route::Sweep => "sweep",
        Route::BySize => "by-size",
        Route::StripPacking => "strip-packing",
        Route::Portfolio => "portfolio",
        Route::Exact => "exact",
    };
    (plan, name)
}

/// The `VmFlags` line of the mapping holding `p`, from `/proc/self/smaps` (`hg`: advised
/// for transparent huge pages); panics when no mapping holds `p`.
#[cfg(target_os = "linux")]
pub fn vm_flags(p: *const u8) -> String {
    let entry = smaps_entry(p);
    let flags = entry.lines().find(|l| l.starts_with("VmFlags:"));
    flags.expect("an smaps entry has VmFlags").to_string()
}

/// The entry of `/proc/self/smaps` for the mapping holding `p`: its header line (the
/// address range first) and its fields (`AnonHugePages:`, say), one per line; panics when
/// no mapping holds `p`.
#[cfg(target_os = "linux")]
pub fn smaps_entry(p: *const u8) -> String {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
    let mut entry: Option<String> = None;
    for line in smaps.lines() {
        let range = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = range.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                if entry.is_some() {
                    break;
                }
                if (lo..hi).contains(&(p as usize)) {
                    entry = Some(String::new());
                } else {
                    continue;
                }
            }
        }
        if let Some(e) = entry.as_mut() {
            e.push_str(line);
            e.push('\n');
        }
    }
    entry.unwrap_or_else(|| panic!("no mapping holds {p:?}"))
}

/// Whether `p` is one of the region's own blocks (see `own_blocks.rs`): the allocator's
/// own large buffers, and the large blocks of profiled and interim passes.
pub fn is_own_block(p: *const u8) -> bool {
    crate::memory::own_blocks::contains(p.cast_mut())
}

/// Bytes resident in the slabs of replaced or evicted plans not yet freed (`stats()`
/// counts live plans' slabs and idle blocks only), measured with `mincore`.
pub fn retired_resident_bytes() -> u64 {
    crate::support::thread::with_bookkeeping(|| {
        crate::registry::reclaim::RECLAIMER.resident_bytes()
    })
}

/// Returns every idle slab block to the OS (`stats().idle_blocks` becomes 0), so that a
/// test of how passes share blocks starts from none, whatever ran before it.
pub fn release_idle_blocks() {
    crate::support::thread::with_bookkeeping(crate::memory::blocks::release_idle)
}

/// Makes slab block takes fail as if the region were exhausted: after `n` more succeed,
/// every one fails; `None` stops failing.
pub fn fail_block_takes_after(n: Option<u32>) {
    let left = n.map_or(u32::MAX, |n| n.min(u32::MAX - 1));
    crate::memory::blocks::FAIL_AFTER.store(left, std::sync::atomic::Ordering::Relaxed);
}

/// Loads the plan files of `dir` as `MEMO_PLAN_DIR` does at the first pass (each file
/// read, checked and compiled; a usable one installed as its key's plan, at most
/// `max_plans` kept); returns how many keys got a plan. The plan-file fuzz target runs it.
pub fn load_plans(dir: &std::path::Path, max_plans: usize) -> usize {
    crate::support::thread::with_bookkeeping(|| crate::plan::load::load_plans(dir, max_plans))
}

/// Frees the retired plans nothing reaches any more, as a pass end does (a test or fuzz
/// target that loads plans without running passes calls it to keep memory bounded).
pub fn reclaim_retired() {
    crate::support::thread::with_bookkeeping(|| {
        crate::registry::reclaim::RECLAIMER.reclaim();
    });
}

//! Plans loaded from `MEMO_PLAN_DIR` at the first pass: each checked plan file of the
//! directory becomes its key's plan, as if it had been profiled. A file is checked as a
//! plan too: the slots it gives lifetimes must not share addresses while live together
//! (memo-planner's validator, a sweep in `O(n log n)`), or it is rejected as
//! [`PlanRejection::Overlapping`].

use std::path::Path;

use memo_planner::{validate_offsets, Buffer, OffsetPlan, PlanError, Problem};

use crate::format::files;
use crate::format::trace::PlanFile;
use crate::registry::cache;
use crate::registry::reclaim::RECLAIMER;
use crate::registry::{self, KeyEntry};
use crate::replay::slab::compile::CompiledPlan;
use crate::replay::slab::pool::{Slabs, MAX_INSTANCES};
use crate::stats::{self, PlanRejection, GLOBAL};

/// Loads every plan file of `dir` (see `files::plan_files`) into the registry; returns
/// how many keys got a plan. A file that cannot be used is reported on stderr in one line
/// naming it and the reason, and counted (`Stats::plan_files_rejected`); its key is
/// profiled afresh.
pub(crate) fn load_plans(dir: &Path, max_plans: usize) -> usize {
    let paths = match files::plan_files(dir) {
        Ok(paths) => paths,
        Err(e) => {
            eprintln!(
                "memomalloc: MEMO_PLAN_DIR {} cannot be read: {e}",
                dir.display()
            );
            return 0;
        }
    };
    let mut loaded = 0;
    for path in paths {
        let compiled = files::read_plan_checked(&path).and_then(|p| {
            let named =
                |(why, e): (PlanRejection, String)| (why, format!("{}: {e}", path.display()));
            check_lifetimes(&p).map_err(named)?;
            CompiledPlan::compile(&p).map_err(|e| named((PlanRejection::Invalid, e.to_string())))
        });
        match compiled {
            Ok(plan) => {
                let Some(entry) = registry::entry(&plan.key) else {
                    continue;
                };
                if install(entry, plan, max_plans) {
                    loaded += 1;
                    stats::add(&GLOBAL.plan_files_loaded, 1);
                }
            }
            Err((why, e)) => {
                stats::add(&GLOBAL.plan_files_rejected[why as usize], 1);
                eprintln!("memomalloc: rejected plan file {e}");
            }
        }
    }
    loaded
}

/// Installs a plan loaded from a file as the plan of `entry` and evicts plans beyond
/// `max_plans`. Returns `false` if memory ran out.
fn install(entry: &'static KeyEntry, compiled: CompiledPlan, max_plans: usize) -> bool {
    let Some(slabs) = Slabs::new(compiled, MAX_INSTANCES) else {
        return false;
    };
    let raw = Box::into_raw(slabs);
    // SAFETY: `raw` is a fresh box owned here.
    unsafe { entry.install(raw, &RECLAIMER) };
    cache::evict_beyond(max_plans, entry);
    true
}

/// Checks that no two slots of `plan` with a lifetime share an address while both are
/// live (slots without one, or without an offset, are not checked: nothing says when
/// they live). The error names both slots by their index in the document.
pub(crate) fn check_lifetimes(plan: &PlanFile) -> Result<(), (PlanRejection, String)> {
    let mut slots = Vec::new();
    let mut buffers = Vec::new();
    let mut offsets = Vec::new();
    for (i, s) in plan.slots.iter().enumerate() {
        let (Some(offset), Some([lower, upper])) = (s.offset, s.lifetime) else {
            continue;
        };
        if upper <= lower {
            let msg = format!("slot #{i} has an empty lifetime [{lower}, {upper})");
            return Err((PlanRejection::Invalid, msg));
        }
        slots.push(i);
        buffers.push(Buffer::new(String::new(), lower, upper, s.size));
        offsets.push(offset);
    }
    if buffers.is_empty() {
        return Ok(());
    }
    // Every buffer has a lifetime and a size (`PlanFile::check`); alignment 1: the
    // offsets' alignment is checked there too.
    let problem = Problem::unnamed(buffers).map_err(|e| (PlanRejection::Invalid, e.to_string()))?;
    match validate_offsets(&problem, &OffsetPlan { offsets }) {
        Ok(_) => Ok(()),
        Err(PlanError::Overlap {
            first,
            second,
            time,
            addresses,
        }) => {
            let msg = format!(
                "slots #{} and #{} are live together at time {time} and share addresses {}..{}",
                slots[first.0], slots[second.0], addresses.0, addresses.1
            );
            Err((PlanRejection::Overlapping, msg))
        }
        Err(e) => Err((PlanRejection::Invalid, e.to_string())),
    }
}

//! Plans loaded from `MEMO_PLAN_DIR` at the first pass: each checked plan file of the
//! directory becomes its key's plan, as if it had been profiled.

use std::path::Path;

use crate::format::files;
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
            CompiledPlan::compile(&p)
                .map_err(|e| (PlanRejection::Invalid, format!("{}: {e}", path.display())))
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

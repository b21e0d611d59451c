//! Trace files as the `memo` CLI reads them (`memo stats`, `export`, `plan` of a trace):
//! the document parsed and checked (`Trace::check`); a trace that passes is turned into
//! its planner problem, planned and validated, and studied as `memo stats` and `memo
//! export` study it. Rejections are answers; a panic or a crash is a failure.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memo_alloc::trace::Trace;
use memo_planner::{validate_offsets, OffsetStrategy};
use memomalloc::study::{self, Study};

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = serde_json::from_slice::<Trace>(data) else {
        return;
    };
    if trace.check().is_err() {
        return;
    }
    let (problem, _chains) = trace.to_problem();
    let plan = OffsetStrategy::GreedyBySize.plan(&problem);
    validate_offsets(&problem, &plan).expect("a valid plan of a checked trace");
    let study = Study::with_strategy(&trace, OffsetStrategy::GreedyBySize);
    serde_json::to_string(&study).expect("a study serialises");
    study::to_csv(&trace);
    study::dhat::to_dhat(&trace, "memo");
    study::perfetto::to_perfetto(&trace, 16);
});

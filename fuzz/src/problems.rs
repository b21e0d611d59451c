//! What a problem file that parses must allow: planning and validation.

use memo_planner::format::FormatError;
use memo_planner::{validate_offsets, OffsetPlan, OffsetStrategy, Problem};

/// Plans a parsed problem (greedy by size: every strategy's plans are checked by the same
/// validator) and validates the plan, and validates the offsets the file carried (a
/// wrong plan is an answer, a panic is not). A rejected file is an answer too.
pub fn check_problem(parsed: Result<(Problem, Option<OffsetPlan>), FormatError>) {
    let Ok((problem, offsets)) = parsed else {
        return;
    };
    let plan = OffsetStrategy::GreedyBySize.plan(&problem);
    validate_offsets(&problem, &plan).expect("greedy by size plans validly");
    if let Some(offsets) = offsets {
        let _ = validate_offsets(&problem, &offsets);
    }
}

//! Problem files in JSON as `memo plan` and `memo compare` read them: parsed with the
//! format's checks; a problem that passes is planned (greedy by size) and the plan
//! validated, and offsets the file carries are validated as given. Rejections are
//! answers; a panic or a crash is a failure.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memomalloc_fuzz::problems::check_problem;

fuzz_target!(|data: &[u8]| {
    check_problem(memo_planner::format::json::parse_problem_json_bytes(
        data,
        "fuzz.json",
    ));
});

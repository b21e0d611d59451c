//! The replay matcher fed arbitrary request sequences against a compiled plan: a plan
//! document made from the input (slots may overlap in address) and a program of requests,
//! frees, reallocs and pass ends, run through memo-alloc's replay. Every block handed out
//! is checked by the shadow rules (aligned, overlapping no live block, its pattern intact
//! until freed, its contents kept by a realloc); a panic or a crash is a failure.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memomalloc_fuzz::program::{run, Program};

fuzz_target!(|program: Program| run(&program));

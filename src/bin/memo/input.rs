//! Reading a command's INPUT: a planner problem (CSV or JSON) or a memomalloc trace.

use std::path::Path;

use memo_alloc::trace::{Trace, TRACE_FORMAT};
use memo_planner::format::parse_problem;
use memo_planner::Problem;
use memomalloc::study::op_path;

use crate::failure::Failure;

/// A problem to plan, with what the heap map can say about its buffers.
pub struct Input {
    /// The problem.
    pub problem: Problem,
    /// The op (scope path) that made each buffer, for traces.
    pub groups: Option<Vec<String>>,
}

/// Reads `path`; a JSON document whose `format` is a memomalloc trace becomes the trace's
/// planner problem (allocations that escaped the pass are left out). A file that cannot be
/// read or parsed is a [`Failure::BadFile`] naming the file (and the line and field, for
/// CSV).
pub fn read(path: &Path) -> Result<Input, Failure> {
    let bytes = read_file(path)?;
    if looks_like_trace(&bytes) {
        let trace = parse_trace(path, &bytes)?;
        let (problem, chains) = trace.to_problem();
        let groups = chains
            .iter()
            .map(|c| op_path(&trace, trace.allocations[c.root as usize].scope))
            .collect();
        return Ok(Input {
            problem,
            groups: Some(groups),
        });
    }
    let name = path.display().to_string();
    let (problem, _) = parse_problem(&bytes, &name).map_err(|e| Failure::BadFile(e.to_string()))?;
    Ok(Input {
        problem,
        groups: None,
    })
}

fn looks_like_trace(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(256)];
    let text = String::from_utf8_lossy(head);
    text.trim_start().starts_with('{') && text.contains(TRACE_FORMAT)
}

/// Reads and checks a memomalloc trace ([`Trace::check`]); errors name the file and what
/// is wrong.
pub fn load_trace(path: &Path) -> Result<Trace, Failure> {
    parse_trace(path, &read_file(path)?)
}

fn read_file(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path)
        .map_err(|e| Failure::BadFile(format!("{}: cannot read the file: {e}", path.display())))
}

fn parse_trace(path: &Path, bytes: &[u8]) -> Result<Trace, Failure> {
    let invalid = |e: &dyn std::fmt::Display| {
        Failure::BadFile(format!(
            "{}: not a valid memomalloc trace: {e}",
            path.display()
        ))
    };
    let trace: Trace = serde_json::from_slice(bytes).map_err(|e| invalid(&e))?;
    trace.check().map_err(|e| invalid(&e))?;
    Ok(trace)
}

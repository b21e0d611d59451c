//! JSON for problems (a versioned document) and plans (their serde form).
//!
//! A problem file is
//!
//! ```json
//! {
//!   "version": 1,
//!   "buffers": [
//!     {"id":"a","lower":0,"upper":2,"size":8},
//!     {"id":"b","lower":1,"upper":3,"size":4,"align":64,"offset":8}
//!   ]
//! }
//! ```
//!
//! `version` is optional (only 1 is known), other top-level keys are ignored, and a bare
//! array of buffers is accepted too. In a buffer, `align` (alias `alignment`) is optional
//! (1 when absent), and `offset` is optional but must then be given for every buffer: the
//! offsets are returned as an [`OffsetPlan`], like the CSV `offset` column. Unknown keys in a
//! buffer are rejected (a misspelt `align` would otherwise be lost silently).
//!
//! Buffers are checked while they are read, so errors point at the line and column where
//! the offending value (or the end of the offending buffer) is, and name the key.
//!
//! Plans are written and read in the serde form of [`OffsetPlan`] (`{"offsets":[...]}`) and
//! [`SharedObjectsPlan`](crate::SharedObjectsPlan)
//! (`{"object_ids":[...],"object_sizes":[...]}`).

mod read;

use std::io::{self, Write};
use std::path::Path;

use serde::de::{DeserializeOwned, DeserializeSeed};
use serde::Serialize;

use super::error::{problem_error, FormatError, FormatErrorKind};
use crate::plan::OffsetPlan;
use crate::problem::Problem;
use read::{json_error, Ctx, DocSeed};

/// The `version` written in, and accepted from, problem files.
pub const PROBLEM_FILE_VERSION: u64 = 1;

fn strip_bom(input: &[u8]) -> &[u8] {
    input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input)
}

/// Parses a JSON problem file (see the [module documentation](self)) into a problem and,
/// when its buffers have offsets, the plan they describe.
///
/// ```
/// use memo_planner::format::{parse_problem_json, FormatErrorKind};
/// let text = r#"{"version": 1, "buffers": [
///     {"id": "a", "lower": 0, "upper": 2, "size": 8},
///     {"id": "b", "lower": 1, "upper": 3, "size": 4, "align": 4}
/// ]}"#;
/// let (problem, plan) = parse_problem_json(text, "p.json").unwrap();
/// assert_eq!(problem.len(), 2);
/// assert!(plan.is_none());
///
/// let bad = "[\n {\"id\": \"a\", \"lower\": 0, \"upper\": 2, \"size\": -8}\n]";
/// let err = parse_problem_json(bad, "p.json").unwrap_err();
/// assert_eq!(err.to_string(), r#"p.json:2:47: field "size": -8 must be positive"#);
/// assert_eq!(err.kind, FormatErrorKind::Negative);
/// ```
pub fn parse_problem_json(
    text: &str,
    name: &str,
) -> Result<(Problem, Option<OffsetPlan>), FormatError> {
    parse_problem_json_bytes(text.as_bytes(), name)
}

/// Like [`parse_problem_json`], for bytes (which must be UTF-8).
pub fn parse_problem_json_bytes(
    input: &[u8],
    name: &str,
) -> Result<(Problem, Option<OffsetPlan>), FormatError> {
    let input = strip_bom(input);
    if input.iter().all(u8::is_ascii_whitespace) {
        return Err(FormatError::new(
            name,
            Some(1),
            None,
            FormatErrorKind::Empty,
            "empty file: expected a JSON problem document",
        ));
    }
    let ctx = Ctx::default();
    let mut de = serde_json::Deserializer::from_slice(input);
    let parsed = DocSeed(&ctx)
        .deserialize(&mut de)
        .and_then(|p| de.end().map(|()| p))
        .map_err(|e| json_error(name, &e, Some(&ctx)))?;
    let fields = ["id", "upper", "size", "align"].map(str::to_string);
    let problem =
        Problem::new(parsed.buffers).map_err(|e| problem_error(name, &e, |_| None, &fields))?;
    Ok((
        problem,
        parsed.offsets.map(|offsets| OffsetPlan { offsets }),
    ))
}

/// Reads a JSON problem file (see [`parse_problem_json`]); errors name the file by its path.
pub fn read_problem_json_file(
    path: impl AsRef<Path>,
) -> Result<(Problem, Option<OffsetPlan>), FormatError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| FormatError::io(&name, &e))?;
    parse_problem_json_bytes(&bytes, &name)
}

fn is_one(v: &u64) -> bool {
    *v == 1
}

#[derive(Serialize)]
struct Row<'a> {
    id: &'a str,
    lower: u64,
    upper: u64,
    size: u64,
    #[serde(skip_serializing_if = "is_one")]
    align: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
}

/// Writes a problem (and optionally an offset plan, as per-buffer `offset`s) as a version 1
/// problem file, one buffer per line.
///
/// Fails with [`io::ErrorKind::InvalidInput`] when the plan's length differs from the
/// problem's, and with the writer's errors.
///
/// ```
/// use memo_planner::{Buffer, OffsetPlan, Problem};
/// use memo_planner::format::{parse_problem_json, write_problem_json};
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b", 1, 3, 4)]).unwrap();
/// let plan = OffsetPlan { offsets: vec![0, 8] };
/// let mut out = Vec::new();
/// write_problem_json(&mut out, &p, Some(&plan)).unwrap();
/// let text = String::from_utf8(out).unwrap();
/// assert_eq!(text, r#"{
///   "version": 1,
///   "buffers": [
///     {"id":"a","lower":0,"upper":2,"size":8,"offset":0},
///     {"id":"b","lower":1,"upper":3,"size":4,"offset":8}
///   ]
/// }
/// "#);
/// assert_eq!(parse_problem_json(&text, "p.json").unwrap(), (p, Some(plan)));
/// ```
pub fn write_problem_json<W: Write>(
    writer: W,
    problem: &Problem,
    plan: Option<&OffsetPlan>,
) -> io::Result<()> {
    if let Some(plan) = plan {
        if plan.offsets.len() != problem.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the plan has {} offsets for {} buffers",
                    plan.offsets.len(),
                    problem.len()
                ),
            ));
        }
    }
    let mut w = io::BufWriter::new(writer);
    write!(
        w,
        "{{\n  \"version\": {PROBLEM_FILE_VERSION},\n  \"buffers\": ["
    )?;
    for (i, b) in problem.buffers().iter().enumerate() {
        w.write_all(if i == 0 { b"\n    " } else { b",\n    " })?;
        let row = Row {
            id: &b.id,
            lower: b.lower,
            upper: b.upper,
            size: b.size,
            align: b.align,
            offset: plan.map(|p| p.offsets[i]),
        };
        serde_json::to_writer(&mut w, &row)?;
    }
    w.write_all(b"\n  ]\n}\n")?;
    w.flush()
}

/// [`write_problem_json`] into a `String`.
///
/// # Panics
///
/// When the plan's length differs from the problem's.
pub fn problem_to_json(problem: &Problem, plan: Option<&OffsetPlan>) -> String {
    let mut out = Vec::new();
    if let Err(e) = write_problem_json(&mut out, problem, plan) {
        panic!("problem_to_json: {e}");
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Parses a plan ([`OffsetPlan`] or [`SharedObjectsPlan`](crate::SharedObjectsPlan)) from
/// its serde JSON form. Checking it against a problem is the validator's job.
///
/// ```
/// use memo_planner::{OffsetPlan, SharedObjectsPlan};
/// use memo_planner::format::parse_plan_json;
/// let plan: OffsetPlan = parse_plan_json(r#"{"offsets": [0, 8]}"#, "plan.json").unwrap();
/// assert_eq!(plan.offsets, vec![0, 8]);
/// let err = parse_plan_json::<SharedObjectsPlan>(r#"{"object_ids": [0]}"#, "plan.json")
///     .unwrap_err();
/// assert_eq!(err.field.as_deref(), Some("object_sizes"));
/// assert_eq!(err.line, Some(1));
/// ```
pub fn parse_plan_json<T: DeserializeOwned>(text: &str, name: &str) -> Result<T, FormatError> {
    parse_plan_json_bytes(text.as_bytes(), name)
}

/// Like [`parse_plan_json`], for bytes.
pub fn parse_plan_json_bytes<T: DeserializeOwned>(
    input: &[u8],
    name: &str,
) -> Result<T, FormatError> {
    let input = strip_bom(input);
    if input.iter().all(u8::is_ascii_whitespace) {
        return Err(FormatError::new(
            name,
            Some(1),
            None,
            FormatErrorKind::Empty,
            "empty file: expected a JSON plan",
        ));
    }
    serde_json::from_slice(input).map_err(|e| json_error(name, &e, None))
}

/// Reads a plan file (see [`parse_plan_json`]); errors name the file by its path.
pub fn read_plan_json_file<T: DeserializeOwned>(path: impl AsRef<Path>) -> Result<T, FormatError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| FormatError::io(&name, &e))?;
    parse_plan_json_bytes(&bytes, &name)
}

/// Writes a plan in its serde JSON form, followed by a newline.
///
/// ```
/// use memo_planner::OffsetPlan;
/// use memo_planner::format::write_plan_json;
/// let mut out = Vec::new();
/// write_plan_json(&mut out, &OffsetPlan { offsets: vec![0, 8] }).unwrap();
/// assert_eq!(out, b"{\"offsets\":[0,8]}\n");
/// ```
pub fn write_plan_json<W: Write, T: Serialize>(writer: W, plan: &T) -> io::Result<()> {
    let mut w = io::BufWriter::new(writer);
    serde_json::to_writer(&mut w, plan)?;
    w.write_all(b"\n")?;
    w.flush()
}

#[cfg(test)]
mod tests;

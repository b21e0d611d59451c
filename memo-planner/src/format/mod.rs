//! File formats: CSV in the minimalloc convention and JSON (serde), for problems and plans.
//!
//! - [`csv`]: `id,lower,upper,size[,alignment][,offset]` with a header row, as
//!   minimalloc reads and writes it (column aliases, inclusive `end`, quoted ids).
//! - [`json`]: a versioned problem document `{"version": 1, "buffers": [...]}` (or a bare
//!   array of buffers), and plans in their serde form.
//!
//! Readers return the problem together with the [`OffsetPlan`] the file carries, if any (a
//! CSV `offset` column, JSON per-buffer `offset`s). Every rejection is a [`FormatError`]
//! naming the file, the line and the field; bad input never panics.
//!
//! ```
//! use memo_planner::format::{parse_problem, problem_to_csv, problem_to_json};
//! let csv = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\n";
//! let (problem, plan) = parse_problem(csv.as_bytes(), "input.csv").unwrap();
//! assert!(plan.is_none());
//! assert_eq!(problem_to_csv(&problem, None), csv);
//! let json = problem_to_json(&problem, None);
//! assert_eq!(parse_problem(json.as_bytes(), "input.json").unwrap().0, problem);
//! ```

pub mod csv;
mod error;
pub mod json;

use std::path::Path;

pub use self::csv::{
    parse_problem_csv, parse_problem_csv_bytes, problem_to_csv, read_problem_csv_file,
    write_problem_csv,
};
pub use self::error::{FormatError, FormatErrorKind};
pub use self::json::{
    parse_plan_json, parse_plan_json_bytes, parse_problem_json, parse_problem_json_bytes,
    problem_to_json, read_plan_json_file, read_problem_json_file, write_plan_json,
    write_problem_json, PROBLEM_FILE_VERSION,
};

use crate::plan::OffsetPlan;
use crate::problem::Problem;

/// A problem file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// minimalloc CSV ([`parse_problem_csv`]).
    Csv,
    /// JSON problem document ([`parse_problem_json`]).
    Json,
}

impl Format {
    /// The format a path's extension names (`.csv`, `.json`, ASCII case ignored), if any.
    ///
    /// ```
    /// use memo_planner::format::Format;
    /// assert_eq!(Format::from_extension("runs/resnet50.CSV"), Some(Format::Csv));
    /// assert_eq!(Format::from_extension("plan.json"), Some(Format::Json));
    /// assert_eq!(Format::from_extension("trace.txt"), None);
    /// ```
    pub fn from_extension(path: impl AsRef<Path>) -> Option<Format> {
        let ext = path.as_ref().extension()?.to_str()?;
        if ext.eq_ignore_ascii_case("csv") {
            Some(Format::Csv)
        } else if ext.eq_ignore_ascii_case("json") {
            Some(Format::Json)
        } else {
            None
        }
    }

    /// Guesses from the content: JSON when the first non-whitespace character (after a
    /// byte order mark) is `[` or `{`, CSV otherwise.
    ///
    /// ```
    /// use memo_planner::format::Format;
    /// assert_eq!(Format::sniff(b"  \n{\"buffers\": []}"), Format::Json);
    /// assert_eq!(Format::sniff(b"id,lower,upper,size\n"), Format::Csv);
    /// ```
    pub fn sniff(bytes: &[u8]) -> Format {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[' | b'{') => Format::Json,
            _ => Format::Csv,
        }
    }
}

/// Parses a problem in the format [`Format::from_extension`] gives for `name`, or else the
/// one [`Format::sniff`] guesses; returns the problem and the offsets the file carries.
pub fn parse_problem(
    bytes: &[u8],
    name: &str,
) -> Result<(Problem, Option<OffsetPlan>), FormatError> {
    match Format::from_extension(name).unwrap_or_else(|| Format::sniff(bytes)) {
        Format::Csv => parse_problem_csv_bytes(bytes, name),
        Format::Json => parse_problem_json_bytes(bytes, name),
    }
}

/// Reads a problem file, CSV or JSON by its extension (`.csv`, `.json`) or, for other
/// names, by its first non-whitespace character (`[` or `{` means JSON); errors name the
/// file by its path.
///
/// ```no_run
/// use memo_planner::format::read_problem_file;
/// let (problem, offsets) = read_problem_file("trace.json")?;
/// # Ok::<(), memo_planner::format::FormatError>(())
/// ```
pub fn read_problem_file(
    path: impl AsRef<Path>,
) -> Result<(Problem, Option<OffsetPlan>), FormatError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| FormatError::io(&name, &e))?;
    match Format::from_extension(path).unwrap_or_else(|| Format::sniff(&bytes)) {
        Format::Csv => parse_problem_csv_bytes(&bytes, &name),
        Format::Json => parse_problem_json_bytes(&bytes, &name),
    }
}

#[cfg(test)]
mod tests;

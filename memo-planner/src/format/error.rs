//! The one error type of the file formats: where (file, line, field) and what.

use std::fmt;

use crate::problem::ProblemError;

/// What kind of problem a [`FormatError`] reports; useful to match on without parsing the
/// message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FormatErrorKind {
    /// The file could not be read.
    Io(std::io::ErrorKind),
    /// The file is empty (or only whitespace): no header, no document.
    Empty,
    /// The file is well formed but lists no buffers.
    NoBuffers,
    /// A required CSV column (or JSON field of a buffer) is absent.
    MissingColumn,
    /// A CSV header names a column twice (or two aliases of one column), or a JSON object
    /// repeats a key.
    DuplicateColumn,
    /// A CSV row has more or fewer fields than the header.
    FieldCount,
    /// Malformed text: an unterminated quote, bad JSON syntax, invalid UTF-8 in an id.
    Syntax,
    /// A JSON value of the wrong type or an unknown key.
    Schema,
    /// A field that should be a non-negative integer is not one.
    NotANumber,
    /// A negative number where a non-negative integer is expected.
    Negative,
    /// A number above `u64::MAX` (or an inclusive `end` of `u64::MAX`).
    OutOfRange,
    /// `upper <= lower`: the buffer is never alive.
    EmptyLifetime,
    /// A buffer of size zero.
    ZeroSize,
    /// An alignment that is zero or not a power of two.
    BadAlignment,
    /// Two buffers with the same id.
    DuplicateId,
    /// The sizes (with alignment padding) add up to more than `u64::MAX` bytes
    /// ([`crate::ProblemError::TooLarge`]).
    TooLarge,
    /// Some buffers have an offset and others do not.
    MissingOffset,
    /// A JSON document with a `version` this reader does not know.
    UnsupportedVersion,
}

/// Why a file could not be read as a problem or a plan.
///
/// Names the file (the display name the caller passed, usually the path), the 1-based line
/// (the CSV header is line 1), for JSON also the column, the field (CSV column or JSON key,
/// as spelled in the input) when one is to blame, and a message.
///
/// ```
/// use memo_planner::format::{parse_problem_csv, FormatErrorKind};
/// let err = parse_problem_csv("id,lower,upper,size\na,0,2,8\nb,1,3,0\n", "resnet50.csv")
///     .unwrap_err();
/// assert_eq!(err.to_string(), r#"resnet50.csv:3: field "size": "0" must be positive"#);
/// assert_eq!((err.line, err.field.as_deref()), (Some(3), Some("size")));
/// assert_eq!(err.kind, FormatErrorKind::ZeroSize);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FormatError {
    /// Display name of the file, as given by the caller (e.g. its path).
    pub file: String,
    /// 1-based line; `None` when the file could not be read at all.
    pub line: Option<usize>,
    /// 1-based column (JSON only).
    pub column: Option<usize>,
    /// The column or key to blame, as spelled in the input.
    pub field: Option<String>,
    /// What is wrong, without the location.
    pub message: String,
    /// The kind of error.
    pub kind: FormatErrorKind,
}

impl FormatError {
    pub(crate) fn new(
        file: &str,
        line: Option<usize>,
        field: Option<&str>,
        kind: FormatErrorKind,
        message: impl Into<String>,
    ) -> FormatError {
        FormatError {
            file: file.to_string(),
            line,
            column: None,
            field: field.map(str::to_string),
            message: message.into(),
            kind,
        }
    }

    pub(crate) fn io(file: &str, err: &std::io::Error) -> FormatError {
        FormatError::new(
            file,
            None,
            None,
            FormatErrorKind::Io(err.kind()),
            format!("cannot read the file: {err}"),
        )
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if let Some(field) = &self.field {
            write!(f, "field {field:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for FormatError {}

/// Quotes a piece of input for a message, cut to a readable length.
pub(crate) fn quote(raw: &[u8]) -> String {
    const MAX: usize = 40;
    let text = String::from_utf8_lossy(raw);
    if text.chars().count() <= MAX {
        format!("{text:?}")
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut:?}...")
    }
}

/// Maps a [`ProblemError`] to the line of the offending buffer; `fields` names the id,
/// upper, size and alignment fields.
pub(crate) fn problem_error(
    name: &str,
    e: &ProblemError,
    line_of: impl Fn(usize) -> Option<usize>,
    fields: &[String; 4],
) -> FormatError {
    let (index, field, kind) = match e {
        ProblemError::EmptyLifetime { index, .. } => {
            (Some(*index), &fields[1], FormatErrorKind::EmptyLifetime)
        }
        ProblemError::ZeroSize { index, .. } => {
            (Some(*index), &fields[2], FormatErrorKind::ZeroSize)
        }
        ProblemError::BadAlignment { index, .. } => {
            (Some(*index), &fields[3], FormatErrorKind::BadAlignment)
        }
        ProblemError::DuplicateId { index, .. } => {
            (Some(*index), &fields[0], FormatErrorKind::DuplicateId)
        }
        ProblemError::TooLarge => (None, &fields[2], FormatErrorKind::TooLarge),
    };
    FormatError::new(
        name,
        index.and_then(&line_of),
        Some(field),
        kind,
        e.to_string(),
    )
}

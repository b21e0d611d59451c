//! CSV in the minimalloc convention.
//!
//! A header row names the columns, in any order (ASCII case ignored):
//!
//! | column | aliases | meaning |
//! | --- | --- | --- |
//! | `id` | `buffer`, `buffer_id` | any string, unique in the file |
//! | `lower` | `begin`, `start` | first time step alive |
//! | `upper` | | first time step no longer alive (exclusive) |
//! | `end` | | last time step alive (inclusive): `upper = end + 1` |
//! | `size` | | bytes, positive |
//! | `alignment` | `align` | optional, a power of two; 1 when absent |
//! | `offset` | | optional: a plan, returned next to the problem |
//!
//! Exactly one of `upper` and `end` must be present. Other columns (minimalloc's `hint` and
//! `gaps`, say) are ignored. Whitespace around fields is trimmed, blank lines are skipped,
//! CRLF line ends and a UTF-8 byte order mark are accepted, and fields may be quoted with
//! RFC 4180 double quotes (`"a, ""b"""` is the id `a, "b"`; a quoted field may span lines).
//!
//! Every rejection is a [`FormatError`] naming the file, the line (the header is line 1 when
//! it is the first line) and the column as spelled in the header.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use super::error::{quote, FormatError, FormatErrorKind};
use crate::plan::OffsetPlan;
use crate::problem::{Buffer, Problem, ProblemError};

/// What a column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Id,
    Lower,
    Upper,
    End,
    Size,
    Align,
    Offset,
    Ignored,
}

impl Role {
    fn of(name: &[u8]) -> Role {
        const TABLE: &[(&str, Role)] = &[
            ("id", Role::Id),
            ("buffer", Role::Id),
            ("buffer_id", Role::Id),
            ("lower", Role::Lower),
            ("begin", Role::Lower),
            ("start", Role::Lower),
            ("upper", Role::Upper),
            ("end", Role::End),
            ("size", Role::Size),
            ("alignment", Role::Align),
            ("align", Role::Align),
            ("offset", Role::Offset),
        ];
        TABLE
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
            .map_or(Role::Ignored, |&(_, r)| r)
    }

    /// The slot a column fills; `upper` and `end` fill the same one.
    fn slot(self) -> Option<usize> {
        match self {
            Role::Id => Some(0),
            Role::Lower => Some(1),
            Role::Upper | Role::End => Some(2),
            Role::Size => Some(3),
            Role::Align => Some(4),
            Role::Offset => Some(5),
            Role::Ignored => None,
        }
    }
}

/// A field's bytes: in the input, or (quoted fields) unescaped in the scratch buffer.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
    in_scratch: bool,
}

/// A malformed record: line, index of the field, message.
struct SyntaxError {
    line: usize,
    field: usize,
    message: String,
}

/// Splits the input into records of fields without allocating per field.
struct Scanner<'a> {
    input: &'a [u8],
    pos: usize,
    /// Line of `pos`, 1-based.
    line: usize,
}

impl<'a> Scanner<'a> {
    /// Reads the next non-blank record into `fields` (and `scratch`); returns its first line.
    fn next_record(
        &mut self,
        fields: &mut Vec<Span>,
        scratch: &mut Vec<u8>,
    ) -> Result<Option<usize>, SyntaxError> {
        let input = self.input;
        let len = input.len();
        fields.clear();
        scratch.clear();
        // Skip blank lines.
        loop {
            let mut i = self.pos;
            while i < len && matches!(input[i], b' ' | b'\t' | b'\r') {
                i += 1;
            }
            if i >= len {
                self.pos = len;
                return Ok(None);
            }
            if input[i] != b'\n' {
                break;
            }
            self.pos = i + 1;
            self.line += 1;
        }
        let record_line = self.line;
        loop {
            let mut i = self.pos;
            while i < len && matches!(input[i], b' ' | b'\t') {
                i += 1;
            }
            if i < len && input[i] == b'"' {
                let quote_line = self.line;
                let start = scratch.len();
                i += 1;
                loop {
                    let Some(k) = input[i..].iter().position(|&b| b == b'"') else {
                        return Err(SyntaxError {
                            line: quote_line,
                            field: fields.len(),
                            message: "unterminated quoted field".to_string(),
                        });
                    };
                    let chunk = &input[i..i + k];
                    self.line += chunk.iter().filter(|&&b| b == b'\n').count();
                    scratch.extend_from_slice(chunk);
                    i += k + 1;
                    if i < len && input[i] == b'"' {
                        scratch.push(b'"');
                        i += 1;
                    } else {
                        break;
                    }
                }
                fields.push(Span {
                    start,
                    end: scratch.len(),
                    in_scratch: true,
                });
                while i < len && matches!(input[i], b' ' | b'\t' | b'\r') {
                    i += 1;
                }
                if i < len && input[i] != b',' && input[i] != b'\n' {
                    return Err(SyntaxError {
                        line: self.line,
                        field: fields.len() - 1,
                        message: format!(
                            "unexpected {} after the closing quote",
                            quote(&input[i..i + 1])
                        ),
                    });
                }
            } else {
                let start = i;
                while i < len && input[i] != b',' && input[i] != b'\n' {
                    i += 1;
                }
                let mut end = i;
                while end > start && matches!(input[end - 1], b' ' | b'\t' | b'\r') {
                    end -= 1;
                }
                fields.push(Span {
                    start,
                    end,
                    in_scratch: false,
                });
            }
            if i >= len {
                self.pos = len;
                return Ok(Some(record_line));
            }
            self.pos = i + 1;
            if input[i] == b'\n' {
                self.line += 1;
                return Ok(Some(record_line));
            }
        }
    }
}

/// Why a field is not a `u64`.
enum NumError {
    NotANumber,
    Negative,
    OutOfRange,
}

fn parse_u64(s: &[u8]) -> Result<u64, NumError> {
    let (negative, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(NumError::NotANumber);
    }
    if negative {
        return Err(NumError::Negative);
    }
    let mut value: u64 = 0;
    for &d in digits {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
            .ok_or(NumError::OutOfRange)?;
    }
    Ok(value)
}

/// Parses CSV text in the minimalloc convention into a problem and, when the input has an
/// `offset` column, the plan it describes.
///
/// `name` is the file's display name for error messages. See the [module
/// documentation](self) for the accepted columns.
///
/// ```
/// use memo_planner::format::parse_problem_csv;
/// let text = "id,lower,upper,size,offset\nb1,0,3,4,8\n\"b 2, odd\",3,9,4,8\n";
/// let (problem, plan) = parse_problem_csv(text, "input.csv").unwrap();
/// assert_eq!(problem.buffers()[1].id, "b 2, odd");
/// assert_eq!(plan.unwrap().offsets, vec![8, 8]);
///
/// let err = parse_problem_csv("id,lower,upper,size\nb1,0,3,12x\n", "input.csv").unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     r#"input.csv:2: field "size": "12x" is not a non-negative integer"#
/// );
/// ```
pub fn parse_problem_csv(
    text: &str,
    name: &str,
) -> Result<(Problem, Option<OffsetPlan>), FormatError> {
    parse_problem_csv_bytes(text.as_bytes(), name)
}

/// Like [`parse_problem_csv`], for bytes that may not be UTF-8 (ids must be).
pub fn parse_problem_csv_bytes(
    input: &[u8],
    name: &str,
) -> Result<(Problem, Option<OffsetPlan>), FormatError> {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let ctx = Ctx { name, input };
    let mut scanner = Scanner {
        input,
        pos: 0,
        line: 1,
    };
    let mut fields: Vec<Span> = Vec::with_capacity(8);
    let mut scratch: Vec<u8> = Vec::new();
    let header = read_header(&ctx, &mut scanner, &mut fields, &mut scratch)?;
    let has_offsets = header.column_of_slot[5].is_some();

    let rows_hint = input.iter().filter(|&&b| b == b'\n').count();
    let mut buffers: Vec<Buffer> = Vec::with_capacity(rows_hint);
    let mut lines: Vec<usize> = Vec::with_capacity(rows_hint);
    let mut offsets: Vec<u64> = Vec::with_capacity(if has_offsets { rows_hint } else { 0 });
    let mut seen: HashMap<Cow<'_, str>, usize> = HashMap::with_capacity(rows_hint);
    let mut total: u64 = 0;
    loop {
        let line = match scanner.next_record(&mut fields, &mut scratch) {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                let field = header.names.get(e.field).map(String::as_str);
                return Err(ctx.err(e.line, field, FormatErrorKind::Syntax, e.message));
            }
        };
        let row = read_row(&ctx, &header, line, &fields, &scratch)?;
        let id_field = header.name_of(0);
        if let Some(&first) = seen.get(&row.id) {
            return Err(ctx.err(
                line,
                Some(id_field),
                FormatErrorKind::DuplicateId,
                format!("duplicate id {:?}, first used on line {first}", row.id),
            ));
        }
        total = total
            .checked_add(row.size)
            .and_then(|t| t.checked_add(row.align))
            .ok_or_else(|| too_large(name, line, header.name_of(3)))?;
        buffers.push(Buffer {
            id: row.id.to_string(),
            lower: row.lower,
            upper: row.upper,
            size: row.size,
            align: row.align,
        });
        seen.insert(row.id, line);
        lines.push(line);
        if has_offsets {
            offsets.push(row.offset);
        }
    }
    drop(seen);
    if buffers.is_empty() {
        return Err(ctx.err(
            header.line,
            None,
            FormatErrorKind::NoBuffers,
            "no buffers: the header is not followed by any rows".to_string(),
        ));
    }
    let column_name = |slot: usize, default: &str| {
        header.column_of_slot[slot].map_or_else(|| default.to_string(), |c| header.names[c].clone())
    };
    let field_names = [
        column_name(0, "id"),
        column_name(2, "upper"),
        column_name(3, "size"),
        column_name(4, "alignment"),
    ];
    let problem = Problem::new(buffers)
        .map_err(|e| problem_error(name, &e, |i| lines.get(i).copied(), &field_names))?;
    Ok((problem, has_offsets.then_some(OffsetPlan { offsets })))
}

/// What every error of one parse needs: the file's name and its bytes.
struct Ctx<'a> {
    name: &'a str,
    input: &'a [u8],
}

impl<'a> Ctx<'a> {
    fn err(
        &self,
        line: usize,
        field: Option<&str>,
        kind: FormatErrorKind,
        message: String,
    ) -> FormatError {
        FormatError::new(self.name, Some(line), field, kind, message)
    }

    /// The bytes of a field, from the input or from the scratch buffer (unquoted text).
    fn bytes<'s>(&self, span: Span, scratch: &'s [u8]) -> &'s [u8]
    where
        'a: 's,
    {
        if span.in_scratch {
            &scratch[span.start..span.end]
        } else {
            &self.input[span.start..span.end]
        }
    }
}

/// The header row: column names, their roles, and the column of each role.
struct Header {
    line: usize,
    names: Vec<String>,
    roles: Vec<Role>,
    /// The column of each role slot (id, lower, upper, size, alignment, offset).
    column_of_slot: [Option<usize>; 6],
}

impl Header {
    /// The name of the column holding role `slot` (the first column if none does).
    fn name_of(&self, slot: usize) -> &str {
        self.names[self.column_of_slot[slot].unwrap_or(0)].as_str()
    }
}

/// Reads the header: no repeated roles, every required column present.
fn read_header(
    ctx: &Ctx,
    scanner: &mut Scanner,
    fields: &mut Vec<Span>,
    scratch: &mut Vec<u8>,
) -> Result<Header, FormatError> {
    let line = match scanner.next_record(fields, scratch) {
        Ok(Some(line)) => line,
        Ok(None) => {
            return Err(ctx.err(
                1,
                None,
                FormatErrorKind::Empty,
                "empty file: expected a header row such as id,lower,upper,size".to_string(),
            ))
        }
        Err(e) => return Err(ctx.err(e.line, None, FormatErrorKind::Syntax, e.message)),
    };
    let names: Vec<String> = fields
        .iter()
        .map(|&s| String::from_utf8_lossy(ctx.bytes(s, scratch)).into_owned())
        .collect();
    let roles: Vec<Role> = names.iter().map(|n| Role::of(n.as_bytes())).collect();
    let mut column_of_slot: [Option<usize>; 6] = [None; 6];
    for (i, role) in roles.iter().enumerate() {
        if let Some(slot) = role.slot() {
            if let Some(first) = column_of_slot[slot] {
                return Err(ctx.err(
                    line,
                    Some(&names[i]),
                    FormatErrorKind::DuplicateColumn,
                    format!("column {:?} repeats column {:?}", names[i], names[first]),
                ));
            }
            column_of_slot[slot] = Some(i);
        }
    }
    for (slot, required) in ["id", "lower", "upper", "size"].iter().enumerate() {
        if column_of_slot[slot].is_none() {
            let also = if slot == 2 { " (or \"end\")" } else { "" };
            return Err(ctx.err(
                line,
                Some(required),
                FormatErrorKind::MissingColumn,
                format!(
                    "missing column {required:?}{also}; the header names {}",
                    names.join(",")
                ),
            ));
        }
    }
    Ok(Header {
        line,
        names,
        roles,
        column_of_slot,
    })
}

/// One data row, checked field by field.
struct Row<'a> {
    id: Cow<'a, str>,
    lower: u64,
    upper: u64,
    size: u64,
    align: u64,
    offset: u64,
}

/// Reads the row of `line` from its `fields`: the field count, each field by its role,
/// and a non-empty lifetime.
fn read_row<'a>(
    ctx: &Ctx<'a>,
    header: &Header,
    line: usize,
    fields: &[Span],
    scratch: &[u8],
) -> Result<Row<'a>, FormatError> {
    let names = &header.names;
    let n = fields.len();
    if n != names.len() {
        let (field, what) = if n < names.len() {
            (Some(names[n].as_str()), "missing: the row has")
        } else {
            (None, "the row has")
        };
        return Err(ctx.err(
            line,
            field,
            FormatErrorKind::FieldCount,
            format!("{what} {n} fields but the header has {}", names.len()),
        ));
    }
    let mut row = Row {
        id: Cow::Borrowed(""),
        lower: 0,
        upper: 0,
        size: 0,
        align: 1,
        offset: 0,
    };
    for (i, &span) in fields.iter().enumerate() {
        let role = header.roles[i];
        let field = names[i].as_str();
        match role {
            Role::Ignored => {}
            Role::Id => row.id = read_id(ctx, line, field, span, scratch)?,
            _ => {
                let bytes = ctx.bytes(span, scratch);
                let value = parse_number(bytes, role)
                    .map_err(|(kind, message)| ctx.err(line, Some(field), kind, message))?;
                set_value(&mut row, role, value, bytes)
                    .map_err(|(kind, message)| ctx.err(line, Some(field), kind, message))?;
            }
        }
    }
    let upper_column = header.column_of_slot[2].unwrap_or(0);
    if row.upper <= row.lower {
        let (upper_text, relation) = if header.roles[upper_column] == Role::End {
            (row.upper - 1, "at least")
        } else {
            (row.upper, "greater than")
        };
        return Err(ctx.err(
            line,
            Some(names[upper_column].as_str()),
            FormatErrorKind::EmptyLifetime,
            format!("\"{upper_text}\" must be {relation} lower ({})", row.lower),
        ));
    }
    Ok(row)
}

/// An id: borrowed from the input when it was not quoted, valid UTF-8 either way.
fn read_id<'a>(
    ctx: &Ctx<'a>,
    line: usize,
    field: &str,
    span: Span,
    scratch: &[u8],
) -> Result<Cow<'a, str>, FormatError> {
    let bytes = ctx.bytes(span, scratch);
    let utf8_error = || {
        ctx.err(
            line,
            Some(field),
            FormatErrorKind::Syntax,
            format!("{} is not valid UTF-8", quote(bytes)),
        )
    };
    if span.in_scratch {
        Ok(Cow::Owned(
            std::str::from_utf8(bytes)
                .map_err(|_| utf8_error())?
                .to_string(),
        ))
    } else {
        let borrowed: &'a [u8] = &ctx.input[span.start..span.end];
        Ok(Cow::Borrowed(
            std::str::from_utf8(borrowed).map_err(|_| utf8_error())?,
        ))
    }
}

/// A numeric field, or the kind and message of its error.
fn parse_number(bytes: &[u8], role: Role) -> Result<u64, (FormatErrorKind, String)> {
    parse_u64(bytes).map_err(|e| match e {
        NumError::NotANumber => (
            FormatErrorKind::NotANumber,
            format!("{} is not a non-negative integer", quote(bytes)),
        ),
        NumError::Negative if role == Role::Size => (
            FormatErrorKind::Negative,
            format!("{} must be positive", quote(bytes)),
        ),
        NumError::Negative => (
            FormatErrorKind::Negative,
            format!(
                "{} is negative: expected a non-negative integer",
                quote(bytes)
            ),
        ),
        NumError::OutOfRange => (
            FormatErrorKind::OutOfRange,
            format!("{} is out of range (at most {})", quote(bytes), u64::MAX),
        ),
    })
}

/// Stores a numeric field in the row after the checks of its role.
fn set_value(
    row: &mut Row,
    role: Role,
    value: u64,
    bytes: &[u8],
) -> Result<(), (FormatErrorKind, String)> {
    match role {
        Role::Lower => row.lower = value,
        Role::Upper => row.upper = value,
        Role::End => {
            row.upper = value.checked_add(1).ok_or_else(|| {
                (
                    FormatErrorKind::OutOfRange,
                    format!(
                        "{} is out of range (an inclusive end is at most {})",
                        quote(bytes),
                        u64::MAX - 1
                    ),
                )
            })?
        }
        Role::Size if value == 0 => {
            return Err((
                FormatErrorKind::ZeroSize,
                format!("{} must be positive", quote(bytes)),
            ))
        }
        Role::Size => row.size = value,
        Role::Align if !value.is_power_of_two() => {
            return Err((
                FormatErrorKind::BadAlignment,
                format!("{} is not a power of two", quote(bytes)),
            ))
        }
        Role::Align => row.align = value,
        Role::Offset => row.offset = value,
        Role::Id | Role::Ignored => {}
    }
    Ok(())
}

fn too_large(name: &str, line: usize, field: &str) -> FormatError {
    FormatError::new(
        name,
        Some(line),
        Some(field),
        FormatErrorKind::TooLarge,
        "the buffers' sizes (with alignment padding) add up to more than 2^64 - 1 bytes",
    )
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

/// Reads a CSV file (see [`parse_problem_csv`]); errors name the file by its path.
///
/// ```no_run
/// use memo_planner::format::read_problem_csv_file;
/// let (problem, plan) = read_problem_csv_file("resnet50.csv")?;
/// # Ok::<(), memo_planner::format::FormatError>(())
/// ```
pub fn read_problem_csv_file(
    path: impl AsRef<Path>,
) -> Result<(Problem, Option<OffsetPlan>), FormatError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| FormatError::io(&name, &e))?;
    parse_problem_csv_bytes(&bytes, &name)
}

fn needs_quotes(id: &str) -> bool {
    id.is_empty()
        || id.starts_with([' ', '\t'])
        || id.ends_with([' ', '\t', '\r'])
        || id.contains([',', '"', '\n', '\r'])
}

/// Writes a problem (and optionally an offset plan) as CSV:
/// `id,lower,upper,size[,alignment][,offset]`, the `alignment` column only when some buffer
/// has an alignment above 1. Ids are quoted when needed.
///
/// Fails with [`io::ErrorKind::InvalidInput`] when the plan's length differs from the
/// problem's, and with the writer's errors.
///
/// ```
/// use memo_planner::{Buffer, OffsetPlan, Problem};
/// use memo_planner::format::write_problem_csv;
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b,c", 1, 3, 4)]).unwrap();
/// let mut out = Vec::new();
/// write_problem_csv(&mut out, &p, Some(&OffsetPlan { offsets: vec![0, 8] })).unwrap();
/// assert_eq!(
///     String::from_utf8(out).unwrap(),
///     "id,lower,upper,size,offset\na,0,2,8,0\n\"b,c\",1,3,4,8\n"
/// );
/// ```
pub fn write_problem_csv<W: Write>(
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
    let aligned = problem.buffers().iter().any(|b| b.align != 1);
    w.write_all(b"id,lower,upper,size")?;
    if aligned {
        w.write_all(b",alignment")?;
    }
    if plan.is_some() {
        w.write_all(b",offset")?;
    }
    w.write_all(b"\n")?;
    for (i, b) in problem.buffers().iter().enumerate() {
        if needs_quotes(&b.id) {
            write!(w, "\"{}\"", b.id.replace('"', "\"\""))?;
        } else {
            w.write_all(b.id.as_bytes())?;
        }
        write!(w, ",{},{},{}", b.lower, b.upper, b.size)?;
        if aligned {
            write!(w, ",{}", b.align)?;
        }
        if let Some(plan) = plan {
            write!(w, ",{}", plan.offsets[i])?;
        }
        w.write_all(b"\n")?;
    }
    w.flush()
}

/// [`write_problem_csv`] into a `String`.
///
/// # Panics
///
/// When the plan's length differs from the problem's.
///
/// ```
/// use memo_planner::{Buffer, Problem};
/// use memo_planner::format::problem_to_csv;
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8).with_align(4)]).unwrap();
/// assert_eq!(problem_to_csv(&p, None), "id,lower,upper,size,alignment\na,0,2,8,4\n");
/// ```
pub fn problem_to_csv(problem: &Problem, plan: Option<&OffsetPlan>) -> String {
    let mut out = Vec::new();
    if let Err(e) = write_problem_csv(&mut out, problem, plan) {
        panic!("problem_to_csv: {e}");
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NAME: &str = "t.csv";

    fn fail(text: &str) -> FormatError {
        match parse_problem_csv(text, NAME) {
            Ok(p) => panic!("accepted {text:?} as {p:?}"),
            Err(e) => e,
        }
    }

    /// Asserts file, line, field and kind, and returns the display string.
    fn check(text: &str, line: usize, field: Option<&str>, kind: FormatErrorKind) -> String {
        let e = fail(text);
        assert_eq!(e.file, NAME, "{e}");
        assert_eq!(e.line, Some(line), "{e}");
        assert_eq!(e.field.as_deref(), field, "{e}");
        assert_eq!(e.kind, kind, "{e}");
        assert_eq!(e.column, None, "{e}");
        e.to_string()
    }

    const H: &str = "id,lower,upper,size\n";

    #[test]
    fn missing_column() {
        let msg = check(
            "id,lower,size\na,0,1\n",
            1,
            Some("upper"),
            FormatErrorKind::MissingColumn,
        );
        assert_eq!(
            msg,
            r#"t.csv:1: field "upper": missing column "upper" (or "end"); the header names id,lower,size"#
        );
        check(
            "lower,upper,size\n0,1,1\n",
            1,
            Some("id"),
            FormatErrorKind::MissingColumn,
        );
        // The header is the first non-blank line.
        check(
            "\n\nid,lower,upper\n",
            3,
            Some("size"),
            FormatErrorKind::MissingColumn,
        );
    }

    #[test]
    fn duplicate_column() {
        let msg = check(
            "id,lower,upper,end,size\n",
            1,
            Some("end"),
            FormatErrorKind::DuplicateColumn,
        );
        assert!(msg.contains(r#"repeats column "upper""#), "{msg}");
        check(
            "id,buffer,lower,upper,size\n",
            1,
            Some("buffer"),
            FormatErrorKind::DuplicateColumn,
        );
    }

    #[test]
    fn too_few_fields() {
        let msg = check(
            &format!("{H}a,0,1,1\nb,0,1\n"),
            3,
            Some("size"),
            FormatErrorKind::FieldCount,
        );
        assert_eq!(
            msg,
            r#"t.csv:3: field "size": missing: the row has 3 fields but the header has 4"#
        );
    }

    #[test]
    fn too_many_fields() {
        let msg = check(
            &format!("{H}a,0,1,1,9\n"),
            2,
            None,
            FormatErrorKind::FieldCount,
        );
        assert_eq!(msg, "t.csv:2: the row has 5 fields but the header has 4");
        // A trailing comma is an extra (empty) field.
        check(
            &format!("{H}a,0,1,1,\n"),
            2,
            None,
            FormatErrorKind::FieldCount,
        );
    }

    #[test]
    fn not_a_number() {
        let msg = check(
            &format!("{H}a,0,1,1\nb,0,1,12x\n"),
            3,
            Some("size"),
            FormatErrorKind::NotANumber,
        );
        assert_eq!(
            msg,
            r#"t.csv:3: field "size": "12x" is not a non-negative integer"#
        );
        for bad in ["", "1.5", "1e3", "+1", "0x10", "1 2", "-", "--1"] {
            check(
                &format!("{H}a,{bad},1,1\n"),
                2,
                Some("lower"),
                FormatErrorKind::NotANumber,
            );
        }
        // Quoting does not make a number out of a word, nor hide one.
        check(
            &format!("{H}a,\"x\",1,1\n"),
            2,
            Some("lower"),
            FormatErrorKind::NotANumber,
        );
        assert!(parse_problem_csv(&format!("{H}a,\"0\",1,1\n"), NAME).is_ok());
    }

    #[test]
    fn negative_number() {
        let msg = check(
            &format!("{H}a,-1,1,1\n"),
            2,
            Some("lower"),
            FormatErrorKind::Negative,
        );
        assert_eq!(
            msg,
            r#"t.csv:2: field "lower": "-1" is negative: expected a non-negative integer"#
        );
        check(
            &format!("{H}a,0,-3,1\n"),
            2,
            Some("upper"),
            FormatErrorKind::Negative,
        );
    }

    #[test]
    fn negative_size() {
        let msg = check(
            &format!("{H}a,0,1,-4\n"),
            2,
            Some("size"),
            FormatErrorKind::Negative,
        );
        assert_eq!(msg, r#"t.csv:2: field "size": "-4" must be positive"#);
    }

    #[test]
    fn zero_size() {
        let msg = check(
            &format!("{H}a,0,1,1\n\nb,0,1,0\n"),
            4,
            Some("size"),
            FormatErrorKind::ZeroSize,
        );
        assert_eq!(msg, r#"t.csv:4: field "size": "0" must be positive"#);
    }

    #[test]
    fn empty_lifetime() {
        let msg = check(
            &format!("{H}a,5,5,1\n"),
            2,
            Some("upper"),
            FormatErrorKind::EmptyLifetime,
        );
        assert_eq!(
            msg,
            r#"t.csv:2: field "upper": "5" must be greater than lower (5)"#
        );
        check(
            &format!("{H}a,5,4,1\n"),
            2,
            Some("upper"),
            FormatErrorKind::EmptyLifetime,
        );
        // With an inclusive end, end == lower is one step; end < lower is empty.
        assert!(parse_problem_csv("id,lower,end,size\na,5,5,1\n", NAME).is_ok());
        let msg = check(
            "id,lower,End,size\na,5,4,1\n",
            2,
            Some("End"),
            FormatErrorKind::EmptyLifetime,
        );
        assert_eq!(
            msg,
            r#"t.csv:2: field "End": "4" must be at least lower (5)"#
        );
    }

    #[test]
    fn duplicate_id() {
        let msg = check(
            &format!("{H}x,0,1,1\ny,0,1,1\n\"x\",2,3,1\n"),
            4,
            Some("id"),
            FormatErrorKind::DuplicateId,
        );
        assert_eq!(
            msg,
            r#"t.csv:4: field "id": duplicate id "x", first used on line 2"#
        );
        // Ids are compared after trimming and unquoting, as strings.
        check(
            "buffer_id,lower,upper,size\n 7 ,0,1,1\n7,0,1,1\n",
            3,
            Some("buffer_id"),
            FormatErrorKind::DuplicateId,
        );
    }

    #[test]
    fn bad_alignment() {
        let msg = check(
            "id,lower,upper,size,alignment\na,0,1,1,8\nb,0,1,1,3\n",
            3,
            Some("alignment"),
            FormatErrorKind::BadAlignment,
        );
        assert_eq!(
            msg,
            r#"t.csv:3: field "alignment": "3" is not a power of two"#
        );
        check(
            "id,lower,upper,size,align\na,0,1,1,0\n",
            2,
            Some("align"),
            FormatErrorKind::BadAlignment,
        );
    }

    #[test]
    fn empty_file() {
        for text in ["", "\n", "  \r\n\t\n", "\u{feff}"] {
            let msg = check(text, 1, None, FormatErrorKind::Empty);
            assert_eq!(
                msg,
                "t.csv:1: empty file: expected a header row such as id,lower,upper,size"
            );
        }
    }

    #[test]
    fn no_buffers() {
        for text in [
            "id,lower,upper,size",
            "id,lower,upper,size\n",
            "id,lower,upper,size\r\n\r\n  \n",
        ] {
            let msg = check(text, 1, None, FormatErrorKind::NoBuffers);
            assert_eq!(
                msg,
                "t.csv:1: no buffers: the header is not followed by any rows"
            );
        }
    }

    #[test]
    fn out_of_range() {
        let max = u64::MAX;
        let (p, plan) = parse_problem_csv(&format!("{H}a,{},{max},1\n", max - 1), NAME).unwrap();
        assert_eq!(p.buffers()[0].upper, max);
        assert!(plan.is_none());
        let msg = check(
            &format!("{H}a,0,18446744073709551616,1\n"),
            2,
            Some("upper"),
            FormatErrorKind::OutOfRange,
        );
        assert_eq!(
            msg,
            r#"t.csv:2: field "upper": "18446744073709551616" is out of range (at most 18446744073709551615)"#
        );
        check(
            &format!("{H}a,0,1,99999999999999999999999999999\n"),
            2,
            Some("size"),
            FormatErrorKind::OutOfRange,
        );
        // An inclusive end of u64::MAX has no half-open upper.
        check(
            &format!("id,lower,end,size\na,0,{max},1\n"),
            2,
            Some("end"),
            FormatErrorKind::OutOfRange,
        );
    }

    #[test]
    fn total_size_overflow() {
        let half = u64::MAX / 2;
        let msg = check(
            &format!("{H}a,0,1,{half}\nb,0,1,{half}\n"),
            3,
            Some("size"),
            FormatErrorKind::TooLarge,
        );
        assert_eq!(
            msg,
            r#"t.csv:3: field "size": the buffers' sizes (with alignment padding) add up to more than 2^64 - 1 bytes"#
        );
        // Same rule as Problem::new: one buffer of u64::MAX bytes also counts its alignment.
        let e = Problem::new(vec![Buffer::new("a", 0, 1, u64::MAX)]).unwrap_err();
        assert_eq!(e, ProblemError::TooLarge);
        check(
            &format!("{H}a,0,1,{}\n", u64::MAX),
            2,
            Some("size"),
            FormatErrorKind::TooLarge,
        );
    }

    #[test]
    fn quoting_errors() {
        let msg = check(
            &format!("{H}a,0,1,1\n\"b,0,1,1\n"),
            3,
            Some("id"),
            FormatErrorKind::Syntax,
        );
        assert_eq!(msg, r#"t.csv:3: field "id": unterminated quoted field"#);
        check(
            &format!("{H}\"b\"x,0,1,1\n"),
            2,
            Some("id"),
            FormatErrorKind::Syntax,
        );
        check("\"id,lower,upper,size\n", 1, None, FormatErrorKind::Syntax);
    }

    #[test]
    fn invalid_utf8_id() {
        let e =
            parse_problem_csv_bytes(b"id,lower,upper,size\n\xff\xfe,0,1,1\n", NAME).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("id")));
        assert_eq!(e.kind, FormatErrorKind::Syntax);
        let e =
            parse_problem_csv_bytes(b"id,lower,upper,size\n\"\xff\",0,1,1\n", NAME).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("id")));
    }

    #[test]
    fn lenient_layout() {
        // BOM, CRLF, blank lines, spaces, column order, case, aliases, ignored columns,
        // quoted ids with commas, quotes and a newline, no trailing newline.
        let text = "\u{feff}  Size , START,end,hint, Buffer \r\n\r\n 4 , 0 , 2 , -1 , b1 \r\n\
                    8,3,3,-1,\"two, \"\"quoted\"\"\nlines\"\r\n   \r\n16,1,4,-1,\"\"";
        let (p, plan) = parse_problem_csv(text, NAME).unwrap();
        assert!(plan.is_none());
        assert_eq!(
            p.buffers(),
            &[
                Buffer::new("b1", 0, 3, 4),
                Buffer::new("two, \"quoted\"\nlines", 3, 4, 8),
                Buffer::new("", 1, 5, 16),
            ]
        );
        // Lines keep counting through blank lines and quoted newlines.
        let e = parse_problem_csv(&format!("{text}\nx,0,1,1,y\n"), NAME).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(8), Some(" Size ".trim()))
        );
    }

    #[test]
    fn offsets_column_is_a_plan() {
        let text = "id,lower,upper,size,offset\nb1,0,3,4,8\nb2,3,9,4,8\nb3,0,9,4,4\n";
        let (p, plan) = parse_problem_csv(text, NAME).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(
            plan,
            Some(OffsetPlan {
                offsets: vec![8, 8, 4]
            })
        );
        assert_eq!(problem_to_csv(&p, plan.as_ref()), text);
        check(
            "id,lower,upper,size,offset\nb1,0,3,4,x\n",
            2,
            Some("offset"),
            FormatErrorKind::NotANumber,
        );
    }

    #[test]
    fn round_trip_with_and_without_alignment() {
        let plain = Problem::new(vec![
            Buffer::new("a", 0, 3, 4),
            Buffer::new(" padded\t", 2, u64::MAX, 1 << 40),
            Buffer::new("", 1, 2, 1),
            Buffer::new("q\"uo,te\r\n", 0, 1, 3),
        ])
        .unwrap();
        let text = problem_to_csv(&plain, None);
        assert!(text.starts_with("id,lower,upper,size\n"), "{text}");
        assert_eq!(
            parse_problem_csv(&text, NAME).unwrap(),
            (plain.clone(), None)
        );

        let mut buffers = plain.into_buffers();
        buffers[1].align = 4096;
        let aligned = Problem::new(buffers).unwrap();
        let plan = OffsetPlan {
            offsets: vec![0, 4096, 7, 8],
        };
        let text = problem_to_csv(&aligned, Some(&plan));
        assert!(
            text.starts_with("id,lower,upper,size,alignment,offset\na,0,3,4,1,0\n"),
            "{text}"
        );
        assert_eq!(
            parse_problem_csv(&text, NAME).unwrap(),
            (aligned.clone(), Some(plan))
        );
        let short = OffsetPlan { offsets: vec![0] };
        let e = write_problem_csv(Vec::new(), &aligned, Some(&short)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    fn any_problem() -> impl Strategy<Value = Problem> {
        proptest::collection::vec(
            (
                ".{0,6}",
                any::<u64>(),
                any::<u64>(),
                1u64..u64::MAX >> 8,
                0u32..13,
            ),
            1..12,
        )
        .prop_map(|rows| {
            let mut ids = std::collections::HashSet::new();
            let buffers = rows
                .into_iter()
                .filter(|(id, ..)| ids.insert(id.clone()))
                .map(|(id, a, b, size, align)| {
                    let (lower, upper) = if a < b {
                        (a, b)
                    } else if a > b {
                        (b, a)
                    } else {
                        (0, 1)
                    };
                    Buffer::new(id, lower, upper, size).with_align(1 << align)
                })
                .collect();
            Problem::new(buffers).expect("valid")
        })
    }

    proptest! {
        #[test]
        fn round_trips(p in any_problem(), with_plan in any::<bool>()) {
            let plan = with_plan.then(|| OffsetPlan { offsets: (0..p.len() as u64).collect() });
            let text = problem_to_csv(&p, plan.as_ref());
            prop_assert_eq!(parse_problem_csv(&text, NAME).unwrap(), (p, plan));
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_problem_csv_bytes(&bytes, NAME);
        }

        #[test]
        fn mutated_csv_never_panics(
            p in any_problem(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(
                b",\"\n\r -0123456789x\xff".to_vec())), 1..6),
        ) {
            let mut bytes = problem_to_csv(&p, None).into_bytes();
            for (at, op, byte) in edits {
                let i = at.index(bytes.len() + 1);
                match op {
                    0 => bytes.insert(i, byte),
                    1 if i < bytes.len() => { bytes.remove(i); }
                    _ if i < bytes.len() => bytes[i] = byte,
                    _ => {}
                }
            }
            match parse_problem_csv_bytes(&bytes, NAME) {
                Ok((q, _)) => prop_assert!(Problem::new(q.into_buffers()).is_ok()),
                Err(e) => {
                    prop_assert_eq!(e.file.as_str(), NAME);
                    prop_assert!(e.line.is_some_and(|l| l >= 1 && l <= bytes.len() + 1));
                }
            }
        }
    }
}

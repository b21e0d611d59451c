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
//! RFC 4180 double quotes (`"a, ""b"""` is the id `a, "b"`; a quoted field may span lines,
//! and keeps its spaces). There are no comment lines.
//!
//! Every rejection is a [`FormatError`] naming the file, the line (the header is line 1 when
//! it is the first line) and the column as spelled in the header.

mod records;
mod write;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

pub use write::{problem_to_csv, write_problem_csv};

use super::error::{problem_error, quote, FormatError, FormatErrorKind};
use crate::plan::OffsetPlan;
use crate::problem::{Buffer, Problem};
use records::{Records, Span};

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
    let mut records = Records::new(input);
    let mut fields: Vec<Span> = Vec::with_capacity(8);
    let mut scratch: Vec<u8> = Vec::new();
    let header = read_header(&ctx, &mut records, &mut fields, &mut scratch)?;
    let has_offsets = header.column_of_slot[5].is_some();

    let rows_hint = input.iter().filter(|&&b| b == b'\n').count();
    let mut buffers: Vec<Buffer> = Vec::with_capacity(rows_hint);
    let mut lines: Vec<usize> = Vec::with_capacity(rows_hint);
    let mut offsets: Vec<u64> = Vec::with_capacity(if has_offsets { rows_hint } else { 0 });
    let mut seen: HashMap<Cow<'_, str>, usize> = HashMap::with_capacity(rows_hint);
    let mut total: u64 = 0;
    loop {
        let line = match records.next_record(&mut fields, &mut scratch) {
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
    records: &mut Records,
    fields: &mut Vec<Span>,
    scratch: &mut Vec<u8>,
) -> Result<Header, FormatError> {
    let line = match records.next_record(fields, scratch) {
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

#[cfg(test)]
mod tests;

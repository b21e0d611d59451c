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

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess};
use serde::de::{Deserializer, Visitor};
use serde::Serialize;

use super::error::{problem_error, FormatError, FormatErrorKind};
use crate::plan::OffsetPlan;
use crate::problem::{Buffer, Problem};

/// The `version` written in, and accepted from, problem files.
pub const PROBLEM_FILE_VERSION: u64 = 1;

/// What the deserializer was doing when an error struck.
#[derive(Default)]
struct Ctx {
    field: RefCell<Option<Cow<'static, str>>>,
    kind: Cell<Option<FormatErrorKind>>,
}

impl Ctx {
    fn fail<E: de::Error>(
        &self,
        kind: FormatErrorKind,
        field: Option<&str>,
        message: fmt::Arguments<'_>,
    ) -> E {
        self.kind.set(Some(kind));
        *self.field.borrow_mut() = field.map(|f| Cow::Owned(f.to_string()));
        E::custom(message)
    }

    fn enter(&self, field: &'static str) {
        *self.field.borrow_mut() = Some(Cow::Borrowed(field));
    }

    fn leave(&self) {
        *self.field.borrow_mut() = None;
    }
}

struct Parsed {
    buffers: Vec<Buffer>,
    offsets: Option<Vec<u64>>,
}

/// The whole document: an object with `buffers`, or a bare array.
struct DocSeed<'c>(&'c Ctx);

impl<'de> DeserializeSeed<'de> for DocSeed<'_> {
    type Value = Parsed;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DocSeed<'_> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"a problem: {"version": 1, "buffers": [...]} or an array of buffers"#)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Parsed, A::Error> {
        BuffersSeed(self.0).visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let ctx = self.0;
        let mut buffers = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "version" => {
                    ctx.enter("version");
                    let v = map.next_value_seed(U64Seed(ctx, "version"))?;
                    if v != PROBLEM_FILE_VERSION {
                        return Err(ctx.fail(
                            FormatErrorKind::UnsupportedVersion,
                            Some("version"),
                            format_args!(
                                "unsupported version {v} (this reader knows {PROBLEM_FILE_VERSION})"
                            ),
                        ));
                    }
                    ctx.leave();
                }
                "buffers" => {
                    if buffers.is_some() {
                        return Err(ctx.fail(
                            FormatErrorKind::DuplicateColumn,
                            Some("buffers"),
                            format_args!("duplicate key \"buffers\""),
                        ));
                    }
                    buffers = Some(map.next_value_seed(BuffersSeed(ctx))?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        buffers.ok_or_else(|| {
            ctx.fail(
                FormatErrorKind::MissingColumn,
                Some("buffers"),
                format_args!("missing key \"buffers\""),
            )
        })
    }
}

/// The array of buffers, checked as it is read.
struct BuffersSeed<'c>(&'c Ctx);

impl<'de> DeserializeSeed<'de> for BuffersSeed<'_> {
    type Value = Parsed;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for BuffersSeed<'_> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of buffers")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Parsed, A::Error> {
        let ctx = self.0;
        let capacity = seq.size_hint().unwrap_or(0).min(1 << 16);
        let mut list = List {
            buffers: Vec::with_capacity(capacity),
            offsets: Vec::new(),
            has_offsets: None,
            seen: HashMap::with_capacity(capacity),
            total: 0,
        };
        while seq.next_element_seed(BufferSeed(ctx, &mut list))?.is_some() {}
        if list.buffers.is_empty() {
            return Err(ctx.fail(
                FormatErrorKind::NoBuffers,
                None,
                format_args!("no buffers: the array is empty"),
            ));
        }
        Ok(Parsed {
            buffers: list.buffers,
            offsets: list.has_offsets.unwrap_or(false).then_some(list.offsets),
        })
    }
}

/// The buffers read so far, and what is needed to check the next one against them.
struct List {
    buffers: Vec<Buffer>,
    offsets: Vec<u64>,
    has_offsets: Option<bool>,
    seen: HashMap<String, usize>,
    total: u64,
}

impl List {
    /// Checks a complete buffer against the previous ones and appends it. Called inside the
    /// buffer's object so that errors point at its closing brace.
    fn push<E: de::Error>(&mut self, ctx: &Ctx, b: Buffer, offset: Option<u64>) -> Result<(), E> {
        let index = self.buffers.len();
        match (self.has_offsets, offset) {
            (None, o) => self.has_offsets = Some(o.is_some()),
            (Some(true), None) => {
                return Err(ctx.fail(
                    FormatErrorKind::MissingOffset,
                    Some("offset"),
                    format_args!("buffer #{index} has no offset but buffer #0 has one"),
                ))
            }
            (Some(false), Some(_)) => {
                return Err(ctx.fail(
                    FormatErrorKind::MissingOffset,
                    Some("offset"),
                    format_args!("buffer #{index} has an offset but buffer #0 has none"),
                ))
            }
            _ => {}
        }
        if let Some(&first) = self.seen.get(&b.id) {
            return Err(ctx.fail(
                FormatErrorKind::DuplicateId,
                Some("id"),
                format_args!(
                    "duplicate id {:?}: buffer #{index} repeats buffer #{first}",
                    b.id
                ),
            ));
        }
        self.total = self
            .total
            .checked_add(b.size)
            .and_then(|t| t.checked_add(b.align))
            .ok_or_else(|| {
                ctx.fail(
                    FormatErrorKind::TooLarge,
                    Some("size"),
                    format_args!(
                        "the buffers' sizes (with alignment padding) add up to more than \
                         2^64 - 1 bytes at buffer #{index}"
                    ),
                )
            })?;
        self.seen.insert(b.id.clone(), index);
        self.buffers.push(b);
        if let Some(o) = offset {
            self.offsets.push(o);
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Id,
    Lower,
    Upper,
    Size,
    Align,
    Offset,
}

const KEYS: &[(&str, Key)] = &[
    ("id", Key::Id),
    ("lower", Key::Lower),
    ("upper", Key::Upper),
    ("size", Key::Size),
    ("align", Key::Align),
    ("alignment", Key::Align),
    ("offset", Key::Offset),
];

/// A buffer's key, as its static spelling.
struct KeySeed<'c>(&'c Ctx);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = (Key, &'static str);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = (Key, &'static str);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a buffer key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match KEYS.iter().find(|(name, _)| *name == v) {
            Some(&(name, key)) => Ok((key, name)),
            None => Err(self.0.fail(
                FormatErrorKind::Schema,
                Some(v),
                format_args!(
                    "unknown key {v:?} in a buffer; expected id, lower, upper, size, align \
                     (or alignment), offset"
                ),
            )),
        }
    }
}

/// One buffer object (and its optional offset), appended to the list.
struct BufferSeed<'c, 'l>(&'c Ctx, &'l mut List);

impl<'de> DeserializeSeed<'de> for BufferSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BufferSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"a buffer {"id", "lower", "upper", "size", "align"?, "offset"?}"#)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let BufferSeed(ctx, list) = self;
        let index = list.buffers.len();
        let mut id: Option<String> = None;
        let mut values: [Option<u64>; 6] = [None; 6];
        while let Some((key, name)) = map.next_key_seed(KeySeed(ctx))? {
            let slot = key as usize;
            if (key == Key::Id && id.is_some()) || values[slot].is_some() {
                return Err(ctx.fail(
                    FormatErrorKind::DuplicateColumn,
                    Some(name),
                    format_args!("duplicate key {name:?} in buffer #{index}"),
                ));
            }
            ctx.enter(name);
            if key == Key::Id {
                id = Some(map.next_value()?);
                ctx.leave();
                continue;
            }
            let v = map.next_value_seed(U64Seed(ctx, name))?;
            match key {
                Key::Size if v == 0 => {
                    return Err(ctx.fail(
                        FormatErrorKind::ZeroSize,
                        Some(name),
                        format_args!("0 must be positive (buffer #{index})"),
                    ))
                }
                Key::Align if !v.is_power_of_two() => {
                    return Err(ctx.fail(
                        FormatErrorKind::BadAlignment,
                        Some(name),
                        format_args!("{v} is not a power of two (buffer #{index})"),
                    ))
                }
                _ => {}
            }
            values[slot] = Some(v);
            if let (Some(lower), Some(upper)) =
                (values[Key::Lower as usize], values[Key::Upper as usize])
            {
                if upper <= lower && matches!(key, Key::Lower | Key::Upper) {
                    return Err(ctx.fail(
                        FormatErrorKind::EmptyLifetime,
                        Some("upper"),
                        format_args!(
                            "{upper} must be greater than lower ({lower}) (buffer #{index})"
                        ),
                    ));
                }
            }
            ctx.leave();
        }
        let missing = |name: &'static str| {
            ctx.fail::<A::Error>(
                FormatErrorKind::MissingColumn,
                Some(name),
                format_args!("missing key {name:?} in buffer #{index}"),
            )
        };
        let id = id.ok_or_else(|| missing("id"))?;
        let lower = values[Key::Lower as usize].ok_or_else(|| missing("lower"))?;
        let upper = values[Key::Upper as usize].ok_or_else(|| missing("upper"))?;
        let size = values[Key::Size as usize].ok_or_else(|| missing("size"))?;
        let align = values[Key::Align as usize].unwrap_or(1);
        let buffer = Buffer {
            id,
            lower,
            upper,
            size,
            align,
        };
        list.push(ctx, buffer, values[Key::Offset as usize])
    }
}

/// A `u64` with messages matching the CSV reader's.
struct U64Seed<'c>(&'c Ctx, &'static str);

impl<'de> DeserializeSeed<'de> for U64Seed<'_> {
    type Value = u64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        let ctx = self.0;
        d.deserialize_u64(self).inspect_err(|_| {
            if ctx.kind.get().is_none() {
                ctx.kind.set(Some(FormatErrorKind::NotANumber));
            }
        })
    }
}

impl<'de> Visitor<'de> for U64Seed<'_> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative integer")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| self.negative(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        if v.fract() == 0.0 && v >= 18_446_744_073_709_551_616.0 {
            Err(self.0.fail(
                FormatErrorKind::OutOfRange,
                Some(self.1),
                format_args!("{v} is out of range (at most {})", u64::MAX),
            ))
        } else if v < 0.0 {
            Err(self.negative(v))
        } else {
            Err(self.0.fail(
                FormatErrorKind::NotANumber,
                Some(self.1),
                format_args!("{v} is not a non-negative integer"),
            ))
        }
    }
}

impl U64Seed<'_> {
    fn negative<E: de::Error>(&self, v: impl fmt::Display) -> E {
        if self.1 == "size" {
            self.0.fail(
                FormatErrorKind::Negative,
                Some(self.1),
                format_args!("{v} must be positive"),
            )
        } else {
            self.0.fail(
                FormatErrorKind::Negative,
                Some(self.1),
                format_args!("{v} is negative: expected a non-negative integer"),
            )
        }
    }
}

/// Turns a serde_json error into a [`FormatError`], using what the visitors recorded.
fn json_error(name: &str, e: &serde_json::Error, ctx: Option<&Ctx>) -> FormatError {
    let kind = match e.classify() {
        serde_json::error::Category::Io => FormatErrorKind::Io(io::ErrorKind::Other),
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            FormatErrorKind::Syntax
        }
        serde_json::error::Category::Data => ctx
            .and_then(|c| c.kind.get())
            .unwrap_or(FormatErrorKind::Schema),
    };
    let mut message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    if message.ends_with(&suffix) {
        message.truncate(message.len() - suffix.len());
    }
    let field = match ctx.and_then(|c| c.field.borrow().clone()) {
        Some(f) => Some(f.into_owned()),
        None => ["missing field `", "unknown field `", "duplicate field `"]
            .iter()
            .find_map(|p| message.strip_prefix(p))
            .and_then(|rest| rest.split('`').next())
            .map(str::to_string),
    };
    FormatError {
        file: name.to_string(),
        line: (e.line() > 0).then_some(e.line()),
        column: (e.line() > 0).then_some(e.column()),
        field,
        message,
        kind,
    }
}

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
mod tests {
    use super::*;
    use crate::plan::SharedObjectsPlan;
    use proptest::prelude::*;

    const NAME: &str = "t.json";

    /// Asserts file, line, column, field and kind; returns the display string.
    fn check(
        text: &str,
        line: usize,
        column: Option<usize>,
        field: Option<&str>,
        kind: FormatErrorKind,
    ) -> String {
        let e = match parse_problem_json(text, NAME) {
            Ok(p) => panic!("accepted {text:?} as {p:?}"),
            Err(e) => e,
        };
        assert_eq!(e.file, NAME, "{e}");
        assert_eq!(e.line, Some(line), "{e}");
        if column.is_some() {
            assert_eq!(e.column, column, "{e}");
        }
        assert_eq!(e.field.as_deref(), field, "{e}");
        assert_eq!(e.kind, kind, "{e}");
        e.to_string()
    }

    /// A document with `rows` as its buffer lines (buffer i on line 3 + i).
    fn doc(rows: &[&str]) -> String {
        format!("{{\n  \"buffers\": [\n{}\n  ]\n}}\n", rows.join(",\n"))
    }

    const A: &str = r#"    {"id":"a","lower":0,"upper":2,"size":8}"#;

    #[test]
    fn accepts_documents_and_bare_arrays() {
        let expected = Problem::new(vec![
            Buffer::new("a", 0, 2, 8),
            Buffer::new("b", 1, 3, 4).with_align(16),
        ])
        .unwrap();
        for text in [
            r#"{"version":1,"buffers":[{"id":"a","lower":0,"upper":2,"size":8},
               {"size":4,"upper":3,"lower":1,"id":"b","alignment":16}],"comment":{"x":[1]}}"#,
            r#"{"buffers":[{"id":"a","lower":0,"upper":2,"size":8},
               {"id":"b","lower":1,"upper":3,"size":4,"align":16}]}"#,
            "\u{feff} [{\"id\":\"a\",\"lower\":0,\"upper\":2,\"size\":8},
               {\"id\":\"b\",\"lower\":1,\"upper\":3,\"size\":4,\"align\":16}]",
        ] {
            assert_eq!(
                parse_problem_json(text, NAME).unwrap(),
                (expected.clone(), None),
                "{text}"
            );
        }
        // The core serde form of a problem reads back too.
        let serde_text = serde_json::to_string(&expected).unwrap();
        assert_eq!(parse_problem_json(&serde_text, NAME).unwrap().0, expected);
    }

    #[test]
    fn missing_key() {
        let msg = check(
            &doc(&[A, r#"    {"id":"b","lower":0,"size":8}"#]),
            4,
            None,
            Some("upper"),
            FormatErrorKind::MissingColumn,
        );
        assert_eq!(
            msg,
            r#"t.json:4:33: field "upper": missing key "upper" in buffer #1"#
        );
        check(
            r#"{"version":1}"#,
            1,
            None,
            Some("buffers"),
            FormatErrorKind::MissingColumn,
        );
    }

    #[test]
    fn unknown_and_duplicate_keys() {
        check(
            &doc(&[r#"    {"id":"a","lower":0,"upper":2,"size":8,"aling":4}"#]),
            3,
            None,
            Some("aling"),
            FormatErrorKind::Schema,
        );
        check(
            &doc(&[r#"    {"id":"a","lower":0,"upper":2,"size":8,"size":8}"#]),
            3,
            None,
            Some("size"),
            FormatErrorKind::DuplicateColumn,
        );
        check(
            &doc(&[r#"    {"id":"a","lower":0,"upper":2,"size":8,"align":8,"alignment":8}"#]),
            3,
            None,
            Some("alignment"),
            FormatErrorKind::DuplicateColumn,
        );
    }

    #[test]
    fn wrong_types_and_numbers() {
        let msg = check(
            &doc(&[A, r#"    {"id":"b","lower":0,"upper":2,"size":"12x"}"#]),
            4,
            Some(46),
            Some("size"),
            FormatErrorKind::NotANumber,
        );
        assert_eq!(
            msg,
            r#"t.json:4:46: field "size": invalid type: string "12x", expected a non-negative integer"#
        );
        check(
            &doc(&[r#"    {"id":"b","lower":0.5,"upper":2,"size":1}"#]),
            3,
            None,
            Some("lower"),
            FormatErrorKind::NotANumber,
        );
        check(
            &doc(&[r#"    {"id":7,"lower":0,"upper":2,"size":1}"#]),
            3,
            None,
            Some("id"),
            FormatErrorKind::Schema,
        );
        let msg = check(
            &doc(&[r#"    {"id":"b","lower":-3,"upper":2,"size":1}"#]),
            3,
            None,
            Some("lower"),
            FormatErrorKind::Negative,
        );
        assert!(
            msg.ends_with(r#"field "lower": -3 is negative: expected a non-negative integer"#),
            "{msg}"
        );
        check(
            &doc(&[r#"    {"id":"b","lower":0,"upper":2,"size":-1}"#]),
            3,
            None,
            Some("size"),
            FormatErrorKind::Negative,
        );
        check(
            &doc(&[r#"    {"id":"b","lower":0,"upper":18446744073709551616,"size":1}"#]),
            3,
            None,
            Some("upper"),
            FormatErrorKind::OutOfRange,
        );
        check("[1]", 1, Some(2), None, FormatErrorKind::Schema);
        check("\"buffers\"", 1, None, None, FormatErrorKind::Schema);
    }

    #[test]
    fn invalid_buffers() {
        let msg = check(
            &doc(&[A, r#"    {"id":"b","lower":0,"upper":2,"size":0}"#]),
            4,
            Some(43),
            Some("size"),
            FormatErrorKind::ZeroSize,
        );
        assert_eq!(
            msg,
            r#"t.json:4:43: field "size": 0 must be positive (buffer #1)"#
        );
        check(
            &doc(&[r#"    {"id":"b","upper":2,"lower":2,"size":1}"#]),
            3,
            None,
            Some("upper"),
            FormatErrorKind::EmptyLifetime,
        );
        check(
            &doc(&[r#"    {"id":"b","lower":0,"upper":2,"size":1,"align":12}"#]),
            3,
            None,
            Some("align"),
            FormatErrorKind::BadAlignment,
        );
        let msg = check(
            &doc(&[A, A]),
            4,
            None,
            Some("id"),
            FormatErrorKind::DuplicateId,
        );
        assert!(
            msg.contains(r#"duplicate id "a": buffer #1 repeats buffer #0"#),
            "{msg}"
        );
        let half = u64::MAX / 2;
        let big = format!(r#"    {{"id":"b","lower":0,"upper":2,"size":{half}}}"#);
        let bigger = big.replace("\"b\"", "\"c\"");
        check(
            &doc(&[&big, &bigger]),
            4,
            None,
            Some("size"),
            FormatErrorKind::TooLarge,
        );
    }

    #[test]
    fn offsets_all_or_none() {
        let text = doc(&[
            r#"    {"id":"a","lower":0,"upper":2,"size":8,"offset":0}"#,
            r#"    {"id":"b","lower":0,"upper":2,"size":8}"#,
        ]);
        check(
            &text,
            4,
            None,
            Some("offset"),
            FormatErrorKind::MissingOffset,
        );
        let text = doc(&[
            A,
            r#"    {"id":"b","lower":0,"upper":2,"size":8,"offset":8}"#,
        ]);
        check(
            &text,
            4,
            None,
            Some("offset"),
            FormatErrorKind::MissingOffset,
        );
    }

    #[test]
    fn empty_syntax_version_no_buffers() {
        check("  \n", 1, None, None, FormatErrorKind::Empty);
        check("[]", 1, None, None, FormatErrorKind::NoBuffers);
        check(
            r#"{"buffers": []}"#,
            1,
            None,
            None,
            FormatErrorKind::NoBuffers,
        );
        check(
            &doc(&[A]).replace("8}", "8"),
            4,
            None,
            None,
            FormatErrorKind::Syntax,
        );
        check(
            &format!("{}x", doc(&[A])),
            6,
            Some(1),
            None,
            FormatErrorKind::Syntax,
        );
        check("[{\"id\":", 1, None, Some("id"), FormatErrorKind::Syntax);
        let msg = check(
            "{\"version\": 2, \"buffers\": []}",
            1,
            Some(13),
            Some("version"),
            FormatErrorKind::UnsupportedVersion,
        );
        assert_eq!(
            msg,
            r#"t.json:1:13: field "version": unsupported version 2 (this reader knows 1)"#
        );
        check("[[]]", 1, None, None, FormatErrorKind::Schema);
        let deep = format!("{{\"x\": {}", "[".repeat(10_000));
        check(&deep, 1, Some(10_006), None, FormatErrorKind::Syntax);
    }

    #[test]
    fn plans() {
        let plan = OffsetPlan {
            offsets: vec![0, 8, u64::MAX],
        };
        let mut out = Vec::new();
        write_plan_json(&mut out, &plan).unwrap();
        assert_eq!(
            parse_plan_json_bytes::<OffsetPlan>(&out, NAME).unwrap(),
            plan
        );
        let shared = SharedObjectsPlan {
            object_ids: vec![0, 1, 0],
            object_sizes: vec![8, 4],
        };
        let mut out = Vec::new();
        write_plan_json(&mut out, &shared).unwrap();
        assert_eq!(
            parse_plan_json_bytes::<SharedObjectsPlan>(&out, NAME).unwrap(),
            shared
        );
        let e = parse_plan_json::<OffsetPlan>("{\n\"offsets\": [1, -2]}", NAME).unwrap_err();
        assert_eq!((e.line, e.kind), (Some(2), FormatErrorKind::Schema));
        let e = parse_plan_json::<OffsetPlan>("{}", NAME).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("offsets"));
        assert_eq!(
            e.to_string(),
            r#"t.json:1:2: field "offsets": missing field `offsets`"#
        );
        let e = parse_plan_json::<OffsetPlan>("", NAME).unwrap_err();
        assert_eq!((e.line, e.kind), (Some(1), FormatErrorKind::Empty));
    }

    #[test]
    fn round_trip_with_and_without_alignment() {
        let plain = crate::fixtures::minimalloc_example();
        let text = problem_to_json(&plain, None);
        assert!(!text.contains("align"), "{text}");
        assert_eq!(parse_problem_json(&text, NAME).unwrap(), (plain, None));
        let aligned = Problem::new(vec![
            Buffer::new("x\"\n\u{e9}", 0, u64::MAX, 1 << 50).with_align(1 << 20),
            Buffer::new("", 3, 4, 1),
        ])
        .unwrap();
        let plan = OffsetPlan {
            offsets: vec![0, 7],
        };
        let text = problem_to_json(&aligned, Some(&plan));
        assert!(text.contains(r#""align":1048576,"offset":0}"#), "{text}");
        assert_eq!(
            parse_problem_json(&text, NAME).unwrap(),
            (aligned, Some(plan))
        );
    }

    proptest! {
        #[test]
        fn round_trips(p in crate::fixtures::strategies::problem(20), with_plan in any::<bool>()) {
            prop_assume!(!p.is_empty());
            let plan = with_plan.then(|| OffsetPlan { offsets: (0..p.len() as u64).rev().collect() });
            let text = problem_to_json(&p, plan.as_ref());
            prop_assert_eq!(parse_problem_json(&text, NAME).unwrap(), (p, plan));
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_problem_json_bytes(&bytes, NAME);
            let _ = parse_plan_json_bytes::<OffsetPlan>(&bytes, NAME);
        }

        #[test]
        fn mutated_json_never_panics(
            p in crate::fixtures::strategies::problem(6),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(
                b",\"\n[]{}:-019.ex\xff".to_vec())), 1..6),
        ) {
            prop_assume!(!p.is_empty());
            let mut bytes = problem_to_json(&p, None).into_bytes();
            for (at, op, byte) in edits {
                let i = at.index(bytes.len() + 1);
                match op {
                    0 => bytes.insert(i, byte),
                    1 if i < bytes.len() => { bytes.remove(i); }
                    _ if i < bytes.len() => bytes[i] = byte,
                    _ => {}
                }
            }
            if let Err(e) = parse_problem_json_bytes(&bytes, NAME) {
                prop_assert_eq!(e.file.as_str(), NAME);
                prop_assert!(e.line.is_some());
            }
        }
    }
}

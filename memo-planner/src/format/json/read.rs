//! Reading a problem document with serde: seeds that check each buffer as it is read and
//! record the key being read, so that errors name the line, column and key.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::io;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess};
use serde::de::{Deserializer, Visitor};

use super::PROBLEM_FILE_VERSION;
use crate::format::error::{FormatError, FormatErrorKind};
use crate::problem::Buffer;

/// What the deserializer was doing when an error struck.
#[derive(Default)]
pub(super) struct Ctx {
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

/// A problem document as read: its buffers and, when they have them, their offsets.
pub(super) struct Parsed {
    pub(super) buffers: Vec<Buffer>,
    pub(super) offsets: Option<Vec<u64>>,
}

/// The whole document: an object with `buffers`, or a bare array.
pub(super) struct DocSeed<'c>(pub(super) &'c Ctx);

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
pub(super) fn json_error(name: &str, e: &serde_json::Error, ctx: Option<&Ctx>) -> FormatError {
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

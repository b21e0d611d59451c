//! Records of a CSV input, field by field: `csv_core` splits the fields and unescapes
//! quoted ones; this reader adds what the format asks beyond RFC 4180, and the lines.
//!
//! - Blank lines (spaces, tabs and carriage returns only) are skipped.
//! - Spaces and tabs before a field are not part of it, nor are spaces, tabs and carriage
//!   returns after an unquoted field (so CRLF line ends need no care).
//! - A quoted field ends at its closing quote: only spaces, tabs and carriage returns may
//!   follow it before the comma or the line end. An unterminated quote is an error.
//! - Only `\n` ends a record; lines are counted from 1.

use csv_core::{ReadFieldResult, Terminator};

use crate::format::error::quote;

/// A field's bytes: in the input (unquoted fields, trimmed), or unescaped in the scratch
/// buffer (quoted fields).
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) in_scratch: bool,
}

/// A malformed record: line, index of the field, message.
pub(super) struct SyntaxError {
    pub(super) line: usize,
    pub(super) field: usize,
    pub(super) message: String,
}

/// Reads records of fields from the input, reusing the caller's buffers.
pub(super) struct Records<'a> {
    input: &'a [u8],
    pos: usize,
    /// Line of `pos`, 1-based.
    line: usize,
    core: csv_core::Reader,
    /// `csv_core`'s output: the current field, unescaped (grown when a field needs more).
    out: Vec<u8>,
    /// Whether `csv_core` has read: its first read takes a byte order mark for one, and
    /// the only mark this format knows is the file's first bytes (the caller strips it).
    has_read: bool,
}

/// What one field's parse consumed and produced.
struct RawField {
    /// Input bytes consumed, with the comma or line end that closed the field.
    len: usize,
    /// Whether a line end (or the end of the input) closed the record.
    record_end: bool,
    /// Bytes of `out` holding the unescaped field.
    out_len: usize,
}

impl<'a> Records<'a> {
    /// Records of `input` (without a byte order mark).
    pub(super) fn new(input: &'a [u8]) -> Records<'a> {
        Records {
            input,
            pos: 0,
            line: 1,
            core: csv_core::ReaderBuilder::new()
                .terminator(Terminator::Any(b'\n'))
                .build(),
            out: vec![0; 256],
            has_read: false,
        }
    }

    /// Reads the next non-blank record into `fields` (and `scratch`); returns its first line.
    pub(super) fn next_record(
        &mut self,
        fields: &mut Vec<Span>,
        scratch: &mut Vec<u8>,
    ) -> Result<Option<usize>, SyntaxError> {
        fields.clear();
        scratch.clear();
        if !self.skip_blank_lines() {
            return Ok(None);
        }
        let record_line = self.line;
        loop {
            while matches!(self.input.get(self.pos), Some(b' ' | b'\t')) {
                self.pos += 1;
            }
            let start = self.pos;
            let raw = self.read_field();
            let bytes = &self.input[start..start + raw.len];
            let body = match bytes.last() {
                Some(b',' | b'\n') => &bytes[..bytes.len() - 1],
                _ => bytes,
            };
            let span = if bytes.first() == Some(&b'"') {
                let line = self.line;
                let field = fields.len();
                let content_end = closing_quote(body).ok_or_else(|| SyntaxError {
                    line,
                    field,
                    message: "unterminated quoted field".to_string(),
                })?;
                let after = &body[content_end + 1..];
                if let Some(k) = after.iter().position(|b| !is_space(*b)) {
                    return Err(SyntaxError {
                        line: line + count_lines(&body[..content_end]),
                        field,
                        message: format!(
                            "unexpected {} after the closing quote",
                            quote(&after[k..k + 1])
                        ),
                    });
                }
                // csv_core copies what follows the closing quote: only spaces here.
                let out_start = scratch.len();
                scratch.extend_from_slice(&self.out[..raw.out_len - after.len()]);
                Span {
                    start: out_start,
                    end: scratch.len(),
                    in_scratch: true,
                }
            } else {
                let trimmed = body.len() - body.iter().rev().take_while(|b| is_space(**b)).count();
                Span {
                    start,
                    end: start + trimmed,
                    in_scratch: false,
                }
            };
            fields.push(span);
            self.line += count_lines(bytes);
            self.pos = start + raw.len;
            if raw.record_end {
                return Ok(Some(record_line));
            }
        }
    }

    /// Moves past blank lines; false at the end of the input.
    fn skip_blank_lines(&mut self) -> bool {
        loop {
            let rest = &self.input[self.pos..];
            match rest.iter().position(|b| !is_space(*b)) {
                None => {
                    self.pos = self.input.len();
                    return false;
                }
                Some(k) if rest[k] == b'\n' => {
                    self.pos += k + 1;
                    self.line += 1;
                }
                Some(_) => return true,
            }
        }
    }

    /// Parses the field at `pos` into `out`.
    fn read_field(&mut self) -> RawField {
        let (mut len, mut out_len) = (0, 0);
        loop {
            let mut rest = &self.input[self.pos + len..];
            if !self.has_read {
                // One byte cannot be a byte order mark.
                rest = &rest[..rest.len().min(1)];
                self.has_read = true;
            }
            let (result, nin, nout) = self.core.read_field(rest, &mut self.out[out_len..]);
            len += nin;
            out_len += nout;
            let record_end = match result {
                ReadFieldResult::Field { record_end } => record_end,
                ReadFieldResult::End => true,
                ReadFieldResult::OutputFull => {
                    self.out.resize(self.out.len() * 2, 0);
                    continue;
                }
                ReadFieldResult::InputEmpty => continue,
            };
            return RawField {
                len,
                record_end,
                out_len,
            };
        }
    }
}

/// Space, tab or carriage return: what surrounds fields without belonging to them.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r')
}

/// The number of line ends in `bytes`.
fn count_lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// The index of the quote closing the quoted field `raw` (which starts with its opening
/// quote; doubled quotes inside are escapes), if it has one.
fn closing_quote(raw: &[u8]) -> Option<usize> {
    let mut i = 1;
    loop {
        let k = i + raw.get(i..)?.iter().position(|&b| b == b'"')?;
        if raw.get(k + 1) == Some(&b'"') {
            i = k + 2;
        } else {
            return Some(k);
        }
    }
}

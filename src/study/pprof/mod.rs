//! A trace as a heap profile in pprof's format (`profile.proto`, gzipped), which
//! `go tool pprof`, pprof.me and speedscope read.
//!
//! One sample per distinct stack, with four values, in the order of Go's heap profiles. A
//! stack is the pass, its op scopes, then the captured call-site frames down to the call
//! site (`memo stats`'s: the standard library's allocation frames inside it are left out,
//! so a stack's leaf, pprof's "flat", is the code that allocated); a record without frames
//! is attributed to its innermost op scope. The values:
//! - `alloc_objects` (`count`) and `alloc_space` (`bytes`): every allocation record, a
//!   realloc's new block included, as DHAT's totals and the folded export count them; they
//!   sum to the trace's calls and requested bytes (`memo stats`'s `calls`);
//! - `inuse_objects` (`count`) and `inuse_space` (`bytes`): the records live at the first
//!   peak of live bytes; they sum to `memo stats`'s peak (`memory.peak_live`) and to its
//!   live set at the peak (`peak_live_set`).
//!
//! Every frame is one location with one line naming one function (ids from 1, in the order
//! of first use); frames carry no addresses, files or line numbers. One mapping, named by
//! the trace's key (or the recorded program's command line), says the functions are
//! already symbolized. `inuse_space` is the default sample type.

mod proto;

use std::collections::HashMap;
use std::io::{Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use memo_alloc::trace::Trace;
use prost::Message;

pub use proto::{Function, Line, Location, Mapping, Profile, Sample, ValueType};

use super::groups::peak_time;
use super::pass::record_end;
use super::stacks::Stacks;

/// The sample types, in order: (type, unit).
pub const SAMPLE_TYPES: [(&str, &str); 4] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
];

/// The heap profile of a checked trace ([`Trace::check`]).
pub fn to_profile(trace: &Trace) -> Profile {
    let mut b = Builder::default();
    b.string("");
    let stacks = Stacks::of(trace);
    let peak = peak_time(trace);
    for (i, a) in trace.allocations.iter().enumerate() {
        let mut ids: Vec<u64> = stacks.record_to_site(i).map(|f| b.location(f)).collect();
        ids.reverse();
        let live = a.alloc <= peak && peak < record_end(trace, i);
        let size = i64::try_from(a.size).unwrap_or(i64::MAX);
        let v = b.sample(ids);
        v[0] += 1;
        v[1] = v[1].saturating_add(size);
        if live {
            v[2] += 1;
            v[3] = v[3].saturating_add(size);
        }
    }
    b.finish(trace, peak)
}

/// The heap profile of a checked trace, encoded and gzipped: the bytes of a `.pb.gz` file.
pub fn to_pprof(trace: &Trace) -> Vec<u8> {
    encode(&to_profile(trace))
}

/// `profile` encoded and gzipped.
pub fn encode(profile: &Profile) -> Vec<u8> {
    gzip(&profile.encode_to_vec())
}

/// Reads a gzipped (or plain) encoded profile back; the error says what is wrong.
pub fn decode(bytes: &[u8]) -> Result<Profile, String> {
    let gzipped = bytes.starts_with(&[0x1f, 0x8b]);
    if !gzipped {
        return Profile::decode(bytes).map_err(|e| format!("not a pprof profile: {e}"));
    }
    let mut plain = Vec::new();
    GzDecoder::new(bytes)
        .read_to_end(&mut plain)
        .map_err(|e| format!("not a gzip stream: {e}"))?;
    Profile::decode(plain.as_slice()).map_err(|e| format!("not a pprof profile: {e}"))
}

/// `bytes` gzipped.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    // Writing to a vector cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

/// A profile while it is built: interned strings, frames and stacks.
#[derive(Default)]
struct Builder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<Function>,
    locations: HashMap<String, u64>,
    samples: Vec<Sample>,
    sample_ids: HashMap<Vec<u64>, usize>,
}

impl Builder {
    /// The string table index of `s`, added on first use.
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    /// The location id of frame `name` (its function has the same id), added on first use.
    fn location(&mut self, name: &str) -> u64 {
        if let Some(&id) = self.locations.get(name) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let name_id = self.string(name);
        self.functions.push(Function {
            id,
            name: name_id,
            system_name: name_id,
            filename: 0,
        });
        self.locations.insert(name.to_string(), id);
        id
    }

    /// The values of the sample of stack `ids` (leaf first), added (zero) on first use.
    fn sample(&mut self, ids: Vec<u64>) -> &mut Vec<i64> {
        let n = self.samples.len();
        let i = *self.sample_ids.entry(ids.clone()).or_insert(n);
        if i == n {
            self.samples.push(Sample {
                location_id: ids,
                value: vec![0; SAMPLE_TYPES.len()],
            });
        }
        &mut self.samples[i].value
    }

    /// The profile, with its sample types and comments naming the trace and its peak.
    fn finish(mut self, trace: &Trace, peak: u64) -> Profile {
        let sample_type = SAMPLE_TYPES
            .iter()
            .map(|(t, unit)| ValueType {
                r#type: self.string(t),
                unit: self.string(unit),
            })
            .collect();
        let comment = vec![
            self.string(&format!("memomalloc trace {}", trace.key)),
            self.string(&format!(
                "inuse_* values: the blocks live at the first peak of live bytes (event {peak})"
            )),
        ];
        let default_sample_type = self.string("inuse_space");
        let program = trace.recording.as_ref().and_then(|r| r.program.as_ref());
        let mapping = vec![Mapping {
            id: 1,
            filename: self.string(program.map_or(&trace.key, |p| &p.command)),
            has_functions: true,
            ..Mapping::default()
        }];
        let location = self
            .functions
            .iter()
            .map(|f| Location {
                id: f.id,
                mapping_id: 1,
                line: vec![Line {
                    function_id: f.id,
                    line: 0,
                }],
            })
            .collect();
        let duration_ns = trace.recording.as_ref().map_or(0, |r| r.duration_ns);
        Profile {
            sample_type,
            sample: self.samples,
            mapping,
            location,
            function: self.functions,
            string_table: self.strings,
            duration_nanos: i64::try_from(duration_ns).unwrap_or(i64::MAX),
            comment,
            default_sample_type,
        }
    }
}

#[cfg(test)]
mod tests;

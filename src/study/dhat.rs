//! A pass as a DHAT JSON file (format version 2), for Valgrind's DHAT viewer
//! (`dh_view.html`), as dhat-rs writes it.
//!
//! - Every allocation record (`alloc`, `alloc_zeroed` or `realloc`) is one block: a realloc
//!   ends the block it continues and starts a new one, as in Valgrind's DHAT.
//! - A block's program point is its frame list, innermost first: the captured call-site
//!   frames (when `MEMO_BACKTRACE=1` was set), then one pseudo-frame per op scope from the
//!   innermost outwards (`[op] matmul`, `[op] layer`), then the pass (`[pass] model`).
//!   Blocks with the same frame list share one program point, so no two points have the
//!   same `fs` (the viewer rejects a repeated location).
//! - Block lifetimes are on (`bklt: true`): time is the trace's event counter (`tu:
//!   "events"`), `te` the pass's events, `tg` the first time of the peak of live bytes,
//!   `tuth` [`SHORT_LIVED_EVENTS`]. Blocks still live at the end count in `eb`/`ebk` and
//!   live until `te`. Accesses are not recorded (`bkacc: false`).

use std::collections::HashMap;

use memo_alloc::trace::Trace;
use serde_json::{json, Map, Value};

use super::pass::{peak, record_end};

/// The viewer's short-lived threshold `tuth`, in events: program points whose blocks live
/// this long or less on average are flagged short-lived.
pub const SHORT_LIVED_EVENTS: u64 = 10;

/// The root frame the viewer requires at `ftbl[0]`.
pub const ROOT_FRAME: &str = "[root]";

/// The DHAT frame of an op scope.
pub fn op_frame(name: &str) -> String {
    format!("[op] {name}")
}

/// The DHAT frame of the pass.
pub fn pass_frame(key: &str) -> String {
    format!("[pass] {key}")
}

/// One program point while it is built.
#[derive(Default)]
struct Point {
    frames: Vec<u32>,
    records: Vec<usize>,
}

/// The frame table `ftbl`: [`ROOT_FRAME`] first, then every other frame once, in the
/// order first asked for.
struct Frames {
    table: Vec<String>,
    index: HashMap<String, u32>,
}

impl Frames {
    fn new() -> Frames {
        Frames {
            table: vec![ROOT_FRAME.to_string()],
            index: HashMap::new(),
        }
    }

    /// The index of `frame` in the table, added if new.
    fn intern(&mut self, frame: String) -> u32 {
        let table = &mut self.table;
        *self.index.entry(frame).or_insert_with_key(|f| {
            table.push(f.clone());
            (table.len() - 1) as u32
        })
    }

    /// The frames of every scope, innermost first: its op frames, then the pass.
    fn of_scopes(&mut self, trace: &Trace) -> Vec<Vec<u32>> {
        let mut out: Vec<Vec<u32>> = Vec::with_capacity(trace.scopes.len());
        for s in &trace.scopes {
            let frames = match s.parent {
                // Parents come first (checked), so their frames are known.
                Some(p) if (p as usize) < out.len() => {
                    let mut f = vec![self.intern(op_frame(&s.name))];
                    f.extend_from_slice(&out[p as usize]);
                    f
                }
                _ => vec![self.intern(pass_frame(&trace.key))],
            };
            out.push(frames);
        }
        out
    }
}

/// The DHAT document of a checked trace ([`Trace::check`]); `cmd` is shown as the command.
pub fn to_dhat(trace: &Trace, cmd: &str) -> Value {
    let mut frames = Frames::new();
    let points = program_points(trace, &mut frames);
    let (_, _, tg) = peak((0..trace.allocations.len()).map(|i| {
        let a = &trace.allocations[i];
        (a.alloc, record_end(trace, i), a.size)
    }));
    let mut pps: Vec<(u64, Value)> = points.iter().map(|p| point_json(trace, p, tg)).collect();
    // Largest first, as the viewer sorts anyway; stable for equal totals.
    pps.sort_by_key(|p| std::cmp::Reverse(p.0));

    let mut doc = Map::new();
    doc.insert("dhatFileVersion".into(), json!(2));
    doc.insert("mode".into(), json!("rust-heap"));
    doc.insert("verb".into(), json!("Allocated"));
    doc.insert("bklt".into(), json!(true));
    doc.insert("bkacc".into(), json!(false));
    doc.insert("tu".into(), json!("events"));
    doc.insert("Mtu".into(), json!("Mevents"));
    doc.insert("tuth".into(), json!(SHORT_LIVED_EVENTS));
    doc.insert("cmd".into(), json!(cmd));
    doc.insert("pid".into(), json!(0));
    doc.insert("tg".into(), json!(tg));
    doc.insert("te".into(), json!(trace.events));
    doc.insert(
        "pps".into(),
        Value::Array(pps.into_iter().map(|(_, v)| v).collect()),
    );
    doc.insert("ftbl".into(), json!(frames.table));
    Value::Object(doc)
}

/// The records grouped by frame list (call-site frames, then the scope's frames), one
/// program point per distinct list, in the order first met.
fn program_points(trace: &Trace, frames: &mut Frames) -> Vec<Point> {
    let scope_frames = frames.of_scopes(trace);
    let mut points: Vec<Point> = Vec::new();
    let mut point_of: HashMap<Vec<u32>, usize> = HashMap::new();
    for (i, a) in trace.allocations.iter().enumerate() {
        let mut fs: Vec<u32> = a
            .call_site
            .iter()
            .flatten()
            .map(|f| frames.intern(f.clone()))
            .collect();
        match scope_frames.get(a.scope as usize) {
            Some(s) => fs.extend_from_slice(s),
            None => fs.push(frames.intern(pass_frame(&trace.key))),
        }
        let p = *point_of.entry(fs.clone()).or_insert_with(|| {
            points.push(Point {
                frames: fs,
                records: Vec::new(),
            });
            points.len() - 1
        });
        points[p].records.push(i);
    }
    points
}

/// A program point's totals (`tb`, `tbk`, `tl`), its own peak (`mb`, `mbk`), its share of
/// the global peak at `tg` (`gb`, `gbk`) and what is live at the end (`eb`, `ebk`); with
/// its total bytes to sort by.
fn point_json(trace: &Trace, p: &Point, tg: u64) -> (u64, Value) {
    let (mut tb, mut tbk, mut tl) = (0u64, 0u64, 0u64);
    let (mut gb, mut gbk, mut eb, mut ebk) = (0u64, 0u64, 0u64, 0u64);
    let mut intervals = Vec::with_capacity(p.records.len());
    for &i in &p.records {
        let a = &trace.allocations[i];
        let end = record_end(trace, i);
        tb += a.size;
        tbk += 1;
        tl += end - a.alloc;
        if a.alloc <= tg && tg < end {
            gb += a.size;
            gbk += 1;
        }
        if a.free.is_none() {
            eb += a.size;
            ebk += 1;
        }
        intervals.push((a.alloc, end, a.size));
    }
    let (mb, mbk, _) = peak(intervals);
    let pp = json!({
        "tb": tb, "tbk": tbk, "tl": tl,
        "mb": mb, "mbk": mbk,
        "gb": gb, "gbk": gbk,
        "eb": eb, "ebk": ebk,
        "fs": p.frames,
    });
    (tb, pp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::tests::sample;
    use std::collections::HashSet;

    #[test]
    fn sample_has_unique_points_and_viewer_fields() {
        let mut t = sample();
        // Same op path as #0/#1 but a call site: its own point.
        t.allocations[1].call_site = Some(vec!["app::big".into()]);
        let d = to_dhat(&t, "memo export");
        for k in [
            "dhatFileVersion",
            "mode",
            "verb",
            "bklt",
            "bkacc",
            "tu",
            "Mtu",
            "cmd",
            "pid",
            "te",
            "pps",
            "ftbl",
            "tg",
            "tuth",
        ] {
            assert!(d.get(k).is_some(), "{k}");
        }
        assert_eq!(d["ftbl"][0], ROOT_FRAME);
        assert_eq!(d["tg"], 7);
        assert_eq!(d["te"], 16);
        let pps = d["pps"].as_array().unwrap();
        let mut seen = HashSet::new();
        for pp in pps {
            assert!(seen.insert(pp["fs"].to_string()), "repeated {}", pp["fs"]);
        }
        // #0 ([op] a), #1 (app::big, [op] a), #2+#3 ([op] b), #4 ([pass]).
        assert_eq!(pps.len(), 4);
        let ftbl = d["ftbl"].as_array().unwrap();
        let names = |pp: &Value| -> Vec<String> {
            pp["fs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| {
                    ftbl[i.as_u64().unwrap() as usize]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect()
        };
        let b = &pps[0];
        assert_eq!(names(b), ["[op] b", "[pass] model"]);
        assert_eq!((b["tb"].as_u64(), b["tbk"].as_u64()), (Some(3000), Some(2)));
        assert_eq!(
            (b["mb"].as_u64(), b["gb"].as_u64()),
            (Some(2000), Some(2000))
        );
        assert_eq!(b["tl"], 2);
        let pass = pps.iter().find(|p| names(p) == ["[pass] model"]).unwrap();
        assert_eq!(
            (pass["eb"].as_u64(), pass["ebk"].as_u64()),
            (Some(10), Some(1))
        );
        assert_eq!(pass["tl"], 5);
        let big = pps.iter().find(|p| names(p)[0] == "app::big").unwrap();
        assert_eq!(names(big), ["app::big", "[op] a", "[pass] model"]);
        assert_eq!(big["gb"], 100);
        let total: u64 = pps.iter().map(|p| p["tb"].as_u64().unwrap()).sum();
        assert_eq!(total, 64 + 100 + 1000 + 2000 + 10);
    }
}

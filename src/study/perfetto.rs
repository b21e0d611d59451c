//! A pass in the Chrome trace-event JSON format, which ui.perfetto.dev and
//! chrome://tracing open.
//!
//! Timestamps are the trace's event ticks, written as microseconds (one event = 1 µs on the
//! time axis). Process 1 is the pass, with:
//! - thread 1 (`pass`): one slice for the whole pass;
//! - thread 2 (`ops`): one slice per op scope instance, as balanced `B`/`E` pairs nested as
//!   the scopes were, with the instance's direct allocations in the `B` event's `args`;
//!   and an instant event (`i`) at the allocation of each of the largest allocations;
//! - a counter track (`C`) `live bytes`, with a sample wherever the live bytes change.

use memo_alloc::trace::Trace;
use serde_json::{json, Value};

use super::pass::{chain_roots, op_path, record_end, scope_spans, ScopeTimes};

/// How many of the largest allocations get an instant event by default.
pub const LARGEST: usize = 16;

const PID: u32 = 1;
const PASS_TID: u32 = 1;
const OPS_TID: u32 = 2;

/// The trace-event document of a checked trace ([`Trace::check`]), with instant events
/// for its `largest` largest allocations (realloc chains, by their largest size).
pub fn to_perfetto(trace: &Trace, largest: usize) -> Value {
    let spans = scope_spans(trace);
    let n = trace.scopes.len();
    let mut events: Vec<Value> = vec![
        json!({"name": "process_name", "ph": "M", "pid": PID,
               "args": {"name": format!("memomalloc pass {}", trace.key)}}),
        json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": PASS_TID,
               "args": {"name": "pass"}}),
        json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": OPS_TID,
               "args": {"name": "ops"}}),
        json!({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": PASS_TID,
               "args": {"sort_index": 0}}),
        json!({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": OPS_TID,
               "args": {"sort_index": 1}}),
        json!({"name": trace.key, "cat": "pass", "ph": "X", "ts": 0, "dur": trace.events,
               "pid": PID, "tid": PASS_TID,
               "args": {"events": trace.events, "ops": n.saturating_sub(1),
                        "allocations": trace.allocations.len()}}),
    ];

    // Direct allocations per scope instance.
    let mut direct = vec![(0u64, 0u64); n];
    for a in &trace.allocations {
        if let Some(d) = direct.get_mut(a.scope as usize) {
            d.0 += 1;
            d.1 += a.size;
        }
    }
    // Op slices in depth-first order (parents before children, children in enter order),
    // then stably sorted by time: ties keep the nesting order.
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
    for s in trace.scopes.iter().skip(1) {
        if let Some(p) = s.parent {
            if let Some(c) = children.get_mut(p as usize) {
                c.push(s.id);
            }
        }
    }
    for c in &mut children {
        c.sort_by_key(|&id| (spans.spans[id as usize].0, id));
    }
    let mut slices: Vec<(u64, Value)> = Vec::with_capacity(2 * n);
    // (scope, whether its children were pushed)
    let mut stack: Vec<(u32, bool)> = children
        .first()
        .map(|c| c.iter().rev().map(|&id| (id, false)).collect())
        .unwrap_or_default();
    while let Some((id, opened)) = stack.pop() {
        let (enter, exit) = spans.spans[id as usize];
        let s = &trace.scopes[id as usize];
        if opened {
            slices.push((
                exit,
                json!({"name": s.name, "ph": "E", "ts": exit, "pid": PID, "tid": OPS_TID}),
            ));
            continue;
        }
        let (count, bytes) = direct[id as usize];
        slices.push((
            enter,
            json!({"name": s.name, "cat": "op", "ph": "B", "ts": enter, "pid": PID,
                   "tid": OPS_TID,
                   "args": {"op": op_path(trace, id), "scope": id, "occurrence": s.occurrence,
                            "allocations": count, "bytes": bytes}}),
        ));
        stack.push((id, true));
        for &c in children[id as usize].iter().rev() {
            stack.push((c, false));
        }
    }
    slices.sort_by_key(|s| s.0);
    events.extend(slices.into_iter().map(|s| s.1));

    // The live-bytes counter.
    let mut deltas: Vec<(u64, i128)> = Vec::with_capacity(2 * trace.allocations.len());
    for (i, a) in trace.allocations.iter().enumerate() {
        let end = record_end(trace, i);
        if end > a.alloc {
            deltas.push((a.alloc, i128::from(a.size)));
            deltas.push((end, -i128::from(a.size)));
        }
    }
    deltas.sort_unstable_by_key(|d| d.0);
    let mut live: i128 = 0;
    let mut k = 0;
    events.push(json!({"name": "live bytes", "ph": "C", "ts": 0, "pid": PID,
                       "args": {"bytes": 0}}));
    while k < deltas.len() {
        let t = deltas[k].0;
        let before = live;
        while k < deltas.len() && deltas[k].0 == t {
            live += deltas[k].1;
            k += 1;
        }
        if live != before {
            events.push(json!({"name": "live bytes", "ph": "C", "ts": t, "pid": PID,
                               "args": {"bytes": live.max(0) as u64}}));
        }
    }

    // The largest allocations.
    let chains = trace.chains();
    let roots = chain_roots(trace);
    let mut members = std::collections::HashMap::new();
    for &r in &roots {
        *members.entry(r).or_insert(0u64) += 1;
    }
    let mut order: Vec<usize> = (0..chains.len()).collect();
    order.sort_by(|&a, &b| {
        chains[b]
            .size
            .cmp(&chains[a].size)
            .then(chains[a].root.cmp(&chains[b].root))
    });
    for &ci in order.iter().take(largest) {
        let c = &chains[ci];
        let a = &trace.allocations[c.root as usize];
        let op = op_path(trace, a.scope);
        events.push(json!({
            "name": format!("alloc {} B", c.size), "cat": "allocation", "ph": "i", "s": "t",
            "ts": c.lower, "pid": PID, "tid": OPS_TID,
            "args": {"allocation": c.root, "size": c.size, "op": op,
                     "freed": c.upper, "escaping": c.escaping,
                     "reallocs": members.get(&c.root).copied().unwrap_or(1) - 1,
                     "call_site": a.call_site.as_ref().and_then(|f| f.first())},
        }));
    }

    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "source": "memomalloc trace",
            "key": trace.key,
            "events": trace.events,
            "time": "event ticks, shown as microseconds",
            "scope_times": match spans.times {
                ScopeTimes::Recorded => "recorded",
                ScopeTimes::Inferred => "inferred",
            },
        },
    })
}

/// Checks that the `B`/`E` events of every thread of a trace-event document are balanced
/// and properly nested, in non-decreasing time; returns how many slices there are.
pub fn check_balanced(doc: &Value) -> Result<usize, String> {
    let events = doc
        .get("traceEvents")
        .and_then(Value::as_array)
        .ok_or("no traceEvents array")?;
    let mut stacks: std::collections::HashMap<(u64, u64), (Vec<String>, f64)> =
        std::collections::HashMap::new();
    let mut slices = 0;
    for (i, e) in events.iter().enumerate() {
        let ph = e
            .get("ph")
            .and_then(Value::as_str)
            .ok_or(format!("event {i}: no ph"))?;
        if ph != "B" && ph != "E" {
            continue;
        }
        let track = (
            e.get("pid").and_then(Value::as_u64).unwrap_or(0),
            e.get("tid").and_then(Value::as_u64).unwrap_or(0),
        );
        let ts = e
            .get("ts")
            .and_then(Value::as_f64)
            .ok_or(format!("event {i}: no ts"))?;
        let name = e
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let (stack, last) = stacks.entry(track).or_insert((Vec::new(), f64::MIN));
        if ts < *last {
            return Err(format!("event {i} ({name}) goes back in time"));
        }
        *last = ts;
        if ph == "B" {
            stack.push(name);
        } else {
            match stack.pop() {
                Some(open) if open == name => slices += 1,
                Some(open) => return Err(format!("event {i} ends {name} inside {open}")),
                None => return Err(format!("event {i} ends {name}, which is not open")),
            }
        }
    }
    for ((pid, tid), (stack, _)) in stacks {
        if let Some(open) = stack.last() {
            return Err(format!("{open} on {pid}/{tid} never ends"));
        }
    }
    Ok(slices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::tests::sample;

    #[test]
    fn sample_slices_are_balanced_and_counters_follow_live_bytes() {
        let t = sample();
        let d = to_perfetto(&t, 2);
        assert_eq!(check_balanced(&d), Ok(3));
        let events = d["traceEvents"].as_array().unwrap();
        let counter: Vec<(u64, u64)> = events
            .iter()
            .filter(|e| e["ph"] == "C")
            .map(|e| {
                (
                    e["ts"].as_u64().unwrap(),
                    e["args"]["bytes"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            counter,
            [
                (0, 0),
                (1, 64),
                (2, 164),
                (3, 100),
                (6, 1100),
                (7, 2100),
                (8, 100),
                (9, 0),
                (11, 10),
                (16, 0)
            ]
        );
        let instants: Vec<u64> = events
            .iter()
            .filter(|e| e["ph"] == "i")
            .map(|e| e["args"]["size"].as_u64().unwrap())
            .collect();
        assert_eq!(instants, [2000, 100]);
        // Without scope times the inferred spans still nest.
        let mut old = t.clone();
        for s in &mut old.scopes {
            s.enter = None;
            s.exit = None;
        }
        assert_eq!(check_balanced(&to_perfetto(&old, 0)), Ok(3));
    }

    #[test]
    fn unbalanced_documents_are_rejected() {
        let d = json!({"traceEvents": [
            {"name": "a", "ph": "B", "ts": 0, "pid": 1, "tid": 1},
            {"name": "b", "ph": "B", "ts": 1, "pid": 1, "tid": 1},
            {"name": "a", "ph": "E", "ts": 2, "pid": 1, "tid": 1},
        ]});
        assert!(check_balanced(&d).is_err());
        let d = json!({"traceEvents": [{"name": "a", "ph": "B", "ts": 0, "pid": 1, "tid": 1}]});
        assert!(check_balanced(&d).is_err());
    }
}

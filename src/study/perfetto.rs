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

use super::pass::{chain_roots, op_path, record_end, scope_spans, ScopeTimes, Spans};

/// How many of the largest allocations get an instant event by default.
pub const LARGEST: usize = 16;

const PID: u32 = 1;
const PASS_TID: u32 = 1;
const OPS_TID: u32 = 2;

/// The trace-event document of a checked trace ([`Trace::check`]), with instant events
/// for its `largest` largest allocations (realloc chains, by their largest size).
pub fn to_perfetto(trace: &Trace, largest: usize) -> Value {
    let spans = scope_spans(trace);
    let mut events = track_metadata(trace);
    events.extend(op_slices(trace, &spans));
    events.extend(live_bytes_counter(trace));
    events.extend(largest_allocations(trace, largest));
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

/// The process and thread names, the threads' order, and the one slice of the whole pass.
fn track_metadata(trace: &Trace) -> Vec<Value> {
    let ops = trace.scopes.len().saturating_sub(1);
    vec![
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
               "args": {"events": trace.events, "ops": ops,
                        "allocations": trace.allocations.len()}}),
    ]
}

/// The allocations made directly in each scope instance: `(count, bytes)` by scope id.
fn direct_allocations(trace: &Trace) -> Vec<(u64, u64)> {
    let mut direct = vec![(0u64, 0u64); trace.scopes.len()];
    for a in &trace.allocations {
        if let Some(d) = direct.get_mut(a.scope as usize) {
            d.0 += 1;
            d.1 += a.size;
        }
    }
    direct
}

/// The child scopes of every scope, in enter order (ties by id).
fn children_in_enter_order(trace: &Trace, spans: &Spans) -> Vec<Vec<u32>> {
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); trace.scopes.len()];
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
    children
}

/// The `B`/`E` events of the op scopes: built in depth-first order (parents before
/// children, children in enter order), then stably sorted by time, so that ties keep the
/// nesting order.
fn op_slices(trace: &Trace, spans: &Spans) -> Vec<Value> {
    let direct = direct_allocations(trace);
    let children = children_in_enter_order(trace, spans);
    let mut slices: Vec<(u64, Value)> = Vec::with_capacity(2 * trace.scopes.len());
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
    slices.into_iter().map(|s| s.1).collect()
}

/// The `live bytes` counter track: a sample at 0, then one wherever the live bytes change.
fn live_bytes_counter(trace: &Trace) -> Vec<Value> {
    let mut deltas: Vec<(u64, i128)> = Vec::with_capacity(2 * trace.allocations.len());
    for (i, a) in trace.allocations.iter().enumerate() {
        let end = record_end(trace, i);
        if end > a.alloc {
            deltas.push((a.alloc, i128::from(a.size)));
            deltas.push((end, -i128::from(a.size)));
        }
    }
    deltas.sort_unstable_by_key(|d| d.0);
    let sample = |t: u64, bytes: u64| json!({"name": "live bytes", "ph": "C", "ts": t, "pid": PID, "args": {"bytes": bytes}});
    let mut samples = vec![sample(0, 0)];
    let mut live: i128 = 0;
    let mut k = 0;
    while k < deltas.len() {
        let t = deltas[k].0;
        let before = live;
        while k < deltas.len() && deltas[k].0 == t {
            live += deltas[k].1;
            k += 1;
        }
        if live != before {
            samples.push(sample(t, live.max(0) as u64));
        }
    }
    samples
}

/// An instant event at the allocation of each of the `largest` largest realloc chains
/// (largest size first, then by first record).
fn largest_allocations(trace: &Trace, largest: usize) -> Vec<Value> {
    let chains = trace.chains();
    let mut members = std::collections::HashMap::new();
    for r in chain_roots(trace) {
        *members.entry(r).or_insert(0u64) += 1;
    }
    let mut order: Vec<usize> = (0..chains.len()).collect();
    order.sort_by(|&a, &b| {
        chains[b]
            .size
            .cmp(&chains[a].size)
            .then(chains[a].root.cmp(&chains[b].root))
    });
    order
        .iter()
        .take(largest)
        .map(|&ci| {
            let c = &chains[ci];
            let a = &trace.allocations[c.root as usize];
            json!({
                "name": format!("alloc {} B", c.size), "cat": "allocation", "ph": "i",
                "s": "t", "ts": c.lower, "pid": PID, "tid": OPS_TID,
                "args": {"allocation": c.root, "size": c.size, "op": op_path(trace, a.scope),
                         "freed": c.upper, "escaping": c.escaping,
                         "reallocs": members.get(&c.root).copied().unwrap_or(1) - 1,
                         "call_site": a.call_site.as_ref().and_then(|f| f.first())},
            })
        })
        .collect()
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

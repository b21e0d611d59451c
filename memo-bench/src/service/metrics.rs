//! memo-alloc's counters in the Prometheus text exposition format (`GET /metrics`), and
//! the reading of them back (the benchmark's parent takes the share of a measured window
//! from two scrapes).

use std::collections::BTreeMap;
use std::fmt::Write;

use memo_alloc::{AbandonReason, MissReason, Stats};

/// Renders `s` and the service's request count as Prometheus text (version 0.0.4).
///
/// ```
/// let text = memo_bench::service::metrics::render(&memo_alloc::Stats::default(), 3);
/// assert!(text.contains("memo_service_requests_total 3\n"));
/// assert!(text.contains("memo_misses_total{reason=\"too_large\"} 0\n"));
/// ```
pub fn render(s: &Stats, requests: u64) -> String {
    let mut out = String::with_capacity(4096);
    let mut metric = |name: &str, kind: &str, help: &str, rows: &[(Option<(&str, &str)>, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (label, v) in rows {
            match label {
                Some((k, l)) => {
                    let _ = writeln!(out, "{name}{{{k}=\"{l}\"}} {v}");
                }
                None => {
                    let _ = writeln!(out, "{name} {v}");
                }
            }
        }
    };
    let one = |v: u64| [(None, v as f64)];
    metric(
        "memo_service_requests_total",
        "counter",
        "Inference requests answered.",
        &one(requests),
    );
    metric(
        "memo_slab_share",
        "gauge",
        "Share of the allocations made in replayed passes that were served from slabs.",
        &[(None, s.slab_share())],
    );
    metric(
        "memo_slab_hits_total",
        "counter",
        "Allocations served from slabs.",
        &one(s.slab_hits),
    );
    metric(
        "memo_pass_allocations_total",
        "counter",
        "Allocations made inside passes (replayed, profiled or on the backend), any thread.",
        &one(s.pass_allocations()),
    );
    let passes = [
        (Some(("mode", "profiled")), s.passes_profiled as f64),
        (Some(("mode", "replayed")), s.passes_replayed as f64),
        (Some(("mode", "backend")), s.passes_backend as f64),
    ];
    metric(
        "memo_passes_total",
        "counter",
        "Passes by how they ran.",
        &passes,
    );
    let misses: Vec<_> = MissReason::ALL
        .iter()
        .map(|&r| (Some(("reason", r.name())), s.misses_for(r) as f64))
        .collect();
    metric(
        "memo_misses_total",
        "counter",
        "Allocations of replayed passes served by the backend, by reason.",
        &misses,
    );
    let abandoned: Vec<_> = AbandonReason::ALL
        .iter()
        .map(|&r| {
            (
                Some(("reason", r.name())),
                s.profiles_abandoned[r as usize] as f64,
            )
        })
        .collect();
    metric(
        "memo_profiles_abandoned_total",
        "counter",
        "Profiles not planned, by reason.",
        &abandoned,
    );
    metric("memo_plans", "gauge", "Keys holding a plan.", &one(s.plans));
    metric(
        "memo_slab_resident_bytes",
        "gauge",
        "Bytes of slab memory resident (instances' blocks and idle blocks).",
        &one(s.slab_resident_bytes),
    );
    metric(
        "memo_slab_idle_blocks",
        "gauge",
        "Blocks of slab memory idle, waiting for the next pass of any key.",
        &one(s.idle_blocks),
    );
    metric(
        "memo_parks_total",
        "counter",
        "Times an async pass gave its slab memory back between two polls.",
        &one(s.parks),
    );
    metric(
        "memo_slab_reserved_bytes",
        "gauge",
        "Bytes of address space reserved for slabs.",
        &one(s.reserved_bytes),
    );
    out
}

/// The samples of a Prometheus text page: `name` or `name{label="value"}` to value.
/// Comment lines are skipped; a line that does not parse is an error naming it.
///
/// ```
/// let page = "# TYPE x counter\nx 3\ny{reason=\"a\"} 1.5\n";
/// let m = memo_bench::service::metrics::parse(page).unwrap();
/// assert_eq!(m["x"], 3.0);
/// assert_eq!(m["y{reason=\"a\"}"], 1.5);
/// ```
pub fn parse(page: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in page.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .rsplit_once(' ')
            .ok_or_else(|| format!("metrics line {}: no value: {line:?}", i + 1))?;
        let value: f64 = value
            .parse()
            .map_err(|e| format!("metrics line {}: value {value:?}: {e}", i + 1))?;
        out.insert(name.to_string(), value);
    }
    Ok(out)
}

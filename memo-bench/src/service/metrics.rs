//! The service's `GET /metrics` page: its own request counter, then memo-alloc's counters
//! in the Prometheus text exposition format ([`memo_alloc::Stats::write_prometheus`]); and
//! the reading of a page back (the benchmark's parent takes the share of a measured window
//! from two scrapes).

use std::collections::BTreeMap;
use std::fmt::Write;

use memo_alloc::Stats;

/// Renders the service's request count and `s` as Prometheus text (version 0.0.4).
///
/// ```
/// let text = memo_bench::service::metrics::render(&memo_alloc::Stats::default(), 3);
/// assert!(text.contains("memo_service_requests_total 3\n"));
/// assert!(text.contains("memo_misses_total{reason=\"too_large\"} 0\n"));
/// ```
pub fn render(s: &Stats, requests: u64) -> String {
    let mut out = String::with_capacity(4096);
    // Writing to a `String` does not fail.
    let _ = writeln!(
        out,
        "# HELP memo_service_requests_total Inference requests answered."
    );
    let _ = writeln!(out, "# TYPE memo_service_requests_total counter");
    let _ = writeln!(out, "memo_service_requests_total {requests}");
    let _ = s.write_prometheus(&mut out);
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

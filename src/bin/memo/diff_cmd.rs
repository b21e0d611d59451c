//! `memo diff`: two traces compared by op and by call site.

use std::path::Path;

use memo_planner::text::thousands;
use memomalloc::study::diff::{diff, Diff, DiffRow, Figures, Presence};

use crate::args::ReportFormat;
use crate::failure::Failure;
use crate::input::load_trace;
use crate::output::{emit, pretty_json_after_inputs};
use crate::table::Table;

/// Rows of each table in the text report (the JSON has them all).
pub const TOP_ROWS: usize = 20;

/// `memo diff A B`.
pub fn diff_cmd(
    a: &Path,
    b: &Path,
    format: ReportFormat,
    output: Option<&Path>,
) -> Result<(), Failure> {
    let (ta, tb) = (load_trace(a)?, load_trace(b)?);
    let d = diff(&ta, &tb);
    let text = match format {
        ReportFormat::Json => pretty_json_after_inputs(&[("input_a", a), ("input_b", b)], &d)?,
        ReportFormat::Text => render(a, b, &d),
    };
    emit(output, &text)
}

/// `v` with its sign and thousands separators; `0` unsigned.
fn signed(v: i64) -> String {
    match v {
        0 => "0".into(),
        v if v > 0 => format!("+{}", thousands(v.unsigned_abs())),
        v => format!("-{}", thousands(v.unsigned_abs())),
    }
}

/// The text report: both traces' totals, then the ops and the call sites.
fn render(a: &Path, b: &Path, d: &Diff) -> String {
    let mut out = String::new();
    let line = |name: &str, path: &Path, key: &str, f: &Figures| {
        format!(
            "{name}  {} (key {key}): {} allocations, {} bytes, {} bytes live at the peak\n",
            path.display(),
            thousands(f.allocations),
            thousands(f.bytes),
            thousands(f.peak_live_bytes)
        )
    };
    out.push_str(&line("A", a, &d.a.key, &d.a.totals));
    out.push_str(&line("B", b, &d.b.key, &d.b.totals));
    out.push_str(&format!(
        "B - A  {} allocations, {} bytes, {} bytes live at the peak\n",
        signed(d.delta.allocations),
        signed(d.delta.bytes),
        signed(d.delta.peak_live_bytes)
    ));
    out.push_str("\nby op, the largest change first\n");
    out.push_str(&rows_table("op", &d.by_op));
    let captured = d.by_call_site.iter().any(|r| r.group != "?");
    if captured {
        out.push_str("\nby call site, the largest change first\n");
        out.push_str(&rows_table("call site", &d.by_call_site));
    } else {
        out.push_str("\nby call site: not captured in either trace\n");
    }
    out
}

/// The first [`TOP_ROWS`] rows as a table.
fn rows_table(what: &str, rows: &[DiffRow]) -> String {
    if rows.is_empty() {
        return "  (none)\n".into();
    }
    let mut t = Table::new(
        &[
            &format!("  {what}"),
            "in",
            "allocs A",
            "allocs B",
            "change",
            "bytes A",
            "bytes B",
            "change",
            "peak A",
            "peak B",
            "change",
        ],
        &[
            false, false, true, true, true, true, true, true, true, true, true,
        ],
    );
    for r in rows.iter().take(TOP_ROWS) {
        let present = match r.present {
            Presence::Both => "both",
            Presence::AOnly => "A",
            Presence::BOnly => "B",
        };
        t.row(vec![
            format!("  {}", r.group),
            present.into(),
            thousands(r.a.allocations),
            thousands(r.b.allocations),
            signed(r.delta.allocations),
            thousands(r.a.bytes),
            thousands(r.b.bytes),
            signed(r.delta.bytes),
            thousands(r.a.peak_live_bytes),
            thousands(r.b.peak_live_bytes),
            signed(r.delta.peak_live_bytes),
        ]);
    }
    let mut text = t.render();
    if rows.len() > TOP_ROWS {
        text.push_str(&format!("  ... {} more\n", rows.len() - TOP_ROWS));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_carry_their_sign() {
        assert_eq!(signed(0), "0");
        assert_eq!(signed(1234), "+1,234");
        assert_eq!(signed(-5), "-5");
        assert_eq!(signed(i64::MIN), "-9,223,372,036,854,775,808");
    }
}

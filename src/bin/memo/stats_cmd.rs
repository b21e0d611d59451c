//! `memo stats`: the allocation-pattern report of a recorded pass.

use std::path::Path;

use memo_planner::text::{bytes_and_mib, short_size, thousands};
use memomalloc::study::{Bucket, Memory, ScopeTimes, Share, Study, TOP_CALL_SITES};

use crate::args::ReportFormat;
use crate::failure::Failure;
use crate::input::load_trace;
use crate::output::{emit, pretty_json_after_inputs};
use crate::table::Table;

/// Width of the histogram bars, in characters.
const BAR: usize = 24;

/// `memo stats`.
pub fn stats(path: &Path, format: ReportFormat, output: Option<&Path>) -> Result<(), Failure> {
    let trace = load_trace(path)?;
    let study = Study::of(&trace);
    let text = match format {
        ReportFormat::Json => pretty_json_after_inputs(&[("input", path)], &study)?,
        ReportFormat::Text => render(path, &study),
    };
    emit(output, &text)
}

/// `part` as a percentage of `whole` with one decimal, `-` when `whole` is 0.
fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

/// Label of a power-of-two bucket: `0`, `1`, `2-3`, or `4 KiB-8 KiB` (upper end excluded)
/// for sizes.
fn bucket_label(b: &Bucket, sizes: bool) -> String {
    if b.min == b.max {
        return if sizes {
            short_size(b.min as f64)
        } else {
            thousands(b.min)
        };
    }
    if sizes {
        // The end, excluded: 2^64 for the last bucket (a float has room for it).
        let end = b.max as f64 + 1.0;
        format!("{} - <{}", short_size(b.min as f64), short_size(end))
    } else {
        format!("{} - {}", thousands(b.min), thousands(b.max))
    }
}

fn histogram(title: &str, buckets: &[Bucket], sizes: bool, out: &mut String) {
    out.push_str(&format!("\n{title}\n"));
    if buckets.is_empty() {
        out.push_str("  (none)\n");
        return;
    }
    let most = buckets.iter().map(|b| b.count).max().unwrap_or(1).max(1);
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    let mut t = Table::new(
        &["  range", "allocations", "share", "bytes", ""],
        &[false, true, true, true, false],
    );
    for b in buckets {
        let len = if b.count == 0 {
            0
        } else {
            ((b.count as f64 / most as f64) * BAR as f64).ceil() as usize
        };
        t.row(vec![
            format!("  {}", bucket_label(b, sizes)),
            thousands(b.count),
            pct(b.count, total),
            thousands(b.bytes),
            "#".repeat(len),
        ]);
    }
    out.push_str(&t.render());
}

/// The text report: the pass in brief, then one section per part of the study.
fn render(path: &Path, s: &Study) -> String {
    let mut out = summary(path, s);
    out.push_str("\nmemory\n");
    out.push_str(&skip_header(&memory_table(&s.memory).render()));
    out.push_str("\nfates\n");
    out.push_str(&fates_table(s).render());
    histogram("sizes (bytes)", &s.sizes, true, &mut out);
    histogram(
        "lifetimes in events (escaping allocations excluded)",
        &s.lifetime_events,
        false,
        &mut out,
    );
    histogram(
        "lifetimes in ops (op scopes entered while live)",
        &s.lifetime_ops,
        false,
        &mut out,
    );
    out.push_str("\nops by bytes\n");
    out.push_str(&ops_table(s).render());
    if s.call_sites_captured {
        out.push_str(&format!("\ntop {TOP_CALL_SITES} call sites by bytes\n"));
        out.push_str(&call_sites_table(s).render());
    } else {
        out.push_str("\ncall sites    not captured (record with MEMO_BACKTRACE=1)\n");
    }
    out.push_str(&crate::groups_text::render(s));
    out
}

/// The report's first lines: the trace, the pass, its allocations and calls.
fn summary(path: &Path, s: &Study) -> String {
    let mut out = String::new();
    let c = &s.calls;
    out.push_str(&format!("trace         {}\n", path.display()));
    out.push_str(&format!(
        "pass          {}: {} events, {} op instances (scope times {})\n",
        s.key,
        thousands(s.events),
        thousands(s.op_instances),
        match s.scope_times {
            ScopeTimes::Recorded => "recorded",
            ScopeTimes::Inferred => "inferred from allocations",
        }
    ));
    out.push_str(&format!(
        "allocations   {} buffers, {}\n",
        thousands(s.allocations),
        bytes_and_mib(s.bytes)
    ));
    out.push_str(&format!(
        "calls         {} alloc, {} alloc_zeroed, {} realloc, {} free; {} B requested\n",
        thousands(c.alloc),
        thousands(c.alloc_zeroed),
        thousands(c.realloc),
        thousands(c.free),
        thousands(c.bytes)
    ));
    out
}

/// The peaks against the lower bound, the plan and no reuse.
fn memory_table(m: &Memory) -> Table {
    let mut t = Table::new(&["", "bytes", ""], &[false, true, false]);
    t.row(vec![
        "  peak live (all allocations)".into(),
        thousands(m.peak_live),
        format!("at event {}", thousands(m.peak_time)),
    ]);
    t.row(vec![
        "  peak live (planned buffers)".into(),
        thousands(m.peak_live_planned),
        format!("{} buffers", thousands(m.planned_buffers)),
    ]);
    t.row(vec![
        "  offsets lower bound".into(),
        thousands(m.lower_bound),
        String::new(),
    ]);
    let ratio = if m.lower_bound == 0 {
        1.0
    } else {
        m.height as f64 / m.lower_bound as f64
    };
    t.row(vec![
        format!("  {} plan height", m.strategy),
        thousands(m.height),
        format!("{ratio:.4} x bound"),
    ]);
    t.row(vec![
        "  no reuse (sizes summed)".into(),
        thousands(m.naive),
        format!(
            "plan saves {}",
            pct(m.naive.saturating_sub(m.height), m.naive)
        ),
    ]);
    t
}

/// Allocations by fate, counted and by bytes.
fn fates_table(s: &Study) -> Table {
    let mut t = Table::new(
        &["", "allocations", "share", "bytes", "share"],
        &[false, true, true, true, true],
    );
    let row = |name: &str, sh: Share| {
        vec![
            format!("  {name}"),
            thousands(sh.count),
            pct(sh.count, s.allocations),
            thousands(sh.bytes),
            pct(sh.bytes, s.bytes),
        ]
    };
    t.row(row("short-lived (freed in their op)", s.shares.short_lived));
    t.row(row("escaping (outlive the pass)", s.shares.escaping));
    t.row(row("realloc'd", s.shares.reallocated));
    t
}

/// One row per op path, by bytes.
fn ops_table(s: &Study) -> Table {
    let mut t = Table::new(
        &[
            "  op",
            "instances",
            "allocations",
            "bytes",
            "share",
            "peak live",
            "short-lived",
            "escaping",
        ],
        &[false, true, true, true, true, true, true, true],
    );
    for r in &s.ops {
        t.row(vec![
            format!("  {}", r.op),
            thousands(r.instances),
            thousands(r.allocations),
            thousands(r.bytes),
            pct(r.bytes, s.bytes),
            thousands(r.peak_live),
            thousands(r.short_lived),
            thousands(r.escaping),
        ]);
    }
    t
}

/// The top call sites, by bytes.
fn call_sites_table(s: &Study) -> Table {
    let mut t = Table::new(
        &["  call site", "allocations", "bytes", "share"],
        &[false, true, true, true],
    );
    for site in &s.call_sites {
        t.row(vec![
            format!("  {}", site.site),
            thousands(site.allocations),
            thousands(site.bytes),
            pct(site.bytes, s.bytes),
        ]);
    }
    t
}

/// A table rendered without its (empty) header and rule.
fn skip_header(table: &str) -> String {
    table
        .lines()
        .skip(2)
        .map(|l| format!("{}\n", l.trim_end()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_buckets() {
        let b = |min, max| Bucket {
            min,
            max,
            count: 1,
            bytes: 1,
        };
        assert_eq!(bucket_label(&b(0, 0), false), "0");
        assert_eq!(bucket_label(&b(4, 7), false), "4 - 7");
        assert_eq!(bucket_label(&b(1024, 2047), true), "1 KiB - <2 KiB");
        assert_eq!(bucket_label(&b(1 << 63, u64::MAX), true), "8 EiB - <16 EiB");
        assert_eq!(bucket_label(&b(1, 1), true), "1 B");
        assert_eq!(bucket_label(&b(512, 1023), true), "512 B - <1 KiB");
        assert_eq!(
            bucket_label(&b(1 << 14, (1 << 15) - 1), true),
            "16 KiB - <32 KiB"
        );
    }
}

//! The sections of `memo stats` that list groups by op and call site (the live set at the
//! peak, the leaks) and the per-thread breakdown of whole-program profiles.

use memo_planner::text::thousands;
use memomalloc::study::{Group, Study, ThreadRow};

use crate::table::Table;

/// Rows of each group listing in the text report (the JSON has them all).
pub const TOP_GROUPS: usize = 10;

/// The live set at the peak, the leaks and (when recorded) the threads, as text.
pub fn render(s: &Study) -> String {
    let mut out = String::new();
    let at_peak: u64 = s.peak_live_set.iter().map(|g| g.bytes).sum();
    out.push_str(&format!(
        "\nlive at the peak ({} bytes), by op and call site\n",
        thousands(at_peak)
    ));
    out.push_str(&groups_table(&s.peak_live_set, at_peak));
    let leaked: u64 = s.leaks.iter().map(|g| g.bytes).sum();
    out.push_str(&format!(
        "\nnever freed ({} bytes), by op and call site\n",
        thousands(leaked)
    ));
    out.push_str(&groups_table(&s.leaks, leaked));
    if !s.threads.is_empty() {
        out.push_str("\nthreads by bytes\n");
        out.push_str(&threads_table(&s.threads).render());
    }
    out
}

/// The first [`TOP_GROUPS`] groups, with their share of `total`.
fn groups_table(groups: &[Group], total: u64) -> String {
    if groups.is_empty() {
        return "  (none)\n".into();
    }
    let mut t = Table::new(
        &["  op", "call site", "blocks", "bytes", "share"],
        &[false, false, true, true, true],
    );
    for g in groups.iter().take(TOP_GROUPS) {
        t.row(vec![
            format!("  {}", g.op),
            g.site.clone(),
            thousands(g.allocations),
            thousands(g.bytes),
            format!("{:.1}%", 100.0 * g.bytes as f64 / total.max(1) as f64),
        ]);
    }
    let mut text = t.render();
    if groups.len() > TOP_GROUPS {
        text.push_str(&format!(
            "  ... {} more groups\n",
            groups.len() - TOP_GROUPS
        ));
    }
    text
}

fn threads_table(rows: &[ThreadRow]) -> Table {
    let mut t = Table::new(
        &[
            "  thread",
            "tid",
            "allocations",
            "bytes",
            "freed elsewhere",
            "at peak",
            "never freed",
        ],
        &[false, true, true, true, true, true, true],
    );
    for r in rows {
        let name = r.name.clone().unwrap_or_else(|| "-".into());
        t.row(vec![
            format!("  #{} {name}", r.thread),
            r.tid.to_string(),
            thousands(r.allocations),
            thousands(r.bytes),
            thousands(r.freed_elsewhere),
            thousands(r.peak_live_bytes),
            thousands(r.leaked_bytes),
        ]);
    }
    t
}

//! Hand-written SVG line plots: latency ratio of each allocator over memomalloc against
//! threads, one plot per workload (like Figure 4.1 of the MemoMalloc thesis).

use std::fmt::Write;

use memo_planner::text::xml_escape;

use super::Cell;

const COLORS: [(&str, &str); 7] = [
    ("glibc", "#d62728"),
    ("jemalloc", "#1f77b4"),
    ("jemalloc-tuned", "#17becf"),
    ("mimalloc", "#2ca02c"),
    ("memo", "#000000"),
    ("memo-jemalloc", "#9467bd"),
    ("memo-slots", "#ff7f0e"),
];

/// The colour of an allocator in every plot.
pub fn color(name: &str) -> &'static str {
    COLORS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("#7f7f7f", |(_, c)| c)
}

/// A plot of `p50(allocator) / p50(memo)` (solid) and the p99 ratio (dashed) against
/// threads for the cells of one workload. `cpus` marks where threads oversubscribe.
pub fn ratio_plot(workload: &str, cells: &[&Cell], cpus: usize) -> String {
    let (w, h) = (640.0, 400.0);
    let (ml, mr, mt, mb) = (60.0, 150.0, 40.0, 50.0);
    let mut threads: Vec<usize> = cells.iter().map(|c| c.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let ratios = cells
        .iter()
        .flat_map(|c| [c.p50_vs_memo, c.p99_vs_memo])
        .flatten();
    let ymax = ratios.fold(1.5f64, f64::max).min(20.0) * 1.1;
    let ymin = 0.0;
    let x = |t: usize| {
        let i = threads.iter().position(|&v| v == t).unwrap_or(0) as f64;
        let n = (threads.len().max(2) - 1) as f64;
        ml + (w - ml - mr) * i / n
    };
    let y = |v: f64| mt + (h - mt - mb) * (1.0 - (v.min(ymax) - ymin) / (ymax - ymin));
    let mut s = String::new();
    open(
        &mut s,
        (w, h),
        &format!("{workload}: pass latency / memomalloc's (p50 solid, p99 dashed)"),
    );
    // Axes and grid.
    let steps = 5;
    for i in 0..=steps {
        let v = ymin + (ymax - ymin) * i as f64 / steps as f64;
        grid_line(&mut s, (ml, w - mr), y(v), &format!("{v:.2}"));
    }
    let _ = write!(
        s,
        r##"<line x1="{ml}" x2="{}" y1="{y1:.1}" y2="{y1:.1}" stroke="#000" stroke-dasharray="2,2"/>"##,
        w - mr,
        y1 = y(1.0)
    );
    for &t in &threads {
        let over = if t > cpus { "*" } else { "" };
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{t}{over}</text>"#,
            x(t),
            h - mb + 18.0
        );
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">threads (* = more than the {cpus} CPUs)</text>"#,
        ml + (w - ml - mr) / 2.0,
        h - 10.0
    );
    let _ = write!(
        s,
        r#"<text x="16" y="{:.1}" transform="rotate(-90 16 {:.1})" text-anchor="middle">ratio (&gt;1: memomalloc faster)</text>"#,
        h / 2.0,
        h / 2.0
    );
    // Series.
    let mut names: Vec<&str> = Vec::new();
    for c in cells {
        if !names.contains(&c.allocator.as_str()) {
            names.push(&c.allocator);
        }
    }
    for (li, name) in names.iter().enumerate() {
        let col = color(name);
        let mut series: Vec<&&Cell> = cells.iter().filter(|c| c.allocator == *name).collect();
        series.sort_by_key(|c| c.threads);
        for (dash, get) in [
            ("", (|c: &Cell| c.p50_vs_memo) as fn(&Cell) -> Option<f64>),
            ("6,4", |c: &Cell| c.p99_vs_memo),
        ] {
            let pts: Vec<String> = series
                .iter()
                .filter_map(|c| get(c).map(|v| format!("{:.1},{:.1}", x(c.threads), y(v))))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{col}" stroke-width="2" stroke-dasharray="{dash}" points="{}"/>"#,
                pts.join(" ")
            );
            if dash.is_empty() {
                for c in &series {
                    if let Some(v) = get(c) {
                        let _ = write!(
                            s,
                            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{col}"><title>{name} x{}: {v:.2}</title></circle>"#,
                            x(c.threads),
                            y(v),
                            c.threads
                        );
                    }
                }
            }
        }
        legend_entry(&mut s, (w - mr + 10.0, mt + 18.0 * li as f64), col, name);
    }
    s.push_str("</svg>\n");
    s
}

/// Opens an SVG of `size` (width, height) on white, with `title` centred at the top.
pub fn open(s: &mut String, size: (f64, f64), title: &str) {
    let (w, h) = size;
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="{w}" height="{h}" fill="white"/>"#
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        w / 2.0,
        xml_escape(title)
    );
}

/// A horizontal grid line at height `y` across `xs` (left, right), `label` at its left.
pub fn grid_line(s: &mut String, xs: (f64, f64), y: f64, label: &str) {
    let (x0, x1) = xs;
    let _ = write!(
        s,
        r##"<line x1="{x0}" x2="{x1}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{label}</text>"##,
        x0 - 6.0,
        y + 4.0,
    );
}

/// A legend entry at `at` (x, y): a short line in `color`, then `name`.
pub fn legend_entry(s: &mut String, at: (f64, f64), color: &str, name: &str) {
    let (x, y) = at;
    let _ = write!(
        s,
        r#"<line x1="{x}" x2="{}" y1="{y}" y2="{y}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
        x + 20.0,
        x + 26.0,
        y + 4.0,
        xml_escape(name),
    );
}

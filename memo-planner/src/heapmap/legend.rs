//! The legend right of the plot.

use std::fmt::Write;

use super::colours::{LegendEntry, DUST_COLOR};
use super::layout::Frame;
use super::options::{Coloring, HeapmapOptions};
use super::svg::{num, text};
use crate::text::thousands;

/// What the legend's footer counts.
pub(super) struct Counts {
    /// Buffers drawn, as rectangles or merged into the raster.
    pub(super) shown: usize,
    /// Buffers merged into the raster of sub-pixel buffers.
    pub(super) dust: usize,
    /// Whether the rectangles carry tooltips.
    pub(super) tooltips: bool,
}

/// The legend right of the plot: the colouring's `entries`, then the raster's entry when
/// buffers were merged, and a footer with the counts.
pub(super) fn draw_legend(
    out: &mut String,
    f: &Frame,
    options: &HeapmapOptions,
    mut entries: Vec<LegendEntry>,
    counts: &Counts,
) {
    if counts.dust > 0 {
        entries.push(LegendEntry {
            label: format!("< 1 px, merged ({})", thousands(counts.dust as u64)),
            color: DUST_COLOR.to_string(),
        });
    }
    let mut foot = vec![format!("{} buffers drawn", thousands(counts.shown as u64))];
    if !counts.tooltips {
        foot.push(format!(
            "tooltips off (> {})",
            thousands(options.max_tooltips as u64)
        ));
    }
    draw_entries(out, f, options, &entries, &foot);
}

/// A heading, one swatch per entry while they fit, and the footer lines at the bottom.
fn draw_entries(
    out: &mut String,
    f: &Frame,
    options: &HeapmapOptions,
    entries: &[LegendEntry],
    foot: &[String],
) {
    let lx = f.px1 + 18.0;
    let mut ly = f.py0 + 4.0;
    if !entries.is_empty() {
        let head = match (&options.groups, options.coloring) {
            (Some(_), _) => "group",
            (None, Coloring::SizeClass) => "size",
            (None, Coloring::IdHash) => "legend",
        };
        text(out, lx, ly + 8.0, 12.0, "start", "bold", "#333", head);
        ly += 22.0;
        let last = f.py1 - 16.0 * foot.len() as f64 - 4.0;
        for e in entries {
            if ly > last {
                break;
            }
            let _ = writeln!(
                out,
                "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>",
                num(lx),
                num(ly - 10.0),
                e.color
            );
            text(
                out,
                lx + 18.0,
                ly,
                11.0,
                "start",
                "normal",
                "#333",
                &e.label,
            );
            ly += 18.0;
        }
    }
    for (k, line) in foot.iter().enumerate() {
        let y = f.py1 - 16.0 * (foot.len() - 1 - k) as f64;
        text(out, lx, y, 10.0, "start", "normal", "#777", line);
    }
}

//! Heap maps: a plan drawn as SVG (time across, address up, one rectangle per buffer).
//!
//! Behind the crate's `heapmap` feature (off by default): the `memo` CLI and memo-bench's
//! reports enable it; a library that only plans, such as the allocator, does not compile it.
//!
//! [`render_svg`] draws every buffer `i` as the rectangle `[lower, upper) x [offset,
//! offset + size)`, with a solid line at the plan's height and a dashed line at the lower
//! bound (max breadth, [`crate::offsets_lower_bound`]), both labelled in bytes and MiB,
//! axes with tick labels, a title, a subtitle with the numbers, and a legend.
//!
//! # Colours
//!
//! - With [`HeapmapOptions::groups`] set (one label per buffer, e.g. the operator that
//!   allocated it), buffers are coloured by group. The groups with the largest area
//!   (bytes x time) get the twelve colours of a qualitative palette; beyond twelve groups,
//!   the eleven largest keep their colour and the rest share a grey "other" entry.
//! - Otherwise [`Coloring::SizeClass`] (the default) bins sizes on a log scale into at
//!   most eight classes of a sequential palette (dark = small, light = large), and
//!   [`Coloring::IdHash`] gives each id a colour from a hash of it, so that neighbours are
//!   told apart and a buffer keeps its colour from one plan to the next.
//!
//! The legend sits right of the plot when the picture is at least 560 pixels wide.
//!
//! # Large problems
//!
//! The output stays small and quick to display however many buffers there are:
//!
//! - Up to [`HeapmapOptions::max_tooltips`] drawn buffers (5000 by default), each
//!   rectangle carries a `<title>` tooltip (id, lifetime, size, offset); above, none does.
//! - Up to [`HeapmapOptions::max_rects`] drawn buffers (20 000 by default), every buffer
//!   is its own `<rect>`. Above, buffers thinner than a pixel in *both* dimensions are not
//!   drawn individually: they are merged into a one-pixel coverage raster drawn as a few
//!   dark grey rectangles (runs of covered pixels, merged vertically), listed in the
//!   legend. If more than `max_rects` buffers remain, the ones with the smallest area on
//!   screen join that raster too. The raster has at most 40 000 rectangles (its cells
//!   grow to 2, 4, ... 16 pixels if needed), so with the defaults a file holds at most
//!   about 60 000 rectangles, 3 to 4 MB, however many buffers there are.
//! - Rectangles thinner than half a pixel in one dimension are widened to half a pixel so
//!   that they stay visible as hairlines.
//!
//! # Time axis
//!
//! By default ([`HeapmapOptions::trim_long_lived`]) a few long-lived buffers (such as
//! weights) that outlive everything else by far do not stretch the time axis: when the
//! ends of lifetimes after the last allocation have a gap longer than both half the whole
//! time span and the span up to the last allocation, the axis stops before that gap and
//! the buffers living on are drawn up to its right edge (the subtitle says so).
//! [`HeapmapOptions::time_range`] zooms to any window instead.
//!
//! # Bad input
//!
//! Nothing panics. An empty problem gives an SVG saying "no buffers". When the plan has
//! fewer or more offsets than the problem has buffers, the buffers that have an offset are
//! drawn and a red note says what was left out; likewise for a groups list of the wrong
//! length (buffers without a label go to a "?" group). The lower bound is always that of
//! the whole problem, computed here unless [`HeapmapOptions::lower_bound`] passes it in.
//!
//! ```
//! use memo_planner::heapmap::{render_svg, HeapmapOptions};
//! use memo_planner::{Buffer, OffsetStrategy, Problem};
//! let problem = Problem::new(vec![
//!     Buffer::new("conv1.out", 0, 2, 4096),
//!     Buffer::new("relu1.out", 1, 3, 4096),
//!     Buffer::new("fc.out", 2, 4, 1024),
//! ]).unwrap();
//! let plan = OffsetStrategy::GreedyBySize.plan(&problem);
//! let options = HeapmapOptions {
//!     title: "greedy-by-size".into(),
//!     groups: Some(vec!["conv".into(), "relu".into(), "fc".into()]),
//!     ..HeapmapOptions::default()
//! };
//! let svg = render_svg(&problem, &plan, &options);
//! assert!(svg.starts_with("<svg"));
//! assert!(svg.contains("height 8,192 B"));
//! assert!(svg.contains("lower bound 8,192 B"));
//! assert!(svg.contains("<title>relu1.out"));
//! ```

mod axes;
mod buffers;
mod colours;
mod dust;
mod layout;
mod legend;
mod options;
mod svg;
#[cfg(test)]
mod tests;

use std::fmt::Write;

pub use options::{Coloring, HeapmapOptions};

use colours::BOUND_COLOR;
use layout::{Drawn, Frame};
use svg::{text, FONT};

use crate::bounds::offsets_lower_bound;
use crate::plan::OffsetPlan;
use crate::problem::Problem;

/// Renders `plan` for `problem` as a standalone SVG document; see the
/// [module documentation](self).
pub fn render_svg(problem: &Problem, plan: &OffsetPlan, options: &HeapmapOptions) -> String {
    let w = f64::from(options.width.clamp(240, 8192));
    let h = f64::from(options.height.clamp(160, 8192));
    let buffers = problem.buffers();
    let n = buffers.len().min(plan.offsets.len());
    let mut out = String::with_capacity(4096 + n.min(options.max_rects.max(1)) * 64);
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" {FONT}>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
    );
    let mut notes = input_notes(problem, plan, options, n);
    text(
        &mut out,
        16.0,
        26.0,
        18.0,
        "start",
        "bold",
        "#111",
        &options.title,
    );
    if n == 0 {
        draw_empty(&mut out, w, h, buffers.is_empty(), &notes);
        return out;
    }
    let lb = options
        .lower_bound
        .unwrap_or_else(|| offsets_lower_bound(problem));
    let height = plan.height(problem);
    let drawn = Drawn {
        buffers: &buffers[..n],
        offsets: &plan.offsets[..n],
    };
    let (t0, t1) = layout::time_window(drawn.buffers, options, &mut notes);
    let mut header = layout::subtitle(buffers.len(), height, lb, w);
    header.append(&mut notes);
    let frame = Frame::new(w, h, header.len(), (t0, t1), height.max(lb));
    let (colors, color_of, legend) = colours::colouring(drawn.buffers, options);
    let (items, dust) = layout::screen_items(&drawn, &frame, options.max_rects);
    draw_notes(&mut out, &header);
    let (yt, xt) = (axes::byte_ticks(frame.ymax), axes::time_ticks(t0, t1));
    axes::draw_grid(&mut out, &frame, &yt, &xt);
    let tooltips = items.len() + dust.len() <= options.max_tooltips;
    buffers::draw_buffers(
        &mut out,
        &frame,
        &drawn,
        &items,
        (&colors, &color_of),
        tooltips,
    );
    if !dust.is_empty() {
        let centres: Vec<(f64, f64)> = dust
            .iter()
            .map(|d| (d.x + d.w / 2.0, d.y + d.h / 2.0))
            .collect();
        dust::draw_dust(
            &mut out,
            &centres,
            frame.px0,
            frame.py0,
            frame.pw(),
            frame.ph(),
        );
    }
    buffers::draw_marks(&mut out, &frame, height, lb);
    axes::draw_axes(&mut out, &frame, &yt, &xt);
    if frame.right >= 200.0 {
        let counts = legend::Counts {
            shown: items.len() + dust.len(),
            dust: dust.len(),
            tooltips,
        };
        legend::draw_legend(&mut out, &frame, options, legend, &counts);
    }
    out.push_str("</svg>\n");
    out
}

/// The subtitle and note lines under the title, one colour each.
fn draw_notes(out: &mut String, lines: &[(String, &str)]) {
    for (k, (note, color)) in lines.iter().enumerate() {
        text(
            out,
            16.0,
            46.0 + 16.0 * k as f64,
            12.0,
            "start",
            "normal",
            color,
            note,
        );
    }
}

/// Warnings about the input: a plan or a group list of the wrong length.
fn input_notes(
    problem: &Problem,
    plan: &OffsetPlan,
    options: &HeapmapOptions,
    n: usize,
) -> Vec<(String, &'static str)> {
    let buffers = problem.buffers();
    let mut notes = Vec::new();
    if plan.offsets.len() != buffers.len() {
        notes.push((
            format!(
                "plan has {} offsets for {} buffers: only the first {} are drawn",
                plan.offsets.len(),
                buffers.len(),
                n
            ),
            BOUND_COLOR,
        ));
    }
    if let Some(g) = &options.groups {
        if g.len() != buffers.len() {
            notes.push((
                format!(
                    "{} group labels for {} buffers: unlabelled buffers are in group \"?\"",
                    g.len(),
                    buffers.len()
                ),
                BOUND_COLOR,
            ));
        }
    }
    notes
}

/// The picture of a problem with nothing to draw, and its notes; closes the SVG.
fn draw_empty(out: &mut String, w: f64, h: f64, no_buffers: bool, notes: &[(String, &str)]) {
    let msg = if no_buffers {
        "no buffers"
    } else {
        "no buffers to draw"
    };
    text(out, w / 2.0, h / 2.0, 20.0, "middle", "normal", "#666", msg);
    draw_notes(out, notes);
    out.push_str("</svg>\n");
}

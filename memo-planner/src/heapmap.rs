//! Heap maps: a plan drawn as SVG (time across, address up, one rectangle per buffer).
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

use std::collections::HashMap;
use std::fmt::Write;

use crate::bounds::offsets_lower_bound;
use crate::plan::OffsetPlan;
use crate::problem::Problem;
use crate::text::{bytes_and_mib, short_size, thousands, trim_float, xml_escape};

/// How buffers are coloured when no groups are given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Coloring {
    /// By size on a log scale, at most eight classes (legend: size ranges).
    #[default]
    SizeClass,
    /// By a hash of the id (no legend).
    IdHash,
}

/// What to draw and how; see the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeapmapOptions {
    /// The title at the top (escaped; may be empty).
    pub title: String,
    /// Width of the picture in pixels (clamped to 240..=8192).
    pub width: u32,
    /// Height of the picture in pixels (clamped to 160..=8192).
    pub height: u32,
    /// One group label per buffer, in the problem's order: colours buffers by group, with
    /// a legend. Overrides [`HeapmapOptions::coloring`].
    pub groups: Option<Vec<String>>,
    /// The colouring when `groups` is `None`.
    pub coloring: Coloring,
    /// The lower bound to mark; `None` computes [`crate::offsets_lower_bound`] (`O(n log n)`).
    pub lower_bound: Option<u64>,
    /// Draw only the time window `[start, end)`; `None` for the automatic range.
    pub time_range: Option<(u64, u64)>,
    /// With no `time_range`, stop the time axis before a long stretch at the end where only
    /// a few long-lived buffers are alive (see the [module documentation](self)).
    pub trim_long_lived: bool,
    /// Tooltips only when at most this many buffers are drawn.
    pub max_tooltips: usize,
    /// Above this many drawn buffers, merge sub-pixel ones (and then the smallest on
    /// screen) into a coverage raster.
    pub max_rects: usize,
}

impl Default for HeapmapOptions {
    fn default() -> HeapmapOptions {
        HeapmapOptions {
            title: "Heap map".to_string(),
            width: 1200,
            height: 720,
            groups: None,
            coloring: Coloring::SizeClass,
            lower_bound: None,
            time_range: None,
            trim_long_lived: true,
            max_tooltips: 5000,
            max_rects: 20_000,
        }
    }
}

/// Sequential palette for size classes (plasma, dark to light, without its palest end).
const SEQUENTIAL: [&str; 8] = [
    "#0d0887", "#4c02a1", "#7e03a8", "#a92395", "#cc4778", "#e66c5c", "#f89540", "#fdc328",
];

/// Qualitative palette for groups.
const QUALITATIVE: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bcbd22", "#79706e", "#d37295",
];

const OTHER_COLOR: &str = "#c9c9c9";
const DUST_COLOR: &str = "#3a3a3a";
const HEIGHT_COLOR: &str = "#111111";
const BOUND_COLOR: &str = "#d62728";
const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

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
    let (t0, t1) = time_window(drawn.buffers, options, &mut notes);
    let mut header = subtitle(buffers.len(), height, lb, w);
    header.append(&mut notes);
    let frame = Frame::new(w, h, header.len(), (t0, t1), height.max(lb));
    let (colors, color_of, legend) = colouring(drawn.buffers, options);
    let (items, dust) = screen_items(&drawn, &frame, options.max_rects);
    let tooltips = items.len() + dust.len() <= options.max_tooltips;
    let shown = items.len() + dust.len();
    for (k, (note, color)) in header.iter().enumerate() {
        text(
            &mut out,
            16.0,
            46.0 + 16.0 * k as f64,
            12.0,
            "start",
            "normal",
            color,
            note,
        );
    }
    let (yt, xt) = (byte_ticks(frame.ymax), time_ticks(t0, t1));
    draw_grid(&mut out, &frame, &yt, &xt);
    draw_buffers(
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
        draw_dust(
            &mut out,
            &centres,
            frame.px0,
            frame.py0,
            frame.pw(),
            frame.ph(),
        );
    }
    draw_marks(&mut out, &frame, height, lb);
    draw_axes(&mut out, &frame, &yt, &xt);
    if frame.right >= 200.0 {
        let mut entries = legend;
        if !dust.is_empty() {
            entries.push(LegendEntry {
                label: format!("< 1 px, merged ({})", thousands(dust.len() as u64)),
                color: DUST_COLOR.to_string(),
            });
        }
        let mut foot = vec![format!("{} buffers drawn", thousands(shown as u64))];
        if !tooltips {
            foot.push(format!(
                "tooltips off (> {})",
                thousands(options.max_tooltips as u64)
            ));
        }
        draw_legend(&mut out, &frame, options, &entries, &foot);
    }
    out.push_str("</svg>\n");
    out
}

/// The drawn buffers and their offsets (the first `n` of the problem and the plan).
struct Drawn<'a> {
    buffers: &'a [crate::problem::Buffer],
    offsets: &'a [u64],
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
    for (k, (note, color)) in notes.iter().enumerate() {
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
    out.push_str("</svg>\n");
}

/// The time window `[t0, t1)`: the option's range, or the whole span, cut before the
/// tail of long-lived buffers when [`HeapmapOptions::trim_long_lived`] is set (a note says
/// so).
fn time_window(
    drawn: &[crate::problem::Buffer],
    options: &HeapmapOptions,
    notes: &mut Vec<(String, &'static str)>,
) -> (u64, u64) {
    let full = (
        drawn.iter().map(|b| b.lower).min().unwrap_or(0),
        drawn.iter().map(|b| b.upper).max().unwrap_or(1),
    );
    match options.time_range {
        Some((s, e)) if s < e => return (s, e),
        Some((s, e)) => {
            notes.push((format!("empty time range [{s}, {e}) ignored"), BOUND_COLOR));
            return full;
        }
        None if !options.trim_long_lived => return full,
        None => {}
    }
    // The ends after the last allocation, in order; cut at the first big gap.
    let last_start = drawn.iter().map(|b| b.lower).max().unwrap_or(full.0);
    let mut tail: Vec<u64> = drawn
        .iter()
        .map(|b| b.upper)
        .filter(|&u| u > last_start)
        .collect();
    tail.sort_unstable();
    tail.dedup();
    let min_gap = ((full.1 - full.0) / 2).max(last_start - full.0);
    let Some(end) = tail
        .windows(2)
        .find(|p| p[1] - p[0] > min_gap)
        .map(|p| p[0])
    else {
        return full;
    };
    let long_lived = drawn.iter().filter(|b| b.upper > end).count();
    if long_lived > 0 {
        notes.push((
            format!(
                "time axis cut at {}: {} long-lived buffers live on up to {}",
                thousands(end),
                thousands(long_lived as u64),
                thousands(full.1)
            ),
            "#555",
        ));
    }
    (full.0, end)
}

/// The subtitle, wrapped at its separators to fit about the width (6.6 px a character).
fn subtitle(buffers: usize, height: u64, lb: u64, w: f64) -> Vec<(String, &'static str)> {
    let mut parts = vec![
        format!("{} buffers", thousands(buffers as u64)),
        format!("height {}", short_size(height as f64)),
        format!("lower bound {}", short_size(lb as f64)),
    ];
    if lb > 0 {
        parts.push(format!(
            "height / lower bound = {:.3}",
            height as f64 / lb as f64
        ));
    }
    let max_chars = ((w - 32.0) / 6.6).max(10.0) as usize;
    let mut header: Vec<(String, &'static str)> = Vec::new();
    for part in parts {
        match header.last_mut() {
            Some((line, _)) if line.chars().count() + 3 + part.chars().count() <= max_chars => {
                line.push_str(" · ");
                line.push_str(&part);
            }
            _ => header.push((part, "#555")),
        }
    }
    header
}

/// The plot area and the scales from time and bytes to pixels.
struct Frame {
    px0: f64,
    px1: f64,
    py0: f64,
    py1: f64,
    /// Room right of the plot (the legend's, when at least 200).
    right: f64,
    /// The byte value at the top of the plot.
    ymax: f64,
    t0: u64,
    t1: u64,
}

impl Frame {
    /// The layout of a `w` x `h` picture with `header_lines` lines under the title, for
    /// the time window `(t0, t1)` and addresses up to `top_value`.
    fn new(w: f64, h: f64, header_lines: usize, (t0, t1): (u64, u64), top_value: u64) -> Frame {
        let top = 44.0 + 16.0 * header_lines as f64;
        let (left, right, bottom) = (86.0, if w >= 560.0 { 200.0 } else { 16.0 }, 50.0);
        let px1 = (w - right).max(left + 40.0);
        let py1 = (h - bottom).max(top + 40.0);
        let ph = py1 - top;
        // Leave room above the upper line for its label.
        let ymax = (top_value.max(1) as f64) * ph / (ph - 20.0).max(1.0);
        Frame {
            px0: left,
            px1,
            py0: top,
            py1,
            right,
            ymax,
            t0,
            t1,
        }
    }

    fn pw(&self) -> f64 {
        self.px1 - self.px0
    }

    fn ph(&self) -> f64 {
        self.py1 - self.py0
    }

    fn x(&self, t: u64) -> f64 {
        let span = (self.t1 - self.t0) as f64;
        self.px0 + (t.saturating_sub(self.t0).min(self.t1 - self.t0) as f64) / span * self.pw()
    }

    fn y(&self, a: f64) -> f64 {
        self.py1 - a / self.ymax * self.ph()
    }
}

/// A buffer's rectangle on screen.
struct Item {
    index: usize,
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

/// The screen rectangles of the buffers in the window, and the sub-pixel ones that are
/// merged into dust when there are more than `max_rects`.
fn screen_items(drawn: &Drawn, frame: &Frame, max_rects: usize) -> (Vec<Item>, Vec<Item>) {
    let mut items: Vec<Item> = Vec::with_capacity(drawn.buffers.len());
    for (i, (b, &off)) in drawn.buffers.iter().zip(drawn.offsets).enumerate() {
        let (l, u) = (b.lower.max(frame.t0), b.upper.min(frame.t1));
        if l >= u {
            continue;
        }
        let (x0, x1) = (frame.x(l), frame.x(u));
        let (ya, yb) = (frame.y(off as f64), frame.y(off as f64 + b.size as f64));
        items.push(Item {
            index: i,
            x: x0,
            y: yb,
            w: x1 - x0,
            h: ya - yb,
        });
    }
    let mut dust = Vec::new();
    if items.len() > max_rects {
        let (big, small): (Vec<Item>, Vec<Item>) =
            items.into_iter().partition(|it| it.w >= 1.0 || it.h >= 1.0);
        items = big;
        dust = small;
        if items.len() > max_rects {
            items.sort_by(|a, b| (b.w * b.h).total_cmp(&(a.w * a.h)));
            dust.extend(items.drain(max_rects..));
        }
    }
    (items, dust)
}

/// The plot background and grid lines.
fn draw_grid(out: &mut String, f: &Frame, yt: &[(f64, String)], xt: &[u64]) {
    let _ = writeln!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f6f6f4\"/>",
        num(f.px0),
        num(f.py0),
        num(f.pw()),
        num(f.ph())
    );
    out.push_str("<g stroke=\"#e2e2de\" stroke-width=\"1\">\n");
    for &(v, _) in yt {
        let y = f.y(v);
        let _ = writeln!(
            out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            num(f.px0),
            num(y),
            num(f.px1),
            num(y)
        );
    }
    for &t in xt {
        let x = f.x(t);
        let _ = writeln!(
            out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            num(x),
            num(f.py0),
            num(x),
            num(f.py1)
        );
    }
    out.push_str("</g>\n");
}

/// The buffers, grouped by colour and by whether they are big enough for an outline.
fn draw_buffers(
    out: &mut String,
    f: &Frame,
    drawn: &Drawn,
    items: &[Item],
    (colors, color_of): (&[String], &[usize]),
    tooltips: bool,
) {
    let _ = writeln!(
        out,
        "<clipPath id=\"plot\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath>",
        num(f.px0),
        num(f.py0),
        num(f.pw()),
        num(f.ph())
    );
    out.push_str("<g id=\"buffers\" clip-path=\"url(#plot)\">\n");
    let mut buckets: Vec<Vec<&Item>> = vec![Vec::new(); colors.len() * 2];
    for it in items {
        let outlined = it.w >= 4.0 && it.h >= 4.0;
        let c = color_of.get(it.index).copied().unwrap_or(0);
        if let Some(bucket) = buckets.get_mut(c * 2 + usize::from(outlined)) {
            bucket.push(it);
        }
    }
    for (k, bucket) in buckets.iter().enumerate() {
        if bucket.is_empty() {
            continue;
        }
        let color = colors.get(k / 2).map_or(OTHER_COLOR, String::as_str);
        if k % 2 == 1 {
            let _ = writeln!(
                out,
                "<g fill=\"{color}\" stroke=\"#ffffff\" stroke-width=\"0.6\">"
            );
        } else {
            let _ = writeln!(out, "<g fill=\"{color}\">");
        }
        for it in bucket {
            draw_rect(out, drawn, it, tooltips);
        }
        out.push_str("</g>\n");
    }
    out.push_str("</g>\n");
}

/// One buffer's rectangle (at least half a pixel each way), with its tooltip.
fn draw_rect(out: &mut String, drawn: &Drawn, it: &Item, tooltips: bool) {
    let (mut x, mut y, mut rw, mut rh) = (it.x, it.y, it.w, it.h);
    if rw < 0.5 {
        x -= (0.5 - rw) / 2.0;
        rw = 0.5;
    }
    if rh < 0.5 {
        y -= (0.5 - rh) / 2.0;
        rh = 0.5;
    }
    let _ = write!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"",
        num(x),
        num(y),
        num(rw),
        num(rh)
    );
    if !tooltips {
        out.push_str("/>\n");
        return;
    }
    let b = &drawn.buffers[it.index];
    let off = drawn.offsets[it.index];
    let _ = writeln!(
        out,
        "><title>{}: time [{}, {}), {} B ({}) at offset {} ({})</title></rect>",
        xml_escape(&b.id),
        b.lower,
        b.upper,
        thousands(b.size),
        short_size(b.size as f64),
        thousands(off),
        short_size(off as f64)
    );
}

/// Height and lower-bound lines; the upper one is labelled above, the lower below.
fn draw_marks(out: &mut String, f: &Frame, height: u64, lb: u64) {
    out.push_str("<g id=\"marks\">\n");
    let lines = [
        ("height-line", "height", height, HEIGHT_COLOR, ""),
        (
            "lower-bound-line",
            "lower bound",
            lb,
            BOUND_COLOR,
            " stroke-dasharray=\"6 4\"",
        ),
    ];
    let upper_is_height = height >= lb;
    for (k, (id, label, value, color, dash)) in lines.iter().enumerate() {
        let y = f.y(*value as f64);
        let _ = writeln!(
            out,
            "<line id=\"{id}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{color}\" stroke-width=\"1.5\"{dash}/>",
            num(f.px0),
            num(y),
            num(f.px1),
            num(y)
        );
        let above = (k == 0) == upper_is_height;
        let ty = if above { y - 5.0 } else { y + 14.0 };
        let s = format!("{label} {}", bytes_and_mib(*value));
        halo_text(out, f.px1 - 6.0, ty, 12.0, "end", color, &s);
    }
    out.push_str("</g>\n");
}

/// The axes, their ticks and labels.
fn draw_axes(out: &mut String, f: &Frame, yt: &[(f64, String)], xt: &[u64]) {
    let _ = writeln!(
        out,
        "<path d=\"M{} {}V{}H{}\" fill=\"none\" stroke=\"#333\" stroke-width=\"1\"/>",
        num(f.px0),
        num(f.py0),
        num(f.py1),
        num(f.px1)
    );
    out.push_str("<g font-size=\"11\" fill=\"#333\">\n");
    for (v, label) in yt {
        let y = f.y(*v);
        let _ = writeln!(
            out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            num(f.px0 - 4.0),
            num(y),
            num(f.px0),
            num(y),
            num(f.px0 - 7.0),
            num(y + 4.0),
            xml_escape(label)
        );
    }
    for &t in xt {
        let x = f.x(t);
        let _ = writeln!(
            out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            num(x),
            num(f.py1),
            num(x),
            num(f.py1 + 4.0),
            num(x),
            num(f.py1 + 17.0),
            thousands(t)
        );
    }
    out.push_str("</g>\n");
    let mid = (f.px0 + f.px1) / 2.0;
    text(
        out,
        mid,
        f.py1 + 38.0,
        12.0,
        "middle",
        "normal",
        "#333",
        "time step",
    );
    let _ = writeln!(
        out,
        "<text transform=\"translate(18 {}) rotate(-90)\" font-size=\"12\" fill=\"#333\" text-anchor=\"middle\">address (offset in the arena)</text>",
        num((f.py0 + f.py1) / 2.0)
    );
}

/// The legend right of the plot: a heading, one swatch per entry while they fit, and
/// the footer lines at the bottom.
fn draw_legend(
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

const MIB: f64 = 1024.0 * 1024.0;

struct LegendEntry {
    label: String,
    color: String,
}

/// The palette, the colour index of each drawn buffer, and the legend entries.
fn colouring(
    drawn: &[crate::problem::Buffer],
    options: &HeapmapOptions,
) -> (Vec<String>, Vec<usize>, Vec<LegendEntry>) {
    if let Some(groups) = &options.groups {
        // Groups by area (bytes x time), largest first; ties by name.
        let mut area: HashMap<&str, f64> = HashMap::new();
        for (i, b) in drawn.iter().enumerate() {
            let g = groups.get(i).map_or("?", String::as_str);
            *area.entry(g).or_insert(0.0) += b.size as f64 * (b.upper - b.lower) as f64;
        }
        let mut order: Vec<(&str, f64)> = area.into_iter().collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        let named = if order.len() > QUALITATIVE.len() {
            QUALITATIVE.len() - 1
        } else {
            order.len()
        };
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut colors: Vec<String> = Vec::new();
        let mut legend = Vec::new();
        for (k, (g, _)) in order.iter().enumerate() {
            index.insert(g, k.min(named));
            if k < named {
                colors.push(QUALITATIVE[k].to_string());
                legend.push(LegendEntry {
                    label: truncate(g, 26),
                    color: QUALITATIVE[k].to_string(),
                });
            }
        }
        if order.len() > named {
            colors.push(OTHER_COLOR.to_string());
            legend.push(LegendEntry {
                label: format!("other ({} groups)", order.len() - named),
                color: OTHER_COLOR.to_string(),
            });
        }
        let color_of = (0..drawn.len())
            .map(|i| {
                let g = groups.get(i).map_or("?", String::as_str);
                index.get(g).copied().unwrap_or(0)
            })
            .collect();
        return (colors, color_of, legend);
    }
    match options.coloring {
        Coloring::IdHash => {
            const HUES: usize = 24;
            let colors = (0..HUES * 2)
                .map(|k| {
                    let hue = (k % HUES) as f64 * 360.0 / HUES as f64;
                    let light = if k < HUES { 0.52 } else { 0.68 };
                    hsl(hue, 0.62, light)
                })
                .collect();
            let color_of = drawn
                .iter()
                .map(|b| (fnv1a(b.id.as_bytes()) % (HUES as u64 * 2)) as usize)
                .collect();
            (colors, color_of, Vec::new())
        }
        Coloring::SizeClass => {
            let log = |s: u64| 63 - s.max(1).leading_zeros() as usize;
            let lo = drawn.iter().map(|b| log(b.size)).min().unwrap_or(0);
            let hi = drawn.iter().map(|b| log(b.size)).max().unwrap_or(0);
            let bins = (hi - lo + 1).min(SEQUENTIAL.len());
            let width = (hi - lo + 1).div_ceil(bins);
            let bins = (hi - lo + 1).div_ceil(width);
            let mut colors = Vec::with_capacity(bins);
            let mut legend = Vec::with_capacity(bins);
            for k in 0..bins {
                // Spread the used classes over the whole palette.
                let p = if bins == 1 {
                    SEQUENTIAL.len() / 2
                } else {
                    k * (SEQUENTIAL.len() - 1) / (bins - 1)
                };
                colors.push(SEQUENTIAL[p].to_string());
                let from = 2f64.powi((lo + k * width) as i32);
                let to = 2f64.powi((lo + (k + 1) * width) as i32);
                legend.push(LegendEntry {
                    label: format!("{} – {}", short_size(from), short_size(to)),
                    color: SEQUENTIAL[p].to_string(),
                });
            }
            legend.reverse();
            let color_of = drawn
                .iter()
                .map(|b| ((log(b.size) - lo) / width).min(bins - 1))
                .collect();
            (colors, color_of, legend)
        }
    }
}

/// At most this many rectangles for the raster of sub-pixel buffers.
const MAX_DUST_RECTS: usize = 40_000;

/// Draws sub-pixel buffers (given by their centres) as a coverage raster: runs of covered
/// cells in each row, merged with identical runs of the rows below. Cells are one pixel,
/// or coarser (2, 4, ... 16 px) when that would take more than [`MAX_DUST_RECTS`].
fn draw_dust(out: &mut String, centres: &[(f64, f64)], px0: f64, py0: f64, pw: f64, ph: f64) {
    let mut cell = 1.0;
    let mut rects = dust_rects(centres, px0, py0, pw, ph, cell);
    while rects.len() > MAX_DUST_RECTS && cell < 16.0 {
        cell *= 2.0;
        rects = dust_rects(centres, px0, py0, pw, ph, cell);
    }
    let _ = writeln!(
        out,
        "<g id=\"dust\" fill=\"{DUST_COLOR}\" fill-opacity=\"0.8\" clip-path=\"url(#plot)\">"
    );
    for (c, r, cw, rh) in rects {
        let _ = writeln!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            num(px0 + c as f64 * cell),
            num(py0 + r as f64 * cell),
            num(cw as f64 * cell),
            num(rh as f64 * cell)
        );
    }
    out.push_str("</g>\n");
}

/// The raster rectangles `(col, row, cols, rows)` in cells of `cell` pixels.
fn dust_rects(
    centres: &[(f64, f64)],
    px0: f64,
    py0: f64,
    pw: f64,
    ph: f64,
    cell: f64,
) -> Vec<(usize, usize, usize, usize)> {
    let cols = (pw / cell).ceil().clamp(1.0, 16384.0) as usize;
    let rows = (ph / cell).ceil().clamp(1.0, 16384.0) as usize;
    let mut grid = vec![false; cols * rows];
    for &(x, y) in centres {
        let c = (((x - px0) / cell).floor().max(0.0) as usize).min(cols - 1);
        let r = (((y - py0) / cell).floor().max(0.0) as usize).min(rows - 1);
        grid[r * cols + c] = true;
    }
    // Open runs: (start col, end col) -> start row.
    let mut open: HashMap<(usize, usize), usize> = HashMap::new();
    let mut rects = Vec::new();
    for r in 0..=rows {
        let mut next: HashMap<(usize, usize), usize> = HashMap::new();
        if r < rows {
            let row = &grid[r * cols..(r + 1) * cols];
            let mut c = 0;
            while c < cols {
                if row[c] {
                    let s = c;
                    while c < cols && row[c] {
                        c += 1;
                    }
                    let start = open.remove(&(s, c)).unwrap_or(r);
                    next.insert((s, c), start);
                } else {
                    c += 1;
                }
            }
        }
        for ((s, e), start) in open.drain() {
            rects.push((s, start, e - s, r - start));
        }
        open = next;
    }
    rects.sort_unstable();
    rects
}

/// Ticks on the address axis: `(bytes, label)`, at a 1-2-5 step in a binary unit.
fn byte_ticks(ymax: f64) -> Vec<(f64, String)> {
    let units = [
        (1.0, "B"),
        (1024.0, "KiB"),
        (MIB, "MiB"),
        (MIB * 1024.0, "GiB"),
        (MIB * MIB, "TiB"),
        (MIB * MIB * 1024.0, "PiB"),
        (MIB * MIB * MIB, "EiB"),
    ];
    let (unit, name) = units
        .iter()
        .rev()
        .find(|(u, _)| ymax / u >= 2.0)
        .copied()
        .unwrap_or((1.0, "B"));
    let mut step = nice_step(ymax / unit / 6.0);
    if unit == 1.0 {
        step = step.max(1.0);
    }
    let mut ticks = Vec::new();
    let mut k = 0.0;
    while k * step * unit <= ymax && ticks.len() < 50 {
        let v = k * step;
        let label = if v.fract() == 0.0 && v < 1e15 {
            thousands(v as u64)
        } else {
            trim_float(v, 2)
        };
        ticks.push((v * unit, format!("{label} {name}")));
        k += 1.0;
    }
    ticks
}

/// Ticks on the time axis, at a 1-2-5 step.
fn time_ticks(t0: u64, t1: u64) -> Vec<u64> {
    let step = (nice_step((t1 - t0) as f64 / 8.0).max(1.0)) as u64;
    let first = t0.div_ceil(step).saturating_mul(step);
    let mut ticks = Vec::new();
    let mut t = first;
    while t <= t1 && ticks.len() < 50 {
        ticks.push(t);
        t = match t.checked_add(step) {
            Some(v) => v,
            None => break,
        };
    }
    ticks
}

/// The smallest of 1, 2, 5 times a power of ten that is at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw.is_nan() || raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// A coordinate with one decimal at most.
fn num(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    trim_float((v * 10.0).round() / 10.0, 1)
}

/// At most `max` characters, with an ellipsis when cut.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[allow(clippy::too_many_arguments)]
fn text(
    out: &mut String,
    x: f64,
    y: f64,
    size: f64,
    anchor: &str,
    weight: &str,
    color: &str,
    s: &str,
) {
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" font-size=\"{size}\" font-weight=\"{weight}\" text-anchor=\"{anchor}\" fill=\"{color}\">{}</text>",
        num(x),
        num(y),
        xml_escape(s)
    );
}

/// Text with a white outline, readable over the rectangles.
fn halo_text(out: &mut String, x: f64, y: f64, size: f64, anchor: &str, color: &str, s: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" font-size=\"{size}\" font-weight=\"bold\" text-anchor=\"{anchor}\" fill=\"{color}\" stroke=\"#ffffff\" stroke-width=\"3\" stroke-opacity=\"0.85\" paint-order=\"stroke\">{}</text>",
        num(x),
        num(y),
        xml_escape(s)
    );
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `#rrggbb` from hue (degrees), saturation and lightness in [0, 1].
fn hsl(hue: f64, s: f64, l: f64) -> String {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = hue / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let to = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", to(r), to(g), to(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{dnn_trace, minimalloc_example};
    use crate::offsets::OffsetStrategy;
    use crate::problem::Buffer;

    /// A minimal well-formedness check: one root element, balanced tags, quoted
    /// attributes without `<`, and every `&` starting a known entity.
    fn check_xml(s: &str) -> Result<(), String> {
        let b = s.as_bytes();
        let mut stack: Vec<&str> = Vec::new();
        let mut roots = 0;
        let mut i = 0;
        let entity_ok = |at: usize| -> bool {
            let rest = &s[at..];
            ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                .iter()
                .any(|e| rest.starts_with(e))
        };
        while i < b.len() {
            match b[i] {
                b'<' => {
                    if s[i..].starts_with("<!--") {
                        i = s[i..].find("-->").ok_or("open comment")? + i + 3;
                        continue;
                    }
                    let closing = b.get(i + 1) == Some(&b'/');
                    let start = i + 1 + usize::from(closing);
                    let mut j = start;
                    while j < b.len() && !b" \n\t/>".contains(&b[j]) {
                        j += 1;
                    }
                    let name = &s[start..j];
                    if name.is_empty() {
                        return Err(format!("empty tag name at {i}"));
                    }
                    // Attributes up to '>'.
                    let mut quote: Option<u8> = None;
                    while j < b.len() {
                        match (quote, b[j]) {
                            (None, b'"') | (None, b'\'') => quote = Some(b[j]),
                            (Some(q), c) if c == q => quote = None,
                            (Some(_), b'<') => return Err(format!("< in attribute at {j}")),
                            (Some(_), b'&') if !entity_ok(j) => {
                                return Err(format!("bad & in attribute at {j}"))
                            }
                            (None, b'>') => break,
                            (None, b'<') => return Err(format!("< in tag at {j}")),
                            _ => {}
                        }
                        j += 1;
                    }
                    if j >= b.len() {
                        return Err("unterminated tag".into());
                    }
                    let self_closing = b[j - 1] == b'/';
                    if closing {
                        match stack.pop() {
                            Some(open) if open == name => {}
                            other => return Err(format!("</{name}> closes {other:?}")),
                        }
                    } else if !self_closing {
                        if stack.is_empty() {
                            roots += 1;
                        }
                        stack.push(name);
                    } else if stack.is_empty() {
                        roots += 1;
                    }
                    i = j + 1;
                }
                b'&' => {
                    if !entity_ok(i) {
                        return Err(format!("bad & in text at {i}"));
                    }
                    i += 1;
                }
                c => {
                    if stack.is_empty() && !c.is_ascii_whitespace() {
                        return Err(format!("text outside the root at {i}"));
                    }
                    if c < 0x20 && !b"\t\n\r".contains(&c) {
                        return Err(format!("control character at {i}"));
                    }
                    i += 1;
                }
            }
        }
        if !stack.is_empty() {
            return Err(format!("unclosed {stack:?}"));
        }
        if roots != 1 {
            return Err(format!("{roots} root elements"));
        }
        Ok(())
    }

    /// The number of `<rect` inside the buffers group.
    fn buffer_rects(svg: &str) -> usize {
        let start = svg.find("<g id=\"buffers\"").expect("buffers group");
        let end = svg
            .find("<g id=\"dust\"")
            .or_else(|| svg.find("<g id=\"marks\""))
            .expect("marks group");
        svg[start..end].matches("<rect").count()
    }

    #[test]
    fn checker_rejects_bad_xml() {
        assert!(check_xml("<svg><g></svg>").is_err());
        assert!(check_xml("<svg>a & b</svg>").is_err());
        assert!(check_xml("<svg><a x=\"<\"/></svg>").is_err());
        assert!(check_xml("<svg/><svg/>").is_err());
        assert!(check_xml("<svg><a x=\"&amp;\">&lt;</a></svg>").is_ok());
    }

    #[test]
    fn small_plan_has_one_rect_per_buffer_and_labelled_lines() {
        let p = minimalloc_example();
        let plan = OffsetStrategy::GreedyBySize.plan(&p);
        let svg = render_svg(&p, &plan, &HeapmapOptions::default());
        check_xml(&svg).unwrap();
        assert_eq!(buffer_rects(&svg), 5);
        assert_eq!(svg.matches("<title>").count(), 5);
        assert!(svg.contains("id=\"height-line\""));
        assert!(svg.contains("id=\"lower-bound-line\""));
        assert!(svg.contains(">height 12 B (0.00 MiB)</text>"));
        assert!(svg.contains(">lower bound 12 B (0.00 MiB)</text>"));
        assert!(svg.contains("<title>b4: time [9, 21), 4 B (4 B) at offset"));
    }

    #[test]
    fn labels_in_mib() {
        let p = Problem::new(vec![
            Buffer::new("a", 0, 2, 3 << 20),
            Buffer::new("b", 1, 3, 1 << 20),
            Buffer::new("c", 2, 4, 1 << 20),
        ])
        .unwrap();
        let plan = OffsetPlan {
            offsets: vec![0, 3 << 20, 0],
        };
        let svg = render_svg(&p, &plan, &HeapmapOptions::default());
        check_xml(&svg).unwrap();
        assert!(svg.contains(">height 4,194,304 B (4.00 MiB)</text>"));
        assert!(svg.contains(">lower bound 4,194,304 B (4.00 MiB)</text>"));
        // A lower bound passed in is used as is, and may sit below the height.
        let options = HeapmapOptions {
            lower_bound: Some(1 << 20),
            ..HeapmapOptions::default()
        };
        let svg = render_svg(&p, &plan, &options);
        assert!(svg.contains(">lower bound 1,048,576 B (1.00 MiB)</text>"));
    }

    #[test]
    fn escapes_ids_titles_and_groups() {
        let p = Problem::new(vec![
            Buffer::new("a<b>&\"c'", 0, 2, 8),
            Buffer::new("ctl\u{1}\u{0}x", 1, 3, 8),
        ])
        .unwrap();
        let plan = OffsetStrategy::GreedyBySize.plan(&p);
        let options = HeapmapOptions {
            title: "<script>&".into(),
            groups: Some(vec!["op<1>".into(), "op&2".into()]),
            ..HeapmapOptions::default()
        };
        let svg = render_svg(&p, &plan, &options);
        check_xml(&svg).unwrap();
        assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&apos;"));
        assert!(svg.contains("&lt;script&gt;&amp;"));
        assert!(svg.contains(">op&lt;1&gt;</text>"));
        assert!(svg.contains(">op&amp;2</text>"));
        assert!(!svg.contains("a<b"));
        assert!(!svg.contains('\u{1}'));
    }

    #[test]
    fn empty_problem_says_no_buffers() {
        let svg = render_svg(
            &Problem::default(),
            &OffsetPlan::default(),
            &HeapmapOptions::default(),
        );
        check_xml(&svg).unwrap();
        assert!(svg.contains(">no buffers</text>"));
    }

    #[test]
    fn mismatched_plans_do_not_panic() {
        let p = minimalloc_example();
        let short = OffsetPlan {
            offsets: vec![8, 8],
        };
        let svg = render_svg(&p, &short, &HeapmapOptions::default());
        check_xml(&svg).unwrap();
        assert_eq!(buffer_rects(&svg), 2);
        assert!(svg.contains("plan has 2 offsets for 5 buffers"));
        let long = OffsetPlan {
            offsets: vec![0; 9],
        };
        let svg = render_svg(&p, &long, &HeapmapOptions::default());
        check_xml(&svg).unwrap();
        assert_eq!(buffer_rects(&svg), 5);
        assert!(svg.contains("plan has 9 offsets for 5 buffers"));
        let none = render_svg(&p, &OffsetPlan::default(), &HeapmapOptions::default());
        check_xml(&none).unwrap();
        assert!(none.contains("no buffers to draw"));
        // Offsets near the top of the address space.
        let huge = OffsetPlan {
            offsets: vec![u64::MAX; 5],
        };
        check_xml(&render_svg(&p, &huge, &HeapmapOptions::default())).unwrap();
    }

    #[test]
    fn odd_options_do_not_panic() {
        let p = dnn_trace(300, 2);
        let plan = OffsetStrategy::GreedyBySize.plan(&p);
        for options in [
            HeapmapOptions {
                width: 0,
                height: 0,
                ..HeapmapOptions::default()
            },
            HeapmapOptions {
                time_range: Some((50, 10)),
                coloring: Coloring::IdHash,
                ..HeapmapOptions::default()
            },
            HeapmapOptions {
                time_range: Some((u64::MAX - 1, u64::MAX)),
                max_rects: 0,
                max_tooltips: 0,
                ..HeapmapOptions::default()
            },
            HeapmapOptions {
                groups: Some(vec!["x".into(); 7]),
                trim_long_lived: false,
                ..HeapmapOptions::default()
            },
        ] {
            let svg = render_svg(&p, &plan, &options);
            check_xml(&svg).unwrap();
        }
    }

    #[test]
    fn many_groups_share_an_other_entry() {
        let p = dnn_trace(200, 4);
        let plan = OffsetStrategy::GreedyBySize.plan(&p);
        let groups: Vec<String> = (0..p.len()).map(|i| format!("op{}", i % 20)).collect();
        let options = HeapmapOptions {
            groups: Some(groups),
            ..HeapmapOptions::default()
        };
        let svg = render_svg(&p, &plan, &options);
        check_xml(&svg).unwrap();
        assert!(svg.contains(">other (9 groups)</text>"));
        assert_eq!(buffer_rects(&svg), 200);
    }

    #[test]
    fn large_trace_stays_small() {
        let p = dnn_trace(100_000, 1);
        let plan = OffsetStrategy::GreedyBySize.plan(&p);
        let svg = render_svg(&p, &plan, &HeapmapOptions::default());
        check_xml(&svg).unwrap();
        assert!(svg.len() < 10_000_000, "{} bytes", svg.len());
        eprintln!(
            "100k buffers: {} bytes, {} rects",
            svg.len(),
            buffer_rects(&svg)
        );
        assert!(!svg.contains("<title>"));
        assert!(buffer_rects(&svg) <= 20_000);
        assert!(svg.contains("id=\"height-line\""));
    }

    proptest::proptest! {
        #[test]
        fn random_problems_and_plans_render_well_formed(
            p in crate::fixtures::strategies::problem(40),
            offsets in proptest::collection::vec(0u64..200, 0..45),
            groups in proptest::option::of(proptest::collection::vec("[a-c<&>\"' ]{0,3}", 0..45)),
        ) {
            let plan = OffsetPlan { offsets };
            let options = HeapmapOptions { groups, ..HeapmapOptions::default() };
            let svg = render_svg(&p, &plan, &options);
            proptest::prop_assert_eq!(check_xml(&svg), Ok(()));
            let n = p.len().min(plan.offsets.len());
            if n > 0 {
                proptest::prop_assert_eq!(buffer_rects(&svg), n);
            }
        }
    }

    #[test]
    fn dust_raster_coarsens_to_stay_small() {
        let centres: Vec<(f64, f64)> = (0..1000)
            .flat_map(|x| (0..600).map(move |y| (x, y)))
            .filter(|(x, y)| (x + y) % 2 == 0)
            .map(|(x, y)| (f64::from(x) + 0.5, f64::from(y) + 0.5))
            .collect();
        assert!(dust_rects(&centres, 0.0, 0.0, 1000.0, 600.0, 1.0).len() > MAX_DUST_RECTS);
        let mut out = String::new();
        draw_dust(&mut out, &centres, 0.0, 0.0, 1000.0, 600.0);
        assert!(out.matches("<rect").count() <= MAX_DUST_RECTS);
        // A solid block becomes one rectangle.
        let block: Vec<(f64, f64)> = (0..10)
            .flat_map(|x| (0..5).map(move |y| (f64::from(x) + 0.5, f64::from(y) + 0.5)))
            .collect();
        assert_eq!(
            dust_rects(&block, 0.0, 0.0, 100.0, 100.0, 1.0),
            vec![(0, 0, 10, 5)]
        );
    }

    #[test]
    fn helpers_format_numbers() {
        assert_eq!(num(1.25), "1.3");
        assert_eq!(num(2.0), "2");
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(time_ticks(0, 100), vec![0, 20, 40, 60, 80, 100]);
    }
}

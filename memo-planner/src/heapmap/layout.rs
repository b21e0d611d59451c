//! The layout: the time window, the subtitle, the plot frame with its scales, and each
//! buffer's rectangle on screen.

use super::colours::BOUND_COLOR;
use super::options::HeapmapOptions;
use crate::problem::Buffer;
use crate::text::{short_size, thousands};

/// The drawn buffers and their offsets (the first `n` of the problem and the plan).
pub(super) struct Drawn<'a> {
    pub(super) buffers: &'a [Buffer],
    pub(super) offsets: &'a [u64],
}

/// The time window `[t0, t1)`: the option's range, or the whole span, cut before the
/// tail of long-lived buffers when [`HeapmapOptions::trim_long_lived`] is set (a note says
/// so).
pub(super) fn time_window(
    drawn: &[Buffer],
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
pub(super) fn subtitle(
    buffers: usize,
    height: u64,
    lb: u64,
    w: f64,
) -> Vec<(String, &'static str)> {
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
pub(super) struct Frame {
    pub(super) px0: f64,
    pub(super) px1: f64,
    pub(super) py0: f64,
    pub(super) py1: f64,
    /// Room right of the plot (the legend's, when at least 200).
    pub(super) right: f64,
    /// The byte value at the top of the plot.
    pub(super) ymax: f64,
    pub(super) t0: u64,
    pub(super) t1: u64,
}

impl Frame {
    /// The layout of a `w` x `h` picture with `header_lines` lines under the title, for
    /// the time window `(t0, t1)` and addresses up to `top_value`.
    pub(super) fn new(
        w: f64,
        h: f64,
        header_lines: usize,
        (t0, t1): (u64, u64),
        top_value: u64,
    ) -> Frame {
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

    pub(super) fn pw(&self) -> f64 {
        self.px1 - self.px0
    }

    pub(super) fn ph(&self) -> f64 {
        self.py1 - self.py0
    }

    pub(super) fn x(&self, t: u64) -> f64 {
        let span = (self.t1 - self.t0) as f64;
        self.px0 + (t.saturating_sub(self.t0).min(self.t1 - self.t0) as f64) / span * self.pw()
    }

    pub(super) fn y(&self, a: f64) -> f64 {
        self.py1 - a / self.ymax * self.ph()
    }
}

/// A buffer's rectangle on screen.
pub(super) struct Item {
    pub(super) index: usize,
    pub(super) x: f64,
    pub(super) y: f64,
    pub(super) w: f64,
    pub(super) h: f64,
}

/// The screen rectangles of the buffers in the window, and the sub-pixel ones that are
/// merged into dust when there are more than `max_rects`.
pub(super) fn screen_items(
    drawn: &Drawn,
    frame: &Frame,
    max_rects: usize,
) -> (Vec<Item>, Vec<Item>) {
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

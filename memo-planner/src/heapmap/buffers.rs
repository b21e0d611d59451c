//! The buffers' rectangles (with tooltips) and the height and lower-bound lines.

use std::fmt::Write;

use super::colours::{BOUND_COLOR, HEIGHT_COLOR, OTHER_COLOR};
use super::layout::{Drawn, Frame, Item};
use super::svg::{halo_text, num};
use crate::text::{bytes_and_mib, short_size, thousands, xml_escape};

/// The buffers, grouped by colour and by whether they are big enough for an outline.
pub(super) fn draw_buffers(
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
pub(super) fn draw_rect(out: &mut String, drawn: &Drawn, it: &Item, tooltips: bool) {
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
pub(super) fn draw_marks(out: &mut String, f: &Frame, height: u64, lb: u64) {
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

//! SVG text primitives: coordinates, text elements, the font.

use std::fmt::Write;

use crate::text::{trim_float, xml_escape};

/// The font family of every text element (set on the root element).
pub(super) const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

/// A coordinate with one decimal at most.
pub(super) fn num(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    trim_float((v * 10.0).round() / 10.0, 1)
}

/// At most `max` characters, with an ellipsis when cut.
pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn text(
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
pub(super) fn halo_text(
    out: &mut String,
    x: f64,
    y: f64,
    size: f64,
    anchor: &str,
    color: &str,
    s: &str,
) {
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" font-size=\"{size}\" font-weight=\"bold\" text-anchor=\"{anchor}\" fill=\"{color}\" stroke=\"#ffffff\" stroke-width=\"3\" stroke-opacity=\"0.85\" paint-order=\"stroke\">{}</text>",
        num(x),
        num(y),
        xml_escape(s)
    );
}

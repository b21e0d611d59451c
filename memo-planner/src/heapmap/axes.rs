//! The grid, the axes and their ticks (1-2-5 steps; binary units on the address axis).

use std::fmt::Write;

use super::layout::Frame;
use super::svg::{num, text};
use crate::text::{thousands, trim_float, xml_escape};

/// The plot background and grid lines.
pub(super) fn draw_grid(out: &mut String, f: &Frame, yt: &[(f64, String)], xt: &[u64]) {
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

/// The axes, their ticks and labels.
pub(super) fn draw_axes(out: &mut String, f: &Frame, yt: &[(f64, String)], xt: &[u64]) {
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

pub(super) const MIB: f64 = 1024.0 * 1024.0;

/// Ticks on the address axis: `(bytes, label)`, at a 1-2-5 step in a binary unit.
pub(super) fn byte_ticks(ymax: f64) -> Vec<(f64, String)> {
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
pub(super) fn time_ticks(t0: u64, t1: u64) -> Vec<u64> {
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
pub(super) fn nice_step(raw: f64) -> f64 {
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

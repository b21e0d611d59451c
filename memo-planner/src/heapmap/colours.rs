//! Colours: the palettes, the colour of each buffer (by group, size class or id hash)
//! and the legend entries that explain them.

use std::collections::HashMap;

use super::options::{Coloring, HeapmapOptions};
use super::svg::truncate;
use crate::problem::Buffer;
use crate::text::short_size;

/// One legend line: a colour swatch and its label.
pub(super) struct LegendEntry {
    pub(super) label: String,
    pub(super) color: String,
}

/// Sequential palette for size classes (plasma, dark to light, without its palest end).
pub(super) const SEQUENTIAL: [&str; 8] = [
    "#0d0887", "#4c02a1", "#7e03a8", "#a92395", "#cc4778", "#e66c5c", "#f89540", "#fdc328",
];

/// Qualitative palette for groups.
pub(super) const QUALITATIVE: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bcbd22", "#79706e", "#d37295",
];

pub(super) const OTHER_COLOR: &str = "#c9c9c9";
pub(super) const DUST_COLOR: &str = "#3a3a3a";
pub(super) const HEIGHT_COLOR: &str = "#111111";
pub(super) const BOUND_COLOR: &str = "#d62728";

/// The palette, the colour index of each drawn buffer, and the legend entries.
pub(super) fn colouring(
    drawn: &[Buffer],
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

pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `#rrggbb` from hue (degrees), saturation and lightness in [0, 1].
pub(super) fn hsl(hue: f64, s: f64, l: f64) -> String {
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

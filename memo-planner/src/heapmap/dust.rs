//! The coverage raster of sub-pixel buffers ("dust") on large problems.

use std::collections::HashMap;
use std::fmt::Write;

use super::colours::DUST_COLOR;
use super::svg::num;

/// At most this many rectangles for the raster of sub-pixel buffers.
pub(super) const MAX_DUST_RECTS: usize = 40_000;

/// Draws sub-pixel buffers (given by their centres) as a coverage raster: runs of covered
/// cells in each row, merged with identical runs of the rows below. Cells are one pixel,
/// or coarser (2, 4, ... 16 px) when that would take more than [`MAX_DUST_RECTS`].
pub(super) fn draw_dust(
    out: &mut String,
    centres: &[(f64, f64)],
    px0: f64,
    py0: f64,
    pw: f64,
    ph: f64,
) {
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
pub(super) fn dust_rects(
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

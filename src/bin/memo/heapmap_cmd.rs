//! `memo heapmap`: a plan drawn as an SVG heap map.

use std::path::Path;

use memo_planner::heapmap::{render_svg, HeapmapOptions};
use memo_planner::text::thousands;

use crate::failure::Failure;
use crate::input;
use crate::output::write_file;
use crate::planning::{run, Strategy};

/// `memo heapmap`.
pub fn heapmap(
    path: &Path,
    strategy: Strategy,
    output: &Path,
    width: u32,
    height: u32,
) -> Result<(), Failure> {
    let input = input::read(path)?;
    let p = run(&input.problem, strategy)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let title = if input.groups.is_some() {
        format!(
            "{name}: {} plan of the recorded pass, coloured by op ({} buffers)",
            p.strategy,
            thousands(input.problem.len() as u64)
        )
    } else {
        format!(
            "{name}: {} ({} buffers)",
            p.strategy,
            thousands(input.problem.len() as u64)
        )
    };
    let options = HeapmapOptions {
        title,
        width,
        height,
        groups: input.groups,
        ..HeapmapOptions::default()
    };
    let svg = render_svg(&input.problem, &p.offsets, &options);
    write_file(output, svg.as_bytes())
}

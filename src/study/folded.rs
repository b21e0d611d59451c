//! A trace as folded stacks (`frame;frame;frame bytes` per line), the input of flame graph
//! tools such as inferno's `inferno-flamegraph` and Brendan Gregg's `flamegraph.pl`.
//!
//! A record's stack is, outermost first: the pass (`[pass] key`), its op scopes from the
//! outermost inwards (`[op] name`), then its captured call-site frames from the outermost
//! inwards (when call sites were recorded); a frame holding the separator `;` or a line
//! break has it replaced by `:`. Its value is the bytes it allocated: every allocation
//! record counts, a realloc's new size included, as DHAT's total bytes do.
//! Lines are sorted by stack, one per distinct stack. [`to_flamegraph`] draws them as a
//! flame graph SVG with the `inferno` crate.

use std::collections::BTreeMap;

use memo_alloc::trace::Trace;

use super::stacks::Stacks;

/// The separator between frames; a frame holding it has it replaced by `:`.
const SEPARATOR: char = ';';

/// The folded stacks of a checked trace ([`Trace::check`]): allocated bytes by stack.
pub fn to_folded(trace: &Trace) -> String {
    let stacks = Stacks::of(trace);
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for (i, a) in trace.allocations.iter().enumerate() {
        let frames: Vec<String> = stacks.record(i).map(frame).collect();
        *totals
            .entry(frames.join(&SEPARATOR.to_string()))
            .or_default() += a.size;
    }
    let mut out = String::new();
    for (stack, bytes) in totals {
        out.push_str(&format!("{stack} {bytes}\n"));
    }
    out
}

/// The flame graph SVG of a checked trace's folded stacks ([`to_folded`]), titled `title`,
/// widths in allocated bytes; an error names what inferno could not draw.
pub fn to_flamegraph(trace: &Trace, title: &str) -> Result<Vec<u8>, String> {
    let folded = to_folded(trace);
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = "bytes".to_string();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, folded.lines(), &mut svg)
        .map_err(|e| e.to_string())?;
    Ok(svg)
}

/// `name` as one frame: no separator inside, no line break.
fn frame(name: &str) -> String {
    name.replace([SEPARATOR, '\n'], ":")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::tests::sample;

    #[test]
    fn sample_folds_to_known_totals() {
        let t = sample();
        t.check().unwrap();
        assert_eq!(
            to_folded(&t),
            "[pass] model 10\n\
             [pass] model;[op] a 164\n\
             [pass] model;[op] b 3000\n"
        );
    }

    #[test]
    fn flame_graph_is_an_svg_with_every_frame() {
        let svg = String::from_utf8(to_flamegraph(&sample(), "sample").unwrap()).unwrap();
        assert!(svg.contains("<svg"), "{svg}");
        for frame in ["[pass] model", "[op] a", "[op] b", "sample"] {
            assert!(svg.contains(frame), "no {frame} in the SVG");
        }
    }

    #[test]
    fn call_sites_extend_the_stack_outermost_first() {
        let mut t = sample();
        // Innermost first, as captured.
        t.allocations[1].call_site = Some(vec!["app::leaf".into(), "app;main".into()]);
        assert_eq!(
            to_folded(&t),
            "[pass] model 10\n\
             [pass] model;[op] a 64\n\
             [pass] model;[op] a;app:main;app::leaf 100\n\
             [pass] model;[op] b 3000\n"
        );
    }
}

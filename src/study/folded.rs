//! A trace as folded stacks (`frame;frame;frame bytes` per line), the input of flame graph
//! tools such as inferno's `inferno-flamegraph` and Brendan Gregg's `flamegraph.pl`.
//!
//! A record's stack is, outermost first: the pass (`[pass] key`), its op scopes from the
//! outermost inwards (`[op] name`), then its captured call-site frames from the outermost
//! inwards (when call sites were recorded). Its value is the bytes it allocated: every
//! allocation record counts, a realloc's new size included, as DHAT's total bytes do.
//! Lines are sorted by stack, one per distinct stack. [`to_flamegraph`] draws them as a
//! flame graph SVG with the `inferno` crate.

use std::collections::BTreeMap;

use memo_alloc::trace::Trace;

use super::dhat::{op_frame, pass_frame};

/// The separator between frames; a frame holding it has it replaced by `:`.
const SEPARATOR: char = ';';

/// The folded stacks of a checked trace ([`Trace::check`]): allocated bytes by stack.
pub fn to_folded(trace: &Trace) -> String {
    let scopes = scope_stacks(trace);
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for a in &trace.allocations {
        let mut stack = scopes
            .get(a.scope as usize)
            .cloned()
            .unwrap_or_else(|| frame(&pass_frame(&trace.key)));
        for f in a.call_site.iter().flatten().rev() {
            stack.push(SEPARATOR);
            stack.push_str(&frame(f));
        }
        *totals.entry(stack).or_default() += a.size;
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

/// Every scope's stack, outermost first: the pass for a root scope, else its parent's
/// stack and its own op frame.
fn scope_stacks(trace: &Trace) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(trace.scopes.len());
    for s in &trace.scopes {
        let stack = match s.parent {
            // Parents come first (checked), so their stacks are known.
            Some(p) if (p as usize) < out.len() => {
                format!(
                    "{}{SEPARATOR}{}",
                    out[p as usize],
                    frame(&op_frame(&s.name))
                )
            }
            _ => frame(&pass_frame(&trace.key)),
        };
        out.push(stack);
    }
    out
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

//! The stack of every allocation record, shared by the stack exports (folded stacks, the
//! flame graph, pprof).
//!
//! A record's stack is, outermost first: the pass (`[pass] key`), its op scopes from the
//! outermost inwards (`[op] name`), then its captured call-site frames from the outermost
//! inwards (none when its call site was not captured).

use memo_alloc::trace::Trace;

use super::dhat::{op_frame, pass_frame};

/// The frames of every scope of a trace, from which each record's stack is read.
pub struct Stacks<'t> {
    trace: &'t Trace,
    /// Per scope id: the pass and op frames, outermost first.
    scopes: Vec<Vec<String>>,
    /// The stack of a record whose scope is unknown: the pass alone.
    pass: Vec<String>,
}

impl<'t> Stacks<'t> {
    /// The scope frames of a checked trace ([`Trace::check`]).
    pub fn of(trace: &'t Trace) -> Stacks<'t> {
        let pass = vec![pass_frame(&trace.key)];
        let mut scopes: Vec<Vec<String>> = Vec::with_capacity(trace.scopes.len());
        for s in &trace.scopes {
            let frames = match s.parent {
                // Parents come first (checked), so their frames are known.
                Some(p) if (p as usize) < scopes.len() => {
                    let mut frames = scopes[p as usize].clone();
                    frames.push(op_frame(&s.name));
                    frames
                }
                _ => pass.clone(),
            };
            scopes.push(frames);
        }
        Stacks {
            trace,
            scopes,
            pass,
        }
    }

    /// The stack of allocation record `i`, outermost first.
    pub fn record(&self, i: usize) -> impl Iterator<Item = &str> + '_ {
        let a = &self.trace.allocations[i];
        let scope = self.scopes.get(a.scope as usize).unwrap_or(&self.pass);
        scope
            .iter()
            .map(String::as_str)
            .chain(a.call_site.iter().flatten().rev().map(String::as_str))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::tests::sample;

    #[test]
    fn a_stack_is_the_pass_its_ops_and_its_frames_outermost_first() {
        let mut t = sample();
        t.scopes[2].parent = Some(1); // b inside a
        t.allocations[2].call_site = Some(vec!["app::leaf".into(), "app::main".into()]);
        t.allocations[4].scope = 99; // an unknown scope: the pass alone
        let stacks = Stacks::of(&t);
        let stack = |i| stacks.record(i).collect::<Vec<_>>();
        assert_eq!(stack(0), ["[pass] model", "[op] a"]);
        assert_eq!(
            stack(2),
            ["[pass] model", "[op] a", "[op] b", "app::main", "app::leaf"]
        );
        assert_eq!(stack(4), ["[pass] model"]);
    }
}

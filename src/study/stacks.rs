//! The stack of every allocation record, shared by the stack exports (folded stacks, the
//! flame graph, pprof).
//!
//! A record's stack is, outermost first: the pass (`[pass] key`), its op scopes from the
//! outermost inwards (`[op] name`; a pass inside a whole-program recording is
//! `[pass] key` too), then its captured call-site frames from the outermost
//! inwards (none when its call site was not captured): all of them
//! ([`Stacks::record`]), or those from the call site outwards, without the standard
//! library's allocation frames inside it ([`Stacks::record_to_site`]).

use memo_alloc::trace::{ScopeKind, Trace};

use super::dhat::{op_frame, pass_frame};
use super::site_frames;

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
        let kinds = trace.recording.as_ref().map(|r| &r.scopes);
        let kind = |id: u32| kinds.and_then(|k| k.get(id as usize)).map(|w| w.kind);
        let mut scopes: Vec<Vec<String>> = Vec::with_capacity(trace.scopes.len());
        for s in &trace.scopes {
            let frames = match s.parent {
                // Parents come first (checked), so their frames are known.
                Some(p) if (p as usize) < scopes.len() => {
                    let mut frames = scopes[p as usize].clone();
                    frames.push(match kind(s.id) {
                        Some(ScopeKind::Pass) => pass_frame(&s.name),
                        _ => op_frame(&s.name),
                    });
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

    /// The stack of allocation record `i`, outermost first, with every captured frame.
    pub fn record(&self, i: usize) -> impl Iterator<Item = &str> + '_ {
        let frames = self.trace.allocations[i].call_site.as_deref();
        self.with_frames(i, frames.unwrap_or_default())
    }

    /// The stack of allocation record `i`, outermost first, ending at its call site (the
    /// frame [`site_name`](super::site_name) names).
    pub fn record_to_site(&self, i: usize) -> impl Iterator<Item = &str> + '_ {
        let frames = self.trace.allocations[i].call_site.as_deref();
        self.with_frames(i, site_frames(frames.unwrap_or_default()))
    }

    /// Record `i`'s scope frames, then `frames` (innermost first) from the outermost.
    fn with_frames<'s>(&'s self, i: usize, frames: &'s [String]) -> impl Iterator<Item = &'s str> {
        let scope = self.trace.allocations[i].scope as usize;
        let scope = self.scopes.get(scope).unwrap_or(&self.pass);
        scope.iter().chain(frames.iter().rev()).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::tests::sample;
    use memo_alloc::trace::{Recording, ScopeWhen};

    #[test]
    fn a_stack_is_the_pass_its_ops_and_its_frames_outermost_first() {
        let mut t = sample();
        t.scopes[2].parent = Some(1); // b inside a
        t.allocations[2].call_site = Some(vec![
            "<alloc::raw_vec::RawVec<T>>::grow".into(),
            "app::leaf".into(),
            "app::main".into(),
        ]);
        t.allocations[4].scope = 99; // an unknown scope: the pass alone
        let stacks = Stacks::of(&t);
        let stack = |i| stacks.record(i).collect::<Vec<_>>();
        assert_eq!(stack(0), ["[pass] model", "[op] a"]);
        let b = ["[pass] model", "[op] a", "[op] b", "app::main", "app::leaf"];
        assert_eq!(
            stack(2),
            [&b[..], &["<alloc::raw_vec::RawVec<T>>::grow"]].concat()
        );
        assert_eq!(stacks.record_to_site(2).collect::<Vec<_>>(), b);
        assert_eq!(stack(4), ["[pass] model"]);
    }

    #[test]
    fn a_pass_inside_a_whole_program_recording_is_a_pass_frame() {
        let mut t = sample();
        let when = |kind| ScopeWhen {
            kind,
            ..ScopeWhen::default()
        };
        t.recording = Some(Recording {
            scopes: vec![
                when(ScopeKind::Program),
                when(ScopeKind::Pass),
                when(ScopeKind::Op),
                when(ScopeKind::Op),
            ],
            ..Recording::default()
        });
        let stacks = Stacks::of(&t);
        let stack = |i| stacks.record(i).collect::<Vec<_>>();
        assert_eq!(stack(0), ["[pass] model", "[pass] a"]);
        assert_eq!(stack(2), ["[pass] model", "[op] b"]);
    }
}

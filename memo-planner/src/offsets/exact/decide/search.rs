//! One attempt: the iterative depth-first search under one preorder.
//!
//! The stack holds two kinds of frames. A *split* frame solves its sub-problems one after
//! the other (the first failing one fails it). A *node* frame tries its candidates in
//! order: each survivor of the checks becomes its child (a node frame of the same
//! sub-problem, or a split frame when the placement emptied a cut). A frame passes its
//! answer ([`Ret`]) to its parent.

use super::parts::dominance_bound;
use super::{Cand, Decider, Probe, NONE};

/// The placement a node made for its current child, to undo.
struct Placed {
    buf: u32,
    mark: usize,
    hatless: bool,
}

/// A node of the search: a sub-problem with some of its buffers placed.
struct Node {
    part: u32,
    list: Vec<Cand>,
    /// The next candidate of `list` to try.
    pos: usize,
    /// Canonical order: no placement below the `(offset, rank)` of the parent's.
    min_key: (u64, u32),
    /// Dominance bound: no placement at or above it.
    bound: u64,
    placed: Option<Placed>,
}

/// The sub-problems `first..end`, solved one after the other; `next` is the current one.
struct Split {
    first: u32,
    end: u32,
    next: u32,
}

enum Frame {
    Node(Node),
    Split(Split),
}

/// Outcome of a finished frame, passed to its parent.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ret {
    Ok,
    Fail,
}

/// What a frame asks of the search loop.
enum Step {
    /// Push this frame (a child).
    Push(Frame),
    /// Pop the frame, passing this answer to its parent.
    Pop(Ret),
    /// The node limit or the time cap ran out.
    Stop,
}

impl Decider<'_> {
    /// One depth-first search under the current preorder.
    pub(super) fn attempt(&mut self) -> Probe {
        self.attempts += 1;
        self.packing.reset();
        self.parts.clear();
        if self.packing.hopeless() {
            return Probe::Infeasible;
        }
        // The root: the problem split at its static cuts.
        let all: Vec<u32> = (0..self.sw.n as u32).collect();
        let (first, end) =
            self.parts
                .split(self.sw, &self.packing, (0, self.sw.sections() as u32), &all);
        let mut stack = vec![Frame::Split(Split {
            first,
            end,
            next: first,
        })];
        let mut ret: Option<Ret> = None;
        while let Some(top) = stack.last_mut() {
            let step = match top {
                Frame::Split(split) => self.split_step(split, ret.take()),
                Frame::Node(node) => self.node_step(node, ret.take()),
            };
            match step {
                Step::Push(frame) => stack.push(frame),
                Step::Pop(r) => {
                    if let Some(Frame::Node(node)) = stack.pop() {
                        self.parts.recycle(node.list);
                    }
                    ret = Some(r);
                }
                Step::Stop => return Probe::Unknown,
            }
        }
        match ret {
            Some(Ret::Ok) => Probe::Found(self.solution.clone()),
            _ => Probe::Infeasible,
        }
    }

    /// A split frame: its first failing sub-problem fails it; once all are solved, it
    /// is solved.
    fn split_step(&mut self, split: &mut Split, ret: Option<Ret>) -> Step {
        match ret {
            Some(Ret::Fail) => {
                self.parts.truncate(split.first);
                return Step::Pop(Ret::Fail);
            }
            Some(Ret::Ok) => split.next += 1,
            None => {}
        }
        if split.next == split.end {
            self.parts.truncate(split.first);
            return Step::Pop(Ret::Ok);
        }
        let part = split.next;
        let list = self.root_list(part);
        Step::Push(Frame::Node(Node {
            part,
            bound: dominance_bound(self.sw, &list),
            list,
            pos: 0,
            min_key: (0, 0),
            placed: None,
        }))
    }

    /// A node frame: takes its child's answer, then tries its next candidate.
    fn node_step(&mut self, node: &mut Node, ret: Option<Ret>) -> Step {
        if let Some(r) = ret {
            if let Some(done) = self.child_answered(node, r) {
                return Step::Pop(done);
            }
        }
        if node.list.is_empty() {
            // A leaf: every buffer of the sub-problem is placed.
            return Step::Pop(Ret::Ok);
        }
        while let Some((o, rank, i)) = self.next_candidate(node) {
            if self.nodes >= self.limit {
                return Step::Stop;
            }
            self.nodes += 1;
            if self.nodes % 1024 == 0 && self.timed_out() {
                return Step::Stop;
            }
            if let Some(placed) = self.try_place(node, o, i) {
                node.placed = Some(placed);
                return Step::Push(self.child(node, o, rank));
            }
        }
        Step::Pop(Ret::Fail)
    }

    /// Takes back the placement of the child that answered `r` (recording it in the
    /// solution when it succeeded); returns the node's own answer when that settles it: a
    /// success, or a failure under a hatless placement (its siblings would fail too).
    fn child_answered(&mut self, node: &mut Node, r: Ret) -> Option<Ret> {
        let p = node.placed.take().expect("a child answers its placement");
        if r == Ret::Ok {
            self.solution[p.buf as usize] = self.packing.offsets[p.buf as usize];
        }
        self.packing.unplace(p.buf as usize, p.mark);
        (r == Ret::Ok || p.hatless).then_some(r)
    }

    /// The next candidate of `node` that canonical order, dominance and the identical
    /// buffers rule allow.
    fn next_candidate(&self, node: &mut Node) -> Option<Cand> {
        while node.pos < node.list.len() {
            let c = node.list[node.pos];
            node.pos += 1;
            if (c.0, c.1) < node.min_key {
                continue;
            }
            if c.0 >= node.bound {
                return None; // the list is sorted by offset
            }
            let twin = self.sw.twin_before[c.2 as usize];
            if twin != NONE && !self.packing.is_placed(twin as usize) {
                continue;
            }
            return Some(c);
        }
        None
    }

    /// Places `i` at `o`; keeps it when the node survives the floor, the top rule and
    /// (unless it split the sub-problem) the level rule.
    fn try_place(&mut self, node: &Node, o: u64, i: u32) -> Option<Placed> {
        let sw = self.sw;
        let i = i as usize;
        let sections = self.parts.get(node.part).sections();
        let mark = self.packing.mark();
        let placed = self
            .packing
            .place(i, o, sections, &mut self.rules.top_spans);
        let fits = placed.fits
            && self
                .rules
                .top_covered(&self.packing, sw.granule, sw.span[i], o + sw.sizes[i])
            && (!self.packing.zero_cuts.is_empty()
                || self
                    .rules
                    .level_filled(sw, &self.packing, sections, o, &node.list[node.pos..]));
        if !fits {
            self.packing.unplace(i, mark);
            return None;
        }
        Some(Placed {
            buf: i as u32,
            mark,
            hatless: placed.hatless,
        })
    }

    /// The frame below a placement at `(o, rank)`: the same sub-problem with the rest of
    /// its candidates, or its split when the placement emptied a cut.
    fn child(&mut self, node: &Node, o: u64, rank: u32) -> Frame {
        if self.packing.zero_cuts.is_empty() {
            let list = self.parts.child_list(&self.packing, &node.list);
            return Frame::Node(Node {
                part: node.part,
                bound: dominance_bound(self.sw, &list),
                list,
                pos: 0,
                min_key: (o, rank),
                placed: None,
            });
        }
        self.packing.zero_cuts.clear();
        let (first, end) = self.parts.split_again(self.sw, &self.packing, node.part);
        Frame::Split(Split {
            first,
            end,
            next: first,
        })
    }
}

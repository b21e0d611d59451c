//! Two deciders on one capacity, one per core, with an answer that does not depend on
//! the threads.
//!
//! Each racer runs its own rotation of preorders (the search time of one preorder is
//! heavy-tailed: on MiniMalloc's challenging set one preorder packs A in 27,000
//! nodes where another finds nothing in 3 million). The race is decided by *node counts*,
//! not by wall time: the decisive answer (a packing, or a proof of infeasibility) reached
//! with the fewest probe nodes wins, ties going to the first racer. A racer stops as soon
//! as its own count passes the best decisive count published so far (it can no longer
//! win), so on two cores a race costs about what its winner costs, and the serial mode
//! (the first racer to the end, then the second up to the first's count) returns exactly
//! the same answer. The *charge* of a probe (what the schedule's node budget pays) is
//! deterministic too: the winner's count, or the limit when neither racer decides.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::decide::{Decider, Probe};
use super::order::Preorder;
use super::sweep::Sweep;

/// The first racer's rotation: TWA (on the challenging set the most productive preorder
/// by far: it packs A, E, F, G, I and K at their lower bounds first) and aRR, area first
/// with random weights on Luby restarts (the better greedy on exact tilings).
pub(crate) const FIRST: [Preorder; 2] = [*b"TWA", *b"aRR"];

/// The second racer's rotation (TAW packs B, C and H first; WAT and AWT add variety; the
/// randomised TWR and aRR, on short Luby restarts, pack some exact tilings).
pub(crate) const SECOND: [Preorder; 5] = [*b"TAW", *b"WAT", *b"AWT", *b"TWR", *b"aRR"];

/// The first racer's rotation at the lower bound of a tight instance (see `schedule.rs`):
/// area with random weights on short Luby restarts. On exact tilings the packings at the
/// bound come from such attempts of a few thousand nodes, not from the fixed preorders
/// (none packs plane:300:1, 500:2 or 500:3 in 3M nodes).
pub(crate) const TIGHT_FIRST: [Preorder; 1] = [*b"aRR"];

/// The second racer's rotation there: a plain random order, on the same restarts. The
/// two hedge each other: on the three hardest of 24 tilings (plane:400:5, 500:3, 500:6),
/// six seeds each, aRR packed 4 of 18 within 10M nodes and RRR 7, not on the same ones.
pub(crate) const TIGHT_SECOND: [Preorder; 1] = [*b"RRR"];

/// Both racers' rotation in the descent: T, then W, then a random tie-break, restarted on
/// the Luby sequence with a seed per racer. Below the best height the search is
/// heavy-tailed: on J at 1.0404x the lower bound one attempt in ten packs within 15,000
/// nodes, while a fixed preorder finds nothing in millions.
pub(crate) const DESCENT: [Preorder; 1] = [*b"TWR"];

/// The second racer's rotation in the descent: TWR and area with random weights (on exact
/// tilings, area first is the better greedy).
pub(crate) const DESCENT_SECOND: [Preorder; 2] = [*b"TWR", *b"aRR"];

/// The two racers and the count they race on.
pub(crate) struct Race<'a> {
    racers: [Decider<'a>; 2],
    bar: &'a AtomicU64,
    parallel: bool,
}

/// What one probe of a race decided, and what it cost.
pub(crate) struct Outcome {
    pub probe: Probe,
    /// Deterministic cost: the winner's probe nodes, or the limit without a winner.
    pub charge: u64,
}

impl<'a> Race<'a> {
    /// Two racers over `sw` publishing through `bar`; on two threads when `parallel`.
    pub fn new(sw: &'a Sweep, bar: &'a AtomicU64, parallel: bool) -> Race<'a> {
        let mut a = Decider::new(sw);
        a.set_rotation(&FIRST);
        a.race_against(bar);
        a.set_seed(1);
        let mut b = Decider::new(sw);
        b.set_rotation(&SECOND);
        b.race_against(bar);
        b.set_seed(2);
        Race {
            racers: [a, b],
            bar,
            parallel,
        }
    }

    /// Gives the racers new rotations (the descent's).
    pub fn set_rotations(&mut self, first: &[Preorder], second: &[Preorder]) {
        self.racers[0].set_rotation(first);
        self.racers[1].set_rotation(second);
    }

    /// Nodes used by both racers so far (wall-clock dependent on two threads).
    pub fn nodes(&self) -> u64 {
        self.racers[0].nodes + self.racers[1].nodes
    }

    /// Decides `capacity` with at most `limit` probe nodes per racer.
    pub fn probe(
        &mut self,
        capacity: u64,
        limit: u64,
        clock: Instant,
        time_cap: Option<Duration>,
    ) -> Outcome {
        self.bar.store(u64::MAX, Ordering::Relaxed);
        let bar = self.bar;
        let run = move |d: &mut Decider<'a>, limit: u64| {
            let r = d.solve(capacity, d.nodes.saturating_add(limit), clock, time_cap);
            if r != Probe::Unknown {
                bar.fetch_min(d.probe_nodes(), Ordering::Relaxed);
            }
            (r, d.probe_nodes())
        };
        let [a, b] = &mut self.racers;
        let (ra, rb) = if self.parallel {
            std::thread::scope(|scope| {
                let h = scope.spawn(|| run(b, limit));
                let ra = run(a, limit);
                (ra, h.join().unwrap_or((Probe::Unknown, limit)))
            })
        } else {
            let ra = run(a, limit);
            let lb = match ra.0 {
                Probe::Unknown => limit,
                _ => ra.1.saturating_sub(1),
            };
            (ra, run(b, lb))
        };
        let decisive = |r: &(Probe, u64)| r.0 != Probe::Unknown;
        let winner = match (decisive(&ra), decisive(&rb)) {
            (true, true) if rb.1 < ra.1 => Some(rb),
            (true, _) => Some(ra),
            (false, true) => Some(rb),
            (false, false) => None,
        };
        match winner {
            Some((probe, n)) => Outcome { probe, charge: n },
            None => Outcome {
                probe: Probe::Unknown,
                charge: limit,
            },
        }
    }
}

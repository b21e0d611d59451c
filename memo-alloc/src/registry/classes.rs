//! Shape classes: the passes of one key told apart by a signature known early in the pass
//! (the size and alignment of its first request above the lane bound), each class
//! with a plan of its own.
//!
//! A key starts with one class, itself: its passes start and run as any key's. Its
//! profiled passes note their signature ([`Signature`]), and its plan keeps the signature
//! of the profile it was made from. When a re-profile of the key has another signature
//! than its plan, the key becomes *classed* ([`Classes::found`]): the re-profile becomes
//! the plan of a new class, a key entry of its own (named `<key>#<n>`), and the key's own
//! plan stays the plan of its first class. From then on a bound pass of the key starts
//! undecided: its requests go to the backend until its signature is known, and the class
//! of that signature profiles or replays the rest of the pass as its own: the class of
//! that very signature; else the class whose first size is nearest by ratio, when within
//! [`CLOSE_RATIO`] (jitter, which the class's merged plan absorbs); else a new class, at
//! most [`Config::max_classes`] per key; past the bound the class whose first size is
//! nearest above, or the largest.
//!
//! A shape founds a class only when it is plausibly new: its first size is more than
//! [`CLOSE_RATIO`] from every class's. And a class whose signature no pass has *matched*
//! since its plan was published (see [`Classes::note_match`]) is replaced rather than
//! kept: its next re-profile merges into its plan and takes over its signature (a key's
//! first pass that made one-time allocations first founds nothing).
//!
//! [`Config::max_classes`]: crate::Config::max_classes

use crate::registry::divergence::FAILING_RATIO;
use crate::stats::PassCounters;
use crate::support::sync::{AtomicBool, AtomicU64, Ordering};

/// Requests above the lane bound whose sizes and alignments make a signature.
pub(crate) const SIGNATURE_REQUESTS: u32 = 1;
/// Requests after which a signature is taken as it stands (a pass of small requests).
pub(crate) const SIGNATURE_WINDOW: u32 = 64;
/// Most classes a key can have (the bound of [`crate::Config::max_classes`]).
pub(crate) const MAX_CLASSES: usize = 16;
/// First sizes within this ratio of each other (either way) are one shape, jittering.
pub(crate) const CLOSE_RATIO: f64 = 1.25;

/// How far apart two first sizes are, as a ratio of at least 1 (0 is a shape of its own:
/// a pass without large requests).
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    match (a.min(b), a.max(b)) {
        (0, 0) => 1.0,
        (0, _) => f64::INFINITY,
        (lo, hi) => hi as f64 / lo as f64,
    }
}

/// Whether first sizes `a` and `b` are one shape (within [`CLOSE_RATIO`]).
pub(crate) fn close(a: u64, b: u64) -> bool {
    ratio(a, b) <= CLOSE_RATIO
}

/// The signature of a pass as its first requests make it (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Signature {
    hash: u64,
    /// The first request above the lane bound (0: none yet).
    first: u64,
    large: u32,
    requests: u32,
}

impl Signature {
    /// Adds a request of `size` bytes aligned to `align`, with lanes of at most `lanes`
    /// bytes. Returns whether the signature is complete.
    #[inline]
    pub(crate) fn note(&mut self, size: u64, align: u64, lanes: u64) -> bool {
        if self.complete() {
            return true;
        }
        self.requests += 1;
        if size.max(align) > lanes {
            if self.first == 0 {
                self.first = size;
            }
            self.large += 1;
            let h = (self.hash ^ size ^ (align << 48)).wrapping_mul(0x100_0000_01b3);
            self.hash = h.rotate_left(23);
        }
        self.complete()
    }

    /// Whether the signature is known: [`SIGNATURE_REQUESTS`] large requests seen, or
    /// [`SIGNATURE_WINDOW`] requests of any size.
    pub(crate) fn complete(&self) -> bool {
        self.large >= SIGNATURE_REQUESTS || self.requests >= SIGNATURE_WINDOW
    }

    /// The signature as one word (never 0).
    pub(crate) fn word(&self) -> u64 {
        (self.hash ^ u64::from(self.large)) | 1
    }

    /// The first request above the lane bound (0: none).
    pub(crate) fn first(&self) -> u64 {
        self.first
    }
}

/// A key's classes (see the module documentation); on a class's own entry, only
/// `signature` is used.
#[derive(Default)]
pub(crate) struct Classes {
    /// The signature of the profile this entry's plan was made from (0: unknown).
    signature: AtomicU64,
    /// The first large request of that profile.
    first: AtomicU64,
    /// A pass matched `signature` since the plan was published (see [`Classes::note_match`]).
    matched: AtomicBool,
    /// The plan replaced one of another shape that no pass had matched (see
    /// [`Classes::note_failing`]).
    replaced: AtomicBool,
    /// The key's passes are classified (it has more than its own class).
    classed: AtomicBool,
    /// Set on a class's entry: it is a class of another key.
    is_class: AtomicBool,
}

impl Classes {
    /// The signature of this entry's plan (0: unknown).
    pub(crate) fn signature(&self) -> u64 {
        self.signature.load(Ordering::Relaxed)
    }

    /// The first large request of this entry's plan's signature (0: none or unknown).
    pub(crate) fn first(&self) -> u64 {
        self.first.load(Ordering::Relaxed)
    }

    /// A plan of this entry was published, made from a profile of signature `s`: with
    /// `retag` (or while the entry has no signature) `s` becomes its signature, else it
    /// keeps its own (a jittered re-profile merged into it). No pass has matched it since.
    pub(crate) fn published(&self, s: &Signature, retag: bool) {
        self.matched.store(false, Ordering::Relaxed);
        let old = self.signature();
        if retag && old != 0 && old != s.word() {
            self.replaced.store(true, Ordering::Relaxed);
        }
        if retag || old == 0 {
            self.signature.store(s.word(), Ordering::Relaxed);
            self.first.store(s.first(), Ordering::Relaxed);
        }
    }

    /// A pass matched this entry's plan: one whose signature is the plan's (a classified
    /// pass), or a pass of a key without classes that replayed the plan without diverging.
    pub(crate) fn note_match(&self) {
        if !self.matched.load(Ordering::Relaxed) {
            self.matched.store(true, Ordering::Relaxed);
        }
    }

    /// A pass replayed this entry's plan with counters `c`. For a key without classes
    /// (whose passes have no signature) it is the evidence of the plan's shape: a pass
    /// that did not diverge matches it; one that missed most of what it asked is
    /// [`Classes::note_failing`].
    /// With `max_classes` of 1 the key never has classes: nothing is noted.
    pub(crate) fn note_replay(&self, c: &PassCounters, max_classes: usize) {
        if max_classes <= 1 || self.classed() || self.is_class() {
            return; // classified passes match by signature
        }
        if c.slab_hits > 0 && c.diverged() == 0 {
            self.note_match();
        } else if c.diverged() as f64 > FAILING_RATIO * c.allocations as f64 {
            self.note_failing();
        }
    }

    /// A replayed pass of this key (without classes) missed most of what it asked. When
    /// the key's plan replaced a shape no pass had matched, that shape may recur after
    /// all (a decoding loop's prefill, replaced by its steps' shape before it came
    /// again): the key's passes are classified from now on, so that a shape of its own
    /// founds a class at its next pass.
    fn note_failing(&self) {
        if self.replaced.load(Ordering::Relaxed) && !self.is_class() {
            self.classed.store(true, Ordering::Release);
        }
    }

    /// Whether a pass matched this entry's plan since it was published.
    pub(crate) fn matched(&self) -> bool {
        self.matched.load(Ordering::Relaxed)
    }

    /// Whether the key's passes are classified.
    pub(crate) fn classed(&self) -> bool {
        self.classed.load(Ordering::Acquire)
    }

    /// Whether this entry is a class of another key.
    pub(crate) fn is_class(&self) -> bool {
        self.is_class.load(Ordering::Relaxed)
    }

    /// Marks this entry as a class of another key, of signature `s`.
    pub(crate) fn mark_class(&self, s: &Signature) {
        self.is_class.store(true, Ordering::Relaxed);
        self.published(s, false);
    }

    /// The key's passes are classified from now on (it gained a class).
    pub(crate) fn set_classed(&self) {
        self.classed.store(true, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn signature(sizes: &[u64]) -> Signature {
        let mut s = Signature::default();
        for &n in sizes {
            s.note(n, 8, 256);
        }
        s
    }

    #[test]
    fn the_first_large_requests_make_the_signature() {
        // Small requests before it do not count; later requests change nothing.
        assert_eq!(
            signature(&[16, 4096, 32, 8192]).word(),
            signature(&[4096, 65536]).word()
        );
        assert_ne!(signature(&[8192]).word(), signature(&[4096]).word());
        assert!(!signature(&[16, 32]).complete());
        assert!(signature(&[16; SIGNATURE_WINDOW as usize]).complete());
        assert_eq!(signature(&[16, 4096]).first(), 4096);
    }

    fn classes(first: u64) -> Classes {
        let c = Classes::default();
        c.published(&signature(&[first]), false);
        c
    }

    #[test]
    fn sizes_within_the_close_ratio_are_one_shape() {
        assert!(close(512, 544)); // jitter
        assert!(close(544, 512));
        assert!(!close(40 << 10, 72 << 10));
        assert!(!close(96 << 10, 128 << 10)); // 1.33x apart
        assert!(close(0, 0));
        assert!(!close(0, 4096));
    }

    #[test]
    fn a_replacing_plan_takes_over_the_signature_and_starts_unmatched() {
        let e = classes(720);
        let old = e.signature();
        e.note_match();
        // A jittered re-profile merged into the plan: its signature stays.
        e.published(&signature(&[700]), false);
        assert_eq!(e.signature(), old);
        assert!(!e.matched());
        assert!(!e.replaced.load(Ordering::Relaxed));
        // A plan replacing one no pass matched: its signature is the new profile's.
        e.published(&signature(&[512]), true);
        assert_eq!(e.signature(), signature(&[512]).word());
        assert_eq!(e.first(), 512);
        assert!(e.replaced.load(Ordering::Relaxed));
    }

    #[test]
    fn a_failing_replay_classifies_a_key_only_after_it_replaced_a_shape() {
        let failing = PassCounters {
            allocations: 10,
            skipped: 8,
            ..PassCounters::default()
        };
        let e = classes(512);
        e.note_replay(&failing, 8);
        assert!(!e.classed());
        e.published(&signature(&[64 << 10]), true);
        e.note_replay(&failing, 8);
        assert!(e.classed());
    }
}

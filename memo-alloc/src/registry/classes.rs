//! Shape classes: the passes of one key told apart by a signature known early in the pass
//! (the sizes and alignments of its first requests above the lane bound), each class
//! with a plan of its own.
//!
//! A key starts with one class, itself: its passes start and run as any key's. Its
//! profiled passes note their signature ([`Signature`]), and its plan keeps the signature
//! of the profile it was made from. When a re-profile of the key has another signature
//! than its plan, the key becomes *classed* (`pass/finish.rs`, `shape_of`): the re-profile becomes
//! the plan of a new class, a key entry of its own (named `<key>#<n>`), and the key's own
//! plan stays the plan of its first class. Signatures are compared at the key's *lead*
//! ([`Classes::lead`]): the large request after those all its shapes make alike or
//! within [`CLOSE_RATIO`] (an interpreter's table of live tensors, the same at every
//! length, a little larger for a decoding step than for its prefill), found when the key
//! founds its first class ([`Signature::parts_at`]). From then on a bound pass of the key
//! starts undecided: its requests go to the backend until its signature at the lead is
//! known, and the class of that signature profiles or replays the rest of the pass as
//! its own: the class of that very signature; else the class whose first size is
//! nearest by ratio, when within [`CLOSE_RATIO`] (jitter, which the class's merged plan
//! absorbs); else a new class, at most [`Config::max_classes`] per key; past the bound the
//! class whose first size is nearest above, or the largest.
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
use crate::support::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Requests above the lane bound a signature keeps (the key's shapes may share all but
/// the last of them, see [`Classes::lead`]).
pub(crate) const SIGNATURE_LARGE: usize = 4;
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

/// A large request as a signature keeps it: its size, and its alignment above bit 48.
fn packed(size: u64, align: u64) -> u64 {
    size | (align.trailing_zeros() as u64) << 48
}

/// The size of a packed request.
fn size_of(p: u64) -> u64 {
    p & ((1 << 48) - 1)
}

/// The first requests of a pass (see the module documentation): its first
/// [`SIGNATURE_LARGE`] requests above the lane bound. Its word and first size are those
/// of the large request at a key's *lead* (the leading large requests every shape of the
/// key makes alike are skipped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Signature {
    /// The first large requests, packed (see [`packed`]).
    large: [u64; SIGNATURE_LARGE],
    /// Entries of `large` noted.
    count: u32,
    requests: u32,
}

impl Signature {
    /// Adds a request of `size` bytes aligned to `align`, with lanes of at most `lanes`
    /// bytes (nothing once [`SIGNATURE_LARGE`] large requests or [`SIGNATURE_WINDOW`]
    /// requests are noted).
    #[inline]
    pub(crate) fn note(&mut self, size: u64, align: u64, lanes: u64) {
        if self.count as usize >= SIGNATURE_LARGE || self.requests >= SIGNATURE_WINDOW {
            return;
        }
        self.requests += 1;
        if size.max(align) > lanes {
            self.note_large(size, align);
        }
    }

    /// Adds a request above the lane bound of a replayed pass (the hit path's lane check
    /// has told it apart already): its large requests are the signature a replay of
    /// another shape is known by (see [`Classes::note_replay`]).
    #[inline(always)]
    pub(crate) fn note_large(&mut self, size: u64, align: u64) {
        if let Some(slot) = self.large.get_mut(self.count as usize) {
            *slot = packed(size, align);
            self.count += 1;
        }
    }

    /// Whether the signature at `lead` is known: the large request after the `lead`
    /// first seen, or [`SIGNATURE_WINDOW`] requests of any size.
    pub(crate) fn complete(&self, lead: u32) -> bool {
        self.count > lead || self.requests >= SIGNATURE_WINDOW
    }

    /// The large request at `lead`, packed (0: none).
    fn at(&self, lead: u32) -> u64 {
        if lead < self.count {
            self.large[lead as usize]
        } else {
            0
        }
    }

    /// The signature at `lead` as one word (never 0; 1: no large request there).
    pub(crate) fn word(&self, lead: u32) -> u64 {
        match self.at(lead) {
            0 => 1,
            p => p.wrapping_mul(0x100_0000_01b3).rotate_left(23) | 1,
        }
    }

    /// The size of the large request at `lead` (0: none).
    pub(crate) fn first(&self, lead: u32) -> u64 {
        size_of(self.at(lead))
    }

    /// Where this signature and `other` part as shapes: the first large request both
    /// have whose sizes are more than [`CLOSE_RATIO`] apart (requests before it are alike
    /// or jitter: an interpreter's table of the graph it runs, a little larger for a
    /// decoding step than for its prefill).
    pub(crate) fn parts_at(&self, other: &Signature) -> Option<u32> {
        let both = self.count.min(other.count);
        (0..both).find(|&i| !close(self.first(i), other.first(i)))
    }
}

/// A key's classes (see the module documentation); on a class's own entry, only
/// `signature`, `first` and `lead` are used.
#[derive(Default)]
pub(crate) struct Classes {
    /// The signature at `lead` of the profile this entry's plan was made from (0:
    /// unknown).
    signature: AtomicU64,
    /// The large request at `lead` of that profile.
    first: AtomicU64,
    /// The large requests of that profile (see `Signature::large`), and how many.
    large: [AtomicU64; SIGNATURE_LARGE],
    count: AtomicU32,
    /// The leading large requests the key's shapes make alike: the signature is the
    /// large request after them. Set when the key founds its first class, then fixed
    /// (and copied to each class).
    lead: AtomicU32,
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

    /// The large request at the lead of this entry's plan's signature (0: none or
    /// unknown).
    pub(crate) fn first(&self) -> u64 {
        self.first.load(Ordering::Relaxed)
    }

    /// The leading large requests the key's shapes make alike (see [`Signature`]).
    pub(crate) fn lead(&self) -> u32 {
        self.lead.load(Ordering::Relaxed)
    }

    /// A plan of this entry was published, made from a profile of signature `s`: with
    /// `retag` (or while the entry has no signature) `s` becomes its signature, else it
    /// keeps its own (a jittered re-profile merged into it). No pass has matched it since.
    pub(crate) fn published(&self, s: &Signature, retag: bool) {
        self.matched.store(false, Ordering::Relaxed);
        let old = self.signature();
        let mut lead = self.lead();
        let parts = self.plan_signature().parts_at(s);
        if retag && old != 0 && (old != s.word(lead) || parts.is_some()) {
            self.replaced.store(true, Ordering::Relaxed);
            // A key without classes yet whose shapes part past the lead: the signature
            // is taken there, so that the replaced shape, if it comes back, founds a
            // class of its own.
            if let Some(p) = parts.filter(|&p| p > lead && !self.classed() && !self.is_class()) {
                self.lead.store(p, Ordering::Relaxed);
                lead = p;
            }
        }
        if retag || old == 0 {
            for (a, &p) in self.large.iter().zip(&s.large) {
                a.store(p, Ordering::Relaxed);
            }
            self.count.store(s.count, Ordering::Relaxed);
            self.tag(s, lead);
        }
    }

    /// Takes `s`'s word and first size at `lead` as this entry's.
    fn tag(&self, s: &Signature, lead: u32) {
        self.signature.store(s.word(lead), Ordering::Relaxed);
        self.first.store(s.first(lead), Ordering::Relaxed);
    }

    /// The large requests of the profile this entry's plan was made from.
    fn plan_signature(&self) -> Signature {
        Signature {
            large: std::array::from_fn(|i| self.large[i].load(Ordering::Relaxed)),
            count: self.count.load(Ordering::Relaxed),
            requests: 0,
        }
    }

    /// Where a profile of signature `s` parts from this key's plan as a shape, past the
    /// lead (see [`Signature::parts_at`]): a key without classes yet whose shapes make
    /// their first large requests alike founds its first class there.
    pub(crate) fn parts_at(&self, s: &Signature) -> Option<u32> {
        if self.classed() || self.is_class() || self.signature() == 0 {
            return None;
        }
        self.plan_signature()
            .parts_at(s)
            .filter(|&p| p > self.lead())
    }

    /// The key's shapes part at large request `lead` (see [`Classes::parts_at`]): its
    /// plan's signature is taken there. Before the key is classed (no pass classifies
    /// itself yet), by the thread that profiled it.
    pub(crate) fn set_lead(&self, lead: u32) {
        self.lead.store(lead, Ordering::Relaxed);
        self.tag(&self.plan_signature(), lead);
    }

    /// A pass matched this entry's plan: one whose signature is the plan's (a classified
    /// pass), or a pass of a key without classes that replayed the plan without diverging.
    pub(crate) fn note_match(&self) {
        if !self.matched.load(Ordering::Relaxed) {
            self.matched.store(true, Ordering::Relaxed);
        }
    }

    /// A pass replayed this entry's plan with counters `c` and signature `s` (see
    /// [`Signature::note_large`]); `other`: it diverged beyond the replan ratio from a
    /// plan an earlier pass fitted. For a key without classes (whose passes are not
    /// classified) it is the evidence of the plan's shape: a pass that did not diverge
    /// matches it; one that missed most of what it asked, by count or by bytes (a
    /// prefill's large blocks among a step's many small ones served by lanes), is
    /// [`Classes::note_failing`]; an `other` one whose first large requests part from
    /// the plan's is of another shape, and the key's passes are classified from its
    /// next pass on ([`Classes::note_other_shape`]): returns `true` then.
    /// With `max_classes` of 1 the key never has classes: nothing is noted.
    pub(crate) fn note_replay(
        &self,
        c: &PassCounters,
        s: &Signature,
        other: bool,
        max_classes: usize,
    ) -> bool {
        if max_classes <= 1 || self.classed() || self.is_class() {
            return false; // classified passes match by signature
        }
        let most = |part: u64, of: u64| part as f64 > FAILING_RATIO * of as f64;
        if c.slab_hits > 0 && c.diverged() == 0 {
            self.note_match();
        } else if most(c.diverged(), c.allocations)
            || most(c.diverged_bytes, c.slab_bytes + c.diverged_bytes)
        {
            self.note_failing();
        }
        other && self.note_other_shape(s)
    }

    /// A replayed pass of signature `s` diverged from this key's plan, which other passes
    /// fit: when `s` parts from the plan's signature, at the lead or past it, the pass
    /// was of another shape that no window of the key's passes may show (an encoder at a
    /// few sequence lengths drawn at random, whose shortest length diverges from the
    /// longest's plan one pass in four): the key's passes are classified from now on,
    /// at the request where the two part, and that shape founds a class at its next
    /// pass. A pass with the plan's first requests (a thread's first pass making
    /// allocations of its own) classifies nothing. Two threads noting passes of other
    /// shapes at once take the same lead or leads that both part the shapes seen.
    fn note_other_shape(&self, s: &Signature) -> bool {
        if self.signature() == 0 {
            return false;
        }
        let plan = self.plan_signature();
        let Some(parts) = plan.parts_at(s) else {
            return false;
        };
        let lead = self.lead().max(parts);
        if close(plan.first(lead), s.first(lead)) {
            return false;
        }
        if lead > self.lead() {
            self.set_lead(lead);
        }
        self.set_classed();
        true
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

    /// Marks this entry as a class of another key whose shapes part at `lead`, of
    /// signature `s`.
    pub(crate) fn mark_class(&self, s: &Signature, lead: u32) {
        self.is_class.store(true, Ordering::Relaxed);
        self.lead.store(lead, Ordering::Relaxed);
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
            signature(&[16, 4096, 32, 8192]).word(0),
            signature(&[4096, 65536]).word(0)
        );
        assert_ne!(signature(&[8192]).word(0), signature(&[4096]).word(0));
        assert!(!signature(&[16, 32]).complete(0));
        assert!(signature(&[16; SIGNATURE_WINDOW as usize]).complete(0));
        assert_eq!(signature(&[16, 4096]).first(0), 4096);
        // At lead 1, the second large request.
        assert!(!signature(&[16, 4096]).complete(1));
        assert_eq!(signature(&[4096, 32, 8192]).first(1), 8192);
        assert_eq!(
            signature(&[4096, 8192]).word(1),
            signature(&[2048, 8192]).word(1)
        );
    }

    #[test]
    fn shapes_part_at_their_first_large_request_of_another_size() {
        let table = signature(&[2048, 40 << 10, 16, 80 << 10]);
        assert_eq!(table.parts_at(&signature(&[2048, 72 << 10])), Some(1));
        assert_eq!(table.parts_at(&signature(&[4096, 72 << 10])), Some(0));
        // Jitter, or nothing to tell them apart by: no parting.
        assert_eq!(table.parts_at(&signature(&[2048, 42 << 10])), None);
        assert_eq!(table.parts_at(&signature(&[2048])), None);
        // A first request that jitters does not hide the parting after it.
        assert_eq!(table.parts_at(&signature(&[2256, 72 << 10])), Some(1));
        assert_eq!(table.parts_at(&signature(&[2256, 42 << 10])), None);
    }

    #[test]
    fn a_key_whose_shapes_share_a_first_request_takes_its_signature_past_it() {
        let e = classes(2048);
        e.published(&signature(&[2048, 40 << 10]), true);
        e.note_match();
        let wide = signature(&[2048, 72 << 10]);
        assert_eq!(e.parts_at(&wide), Some(1));
        e.set_lead(1);
        assert_eq!(e.first(), 40 << 10);
        assert_ne!(e.signature(), wide.word(1));
        assert_eq!(e.parts_at(&wide), None, "parted at the lead already");
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
        assert_eq!(e.signature(), signature(&[512]).word(0));
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
        e.note_replay(&failing, &Signature::default(), false, 8);
        assert!(!e.classed());
        e.published(&signature(&[64 << 10]), true);
        e.note_replay(&failing, &Signature::default(), false, 8);
        assert!(e.classed());
    }

    /// A replayed signature: the large requests of `sizes` (see `Signature::note_large`).
    fn replayed(sizes: &[u64]) -> Signature {
        let mut s = Signature::default();
        for &n in sizes {
            s.note_large(n, 8);
        }
        s
    }

    #[test]
    fn a_diverged_replay_whose_first_requests_part_from_the_plans_classifies_the_key() {
        let diverged = PassCounters {
            allocations: 100,
            slab_hits: 80,
            skipped: 20,
            ..PassCounters::default()
        };
        let e = classes(2048);
        e.published(&signature(&[2048, 40 << 10, 80 << 10]), true);
        // A pass with the plan's first requests (a one-off), or one that was not of
        // another shape: nothing.
        assert!(!e.note_replay(&diverged, &replayed(&[2048, 40 << 10]), true, 8));
        assert!(!e.note_replay(&diverged, &replayed(&[2048, 72 << 10]), false, 8));
        // Nor with classes turned off.
        assert!(!e.note_replay(&diverged, &replayed(&[2048, 72 << 10]), true, 1));
        assert!(!e.classed());
        // Another shape, parting past the first request: classified at the parting.
        assert!(e.note_replay(&diverged, &replayed(&[2048, 72 << 10]), true, 8));
        assert!(e.classed());
        assert_eq!(e.lead(), 1);
        assert_eq!(e.first(), 40 << 10);
        // Classified passes match by signature from now on.
        assert!(!e.note_replay(&diverged, &replayed(&[4096]), true, 8));
    }

    #[test]
    fn a_replay_missing_most_of_its_bytes_fails_though_most_requests_hit() {
        // A prefill on its steps' plan: its few large blocks miss, its small ones hit.
        let mut prefill = PassCounters {
            allocations: 100,
            slab_hits: 90,
            slab_bytes: 90 * 64,
            diverged_bytes: 10 * (192 << 10),
            ..PassCounters::default()
        };
        prefill.misses[crate::stats::MissReason::TooLarge as usize] = 10;
        let e = classes(2048);
        e.published(&signature(&[2256, 3072]), true);
        e.note_replay(&prefill, &Signature::default(), false, 8);
        assert!(e.classed());
    }
}

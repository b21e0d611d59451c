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
//! of that signature (made when new, at most [`Config::max_classes`] per key; past the
//! bound the class whose first size is nearest above, or the largest) profiles or
//! replays the rest of the pass as its own.
//!
//! [`Config::max_classes`]: crate::Config::max_classes

use crate::registry::key_entry::KeyEntry;
use crate::support::sync::{plain, Ordering};

/// Requests above the lane bound whose sizes and alignments make a signature.
pub(crate) const SIGNATURE_REQUESTS: u32 = 1;
/// Requests after which a signature is taken as it stands (a pass of small requests).
pub(crate) const SIGNATURE_WINDOW: u32 = 64;
/// Most classes a key can have (the bound of [`crate::Config::max_classes`]).
pub(crate) const MAX_CLASSES: usize = 16;

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
    signature: plain::AtomicU64,
    /// The first large request of that profile.
    first: plain::AtomicU64,
    /// The key's passes are classified (it has more than its own class).
    classed: plain::AtomicBool,
    /// Set on a class's entry: it is a class of another key.
    is_class: plain::AtomicBool,
    /// The classes beyond the key's own, in the order they were made (written under the
    /// registry's insertion lock, published with Release).
    entries: [plain::AtomicPtr<KeyEntry>; MAX_CLASSES],
}

impl Classes {
    /// The signature of this entry's plan (0: unknown).
    pub(crate) fn signature(&self) -> u64 {
        self.signature.load(Ordering::Relaxed)
    }

    /// Notes the signature of the profile this entry's plan is made from (the first
    /// signature a class or key gets stays its own).
    pub(crate) fn set_signature(&self, s: &Signature) {
        if self
            .signature
            .compare_exchange(0, s.word(), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.first.store(s.first(), Ordering::Relaxed);
        }
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
        self.set_signature(s);
    }

    /// The key's classes beyond its own.
    pub(crate) fn each(&self) -> impl Iterator<Item = &'static KeyEntry> + '_ {
        self.entries.iter().map_while(|e| {
            // SAFETY: class entries are table entries: leaked and never freed.
            unsafe { e.load(Ordering::Acquire).as_ref() }
        })
    }

    /// Number of classes, the key's own included.
    pub(crate) fn count(&self) -> usize {
        1 + self.each().count()
    }

    /// The class of signature `s` among the key's (`own`: the key's entry), if it has one.
    pub(crate) fn find(&self, own: &'static KeyEntry, s: &Signature) -> Option<&'static KeyEntry> {
        let w = s.word();
        if self.signature() == w {
            return Some(own);
        }
        self.each().find(|c| c.classes.signature() == w)
    }

    /// Past the bound: the class whose first large request is the smallest holding `s`'s,
    /// else the one with the largest.
    pub(crate) fn nearest(&self, own: &'static KeyEntry, s: &Signature) -> &'static KeyEntry {
        let first = |e: &KeyEntry| e.classes.first.load(Ordering::Relaxed);
        let all = || std::iter::once(own).chain(self.each());
        all()
            .filter(|&e| first(e) >= s.first())
            .min_by_key(|&e| first(e))
            .or_else(|| all().max_by_key(|&e| first(e)))
            .unwrap_or(own)
    }

    /// Adds `class` as the key's next class; marks the key classed. `false` when the key
    /// has `max` classes already. Under the registry's insertion lock.
    pub(crate) fn add(&self, class: &'static KeyEntry, max: usize) -> bool {
        let max = max.clamp(1, MAX_CLASSES + 1) - 1;
        let Some(slot) = self.entries[..max]
            .iter()
            .find(|e| e.load(Ordering::Relaxed).is_null())
        else {
            return false;
        };
        slot.store(class as *const KeyEntry as *mut KeyEntry, Ordering::Release);
        self.classed.store(true, Ordering::Release);
        true
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
}

//! A key's table of shape classes: the entries of its classes beyond its own (see
//! `classes.rs` for what a class is), found by signature. The table is written under the
//! registry's insertion lock and read without one (entries published with Release).

use crate::registry::classes::{ratio, Signature, CLOSE_RATIO, MAX_CLASSES};
use crate::registry::key_entry::KeyEntry;
use crate::support::sync::Ordering;

impl KeyEntry {
    /// The key's classes beyond its own, in the order they were made.
    pub(crate) fn each_class(&self) -> impl Iterator<Item = &'static KeyEntry> + '_ {
        self.class_entries.iter().map_while(|e| {
            // SAFETY: class entries are table entries: leaked and never freed.
            unsafe { e.load(Ordering::Acquire).as_ref() }
        })
    }

    /// Number of classes, the key's own included.
    pub(crate) fn class_count(&self) -> usize {
        1 + self.each_class().count()
    }

    /// The class of signature `s` among the key's (its own included), if it has one.
    pub(crate) fn find_class(&'static self, s: &Signature) -> Option<&'static KeyEntry> {
        let w = s.word(self.classes.lead());
        if self.classes.signature() == w {
            return Some(self);
        }
        self.each_class().find(|c| c.classes.signature() == w)
    }

    /// The class whose first size is nearest to `s`'s by ratio, when within
    /// [`CLOSE_RATIO`]: the class a jittered signature belongs to.
    pub(crate) fn close_class(&'static self, s: &Signature) -> Option<&'static KeyEntry> {
        let first = s.first(self.classes.lead());
        let apart = |e: &KeyEntry| ratio(e.classes.first(), first);
        std::iter::once(self)
            .chain(self.each_class())
            .filter(|&e| e.classes.signature() != 0 && apart(e) <= CLOSE_RATIO)
            .min_by(|&a, &b| apart(a).total_cmp(&apart(b)))
    }

    /// Past the bound: the class whose first large request is the smallest holding `s`'s,
    /// else the one with the largest.
    pub(crate) fn nearest_class(&'static self, s: &Signature) -> &'static KeyEntry {
        let first = |e: &KeyEntry| e.classes.first();
        let own = s.first(self.classes.lead());
        let all = || std::iter::once(self).chain(self.each_class());
        all()
            .filter(|&e| first(e) >= own)
            .min_by_key(|&e| first(e))
            .or_else(|| all().max_by_key(|&e| first(e)))
            .unwrap_or(self)
    }

    /// Adds `class` as the key's next class; marks the key classed and starts its
    /// divergence window afresh. `false` when the key has `max` classes already. Under
    /// the registry's insertion lock.
    pub(crate) fn add_class(&self, class: &'static KeyEntry, max: usize) -> bool {
        let max = max.clamp(1, MAX_CLASSES + 1) - 1;
        let Some(slot) = self.class_entries[..max]
            .iter()
            .find(|e| e.load(Ordering::Relaxed).is_null())
        else {
            return false;
        };
        slot.store(class as *const KeyEntry as *mut KeyEntry, Ordering::Release);
        self.classes.set_classed();
        // The key's window so far counted passes of every shape on its plan; from now on
        // only its own class's passes replay it.
        self.restart_window();
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

    fn entry(first: u64) -> &'static KeyEntry {
        let e: &'static KeyEntry = Box::leak(KeyEntry::new("classes-test", 0).unwrap());
        e.classes.published(&signature(&[first]), false);
        e
    }

    #[test]
    fn a_jittered_signature_belongs_to_the_class_nearest_by_ratio() {
        let own = entry(40 << 10);
        let wide = entry(72 << 10);
        assert!(own.add_class(wide, 8));
        let near = |first: u64| own.close_class(&signature(&[first]));
        assert!(std::ptr::eq(near(42 << 10).unwrap(), own));
        assert!(std::ptr::eq(near(70 << 10).unwrap(), wide));
        assert!(near(56 << 10).is_none()); // 1.4x from 40 Ki and 1.29x from 72 Ki
        assert!(own.classes.classed());
        assert_eq!(own.class_count(), 2);
    }
}

//! The table of key entries: lookups are lock-free, in a fixed open-addressing table of
//! entries that are never removed (a process has few distinct keys; past [`MAX_KEYS`] a
//! pass runs on the backend).

use std::ptr;

use crate::registry::classes::Signature;
use crate::registry::key_entry::KeyEntry;
use crate::support::hash::FastHasher;
use crate::support::sync::{plain, LockId, Ordering, SpinCell};

/// Most distinct keys.
pub(crate) const MAX_KEYS: usize = 4096;

static TABLE: [plain::AtomicPtr<KeyEntry>; MAX_KEYS] =
    [const { plain::AtomicPtr::new(ptr::null_mut()) }; MAX_KEYS];
/// Guards entry creation.
pub(crate) static INSERT: SpinCell<()> = SpinCell::new(LockId::Registry, ());

fn hash_key(key: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = FastHasher::default();
    h.write(key.as_bytes());
    h.finish()
}

/// The entry of `key`, if it exists.
pub(crate) fn find(key: &str) -> Option<&'static KeyEntry> {
    let hash = hash_key(key);
    let mut i = hash as usize % MAX_KEYS;
    for _ in 0..MAX_KEYS {
        let e = TABLE[i].load(Ordering::Acquire);
        if e.is_null() {
            return None;
        }
        // SAFETY: entries are leaked on insertion and never freed.
        let e = unsafe { &*e };
        if e.hash == hash && &*e.key == key {
            return Some(e);
        }
        i = (i + 1) % MAX_KEYS;
    }
    None
}

/// The entry of `key`, created if needed (with the re-entrancy guard set); `None` when
/// the table is full or memory ran out.
pub(crate) fn entry(key: &str) -> Option<&'static KeyEntry> {
    if let Some(e) = find(key) {
        return Some(e);
    }
    INSERT.with(|()| {
        if let Some(e) = find(key) {
            return Some(e);
        }
        insert(key)
    })
}

/// Inserts a new entry for `key` (under [`INSERT`]).
fn insert(key: &str) -> Option<&'static KeyEntry> {
    let hash = hash_key(key);
    let mut i = hash as usize % MAX_KEYS;
    for _ in 0..MAX_KEYS {
        if TABLE[i].load(Ordering::Acquire).is_null() {
            let e: &'static KeyEntry = Box::leak(KeyEntry::new(key, hash)?);
            TABLE[i].store(e as *const _ as *mut _, Ordering::Release);
            return Some(e);
        }
        i = (i + 1) % MAX_KEYS;
    }
    None
}

/// The class of signature `s` of key `own` (its own, or the one within the close ratio,
/// see `classes.rs`), made (named `<key>#<n>`) when there is none and the key has fewer
/// than `max` classes; `None` past the bound or when memory or the table ran out. With
/// the re-entrancy guard set.
pub(crate) fn class_entry(
    own: &'static KeyEntry,
    s: &Signature,
    max: usize,
) -> Option<&'static KeyEntry> {
    INSERT.with(|()| {
        if let Some(c) = own.find_class(s) {
            return Some(c);
        }
        if let Some(c) = own.close_class(s) {
            return Some(c);
        }
        if own.class_count() >= max {
            return None;
        }
        let mut name = String::new();
        name.try_reserve_exact(own.key.len() + 4).ok()?;
        {
            use std::fmt::Write;
            write!(name, "{}#{}", own.key, own.class_count()).ok()?;
        }
        let c = find(&name).or_else(|| insert(&name))?;
        c.classes.mark_class(s, own.classes.lead());
        own.add_class(c, max).then_some(c)
    })
}

/// Calls `f` for every entry.
pub(crate) fn for_each(mut f: impl FnMut(&'static KeyEntry)) {
    for slot in &TABLE {
        let e = slot.load(Ordering::Acquire);
        if !e.is_null() {
            // SAFETY: entries are leaked and never freed.
            f(unsafe { &*e });
        }
    }
}

/// Lends the blocks of every plan's idle instances that wait to (see `Slabs::lend_idle`).
/// Runs at a pass boundary, with the re-entrancy guard set.
pub(crate) fn lend_idle_blocks() {
    for_each(|e| {
        let (_guard, s) = e.read();
        if !s.is_null() {
            // SAFETY: the read guard keeps a published plan from being freed.
            unsafe { &*s }.lend_idle();
        }
    });
}

/// Plans kept, their instances and pinned instances, and resident bytes, over all keys.
pub(crate) fn totals() -> (u64, u64, u64, u64) {
    let (mut plans, mut slabs, mut pinned, mut bytes) = (0, 0, 0, 0);
    for_each(|e| {
        let (_guard, s) = e.read();
        if !s.is_null() {
            // SAFETY: the read guard keeps a published plan from being freed.
            let s = unsafe { &*s };
            plans += 1;
            slabs += s.instances() as u64;
            pinned += s.pinned() as u64;
            bytes += s.resident_bytes();
        }
    });
    (plans, slabs, pinned, bytes)
}

//! A lock-free stack of chunk runs given back without the region lock: a free pushes the
//! run (its node written in the run's own first bytes); the next carve, under the lock,
//! takes the whole stack at once. Taking everything in one swap means no node is ever
//! popped while another thread reads it, so there is no ABA. A leaf (loom model
//! `run_stack_hands_every_run_over_once`).

use std::ptr;

use crate::support::sync::{AtomicPtr, Ordering, OwnerCell};

/// A run on the stack, written in its own first bytes: the next run and its chunk count.
pub(crate) struct Run {
    link: OwnerCell<(*mut Run, usize)>,
}

/// The stack of runs.
pub(crate) struct RunStack {
    head: AtomicPtr<Run>,
}

impl RunStack {
    /// An empty stack.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> RunStack {
        RunStack {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// An empty stack (loom's atomics are not `const`).
    #[cfg(loom)]
    pub(crate) fn new() -> RunStack {
        RunStack {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Pushes a run of `chunks` chunks whose node lives at `node`.
    ///
    /// # Safety
    /// `node` is valid for writes of a `Run`, aligned, and no one else uses it until it
    /// is taken back by [`RunStack::take_all`].
    pub(crate) unsafe fn push(&self, node: *mut Run, chunks: usize) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let link = OwnerCell::new((head, chunks));
            // SAFETY: the caller gives `node` to the stack; it is not published yet.
            unsafe { node.write(Run { link }) };
            // Release: the node's contents before it is reachable from the head.
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Takes every run pushed so far, newest first, with its chunk count. The runs are
    /// the caller's from then on.
    pub(crate) fn take_all(&self) -> Taken {
        // Acquire: every node pushed before the swap is fully written.
        Taken(self.head.swap(ptr::null_mut(), Ordering::Acquire))
    }
}

/// The runs taken off a [`RunStack`].
pub(crate) struct Taken(*mut Run);

impl Iterator for Taken {
    type Item = (*mut Run, usize);

    fn next(&mut self) -> Option<(*mut Run, usize)> {
        let node = self.0;
        if node.is_null() {
            return None;
        }
        // SAFETY: a node pushed by `push`, written before the Release that published it
        // (paired with `take_all`'s Acquire); taken off the stack, it is ours alone.
        let (next, chunks) = unsafe { (*node).link.with_mut(|l| *l) };
        self.0 = next;
        Some((node, chunks))
    }
}

//! Passes that follow the work: a handle to carry a pass to helper threads, and passes
//! not bound to a thread, for async tasks.
//!
//! # Helper threads
//! [`current`] gives a [`PassHandle`] (`Send + Sync + Clone`) to the pass running on this
//! thread. On any thread, [`PassHandle::enter`]`(id)` (or [`PassHandle::in_scope`]) makes
//! that thread's allocations belong to the pass as *helper context* `id` until the guard
//! drops. Each helper context is its own deterministic sequence in the profile and in the
//! plan, keyed by the `id` the caller gives (a worker or chunk index: never an OS thread
//! id), so replays match however the scheduler interleaves the helpers; its slots never
//! share addresses with another context's (contexts run concurrently). One thread is in a
//! helper context at a time (a second one runs on the backend); entering the same id again
//! later continues its sequence. Frees work from any thread. The pass ends when its owner's
//! guard drops: helpers can no longer enter, those in finish first, and what a helper
//! still holds then is never reused under it.
//!
//! ```
//! let _pass = memo_alloc::pass("model");
//! let handle = memo_alloc::current().expect("inside a pass");
//! std::thread::scope(|s| {
//!     for worker in 0..2 {
//!         let handle = handle.clone();
//!         s.spawn(move || handle.in_scope(worker, || vec![0u8; 4096].len()));
//!     }
//! });
//! ```
//!
//! With rayon, enter in each task, keyed by the task's index (not by the worker thread):
//!
//! ```ignore
//! let handle = memo_alloc::current().unwrap();
//! rayon::scope(|s| for (i, chunk) in chunks.iter().enumerate() {
//!     let h = handle.clone();
//!     s.spawn(move |_| h.in_scope(i, || work(chunk)));
//! });
//! ```
//!
//! # Async tasks
//! A [`Pass`] is owned, not bound to a thread. [`Pass::wrap`] turns a future into one that
//! enters the pass's main context at each `poll`, on whichever thread polls it, and leaves
//! it when `poll` returns (as `tracing::Instrument` does with spans), so two requests
//! interleaved on one worker thread never mix their allocations. The pass ends when the
//! future completes (or is dropped: a cancelled future's pass is abandoned). Between two
//! polls, a pass none of whose slab slots is live gives its slab's memory back, for any
//! pass of any key to use until its next poll; so the slab memory of a service follows
//! the polls that run at once, not the requests in flight.
//!
//! ```
//! # fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     let mut f = std::pin::pin!(f);
//! #     let waker = std::task::Waker::noop();
//! #     loop {
//! #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut std::task::Context::from_waker(&waker)) { return v; }
//! #     }
//! # }
//! async fn infer(x: Vec<f32>) -> f32 {
//!     x.iter().map(|v| v * 2.0).sum()
//! }
//! let y = block_on(memo_alloc::Pass::new("model").wrap(infer(vec![1.0; 64])));
//! assert_eq!(y, 128.0);
//! ```

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context as TaskContext, Poll};

use crate::format::trace::ScopeKind;
use crate::observe::{self as observe_program, ScopeMark};
use crate::pass::PassState;
use crate::pass::{create, end, enter_helper, enter_main, leave, park};
use crate::stats::AbandonReason;
use crate::support::thread;

/// A handle to a running pass, to enter it on other threads (see the module
/// documentation). Holding one does not keep the pass running: once its owner ended it,
/// entering does nothing.
pub struct PassHandle {
    pass: NonNull<PassState>,
}

// SAFETY: the pass is shared through atomics (its contexts are entered by one thread at a
// time, through `pass`), and kept alive by the handle's reference.
unsafe impl Send for PassHandle {}
// SAFETY: as above.
unsafe impl Sync for PassHandle {}

impl PassHandle {
    fn state(&self) -> &PassState {
        // SAFETY: the handle holds a reference: the pass is alive.
        unsafe { self.pass.as_ref() }
    }

    /// Makes this thread's allocations belong to the pass, as helper context `id`, until
    /// the guard drops. Does nothing once the pass has ended.
    pub fn enter(&self, id: usize) -> EnterGuard {
        let id = u32::try_from(id).unwrap_or(u32::MAX);
        let context = thread::with_bookkeeping(|| enter_helper(self.state(), id));
        EnterGuard {
            context,
            recorded: context.and_then(|_| record_enter(self.state())),
            _not_send: PhantomData,
        }
    }

    /// Runs `f` in helper context `id` of the pass (see [`PassHandle::enter`]).
    pub fn in_scope<R>(&self, id: usize, f: impl FnOnce() -> R) -> R {
        let _g = self.enter(id);
        f()
    }

    /// The pass's key (`None` when passes are off).
    pub fn key(&self) -> Option<&str> {
        self.state().entry.map(|e| &*e.key)
    }
}

impl Clone for PassHandle {
    fn clone(&self) -> PassHandle {
        self.state().retain();
        PassHandle { pass: self.pass }
    }
}

impl Drop for PassHandle {
    fn drop(&mut self) {
        if self.state().release() {
            // SAFETY: the last reference; the pass was boxed by `pass::start`.
            thread::with_bookkeeping(|| drop(unsafe { Box::from_raw(self.pass.as_ptr()) }));
        }
    }
}

/// A handle to the pass this thread is in (its current context's pass), if any.
///
/// ```
/// assert!(memo_alloc::current().is_none());
/// let _p = memo_alloc::pass("current-doc");
/// assert_eq!(memo_alloc::current().unwrap().key(), Some("current-doc"));
/// ```
pub fn current() -> Option<PassHandle> {
    let ctx = crate::pass::context::current();
    // SAFETY: a non-null pointer is this thread's current context; its pass is alive.
    let pass = unsafe { ctx.as_ref() }?.pass;
    // SAFETY: as above.
    unsafe { (*pass).retain() };
    Some(PassHandle {
        pass: NonNull::new(pass.cast_mut())?,
    })
}

/// Leaves the context entered by [`PassHandle::enter`] or [`Pass::enter`] when dropped.
/// Not `Send`.
#[must_use = "the context is left when this guard is dropped"]
pub struct EnterGuard {
    context: Option<u64>,
    /// The pass's scope in a whole-program recording, while the guard lives.
    recorded: Option<ScopeMark>,
    _not_send: PhantomData<*mut ()>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        if let Some(serial) = self.context {
            thread::with_bookkeeping(|| leave(serial));
        }
        if let Some(mark) = self.recorded.take() {
            observe_program::exit_scope(mark);
        }
    }
}

/// While a whole-program recording runs, enters the scope of `state`'s pass on this
/// thread, so that what the thread allocates while it works for the pass (as its main or
/// a helper context) is attributed to it, as for [`crate::pass`].
fn record_enter(state: &PassState) -> Option<ScopeMark> {
    if !observe_program::state::recording() {
        return None;
    }
    let key: &'static str = &state.entry?.key;
    observe_program::enter_scope(key, ScopeKind::Pass)
}

/// A pass not bound to a thread: made at [`Pass::new`], entered by whichever thread works
/// for it ([`Pass::enter`], [`Pass::wrap`]), ended when dropped. See the module
/// documentation.
pub struct Pass {
    pass: Option<NonNull<PassState>>,
    cancelled: bool,
}

// SAFETY: as for `PassHandle`; the main context is taken by one thread at a time.
unsafe impl Send for Pass {}
// SAFETY: as above.
unsafe impl Sync for Pass {}

impl Pass {
    /// Starts a pass of `key` (profiled, replayed or on the backend, as `pass()` decides),
    /// entered by no thread yet.
    pub fn new(key: &str) -> Pass {
        let pass = thread::with_bookkeeping(|| create(key));
        Pass {
            pass: pass.and_then(|p| NonNull::new(p.cast_mut())),
            cancelled: false,
        }
    }

    /// Makes this thread's allocations belong to the pass (its main context) until the
    /// guard drops. One thread at a time: while another has it entered, this does nothing.
    pub fn enter(&self) -> EnterGuard {
        let context = self.pass.and_then(|p| {
            // SAFETY: the owner's reference keeps the pass alive.
            thread::with_bookkeeping(|| enter_main(unsafe { p.as_ref() }))
        });
        // SAFETY: as above.
        let recorded = context.and_then(|_| record_enter(unsafe { self.pass?.as_ref() }));
        EnterGuard {
            context,
            recorded,
            _not_send: PhantomData,
        }
    }

    /// Between polls: gives the pass's slab memory back if nothing of it is live (see
    /// `pass::park`; entering takes memory again). `&mut`: no other thread can reach
    /// the pass meanwhile.
    fn park(&mut self) {
        if let Some(p) = self.pass {
            // SAFETY: the owner's reference keeps the pass alive.
            thread::with_bookkeeping(|| park(unsafe { p.as_ref() }));
        }
    }

    /// A handle to carry the pass to helper threads.
    pub fn handle(&self) -> Option<PassHandle> {
        let p = self.pass?;
        // SAFETY: the owner's reference keeps the pass alive.
        unsafe { p.as_ref() }.retain();
        Some(PassHandle { pass: p })
    }

    /// `fut`, entering the pass at each poll (see the module documentation).
    pub fn wrap<F: Future>(self, fut: F) -> InPass<F> {
        InPass {
            fut,
            pass: self,
            done: false,
        }
    }
}

impl Pass {
    /// Ends the pass now (once).
    fn end(&mut self, abandon: Option<AbandonReason>) {
        if let Some(p) = self.pass.take() {
            thread::with_bookkeeping(|| end(p.as_ptr(), abandon));
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let abandon = if std::thread::panicking() {
            Some(AbandonReason::Panic)
        } else {
            self.cancelled.then_some(AbandonReason::Cancelled)
        };
        self.end(abandon);
    }
}

/// A future in a pass: see [`Pass::wrap`].
pub struct InPass<F> {
    // Dropped first: a cancelled future's state goes before its pass ends.
    fut: F,
    pass: Pass,
    done: bool,
}

impl<F: Future> Future for InPass<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        // SAFETY: `fut` is pinned structurally: it is never moved out of `self` (no method
        // gives it out, and `Drop` for `InPass` does not move it); the other fields are
        // not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        let polled = {
            let _in = this.pass.enter();
            fut.poll(cx)
        };
        match polled {
            // Ended at once, not when the future is dropped (which may be much later):
            // its memory serves other passes from now on.
            Poll::Ready(_) => {
                this.done = true;
                this.pass.end(None);
            }
            Poll::Pending => this.pass.park(),
        }
        polled
    }
}

impl<F> Drop for InPass<F> {
    fn drop(&mut self) {
        // Dropped before completing: the pass was cut short.
        self.pass.cancelled = !self.done;
    }
}

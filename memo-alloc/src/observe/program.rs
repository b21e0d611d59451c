//! Recording a whole program (`MEMO_PROFILE`, [`Profiler`]) and counting a thread's heap
//! ([`HeapTracker`]).
//!
//! `MEMO_PROFILE=<path>` is read at the process's first allocation (`getenv`, which does
//! not allocate). The recording runs from there to the end: the trace is written by an
//! `atexit` hook (the end of `main`, or `std::process::exit`), or, on `SIGINT` or
//! `SIGTERM` whose handling was the default when the recording began, by a watcher thread
//! that then ends the process by the same signal. A crash (or `SIGKILL`, or a signal the
//! program handles itself without exiting) loses the recording. A forked child does not
//! record. The watcher is a plain `pthread` started with the recording; the signal handler
//! only writes the signal's number to a pipe.
//!
//! Settings, read with `MEMO_PROFILE` (and by [`ProfilerOptions::from_env`]):
//! `MEMO_PROFILE_BACKTRACE` (`off`, `all`, or the call-site sampling interval in bytes;
//! default 524288: see `sites.rs`) and `MEMO_PROFILE_MAX_BYTES` (the cap on the recording's
//! buffers, default 536870912; past it nothing more is recorded and the trace says it was
//! truncated).

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU8, AtomicUsize, Ordering};

use crate::observe::counts::{self, HeapStats};
use crate::observe::log::{self, ThreadObs};
use crate::observe::state::{self, Options, DEFAULT_CAP_BYTES, DEFAULT_SITE_SAMPLE};
use crate::observe::write::{self, Program};
use crate::support::thread;

/// How a [`Profiler`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProfilerOptions {
    /// Call sites: 0 none, 1 every allocation's, `n` sampled every `n` bytes allocated per
    /// thread (so every allocation of `n` bytes or more). Default 512 KiB.
    pub site_sample_bytes: u64,
    /// The cap on the recording's buffers, in bytes (48 bytes an event, plus sampled
    /// frames). Past it nothing more is recorded; the trace says it was truncated.
    /// Default 512 MiB.
    pub max_bytes: u64,
}

impl Default for ProfilerOptions {
    fn default() -> ProfilerOptions {
        ProfilerOptions {
            site_sample_bytes: DEFAULT_SITE_SAMPLE,
            max_bytes: DEFAULT_CAP_BYTES,
        }
    }
}

impl ProfilerOptions {
    /// The defaults, changed by `MEMO_PROFILE_BACKTRACE` and `MEMO_PROFILE_MAX_BYTES`.
    pub fn from_env() -> ProfilerOptions {
        let mut o = ProfilerOptions::default();
        if let Some(v) = getenv(c"MEMO_PROFILE_BACKTRACE") {
            o.site_sample_bytes = match v {
                b"off" | b"none" | b"0" => 0,
                b"all" | b"1" => 1,
                v => parse_u64(v).unwrap_or(DEFAULT_SITE_SAMPLE),
            };
        }
        if let Some(n) = getenv(c"MEMO_PROFILE_MAX_BYTES").and_then(parse_u64) {
            o.max_bytes = n;
        }
        o
    }

    /// Sets the call-site sampling interval (see [`ProfilerOptions::site_sample_bytes`]).
    pub fn with_site_sample_bytes(mut self, bytes: u64) -> ProfilerOptions {
        self.site_sample_bytes = bytes;
        self
    }

    /// Sets the cap on the recording's buffers.
    pub fn with_max_bytes(mut self, bytes: u64) -> ProfilerOptions {
        self.max_bytes = bytes;
        self
    }

    fn state(self) -> Options {
        Options {
            site_sample: self.site_sample_bytes,
            cap_bytes: self.max_bytes,
        }
    }
}

/// An environment variable's bytes, read without allocating.
fn getenv(name: &std::ffi::CStr) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated; the value lives as long as the environment is not
    // changed, and is copied or parsed at once.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null result of getenv is a NUL-terminated string.
    let bytes = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
    (!bytes.is_empty()).then_some(bytes)
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

/// Records every allocation of every thread until dropped (**contract**); the drop writes
/// the trace (a `memomalloc-trace` every `memo` subcommand reads). One recording runs at a
/// time: a profiler started while another records (or `MEMO_PROFILE` does) records nothing.
///
/// What runs on the allocation path while it records: a thread's first request after the
/// start (or each thread's first, from then on) makes it *observed*; each request of an
/// observed thread is served as it would be and then logged (48 bytes, a sequence number
/// and the monotonic clock), with its call site when sampled. Replayed passes are served by
/// the backend while a recording runs, so that every free is seen. A pass already running
/// on another thread when the recording starts is recorded from its end.
#[must_use = "the recording is written when the profiler is dropped"]
pub struct Profiler {
    path: Option<PathBuf>,
}

impl Profiler {
    /// Starts recording to `path`, with [`ProfilerOptions::from_env`].
    pub fn start(path: impl AsRef<Path>) -> Profiler {
        Profiler::start_with(path, ProfilerOptions::from_env())
    }

    /// Starts recording to `path` with `options`.
    pub fn start_with(path: impl AsRef<Path>, options: ProfilerOptions) -> Profiler {
        let started = thread::with_bookkeeping(|| state::begin(options.state()));
        Profiler {
            path: started.then(|| path.as_ref().to_path_buf()),
        }
    }

    /// Whether this profiler records (no other recording was running).
    pub fn is_recording(&self) -> bool {
        self.path.is_some()
    }

    /// Stops and writes the trace now; what it wrote, or why it could not.
    pub fn finish(mut self) -> Result<Written, String> {
        match self.path.take() {
            Some(path) => write_recording(&path),
            None => Err("this profiler was not recording".into()),
        }
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            if let Err(e) = write_recording(&path) {
                eprintln!("memomalloc: {e}");
            }
        }
    }
}

/// What a recording's trace holds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// The file.
    pub path: PathBuf,
    /// Allocations recorded (realloc calls included).
    pub allocations: u64,
    /// Threads that allocated.
    pub threads: u64,
    /// Events (the trace's final time).
    pub events: u64,
    /// Whether the recording stopped at its cap.
    pub truncated: bool,
}

/// Stops the running recording and writes its trace to `path`.
fn write_recording(path: &Path) -> Result<Written, String> {
    thread::with_bookkeeping(|| {
        if !state::stop() {
            return Err("no whole-program recording runs".into());
        }
        let threads: Vec<&mut ThreadObs> = log::threads()
            .into_iter()
            // SAFETY: listed states are never freed; the recording is stopped, and the
            // threads that were inside an append are waited for (or left out).
            .map(|p| unsafe { &mut *p })
            .collect();
        let ready: Vec<&ThreadObs> = threads
            .iter()
            .filter(|t| t.quiesce(1 << 20))
            .map(|t| &**t)
            .collect();
        let trace = write::build(&ready, program_info());
        let result = crate::format::files::write_trace(path, &trace).map(|_| Written {
            path: path.to_path_buf(),
            allocations: trace.allocations.len() as u64,
            threads: trace
                .recording
                .as_ref()
                .map_or(0, |r| r.threads.len() as u64),
            events: trace.events,
            truncated: trace
                .recording
                .as_ref()
                .and_then(|r| r.program.as_ref())
                .is_some_and(|p| p.truncated),
        });
        drop(trace);
        for t in threads {
            if t.quiesce(1 << 20) {
                t.clear_log();
            }
        }
        state::finish_writing();
        result.map_err(|e| format!("cannot write the profile to {}: {e}", path.display()))
    })
}

/// The program's name, id and command line, and the recording's figures.
fn program_info() -> Program {
    let command = std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let key = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "program".into());
    let (truncated, dropped) = state::losses();
    Program {
        key,
        pid: std::process::id() as u64,
        command,
        start_ns: state::start_ns(),
        end_ns: state::now_ns(),
        site_sample: state::site_sample(),
        truncated,
        dropped,
    }
}

/// The path `MEMO_PROFILE` named, copied at the first allocation.
struct EnvPath(UnsafeCell<[u8; 4096]>);
// SAFETY: written once by the thread that wins `INIT` before it publishes `PATH_LEN`
// (Release), read only after (Acquire).
unsafe impl Sync for EnvPath {}
static ENV_PATH: EnvPath = EnvPath(UnsafeCell::new([0; 4096]));
static PATH_LEN: AtomicUsize = AtomicUsize::new(0);
static INIT: AtomicU8 = AtomicU8::new(0);

/// Reads `MEMO_PROFILE` once (see the module documentation); begins the recording, its
/// exit hook, signal handlers and watcher when set.
pub(crate) fn init_from_env() {
    if INIT.load(Ordering::Acquire) != 0
        || INIT
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        return;
    }
    let Some(path) = getenv(c"MEMO_PROFILE").filter(|p| p.len() < 4096) else {
        return;
    };
    // SAFETY: this thread won `INIT`: the only writer, before `PATH_LEN` is published.
    unsafe { (&mut *ENV_PATH.0.get())[..path.len()].copy_from_slice(path) };
    PATH_LEN.store(path.len(), Ordering::Release);
    if !state::begin(ProfilerOptions::from_env().state()) {
        return;
    }
    // SAFETY: registering C callbacks that do not unwind.
    unsafe {
        libc::atexit(write_at_exit);
        libc::pthread_atfork(None, None, Some(forget_in_child));
    }
    watch_signals();
}

/// The path `MEMO_PROFILE` named.
fn env_path() -> Option<PathBuf> {
    let len = PATH_LEN.load(Ordering::Acquire);
    if len == 0 {
        return None;
    }
    // SAFETY: published with `PATH_LEN` (see `EnvPath`).
    let bytes = unsafe { &(&*ENV_PATH.0.get())[..len] };
    Some(PathBuf::from(std::ffi::OsStr::new(
        std::str::from_utf8(bytes).unwrap_or("memo-profile.trace.json"),
    )))
}

/// Writes the `MEMO_PROFILE` recording, once, saying so on standard error.
fn write_env_recording() {
    let Some(path) = env_path() else { return };
    if !state::active() {
        return;
    }
    match write_recording(&path) {
        Ok(w) => eprintln!(
            "memomalloc: whole-program profile written to {} ({} allocations, {} threads{})",
            w.path.display(),
            w.allocations,
            w.threads,
            if w.truncated {
                ", truncated at its cap"
            } else {
                ""
            }
        ),
        Err(e) => eprintln!("memomalloc: {e}"),
    }
}

extern "C" fn write_at_exit() {
    write_env_recording();
}

extern "C" fn forget_in_child() {
    state::forget_in_child();
    PIPE_WRITE.store(-1, Ordering::Relaxed);
}

static PIPE_READ: AtomicI32 = AtomicI32::new(-1);
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
static PID: AtomicI32 = AtomicI32::new(0);

/// Handles `SIGINT` and `SIGTERM` (where their handling is the default) by a watcher
/// thread that writes the recording and ends the process by the same signal.
fn watch_signals() {
    let mut fds = [-1i32; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    PIPE_READ.store(fds[0], Ordering::Relaxed);
    PIPE_WRITE.store(fds[1], Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    let mut tid: libc::pthread_t = 0;
    // SAFETY: a new detached thread running `watcher`, which takes no argument.
    let started = unsafe {
        libc::pthread_create(&mut tid, std::ptr::null(), watcher, std::ptr::null_mut()) == 0
            && libc::pthread_detach(tid) == 0
    };
    if !started {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction with a zeroed, then filled struct; the handler is async-signal
        // safe (getpid, write, signal, raise).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_signal as *const () as usize;
            new.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_WRITE.load(Ordering::Relaxed);
    // SAFETY: async-signal-safe calls only.
    unsafe {
        if fd < 0 || libc::getpid() != PID.load(Ordering::Relaxed) {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
            return;
        }
        let b = sig as u8;
        libc::write(fd, (&b as *const u8).cast(), 1);
    }
}

extern "C" fn watcher(_: *mut libc::c_void) -> *mut libc::c_void {
    let fd = PIPE_READ.load(Ordering::Relaxed);
    let mut b = 0u8;
    loop {
        // SAFETY: reads one byte into `b`.
        let n = unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
        if n == 1 {
            break;
        }
        if n == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return std::ptr::null_mut();
        }
    }
    write_env_recording();
    while !state::idle() {
        std::thread::sleep(std::time::Duration::from_millis(10)); // another writer's turn
    }
    // SAFETY: restores the default action and ends the process by the signal received.
    unsafe {
        libc::signal(b as libc::c_int, libc::SIG_DFL);
        libc::kill(libc::getpid(), b as libc::c_int);
    }
    std::ptr::null_mut()
}

/// Counts this thread's heap until dropped (**contract**): see [`HeapStats`] for what
/// counts against it. Trackers nest, may be dropped in any order, and are per thread, so
/// tests that run in parallel in one process each count their own. Not `Send`.
///
/// While a tracker is open its thread is observed: each of its requests is served as it
/// would be, then counted (a table insert or remove on the thread's own table).
#[must_use = "the tracker stops counting when dropped"]
pub struct HeapTracker {
    index: Option<usize>,
    _not_send: PhantomData<*mut ()>,
}

impl HeapTracker {
    /// Starts counting this thread's heap.
    pub fn start() -> HeapTracker {
        let index = thread::with_bookkeeping(|| log::this_thread()?.counting.open());
        if index.is_some() {
            thread::count_heap(1);
        }
        HeapTracker {
            index,
            _not_send: PhantomData,
        }
    }

    /// What this tracker counted so far.
    pub fn stats(&self) -> HeapStats {
        let Some(i) = self.index else {
            return HeapStats::default();
        };
        thread::with_bookkeeping(|| {
            log::this_thread().map_or_else(HeapStats::default, |o| o.counting.tracker(i))
        })
    }
}

impl Drop for HeapTracker {
    fn drop(&mut self) {
        if let Some(i) = self.index {
            thread::with_bookkeeping(|| {
                if let Some(o) = log::this_thread() {
                    o.counting.close(i);
                }
            });
            thread::count_heap(-1);
        }
    }
}

/// This thread's heap counters, over the time it was observed (a tracker open, or a
/// whole-program recording).
pub fn thread_heap() -> HeapStats {
    thread::with_bookkeeping(|| {
        log::this_thread().map_or_else(HeapStats::default, |o| o.counting.thread())
    })
}

/// The process's heap counters: every block counted on any observed thread.
pub fn process_heap() -> HeapStats {
    counts::process()
}

//! Helpers shared by the integration tests: running one test of this binary in a child
//! process (each child has its own configuration and registry), bounded waits, and the
//! difference a run of passes makes to a key's report.

#![allow(dead_code)]

mod backend;

use std::process::Command;
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use backend::{Backend, BACKEND_ENV};

/// Whether this process is a child started by [`run_child`].
pub fn is_child() -> bool {
    std::env::var_os("MEMO_TEST_CHILD").is_some()
}

/// The command that runs the ignored test `name` of this binary in a child process, with
/// no `MEMO_*` variable of the caller's but the backend's ([`BACKEND_ENV`]): the child's
/// configuration is what the test says, not the caller's environment.
pub fn child_command(name: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([
        "--ignored",
        "--exact",
        name,
        "--test-threads=1",
        "--nocapture",
    ])
    .env("MEMO_TEST_CHILD", "1");
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("MEMO_")
            && var != "MEMO_TEST_CHILD"
            && var != BACKEND_ENV
        {
            cmd.env_remove(var);
        }
    }
    cmd
}

/// Runs the ignored test `name` of this binary in a child process with `env` set (see
/// [`child_command`]), and asserts it passed. Returns the child's stderr.
pub fn run_child(name: &str, env: &[(&str, &str)]) -> String {
    let mut cmd = child_command(name);
    // Plans are made before the profiled pass's guard returns (deterministic counts),
    // unless the test says otherwise.
    cmd.env("MEMO_PLANNER", "inline");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child {name} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stderr
}

/// Makes this process plan profiles inline (before a profiled pass's guard returns), so
/// that a test can count on the next pass of a key replaying. Call it first in every
/// test of a binary that relies on that: the first call fixes the configuration.
pub fn inline_planner() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut c = memo_alloc::Config::from_env();
        c.planner = memo_alloc::Planner::Inline;
        memo_alloc::configure(c);
    });
    assert_eq!(
        memo_alloc::config::config().planner,
        memo_alloc::Planner::Inline,
        "a pass ran before the test fixed its configuration"
    );
}

/// [`inline_planner`], then the test binary's serial lock: tests of one binary run in
/// parallel, and those that read process-wide counters take this lock so that the
/// counters they read are their own.
pub fn serial_inline() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    inline_planner();
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh, empty directory for one scenario of this test process.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("memo-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

/// `waitpid`, killing the child if it has not exited after `secs` seconds (a hang guard,
/// not a timing assertion: a hung child is a failure either way). Returns the status.
pub fn wait_bounded(pid: libc::pid_t, secs: u64) -> Result<i32, String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Ok(status);
        }
        if r != 0 {
            return Err(format!("waitpid failed: {r}"));
        }
        if Instant::now() > deadline {
            // SAFETY: killing and reaping our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(format!("the child hung for {secs} s (deadlocked?)"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Peak resident set size of this process so far, in bytes (`getrusage`).
pub fn max_rss_bytes() -> u64 {
    // SAFETY: getrusage fills the struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as u64 * 1024
}

/// Resident set size of this process right now, in bytes (`/proc/self/statm`).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Runs `f` (passes of `key`) and returns the key's report before and after.
pub fn delta(key: &str, f: impl FnOnce()) -> (memo_alloc::PassReport, memo_alloc::PassReport) {
    let before = memo_alloc::report(key).unwrap_or_default();
    f();
    (before, memo_alloc::report(key).expect("a pass ran"))
}

/// Slab hits between the two reports of a [`delta`].
pub fn hits(d: &(memo_alloc::PassReport, memo_alloc::PassReport)) -> u64 {
    d.1.slab_hits - d.0.slab_hits
}

//! `MEMO_TRACE_DIR` output and `MEMO_PLAN_DIR` input.
//!
//! Each profiled pass writes `<key>.<n>.trace.json` and `<key>.<n>.plan.json`, where `<key>`
//! is the pass key with characters other than ASCII letters, digits, `-`, `_` and `.`
//! replaced by `_`, and `<n>` counts the key's profiled passes in this process (from 1).
//! Plans are loaded from every `*.plan.json` in the plan directory; when a key has several,
//! the one written last (highest `<n>`, then name order) wins.

use std::path::Path;

use crate::format::trace::{PlanFile, Trace, FORMAT_VERSION, PLAN_FORMAT};
use crate::stats::PlanRejection;
use crate::support::sync::{plain::AtomicU64, Ordering};

static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// The file-name form of a key.
pub fn file_stem(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes a pass's trace and plan as `<stem>.<serial>.*.json` (`serial`: the pass's number
/// among its key's profiled passes; a process-wide counter for keys without an entry);
/// errors are reported on stderr, never fatal.
pub(crate) fn write_pass(dir: &Path, trace: &Trace, plan: &PlanFile, serial: Option<u64>) {
    let n = serial.unwrap_or_else(|| WRITTEN.fetch_add(1, Ordering::Relaxed) + 1);
    let stem = file_stem(&trace.key);
    let result = std::fs::create_dir_all(dir).and_then(|_| {
        write_json(&dir.join(format!("{stem}.{n}.trace.json")), trace)?;
        write_json(&dir.join(format!("{stem}.{n}.plan.json")), plan)
    });
    if let Err(e) = result {
        eprintln!(
            "memomalloc: cannot write the trace of {:?} to {}: {e}",
            trace.key,
            dir.display()
        );
    }
}

/// Writes a trace to `path` (through a temporary file beside it, renamed when complete).
pub(crate) fn write_trace(path: &Path, trace: &Trace) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    write_json(path, trace)
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    serde_json::to_writer(file, value).map_err(std::io::Error::other)?;
    std::fs::rename(&tmp, path)
}

/// Reads a trace written by a profiled pass or a whole-program recording (any version
/// this build reads: see [`crate::trace::TRACE_VERSION`]).
pub fn read_trace(path: &Path) -> Result<Trace, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let trace: Trace =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if trace.format != crate::format::trace::TRACE_FORMAT
        || !crate::format::trace::trace_version_supported(trace.version)
    {
        return Err(format!(
            "{}: format {:?} version {} is not a memomalloc trace version {} to {}",
            path.display(),
            trace.format,
            trace.version,
            FORMAT_VERSION,
            crate::format::trace::TRACE_VERSION
        ));
    }
    trace
        .check()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(trace)
}

/// Reads and checks a plan document.
pub fn read_plan(path: &Path) -> Result<PlanFile, String> {
    read_plan_checked(path).map_err(|(_, e)| e)
}

/// Plan files larger than this are rejected unread (a plan of the largest size a slab
/// table accepts is far smaller).
const MAX_PLAN_FILE_BYTES: u64 = 1 << 30;

/// Reads a plan document and checks it; on failure, why and a message naming the file.
pub(crate) fn read_plan_checked(path: &Path) -> Result<PlanFile, (PlanRejection, String)> {
    let fail = |why, e: &dyn std::fmt::Display| (why, format!("{}: {e}", path.display()));
    let len = std::fs::metadata(path)
        .map_err(|e| fail(PlanRejection::Unreadable, &e))?
        .len();
    if len > MAX_PLAN_FILE_BYTES {
        let msg = format!("{len} bytes exceed the {MAX_PLAN_FILE_BYTES}-byte limit");
        return Err(fail(PlanRejection::Invalid, &msg));
    }
    let mut text = Vec::new();
    text.try_reserve_exact(len as usize)
        .map_err(|e| fail(PlanRejection::Unreadable, &e))?;
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut text))
        .map_err(|e| fail(PlanRejection::Unreadable, &e))?;
    let plan: PlanFile =
        serde_json::from_slice(&text).map_err(|e| fail(PlanRejection::Malformed, &e))?;
    if plan.format != PLAN_FORMAT || plan.version != FORMAT_VERSION {
        let msg = format!(
            "format {:?} version {} is not a memomalloc plan version {FORMAT_VERSION}",
            plan.format, plan.version
        );
        return Err(fail(PlanRejection::Unsupported, &msg));
    }
    plan.check().map_err(|e| fail(PlanRejection::Invalid, &e))?;
    Ok(plan)
}

/// The plan files of `dir` in load order: every `*.plan.json`, by the serial number in
/// its name, then by name (so when a key has several, the one written last wins).
pub(crate) fn plan_files(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".plan.json"))
        .collect();
    let serial = |p: &Path| -> u64 {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = name.trim_end_matches(".plan.json");
        stem.rsplit('.')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    paths.sort_by(|a, b| serial(a).cmp(&serial(b)).then_with(|| a.cmp(b)));
    Ok(paths)
}

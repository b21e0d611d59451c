//! `memo export`: a trace for other tools (DHAT viewer, Perfetto, CSV planners, flame
//! graph tools, pprof).

use std::path::Path;

use memo_alloc::trace::Trace;
use memo_planner::text::thousands;
use memomalloc::study::{dhat, folded, perfetto, pprof, to_csv};
use serde_json::Value;

use crate::failure::Failure;
use crate::input::load_trace;
use crate::output::{compact_json, emit, write_file};

/// The files `memo export` writes (at least one).
#[derive(Clone, Copy, Debug, Default)]
pub struct Outputs<'a> {
    /// The DHAT JSON file.
    pub dhat: Option<&'a Path>,
    /// The Chrome trace-event JSON file.
    pub perfetto: Option<&'a Path>,
    /// The planner problem as CSV.
    pub csv: Option<&'a Path>,
    /// The folded stacks.
    pub folded: Option<&'a Path>,
    /// The flame graph SVG.
    pub flamegraph: Option<&'a Path>,
    /// The pprof heap profile.
    pub pprof: Option<&'a Path>,
}

/// `memo export`: writes each requested file and says what it holds; `largest` is the
/// number of allocations marked in the Perfetto file.
pub fn export(path: &Path, outputs: Outputs, largest: usize) -> Result<(), Failure> {
    if outputs.dhat.is_none()
        && outputs.perfetto.is_none()
        && outputs.csv.is_none()
        && outputs.folded.is_none()
        && outputs.flamegraph.is_none()
        && outputs.pprof.is_none()
    {
        return Err(Failure::Usage {
            subcommand: "export",
            message:
                "nothing to export: give --dhat, --perfetto, --csv, --folded, --flamegraph and/or \
                 --pprof"
                    .into(),
        });
    }
    let trace = load_trace(path)?;
    let mut said = String::new();
    if let Some(out) = outputs.dhat {
        said.push_str(&write_dhat(path, &trace, out)?);
    }
    if let Some(out) = outputs.perfetto {
        said.push_str(&write_perfetto(&trace, out, largest)?);
    }
    if let Some(out) = outputs.csv {
        said.push_str(&write_csv(&trace, out)?);
    }
    if let Some(out) = outputs.folded {
        said.push_str(&write_folded(&trace, out)?);
    }
    if let Some(out) = outputs.flamegraph {
        said.push_str(&write_flamegraph(&trace, out)?);
    }
    if let Some(out) = outputs.pprof {
        said.push_str(&write_pprof(&trace, out)?);
    }
    emit(None, &said)
}

/// Writes `doc` to `path` as compact JSON.
fn write_json(path: &Path, doc: &Value) -> Result<(), Failure> {
    write_file(path, compact_json(doc)?.as_bytes())
}

/// Writes the DHAT file; returns the line that says what it holds.
fn write_dhat(path: &Path, trace: &Trace, out: &Path) -> Result<String, Failure> {
    let cmd = format!("memomalloc pass {} ({})", trace.key, path.display());
    let doc = dhat::to_dhat(trace, &cmd);
    write_json(out, &doc)?;
    let pps = doc["pps"].as_array().map_or(0, Vec::len);
    Ok(format!(
        "dhat      {}: {} program points, {} frames (open it in valgrind's dh_view.html)\n",
        out.display(),
        thousands(pps as u64),
        thousands(doc["ftbl"].as_array().map_or(0, Vec::len) as u64)
    ))
}

/// Writes the Perfetto file; returns the line that says what it holds.
fn write_perfetto(trace: &Trace, out: &Path, largest: usize) -> Result<String, Failure> {
    let doc = perfetto::to_perfetto(trace, largest);
    write_json(out, &doc)?;
    let n = doc["traceEvents"].as_array().map_or(0, Vec::len);
    Ok(format!(
        "perfetto  {}: {} trace events (open it in ui.perfetto.dev or chrome://tracing)\n",
        out.display(),
        thousands(n as u64)
    ))
}

/// Writes the CSV problem; returns the line that says what it holds.
fn write_csv(trace: &Trace, out: &Path) -> Result<String, Failure> {
    let csv = to_csv(trace);
    write_file(out, csv.as_bytes())?;
    Ok(format!(
        "csv       {}: {} buffers (minimalloc convention)\n",
        out.display(),
        thousands(csv.lines().count().saturating_sub(1) as u64)
    ))
}

/// Writes the folded stacks; returns the line that says what it holds.
fn write_folded(trace: &Trace, out: &Path) -> Result<String, Failure> {
    let text = folded::to_folded(trace);
    write_file(out, text.as_bytes())?;
    Ok(format!(
        "folded    {}: {} stacks (feed it to inferno-flamegraph or flamegraph.pl)\n",
        out.display(),
        thousands(text.lines().count() as u64)
    ))
}

/// Writes the flame graph SVG; returns the line that says what it holds.
fn write_flamegraph(trace: &Trace, out: &Path) -> Result<String, Failure> {
    let title = format!("{}: allocated bytes by stack", trace.key);
    let svg = folded::to_flamegraph(trace, &title)
        .map_err(|e| Failure::BadFile(format!("{}: {e}", out.display())))?;
    write_file(out, &svg)?;
    Ok(format!(
        "flamegraph {}: allocated bytes by stack (open it in a browser)\n",
        out.display()
    ))
}

/// Writes the pprof heap profile; returns the line that says what it holds.
fn write_pprof(trace: &Trace, out: &Path) -> Result<String, Failure> {
    let profile = pprof::to_profile(trace);
    write_file(out, &pprof::encode(&profile))?;
    Ok(format!(
        "pprof     {}: {} stacks, {} frames (go tool pprof -top {})\n",
        out.display(),
        thousands(profile.sample.len() as u64),
        thousands(profile.location.len() as u64),
        out.display()
    ))
}

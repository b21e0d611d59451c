//! `memo export`: a recorded pass for other tools (DHAT viewer, Perfetto, CSV planners).

use std::path::Path;

use memo_planner::text::thousands;
use memomalloc::study::{dhat, perfetto, to_csv};
use serde_json::Value;

use crate::input::load_trace;
use crate::output::{emit, write_file};

/// Writes `doc` to `path` as compact JSON.
fn write_json(path: &Path, doc: &Value) -> Result<(), String> {
    let text = serde_json::to_string(doc).map_err(|e| e.to_string())?;
    write_file(path, text.as_bytes())
}

/// `memo export`: writes each requested file and says what it holds.
pub fn export(
    path: &Path,
    dhat_out: Option<&Path>,
    perfetto_out: Option<&Path>,
    csv_out: Option<&Path>,
    largest: usize,
) -> Result<(), String> {
    if dhat_out.is_none() && perfetto_out.is_none() && csv_out.is_none() {
        return Err("nothing to export: give --dhat, --perfetto and/or --csv".into());
    }
    let trace = load_trace(path)?;
    let mut said = String::new();
    if let Some(out) = dhat_out {
        let cmd = format!("memomalloc pass {} ({})", trace.key, path.display());
        let doc = dhat::to_dhat(&trace, &cmd);
        write_json(out, &doc)?;
        let pps = doc["pps"].as_array().map_or(0, Vec::len);
        said.push_str(&format!(
            "dhat      {}: {} program points, {} frames (open it in valgrind's dh_view.html)\n",
            out.display(),
            thousands(pps as u64),
            thousands(doc["ftbl"].as_array().map_or(0, Vec::len) as u64)
        ));
    }
    if let Some(out) = perfetto_out {
        let doc = perfetto::to_perfetto(&trace, largest);
        write_json(out, &doc)?;
        let n = doc["traceEvents"].as_array().map_or(0, Vec::len);
        said.push_str(&format!(
            "perfetto  {}: {} trace events (open it in ui.perfetto.dev or chrome://tracing)\n",
            out.display(),
            thousands(n as u64)
        ));
    }
    if let Some(out) = csv_out {
        let csv = to_csv(&trace);
        write_file(out, csv.as_bytes())?;
        said.push_str(&format!(
            "csv       {}: {} buffers (minimalloc convention)\n",
            out.display(),
            thousands(csv.lines().count().saturating_sub(1) as u64)
        ));
    }
    emit(None, &said)
}

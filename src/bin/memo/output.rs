//! Where a command's results go: standard output or a file.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::failure::Failure;

/// Writes `text` to `output`, or to standard output.
pub fn emit(output: Option<&Path>, text: &str) -> Result<(), Failure> {
    match output {
        Some(path) => write_file(path, text.as_bytes()),
        None => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`memo ... | head`) is not an error worth a message.
            let _ = out.write_all(text.as_bytes());
            Ok(())
        }
    }
}

/// Writes `bytes` to the file `path`; the error names the file.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes)
        .map_err(|e| Failure::BadFile(format!("{}: cannot write: {e}", path.display())))
}

/// `doc` as compact JSON text.
pub fn compact_json(doc: &Value) -> Result<String, Failure> {
    serde_json::to_string(doc).map_err(internal)
}

/// `doc` as indented JSON text ending in a newline.
pub fn pretty_json(doc: &Value) -> Result<String, Failure> {
    let mut text = serde_json::to_string_pretty(doc).map_err(internal)?;
    text.push('\n');
    Ok(text)
}

/// `fields` (an object) as indented JSON, after the paths of the files it was read from
/// (`inputs`: each field's name and path).
pub fn pretty_json_after_inputs(
    inputs: &[(&str, &Path)],
    fields: &impl serde::Serialize,
) -> Result<String, Failure> {
    let mut doc = serde_json::Map::new();
    for (name, path) in inputs {
        doc.insert((*name).into(), Value::from(path.display().to_string()));
    }
    if let Value::Object(m) = serde_json::to_value(fields).map_err(internal)? {
        doc.extend(m);
    }
    pretty_json(&Value::Object(doc))
}

/// A document that does not serialise: the result failed.
fn internal(e: serde_json::Error) -> Failure {
    Failure::Failed(format!("internal error: cannot write JSON: {e}"))
}

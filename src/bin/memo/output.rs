//! Where a command's results go: standard output or a file.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

/// Writes `text` to `output`, or to standard output.
pub fn emit(output: Option<&Path>, text: &str) -> Result<(), String> {
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
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// `doc` as indented JSON text ending in a newline.
pub fn pretty_json(doc: &Value) -> Result<String, String> {
    let mut text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

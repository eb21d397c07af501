//! Writing the commands' JSON reports and records.

use std::path::Path;

use anyhow::{Context, Result};

/// Writes `doc` as pretty JSON with a final newline, naming the file on failure.
pub fn write_json(path: &Path, doc: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(doc)?;
    std::fs::write(path, text + "\n").with_context(|| format!("{}: cannot write", path.display()))
}

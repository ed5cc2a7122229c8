//! [`Repair`]: a torn last line — what a crash in the middle of an append leaves — cut off a
//! JSON Lines file the orchestrator writes (the ledger, the archive), and noted beside it.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{TasksError, now_rfc3339};

/// A torn last line found and cut off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The file repaired.
    pub file: PathBuf,
    /// The torn line's number, from 1.
    pub line: u64,
    /// Where the torn bytes started (the file's length now).
    pub offset: u64,
    /// The torn bytes, lossily as text.
    pub torn: String,
    /// The file the note was appended to: `<file>.repairs.jsonl`.
    pub note: PathBuf,
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "repaired {}: cut off the torn line {} (from byte {}, {} byte(s), noted in {})",
            self.file.display(),
            self.line,
            self.offset,
            self.torn.len(),
            self.note.display()
        )
    }
}

/// Where the whole lines of `bytes` end: after the last newline (0 when there is none).
pub(super) fn whole(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)
}

/// When `bytes` (the content of `file`, open for writing) end in a line without its newline,
/// notes it in `<path>.repairs.jsonl` and cuts it off.
///
/// # Errors
///
/// The note or the cut cannot be written.
pub(super) fn cut_torn_tail(
    path: &Path,
    file: &File,
    bytes: &[u8],
) -> Result<Option<Repair>, TasksError> {
    let offset = whole(bytes);
    if offset == bytes.len() {
        return Ok(None);
    }
    let line = bytes[..offset].iter().filter(|b| **b == b'\n').count() as u64 + 1;
    let note_path = PathBuf::from(format!("{}.repairs.jsonl", path.display()));
    let torn = String::from_utf8_lossy(&bytes[offset..]).into_owned();
    let note = serde_json::json!({
        "repaired_at": now_rfc3339(),
        "file": path.display().to_string(),
        "line": line,
        "offset": offset,
        "torn": torn,
        "action": "cut off the torn last line (a crash in the middle of an append)",
    });
    let mut notes = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&note_path)
        .map_err(TasksError::io(&note_path))?;
    writeln!(notes, "{note}")
        .and_then(|()| notes.sync_data())
        .map_err(TasksError::io(&note_path))?;
    file.set_len(offset as u64)
        .and_then(|()| file.sync_data())
        .map_err(TasksError::io(path))?;
    tracing::warn!(file = %path.display(), line, offset, "repaired a torn last line");
    Ok(Some(Repair {
        file: path.to_owned(),
        line,
        offset: offset as u64,
        torn,
        note: note_path,
    }))
}

//! [`latest`]: the surgical read — the latest ledger line of each task asked for, reading the
//! ledger backwards from its end and stopping once every task is found, so the cost depends on
//! how far back the answers are, not on the ledger's length.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

use super::{Line, TasksError};

/// How much is read per step backwards.
const CHUNK: u64 = 64 * 1024;

/// The answer of [`latest`].
#[derive(Debug, Clone, Default)]
pub struct Latest {
    /// The latest line of each task found, by id.
    pub lines: BTreeMap<String, Line>,
    /// Bytes read from the ledger to find them.
    pub bytes_read: u64,
}

/// The latest line of each of `ids` (every task in the ledger when `ids` is empty: then the
/// whole ledger is read). A torn or foreign line is skipped. Takes no lock: the writer only
/// appends whole lines.
///
/// # Errors
///
/// The ledger does not exist ([`TasksError::NoLedger`]) or cannot be read.
pub fn latest(ledger: &Path, ids: &[String]) -> Result<Latest, TasksError> {
    let mut file = File::open(ledger).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => TasksError::NoLedger(ledger.to_owned()),
        _ => TasksError::io(ledger)(e),
    })?;
    let io = TasksError::io;
    let mut end = file.metadata().map_err(io(ledger))?.len();
    let mut wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    let everything = wanted.is_empty();
    let mut out = Latest::default();
    // Bytes of a line that began before the chunk just read (its end is in `carry`).
    let mut carry: Vec<u8> = Vec::new();
    while end > 0 && (everything || !wanted.is_empty()) {
        let start = end.saturating_sub(CHUNK);
        let mut chunk = vec![0; (end - start) as usize];
        file.seek(SeekFrom::Start(start)).map_err(io(ledger))?;
        file.read_exact(&mut chunk).map_err(io(ledger))?;
        out.bytes_read += chunk.len() as u64;
        chunk.extend_from_slice(&carry);
        // The first line of the chunk may be cut unless the chunk starts the file.
        let first = if start == 0 {
            0
        } else {
            match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => i + 1,
                None => chunk.len(),
            }
        };
        for raw in chunk[first..].rsplit(|b| *b == b'\n') {
            take(raw, &mut wanted, everything, &mut out);
        }
        carry = chunk[..first].to_vec();
        end = start;
    }
    if !carry.is_empty() {
        take(&carry.clone(), &mut wanted, everything, &mut out);
    }
    Ok(out)
}

fn take(raw: &[u8], wanted: &mut BTreeSet<&str>, everything: bool, out: &mut Latest) {
    if raw.is_empty() {
        return;
    }
    let Ok(line) = serde_json::from_slice::<Line>(raw) else {
        return;
    };
    if out.lines.contains_key(&line.id) {
        return;
    }
    if everything || wanted.remove(line.id.as_str()) {
        out.lines.insert(line.id.clone(), line);
    }
}

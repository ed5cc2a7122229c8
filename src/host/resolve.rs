//! Naming a thread on the command line: a full id, a unique prefix of one (`46a2acab`), or a
//! displayed path (`46a2acab.part1`), as `threads` and the demo print them.

use crate::host::HostError;
use crate::{ThreadId, ThreadInfo};

/// How many matching threads an ambiguity message names before it counts the rest.
const NAMED_MATCHES: usize = 8;

/// The thread `text` names among `threads`, read from `source` (for messages).
///
/// A full id is taken as it is (whether it exists is the caller's question); otherwise an
/// exact path wins over an id prefix. Prefixes compare case-insensitively.
///
/// # Errors
///
/// Nothing matches, or more than one thread does (each named, with its path).
pub(crate) fn resolve(
    threads: &[ThreadInfo],
    text: &str,
    source: &str,
) -> Result<ThreadId, HostError> {
    if let Ok(id) = text.parse() {
        return Ok(id);
    }
    let by_path: Vec<&ThreadInfo> = threads.iter().filter(|t| &*t.path == text).collect();
    let prefix = text.to_ascii_lowercase();
    let matches = if by_path.is_empty() && is_id_prefix(&prefix) {
        threads
            .iter()
            .filter(|t| t.id.to_string().starts_with(&prefix))
            .collect()
    } else {
        by_path
    };
    match matches.as_slice() {
        [one] => Ok(one.id),
        [] if !is_id_prefix(&prefix) && !text.contains('.') => Err(HostError::usage(format!(
            "`{text}` is not a thread id, id prefix or path (such as 46a2acab.part1)"
        ))),
        [] => Err(HostError::usage(format!(
            "no thread matches `{text}` in {source}"
        ))),
        many => Err(HostError::usage(ambiguous(text, many))),
    }
}

/// Whether `text` could begin a thread id: hex digits and dashes, at least one digit.
fn is_id_prefix(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_hexdigit())
        && text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

fn ambiguous(text: &str, many: &[&ThreadInfo]) -> String {
    let named: Vec<String> = many
        .iter()
        .take(NAMED_MATCHES)
        .map(|t| format!("{} ({})", t.id, t.path))
        .collect();
    let rest = match many.len().saturating_sub(NAMED_MATCHES) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        "`{text}` matches {} threads: {}{rest}; give more of the id",
        many.len(),
        named.join(", ")
    )
}

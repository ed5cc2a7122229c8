//! 06's redaction at run time (AG-032 SensitiveInLog): a symbol named in a `SNAP … redact=`
//! list is sensitive for the rest of the run, and so is whatever is derived from one: a symbol
//! SET from it, a FOREACH variable over it, the symbols a RUN (or a call of a process) given
//! it binds, and in that child process the arguments it was given ([`REDACT_ARG`]). Its value
//! never reaches a recorded event or an error message: a RETURN of it gives `[REDACTED]`, a
//! TELL or SNAP of it its name only, and its text is cut out of every event and error message
//! (what a tool echoes back included).

use std::collections::BTreeSet;

use crate::process::expr::{Expr, ExprKind, Value};

/// What a sensitive value is replaced with (06: "Secrets/PII MUST be redacted as `[REDACTED]`").
pub(crate) const REDACTED: &str = "[REDACTED]";

/// Texts shorter than this are not cut out of messages: a secret `1` would erase every digit.
const MIN_SECRET_CHARS: usize = 4;

/// The argument a process's call of a process of its file carries to name the arguments that
/// are sensitive in the caller (a list of keys): the child redacts them too. Not a key a
/// process can declare (keys start with a-z).
pub(crate) const REDACT_ARG: &str = "_redact";

/// Whether `e` reads any symbol, local or placeholder of `sensitive` (locals by their
/// lowercase name; a placeholder `<KEY>` reads the argument `key`).
pub(crate) fn reads_any(e: &Expr, sensitive: &BTreeSet<String>) -> bool {
    if sensitive.is_empty() {
        return false;
    }
    let mut found = false;
    e.walk(&mut |e| match &e.kind {
        ExprKind::Symbol(name) | ExprKind::Local(name) => found |= sensitive.contains(name),
        ExprKind::Placeholder(name) => {
            found |= sensitive.contains(name) || sensitive.contains(&name.to_ascii_lowercase());
        }
        _ => {}
    });
    found
}

/// The texts of a sensitive value as a message could show them: its strings and numbers (the
/// leaves of a list or object), each of at least [`MIN_SECRET_CHARS`] characters.
pub(crate) fn texts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Str(s) if s.chars().count() >= MIN_SECRET_CHARS => out.push(s.clone()),
        Value::Num(n) if n.to_string().len() >= MIN_SECRET_CHARS => out.push(n.to_string()),
        Value::List(items) => items.iter().for_each(|v| texts(v, out)),
        Value::Object(m) => m.values().for_each(|v| texts(v, out)),
        _ => {}
    }
}

/// `value` with every occurrence of a secret text in its strings replaced by [`REDACTED`]
/// (an error object: its type, message, tool, suppressed errors).
pub(crate) fn scrub(value: &mut Value, secrets: &[String]) {
    match value {
        Value::Str(s) => {
            for secret in secrets {
                if s.contains(secret.as_str()) {
                    *s = s.replace(secret.as_str(), REDACTED);
                }
            }
        }
        Value::List(items) => items.iter_mut().for_each(|v| scrub(v, secrets)),
        Value::Object(m) => m.values_mut().for_each(|v| scrub(v, secrets)),
        _ => {}
    }
}

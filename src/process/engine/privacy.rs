//! 06's redaction at run time (AG-032 SensitiveInLog): a symbol named in a `SNAP … redact=`
//! list is sensitive for the rest of the run, and so is a symbol SET from one. Its value never
//! reaches a recorded event or an error message: a RETURN of it gives `[REDACTED]`, a TELL or
//! SNAP of it its name only, and its text is cut out of error messages.

use std::collections::BTreeSet;

use crate::process::expr::{Expr, ExprKind, Value};

/// What a sensitive value is replaced with (06: "Secrets/PII MUST be redacted as `[REDACTED]`").
pub(crate) const REDACTED: &str = "[REDACTED]";

/// Texts shorter than this are not cut out of messages: a secret `1` would erase every digit.
const MIN_SECRET_CHARS: usize = 4;

/// Whether `e` reads any symbol of `sensitive`.
pub(crate) fn reads_any(e: &Expr, sensitive: &BTreeSet<String>) -> bool {
    if sensitive.is_empty() {
        return false;
    }
    let mut found = false;
    e.walk(&mut |e| {
        if let ExprKind::Symbol(name) = &e.kind {
            found |= sensitive.contains(name);
        }
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

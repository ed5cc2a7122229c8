//! Spelling of names (03 identifiers): AG-003 for a name off its regex, AG-002 for a reserved
//! word; and the ISO 8601 shape of time literals (AG-014).

use crate::process::ast::Ident;
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};

/// The reserved tokens of 03.
pub const RESERVED: &[&str] = &[
    "GIVEN",
    "WHEN",
    "THEN",
    "IF",
    "ELSE",
    "FOREACH",
    "IN",
    "TRY",
    "RECOVER",
    "RUN",
    "USE",
    "SET",
    "CAPTURE",
    "RETURN",
    "ASSERT",
    "SHOULD",
    "MAY",
    "AND",
    "OR",
    "NOT",
    "WITH",
    "PAR",
    "JOIN",
    "TELL",
    "SNAP",
    "MILESTONE",
];

fn reserved(name: &str, span: Span, what: &str, diags: &mut Vec<Diagnostic>) -> bool {
    let hit = RESERVED.contains(&name.to_ascii_uppercase().as_str());
    if hit {
        let msg = format!("{what} {name} is a reserved word");
        diags.push(
            Diagnostic::new(Code::ReservedTokenMisuse, span, msg).hint("choose another name"),
        );
    }
    hit
}

fn invalid(name: &str, span: Span, what: &str, rule: &str, diags: &mut Vec<Diagnostic>) {
    let msg = format!("{what} {name} does not match {rule}");
    diags.push(Diagnostic::new(Code::InvalidId, span, msg));
}

/// A symbol: `^[A-Z0-9_]{2,24}$`.
pub fn symbol(id: &Ident, diags: &mut Vec<Diagnostic>) {
    symbol_name(&id.name, id.span, diags);
}

/// A symbol given by name and span (symbols read in expressions).
pub fn symbol_name(name: &str, span: Span, diags: &mut Vec<Diagnostic>) {
    if reserved(name, span, "symbol", diags) {
        return;
    }
    let ok = (2..=24).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        invalid(name, span, "symbol", "^[A-Z0-9_]{2,24}$", diags);
    }
}

fn id_lower(name: &str, max: usize) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= max
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// A process id: `^[a-z][a-z0-9_-]{1,63}$`.
pub fn process_id(id: &Ident, diags: &mut Vec<Diagnostic>) {
    tool_or_process(id, "process id", diags);
}

/// A tool name: `^[a-z][a-z0-9_-]{1,63}$`, or an MCP server's tool `server.tool`, each part
/// of that form and 64 characters in all (docs/decisions/2026-11-26-mcp-tool-names.md).
pub fn tool(id: &Ident, diags: &mut Vec<Diagnostic>) {
    let mcp = id.name.split_once('.').is_some_and(|(server, tool)| {
        id.name.len() <= 64 && id_lower(server, 32) && id_lower(tool, 64)
    });
    if !mcp {
        tool_or_process(id, "tool name", diags);
    }
}

fn tool_or_process(id: &Ident, what: &str, diags: &mut Vec<Diagnostic>) {
    let ok = id_lower(&id.name, 64) && id.name.len() >= 2;
    if !reserved(&id.name, id.span, what, diags) && !ok {
        invalid(&id.name, id.span, what, "^[a-z][a-z0-9_-]{1,63}$", diags);
    }
}

/// A key, argument, loop or RECOVER variable: lowercase (`IdLower`).
pub fn lower(id: &Ident, what: &str, diags: &mut Vec<Diagnostic>) {
    if !reserved(&id.name, id.span, what, diags) && !id_lower(&id.name, usize::MAX) {
        invalid(&id.name, id.span, what, "^[a-z][a-z0-9_-]*$", diags);
    }
}

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `s` is an ISO 8601 date, or date and time with `Z` or an offset (01: local times
/// need an offset).
pub fn is_iso8601(s: &str) -> bool {
    if !s.is_ascii() {
        return false;
    }
    let (date, time) = s.split_once('T').map_or((s, None), |(d, t)| (d, Some(t)));
    let date_ok = date.len() == 10
        && digits(&date[..4], 4)
        && &date[4..5] == "-"
        && digits(&date[5..7], 2)
        && &date[7..8] == "-"
        && digits(&date[8..], 2);
    let Some(time) = time else { return date_ok };
    let (clock, offset) = match time.strip_suffix('Z') {
        Some(c) => (c, "+00:00"),
        None if time.len() > 6 => time.split_at(time.len() - 6),
        None => return false,
    };
    let clock = clock.split_once('.').map_or(clock, |(c, frac)| {
        if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
            "x"
        } else {
            c
        }
    });
    let hm = |t: &str| t.len() == 5 && digits(&t[..2], 2) && &t[2..3] == ":" && digits(&t[3..], 2);
    let clock_ok = hm(clock)
        || (clock.len() == 8 && hm(&clock[..5]) && &clock[5..6] == ":" && digits(&clock[6..], 2));
    let offset_ok = (offset.starts_with('+') || offset.starts_with('-')) && hm(&offset[1..]);
    date_ok && clock_ok && offset_ok
}

#[cfg(test)]
mod tests {
    use super::is_iso8601;

    #[test]
    fn iso8601_dates_and_times_with_offsets() {
        for ok in [
            "2026-11-24",
            "2026-11-24T16:50Z",
            "2026-11-24T16:50:00Z",
            "2026-11-24T16:50:00.123+01:00",
        ] {
            assert!(is_iso8601(ok), "{ok}");
        }
        for bad in [
            "24/11/2026",
            "2026-11-24T16:50",
            "2026-11-24T16:50:00",
            "2026-1-24",
            "2026-11-24T1650Z",
            "é026-11-24",
            "2026-11-24T16:50:00.Z",
        ] {
            assert!(!is_iso8601(bad), "{bad}");
        }
    }
}

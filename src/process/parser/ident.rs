//! Names in statements: symbols, lowercase ids and backticked process or tool ids. Their
//! spelling (regexes, reserved words) is checked later by `check`, which sees every name.

use crate::process::ast::Ident;
use crate::process::code::Code;
use crate::process::diagnostic::Diagnostic;
use crate::process::lexer::{Cursor, Tok};

fn word(cur: &mut Cursor<'_>, upper: bool, what: &str) -> Result<Ident, Diagnostic> {
    match cur.peek().map(|t| &t.tok) {
        Some(Tok::Word(w)) if w.starts_with(|c: char| c.is_ascii_lowercase()) != upper => {
            let name = w.clone();
            cur.bump();
            Ok(Ident {
                name,
                span: cur.last(),
            })
        }
        Some(Tok::Word(_)) => {
            let case = if upper { "UPPER_SNAKE" } else { "lowercase" };
            let hint = format!("a {what} is written in {case}");
            Err(cur.expected(Code::InvalidId, what).hint(hint))
        }
        _ => Err(cur.expected(Code::Syntax, what)),
    }
}

/// An `UPPER_SNAKE` symbol.
pub(super) fn symbol(cur: &mut Cursor<'_>) -> Result<Ident, Diagnostic> {
    word(cur, true, "a symbol")
}

/// A lowercase name: a loop variable, a RECOVER variable, a key.
pub(super) fn local(cur: &mut Cursor<'_>) -> Result<Ident, Diagnostic> {
    word(cur, false, "a lowercase name")
}

/// `` `id` ``: a backticked process or tool id. A bare word is AG-003 (02: ids in statements
/// are wrapped in backticks).
pub(super) fn tick(cur: &mut Cursor<'_>, what: &str) -> Result<Ident, Diagnostic> {
    match cur.peek().map(|t| &t.tok) {
        Some(Tok::Tick(id)) => {
            let name = id.clone();
            cur.bump();
            Ok(Ident {
                name,
                span: cur.last(),
            })
        }
        Some(Tok::Word(w)) => {
            let msg = format!("{what} {w} is not wrapped in backticks");
            Err(Diagnostic::new(Code::InvalidId, cur.here(), msg).hint(format!("write `{w}`")))
        }
        _ => Err(cur.expected(Code::Syntax, &format!("a backticked {what}"))),
    }
}

/// A list `SYM, SYM, …` (at least one).
pub(super) fn symbols(cur: &mut Cursor<'_>) -> Result<Vec<Ident>, Diagnostic> {
    let mut out = vec![symbol(cur)?];
    while cur.eat_punct(",") {
        out.push(symbol(cur)?);
    }
    Ok(out)
}

/// `[SYM, SYM, …]` (possibly empty).
pub(super) fn symbol_list(cur: &mut Cursor<'_>) -> Result<Vec<Ident>, Diagnostic> {
    cur.expect_punct("[", Code::Syntax)?;
    if cur.eat_punct("]") {
        return Ok(Vec::new());
    }
    let out = symbols(cur)?;
    cur.expect_punct("]", Code::Syntax)?;
    Ok(out)
}

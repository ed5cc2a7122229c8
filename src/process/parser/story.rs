//! RETURN, ASSERT / ASSERT ALL and the story statements TELL and SNAP.

use super::ident::{symbol, symbol_list, symbols};
use super::stmt::{R, eat_label, pairs, string};
use crate::process::ast::{Level, Return, Snap, StmtKind, Tell};
use crate::process::code::Code;
use crate::process::diagnostic::Diagnostic;
use crate::process::expr::{ExprKind, parse_expr};
use crate::process::lexer::{Cursor, Tok};

pub(super) fn ret(cur: &mut Cursor<'_>) -> R<StmtKind> {
    cur.bump();
    cur.expect_punct(":", Code::Syntax)?;
    let is_pairs = cur.peek_at(1).is_some_and(|t| t.is_punct("="));
    Ok(StmtKind::Return(if is_pairs {
        Return::Pairs(pairs(cur)?)
    } else {
        Return::Symbols(symbols(cur)?)
    }))
}

pub(super) fn assert(cur: &mut Cursor<'_>) -> R<StmtKind> {
    cur.bump();
    let invalid = |d: Diagnostic| match d.code {
        Code::Syntax => Diagnostic {
            code: Code::AssertInvalid,
            ..d
        },
        _ => d,
    };
    if cur.peek().is_some_and(|t| t.is_word("ALL"))
        && cur.peek_at(1).is_some_and(|t| t.is_punct(":"))
    {
        cur.bump();
        cur.bump();
        let list = parse_expr(cur).map_err(invalid)?;
        let ExprKind::List(items) = list.kind else {
            return Err(Diagnostic::new(
                Code::AssertInvalid,
                list.span,
                "ASSERT ALL needs a [list] of conditions",
            ));
        };
        return Ok(StmtKind::AssertAll(items));
    }
    Ok(StmtKind::Assert(parse_expr(cur).map_err(invalid)?))
}

pub(super) fn tell(cur: &mut Cursor<'_>) -> R<Tell> {
    cur.bump();
    let mut t = Tell::default();
    if matches!(cur.peek().map(|t| &t.tok), Some(Tok::Str(_))) {
        t.message = Some(string(cur)?);
    }
    if eat_label(cur, "why") {
        t.why = Some(symbol(cur)?);
    }
    if cur.eat_word("level") {
        cur.expect_punct("=", Code::Syntax)?;
        t.level = Some(if cur.eat_word("brief") {
            Level::Brief
        } else {
            cur.expect_word("full", Code::Syntax)?;
            Level::Full
        });
    }
    if eat_label(cur, "outcome") {
        t.outcome = Some(string(cur)?);
    }
    Ok(t)
}

pub(super) fn snap(cur: &mut Cursor<'_>) -> R<Snap> {
    cur.bump();
    let mut s = Snap {
        symbols: symbol_list(cur)?,
        ..Snap::default()
    };
    if cur.eat_word("delta") {
        cur.expect_punct("=", Code::Syntax)?;
        s.delta = Some(if cur.eat_word("true") {
            true
        } else {
            cur.expect_word("false", Code::Syntax)?;
            false
        });
    }
    if cur.eat_word("redact") {
        cur.expect_punct("=", Code::Syntax)?;
        s.redact = symbol_list(cur)?;
    }
    Ok(s)
}

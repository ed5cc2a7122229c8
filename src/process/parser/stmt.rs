//! One-line statements: RUN, USE, CAPTURE, SET, UNSET, RETURN, ASSERT, ASSERT ALL, TELL,
//! MILESTONE, SNAP.

use super::ident::{local, symbol, symbols, tick};
use super::story;
use crate::process::ast::{Capture, MapEntry, Modifiers, Origin, Param, StmtKind, Use};
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};
use crate::process::expr::{Expr, parse_expr, parse_path};
use crate::process::lexer::{Cursor, Tok};

pub(super) type R<T> = Result<T, Diagnostic>;

const STATEMENTS: &str = "RUN, USE, CAPTURE, SET, UNSET, RETURN, ASSERT, TELL, MILESTONE, SNAP, \
                          IF, GIVEN, WHEN, THEN, WITH, PAR, JOIN, FOREACH, TRY";

/// A one-line statement, from its keyword to the end of the line.
pub(super) fn simple(cur: &mut Cursor<'_>) -> R<StmtKind> {
    let Some(Tok::Word(w)) = cur.peek().map(|t| &t.tok) else {
        return Err(cur
            .expected(Code::Syntax, "a statement")
            .hint(format!("statements: {STATEMENTS}")));
    };
    let kind = match w.as_str() {
        "RUN" => run(cur)?,
        "USE" => StmtKind::Use(use_stmt(cur)?),
        "CAPTURE" => StmtKind::Capture(capture(cur)?),
        "SET" => set(cur)?,
        "UNSET" => {
            cur.bump();
            StmtKind::Unset(symbol(cur)?)
        }
        "RETURN" => story::ret(cur)?,
        "ASSERT" => story::assert(cur)?,
        "TELL" => StmtKind::Tell(story::tell(cur)?),
        "MILESTONE" => {
            cur.bump();
            StmtKind::Milestone(string(cur)?)
        }
        "SNAP" => StmtKind::Snap(story::snap(cur)?),
        other => {
            let msg = format!("unknown statement {other}");
            return Err(Diagnostic::new(Code::Syntax, cur.here(), msg)
                .hint(format!("statements: {STATEMENTS}")));
        }
    };
    cur.finish()?;
    Ok(kind)
}

pub(super) fn string(cur: &mut Cursor<'_>) -> R<String> {
    match cur.peek().map(|t| &t.tok) {
        Some(Tok::Str(s)) => {
            let s = s.clone();
            cur.bump();
            Ok(s)
        }
        _ => Err(cur.expected(Code::Syntax, "a double-quoted string")),
    }
}

/// `word:` (`where:`, `map:`, `why:`, `outcome:`) if next.
pub(super) fn eat_label(cur: &mut Cursor<'_>, word: &str) -> bool {
    let hit = cur.peek().is_some_and(|t| t.is_word(word))
        && cur.peek_at(1).is_some_and(|t| t.is_punct(":"));
    if hit {
        cur.bump();
        cur.bump();
    }
    hit
}

/// `[where: k=V, …]`.
fn where_params(cur: &mut Cursor<'_>) -> R<Vec<Param>> {
    if !eat_label(cur, "where") {
        return Ok(Vec::new());
    }
    pairs(cur)
}

/// `k=V, k=V, …` (at least one).
pub(super) fn pairs(cur: &mut Cursor<'_>) -> R<Vec<Param>> {
    let mut out = Vec::new();
    loop {
        let key = local(cur)?;
        cur.expect_punct("=", Code::Syntax)?;
        out.push(Param {
            key,
            value: parse_expr(cur)?,
        });
        if !cur.eat_punct(",") {
            return Ok(out);
        }
    }
}

/// WITH's object pairs as params (keys carry the object's span).
pub(super) fn object_params(pairs: Vec<(String, Expr)>, span: Span) -> Vec<Param> {
    pairs
        .into_iter()
        .map(|(name, value)| Param {
            key: crate::process::ast::Ident { name, span },
            value,
        })
        .collect()
}

fn run(cur: &mut Cursor<'_>) -> R<StmtKind> {
    cur.bump();
    let process = tick(cur, "process id")?;
    Ok(StmtKind::Run {
        process,
        params: where_params(cur)?,
    })
}

pub(super) fn use_stmt(cur: &mut Cursor<'_>) -> R<Use> {
    let start = cur.here();
    cur.bump();
    let tool = tick(cur, "tool name")?;
    let params = where_params(cur)?;
    let modifiers = if cur.eat_punct("(") {
        Some(modifiers(cur)?)
    } else {
        None
    };
    let end = cur.last();
    let span = Span::new(
        start.line,
        start.column,
        end.column + end.len - start.column,
    );
    Ok(Use {
        tool,
        params,
        modifiers,
        span,
    })
}

/// `atomic, timeout_ms=N, retry=N)` after `(`: each optional, in this order (AG-027).
fn modifiers(cur: &mut Cursor<'_>) -> R<Modifiers> {
    let mut m = Modifiers::default();
    let mut rank = 0;
    let hint = "(atomic, timeout_ms=N, retry=N), each optional, in this order";
    loop {
        let at = cur.here();
        let (r, name) = match cur.bump().map(|t| &t.tok) {
            Some(Tok::Word(w)) if w == "atomic" => (1, "atomic"),
            Some(Tok::Word(w)) if w == "timeout_ms" => (2, "timeout_ms"),
            Some(Tok::Word(w)) if w == "retry" => (3, "retry"),
            _ => {
                return Err(Diagnostic::new(
                    Code::TimeoutRetryPolicy,
                    at,
                    "expected atomic, timeout_ms or retry",
                )
                .hint(hint));
            }
        };
        if r <= rank {
            let msg = format!("{name} is repeated or out of order");
            return Err(Diagnostic::new(Code::TimeoutRetryPolicy, at, msg).hint(hint));
        }
        rank = r;
        if r == 1 {
            m.atomic = true;
        } else {
            cur.expect_punct("=", Code::TimeoutRetryPolicy)?;
            let Some(Tok::Num(n)) = cur.peek().map(|t| &t.tok) else {
                return Err(cur.expected(Code::TimeoutRetryPolicy, &format!("a number for {name}")));
            };
            cur.bump();
            let v = Some((*n, cur.last()));
            if r == 2 {
                m.timeout_ms = v
            } else {
                m.retry = v
            }
        }
        if cur.eat_punct(")") {
            return Ok(m);
        }
        cur.expect_punct(",", Code::TimeoutRetryPolicy)?;
    }
}

pub(super) fn capture(cur: &mut Cursor<'_>) -> R<Capture> {
    let start = cur.here();
    cur.bump();
    let symbols = symbols(cur)?;
    cur.expect_word("from", Code::Syntax)?;
    let tool = tick(cur, "tool name")?;
    let mut map = Vec::new();
    if eat_label(cur, "map") {
        loop {
            let Some(Tok::Str(text)) = cur.peek().map(|t| &t.tok) else {
                return Err(cur.expected(Code::CapturePathError, "a quoted path"));
            };
            cur.bump();
            let path = parse_path(text, cur.last())?;
            cur.expect_punct("->", Code::CapturePathError)?;
            map.push(MapEntry {
                path,
                symbol: symbol(cur)?,
            });
            if !cur.eat_punct(",") {
                break;
            }
        }
    }
    let end = cur.last();
    let span = Span::new(
        start.line,
        start.column,
        end.column + end.len - start.column,
    );
    Ok(Capture {
        symbols,
        tool,
        map,
        span,
    })
}

fn set(cur: &mut Cursor<'_>) -> R<StmtKind> {
    cur.bump();
    let symbol = symbol(cur)?;
    cur.expect_punct(":=", Code::Syntax)?;
    let value = parse_expr(cur)?;
    let origin = if cur.eat_punct("(") {
        Some(origin(cur)?)
    } else {
        None
    };
    Ok(StmtKind::Set {
        symbol,
        value,
        origin,
    })
}

/// `from SOURCE)` after `(`: a backticked tool, INP, a symbol or "Agent Inference" (AG-019).
fn origin(cur: &mut Cursor<'_>) -> R<Origin> {
    let hint = "(from `tool`), (from INP), (from SYMBOL) or (from \"Agent Inference\")";
    cur.expect_word("from", Code::ForbiddenSymbolOrigin)
        .map_err(|d| d.hint(hint))?;
    let at = cur.here();
    let origin = match cur.peek().map(|t| &t.tok) {
        Some(Tok::Tick(_)) => Origin::Tool(tick(cur, "tool name")?),
        Some(Tok::Word(w)) if w == "INP" => {
            cur.bump();
            Origin::Inp
        }
        Some(Tok::Str(s)) if s == "Agent Inference" => {
            cur.bump();
            Origin::AgentInference
        }
        Some(Tok::Word(w)) if !w.starts_with(|c: char| c.is_ascii_lowercase()) => {
            Origin::Symbol(symbol(cur)?)
        }
        _ => {
            return Err(
                Diagnostic::new(Code::ForbiddenSymbolOrigin, at, "invalid SET origin").hint(hint),
            );
        }
    };
    cur.expect_punct(")", Code::ForbiddenSymbolOrigin)?;
    Ok(origin)
}

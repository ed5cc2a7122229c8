//! Primary expressions: literals, names, placeholders, lists, JSON objects, `enum(…)`,
//! parentheses and calls.

use super::parse::{call, cover, node, parse_expr};
use super::{Expr, ExprKind};
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};
use crate::process::lexer::{Cursor, Tok};

type Parsed = Result<Expr, Diagnostic>;

pub(super) fn primary(cur: &mut Cursor<'_>) -> Parsed {
    let Some(token) = cur.peek() else {
        return Err(cur.expected(Code::Syntax, "a value"));
    };
    let at = token.span;
    let kind = match &token.tok {
        Tok::Str(s) => ExprKind::Str(s.clone()),
        Tok::Num(n) => ExprKind::Num(*n),
        Tok::Placeholder(p) => ExprKind::Placeholder(p.clone()),
        Tok::Punct("(") => return parenthesized(cur),
        Tok::Punct("[") => return list(cur),
        Tok::Punct("{") => return object(cur),
        Tok::Word(w) => return word(cur, w, at),
        _ => return Err(cur.expected(Code::Syntax, "a value")),
    };
    cur.bump();
    node(cur, kind, at)
}

fn word(cur: &mut Cursor<'_>, w: &str, at: Span) -> Parsed {
    cur.bump();
    let kind = match w {
        "true" => ExprKind::Bool(true),
        "false" => ExprKind::Bool(false),
        "null" => ExprKind::Null,
        "enum" if adjacent_paren(cur, at) => return choice(cur, at),
        _ if w.starts_with(|c: char| c.is_ascii_lowercase()) && adjacent_paren(cur, at) => {
            return call(cur, w, at);
        }
        _ if w.starts_with(|c: char| c.is_ascii_lowercase()) => ExprKind::Local(w.to_string()),
        _ => ExprKind::Symbol(w.to_string()),
    };
    node(cur, kind, at)
}

/// Whether `(` follows the word at `at` with no space: `len(x)` is a call, `X (from …)` is not.
fn adjacent_paren(cur: &Cursor<'_>, at: Span) -> bool {
    cur.peek().is_some_and(|t| {
        t.is_punct("(") && t.span.line == at.line && t.span.column == at.column + at.len
    })
}

fn parenthesized(cur: &mut Cursor<'_>) -> Parsed {
    cur.bump();
    let inner = parse_expr(cur)?;
    cur.expect_punct(")", Code::Syntax)?;
    Ok(inner)
}

fn list(cur: &mut Cursor<'_>) -> Parsed {
    cur.bump();
    let at = cur.last();
    let mut items = Vec::new();
    if !cur.eat_punct("]") {
        loop {
            items.push(parse_expr(cur)?);
            if cur.eat_punct("]") {
                break;
            }
            cur.expect_punct(",", Code::BadJson)?;
        }
    }
    node(cur, ExprKind::List(items), cover(at, cur.last()))
}

/// A JSON object: `"key": value` pairs; keys are `JsonKey` (lowercase) or `$artifact`.
fn object(cur: &mut Cursor<'_>) -> Parsed {
    cur.bump();
    let at = cur.last();
    let mut pairs: Vec<(String, Expr)> = Vec::new();
    if !cur.eat_punct("}") {
        loop {
            let Some(Tok::Str(key)) = cur.peek().map(|t| &t.tok) else {
                return Err(cur.expected(Code::BadJson, "a double-quoted JSON key"));
            };
            cur.bump();
            check_key(key, cur.last())?;
            if pairs.iter().any(|(k, _)| k == key) {
                let msg = format!("JSON key \"{key}\" appears twice");
                return Err(Diagnostic::new(Code::BadJson, cur.last(), msg));
            }
            cur.expect_punct(":", Code::BadJson)?;
            let value = parse_expr(cur).map_err(|d| match d.code {
                Code::Syntax => Diagnostic {
                    code: Code::BadJson,
                    ..d
                },
                _ => d,
            })?;
            pairs.push((key.clone(), value));
            if cur.eat_punct("}") {
                break;
            }
            cur.expect_punct(",", Code::BadJson)?;
        }
    }
    node(cur, ExprKind::Object(pairs), cover(at, cur.last()))
}

fn check_key(key: &str, at: Span) -> Result<(), Diagnostic> {
    let mut chars = key.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if (first && rest) || key == "$artifact" {
        return Ok(());
    }
    let msg = format!("JSON key \"{key}\" is not a lowercase key");
    Err(Diagnostic::new(Code::BadJson, at, msg)
        .hint("JSON keys start with a-z and continue with a-z, 0-9, _ or -"))
}

/// `enum(A,B,…)` after the word `enum`.
fn choice(cur: &mut Cursor<'_>, at: Span) -> Parsed {
    cur.bump();
    let mut names = Vec::new();
    loop {
        match cur.bump().map(|t| &t.tok) {
            Some(Tok::Word(w)) => names.push(w.clone()),
            _ => {
                return Err(Diagnostic::new(
                    Code::Syntax,
                    cur.last(),
                    "expected a symbol in enum(…)",
                ));
            }
        }
        if cur.eat_punct(")") {
            break;
        }
        cur.expect_punct(",", Code::Syntax)?;
    }
    node(cur, ExprKind::Enum(names), cover(at, cur.last()))
}

//! Primary expressions: literals, names, placeholders, lists, JSON objects, `enum(…)`,
//! parentheses and calls.

use super::parse::{call, cover, node, parse_expr};
use super::{Expr, ExprKind};
use crate::process::check::RESERVED;
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

/// A JSON object: `"key": value` pairs; keys are `JsonKey` (lowercase) or `$artifact`. A
/// brace that opens on a word is a choice set, `{V1|V2}`.
fn object(cur: &mut Cursor<'_>) -> Parsed {
    cur.bump();
    let at = cur.last();
    if matches!(cur.peek().map(|t| &t.tok), Some(Tok::Word(_))) {
        return choice_set(cur, at);
    }
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

/// `{V1|V2|…}` after its `{` (03: "engine turns into enum() at compile time").
fn choice_set(cur: &mut Cursor<'_>, at: Span) -> Parsed {
    let mut names = Vec::new();
    loop {
        names.push(member(cur)?);
        if cur.eat_punct("}") {
            break;
        }
        cur.expect_punct("|", Code::Syntax)?;
    }
    node(cur, ExprKind::Enum(names), cover(at, cur.last()))
}

/// A member of `enum(…)` or of a choice set: an UpperSym (03: "enum(V1,V2,...)", "UpperSym"),
/// not a reserved word (AG-002).
fn member(cur: &mut Cursor<'_>) -> Result<String, Diagnostic> {
    let Some(Tok::Word(w)) = cur.bump().map(|t| &t.tok) else {
        let msg = "expected a symbol in a choice (enum(…) or {A|B})";
        return Err(Diagnostic::new(Code::Syntax, cur.last(), msg));
    };
    let (w, at) = (w.clone(), cur.last());
    if RESERVED.contains(&w.to_ascii_uppercase().as_str()) {
        let msg = format!("choice {w} is a reserved word");
        return Err(Diagnostic::new(Code::ReservedTokenMisuse, at, msg).hint("choose another name"));
    }
    let upper = (2..=24).contains(&w.len())
        && w.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !upper {
        let msg = format!("choice {w} does not match ^[A-Z0-9_]{{2,24}}$");
        return Err(
            Diagnostic::new(Code::InvalidId, at, msg).hint("choices are UPPER_SNAKE symbols")
        );
    }
    Ok(w)
}

/// A JSON key: lowercase (03: "IDs/keys MUST be lowercase"), not a reserved word (AG-002),
/// or `$artifact`.
fn check_key(key: &str, at: Span) -> Result<(), Diagnostic> {
    if RESERVED.contains(&key.to_ascii_uppercase().as_str()) {
        let msg = format!("JSON key \"{key}\" is a reserved word");
        let hint = "03: reserved words cannot be used as ids, keys or symbols";
        return Err(Diagnostic::new(Code::ReservedTokenMisuse, at, msg).hint(hint));
    }
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
        names.push(member(cur)?);
        if cur.eat_punct(")") {
            break;
        }
        cur.expect_punct(",", Code::Syntax)?;
    }
    node(cur, ExprKind::Enum(names), cover(at, cur.last()))
}

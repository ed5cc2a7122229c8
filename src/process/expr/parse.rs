//! The expression parser: precedence climbing over the tokens of one line.

use super::{BinOp, Expr, ExprKind, Func, MAX_DEPTH, UnOp};
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};
use crate::process::lexer::{Cursor, Tok};

type Parsed = Result<Expr, Diagnostic>;

/// Parses one expression from the cursor, stopping before a token that cannot continue it
/// (`,`, `:`, `)`, `]`, the end of the line).
///
/// # Errors
///
/// AP-001 for a token that cannot start or continue an expression, AG-007 inside a JSON
/// object, AG-022 for a call of a random function, AG-029 for an unknown function or a wrong
/// number of arguments.
///
/// # Example
///
/// ```
/// use agentpump::process::expr::{BinOp, ExprKind, parse_expr};
/// use agentpump::process::lexer::{Cursor, lex};
/// let (tokens, _) = lex("err.type = \"timeout\" OR RETRIES > 3", 1, 1);
/// let expr = parse_expr(&mut Cursor::new(&tokens, Default::default()))?;
/// assert!(matches!(expr.kind, ExprKind::Binary(BinOp::Or, _, _)));
/// # Ok::<(), agentpump::process::Diagnostic>(())
/// ```
pub fn parse_expr(cur: &mut Cursor<'_>) -> Parsed {
    nested(cur, or)
}

/// Runs `f` one level deeper: AP-002 past [`MAX_DEPTH`], before the parser recurses again.
fn nested(cur: &mut Cursor<'_>, f: fn(&mut Cursor<'_>) -> Parsed) -> Parsed {
    let result = if cur.descend() > MAX_DEPTH {
        Err(too_deep(cur.here()))
    } else {
        f(cur)
    };
    cur.ascend();
    result
}

/// AP-002 for an expression nested past [`MAX_DEPTH`], at the token where it went past.
fn too_deep(at: Span) -> Diagnostic {
    let msg = format!("expression nested deeper than {MAX_DEPTH} levels (the limit)");
    Diagnostic::new(Code::LimitExceeded, at, msg)
        .hint("bind a part to a symbol with SET first, then use the symbol")
}

/// An expression built from parts already parsed; AP-002 when it is deeper than
/// [`MAX_DEPTH`] (a long chain of operators nests without the parser recursing).
pub(super) fn node(cur: &Cursor<'_>, kind: ExprKind, span: Span) -> Parsed {
    let e = Expr::new(kind, span);
    if e.depth() > MAX_DEPTH {
        return Err(too_deep(cur.last()));
    }
    Ok(e)
}

fn join(cur: &Cursor<'_>, op: BinOp, a: Expr, b: Expr) -> Parsed {
    let span = cover(a.span, b.span);
    node(cur, ExprKind::Binary(op, Box::new(a), Box::new(b)), span)
}

/// The span from the start of `a` to the end of `b` (on one line).
pub(crate) fn cover(a: Span, b: Span) -> Span {
    let end = (b.column + b.len).max(a.column + a.len);
    Span::new(a.line, a.column, end - a.column)
}

fn or(cur: &mut Cursor<'_>) -> Parsed {
    let mut left = and(cur)?;
    while cur.eat_word("OR") {
        let right = and(cur)?;
        left = join(cur, BinOp::Or, left, right)?;
    }
    Ok(left)
}

fn and(cur: &mut Cursor<'_>) -> Parsed {
    let mut left = not(cur)?;
    while cur.eat_word("AND") {
        let right = not(cur)?;
        left = join(cur, BinOp::And, left, right)?;
    }
    Ok(left)
}

fn not(cur: &mut Cursor<'_>) -> Parsed {
    if cur.eat_word("NOT") {
        let at = cur.last();
        let inner = nested(cur, not)?;
        let span = cover(at, inner.span);
        return node(cur, ExprKind::Unary(UnOp::Not, Box::new(inner)), span);
    }
    comparison(cur)
}

fn comparison(cur: &mut Cursor<'_>) -> Parsed {
    let left = sum(cur)?;
    let op = match cur.peek().map(|t| &t.tok) {
        Some(Tok::Punct("=" | "==")) => BinOp::Eq,
        Some(Tok::Punct("!=")) => BinOp::Ne,
        Some(Tok::Punct("<")) => BinOp::Lt,
        Some(Tok::Punct("<=")) => BinOp::Le,
        Some(Tok::Punct(">")) => BinOp::Gt,
        Some(Tok::Punct(">=")) => BinOp::Ge,
        Some(Tok::Word(w)) if w == "IN" => BinOp::In,
        _ => return Ok(left),
    };
    cur.bump();
    let right = sum(cur)?;
    join(cur, op, left, right)
}

fn sum(cur: &mut Cursor<'_>) -> Parsed {
    let mut left = product(cur)?;
    loop {
        let op = match cur.peek().map(|t| &t.tok) {
            Some(Tok::Punct("+")) => BinOp::Add,
            Some(Tok::Punct("-")) => BinOp::Sub,
            _ => return Ok(left),
        };
        cur.bump();
        let right = product(cur)?;
        left = join(cur, op, left, right)?;
    }
}

fn product(cur: &mut Cursor<'_>) -> Parsed {
    let mut left = unary(cur)?;
    loop {
        let op = match cur.peek().map(|t| &t.tok) {
            Some(Tok::Punct("*")) => BinOp::Mul,
            Some(Tok::Punct("/")) => BinOp::Div,
            Some(Tok::Punct("%")) => BinOp::Rem,
            _ => return Ok(left),
        };
        cur.bump();
        let right = unary(cur)?;
        left = join(cur, op, left, right)?;
    }
}

fn unary(cur: &mut Cursor<'_>) -> Parsed {
    if cur.eat_punct("-") {
        let at = cur.last();
        let inner = nested(cur, unary)?;
        let span = cover(at, inner.span);
        return node(cur, ExprKind::Unary(UnOp::Neg, Box::new(inner)), span);
    }
    postfix(cur)
}

fn postfix(cur: &mut Cursor<'_>) -> Parsed {
    let mut base = super::primary::primary(cur)?;
    loop {
        if cur.eat_punct(".") {
            let Some(Tok::Word(name)) = cur.peek().map(|t| &t.tok) else {
                return Err(cur.expected(Code::Syntax, "a member name after `.`"));
            };
            cur.bump();
            let span = cover(base.span, cur.last());
            base = node(cur, ExprKind::Member(Box::new(base), name.clone()), span)?;
        } else if cur.eat_punct("[") {
            let index = parse_expr(cur)?;
            let close = cur.expect_punct("]", Code::Syntax)?;
            let span = cover(base.span, close);
            base = node(cur, ExprKind::Index(Box::new(base), Box::new(index)), span)?;
        } else {
            return Ok(base);
        }
    }
}

/// Parses `name(args…)` after the name has been read.
pub(super) fn call(cur: &mut Cursor<'_>, name: &str, at: Span) -> Parsed {
    if ["random", "rand", "shuffle", "sample", "uuid", "now"].contains(&name) {
        let msg = format!("{name}() is nondeterministic and no seed can be given to it");
        return Err(Diagnostic::new(Code::RandomnessPolicy, at, msg)
            .hint("use a tool that takes a seed: USE `tool` where: seed=…"));
    }
    let Some(func) = Func::from_name(name) else {
        let msg = format!("unknown function {name}()");
        let known: Vec<&str> = Func::ALL.iter().map(|f| f.name()).collect();
        return Err(Diagnostic::new(Code::AssertInvalid, at, msg)
            .hint(format!("functions: {}", known.join(", "))));
    };
    cur.expect_punct("(", Code::Syntax)?;
    let mut args = Vec::new();
    if !cur.eat_punct(")") {
        loop {
            args.push(parse_expr(cur)?);
            if cur.eat_punct(")") {
                break;
            }
            cur.expect_punct(",", Code::Syntax)?;
        }
    }
    let span = cover(at, cur.last());
    let (min, max) = func.arity();
    if args.len() < min || args.len() > max {
        let msg = format!(
            "{name}() takes {min} to {max} arguments, found {}",
            args.len()
        );
        return Err(Diagnostic::new(Code::AssertInvalid, span, msg));
    }
    node(cur, ExprKind::Call(func, args), span)
}

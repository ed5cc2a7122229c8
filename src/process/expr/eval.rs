//! Evaluation of an [`Expr`] against an [`Env`]: exact decimals, no side effects.
//!
//! The engine will evaluate conditions and values with this; the front end uses it in tests.

use super::{BinOp, Expr, ExprKind, UnOp};
use crate::process::code::Code;
use crate::process::diagnostic::Span;
pub use crate::value::Value;
use crate::value::{MAX_DEPTH, Oversize};

/// The default of [`Env::max_value_bytes`]: 8 MiB, so `range(1000000)` (6.9 MB of JSON) fits.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 8 << 20;

/// Where names get their values, and how big a value may grow.
pub trait Env {
    /// The value of an `UPPER_SNAKE` symbol, if bound.
    fn symbol(&self, name: &str) -> Option<Value>;
    /// The value of a lowercase local (loop variable, RECOVER variable, argument), if bound.
    fn local(&self, name: &str) -> Option<Value>;
    /// The value of a placeholder, if it resolves.
    fn placeholder(&self, name: &str) -> Option<Value>;
    /// The largest value an expression may build, in bytes of its compact JSON text (an
    /// organism's `[limits] max_value_bytes`); past it, AP-002 before the value is built.
    fn max_value_bytes(&self) -> usize {
        DEFAULT_MAX_VALUE_BYTES
    }
}

/// Why an evaluation failed, with the code the engine raises and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EvalError {
    /// AG-001 (unbound name), AG-006 (placeholder), or AG-029 (type error, division by zero).
    pub code: Code,
    /// What went wrong.
    pub message: String,
    /// The sub-expression at fault.
    pub span: Span,
}

pub(super) fn fail(code: Code, span: Span, message: String) -> EvalError {
    EvalError {
        code,
        message,
        span,
    }
}

/// Evaluates `expr`.
///
/// # Errors
///
/// An [`EvalError`] for an unbound name, an unresolved placeholder, a type mismatch, a missing
/// member, an index out of range, a division by zero or an overflow; AP-002 for a value that
/// would be larger than [`Env::max_value_bytes`] or nest deeper than [`MAX_DEPTH`] (checked
/// before it is built).
///
/// # Example
///
/// ```
/// # use agentpump::process::expr::{Env, Value, eval, parse_expr};
/// # use agentpump::process::lexer::{Cursor, lex};
/// struct None_;
/// impl Env for None_ {
///     fn symbol(&self, _: &str) -> Option<Value> { None }
///     fn local(&self, _: &str) -> Option<Value> { None }
///     fn placeholder(&self, _: &str) -> Option<Value> { None }
/// }
/// let (tokens, _) = lex("(1 + 2) / 4 >= 0.75", 1, 1);
/// let mut cur = Cursor::new(&tokens, Default::default());
/// let expr = parse_expr(&mut cur)?;
/// assert_eq!(eval(&expr, &None_)?, Value::Bool(true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn eval(expr: &Expr, env: &dyn Env) -> Result<Value, EvalError> {
    let at = expr.span;
    Ok(match &expr.kind {
        ExprKind::Symbol(_) | ExprKind::Local(_) | ExprKind::Placeholder(_) => name(expr, env)?,
        ExprKind::List(items) => {
            let mut room = Room::new(env, at);
            let items = items.iter().map(|e| room.item(eval(e, env)?, 0));
            Value::List(items.collect::<Result<_, _>>()?)
        }
        ExprKind::Object(pairs) => {
            let mut room = Room::new(env, at);
            let pairs = pairs.iter().map(|(k, e)| {
                let key = crate::value::size::string_len(k) + 1;
                Ok((k.clone(), room.item(eval(e, env)?, key)?))
            });
            Value::Object(pairs.collect::<Result<_, EvalError>>()?)
        }
        ExprKind::Member(base, name) => member(eval(base, env)?, name, at)?,
        ExprKind::Index(base, index) => index_of(eval(base, env)?, eval(index, env)?, at)?,
        ExprKind::Unary(op, inner) => unary(*op, eval(inner, env)?, at)?,
        ExprKind::Binary(op, a, b) => binary(*op, a, b, env, at)?,
        ExprKind::Call(func, args) => {
            let values = all(args, env)?;
            let limit = env.max_value_bytes();
            func.fits(&values, limit)
                .map_err(|o| oversize(o, limit, at))?;
            let v = func
                .apply(values)
                .map_err(|m| fail(Code::AssertInvalid, at, m))?;
            fits(&v, limit, at)?;
            v
        }
        ExprKind::Str(s) => Value::Str(s.clone()),
        ExprKind::Num(n) => Value::Num(*n),
        ExprKind::Bool(b) => Value::Bool(*b),
        ExprKind::Null => Value::Null,
        ExprKind::Enum(names) => Value::List(names.iter().cloned().map(Value::Str).collect()),
    })
}

/// AP-002 for a value past its bounds, naming the limit.
pub(super) fn oversize(o: Oversize, limit: usize, at: Span) -> EvalError {
    let message = match o {
        Oversize::Bytes { .. } => format!(
            "value larger than the limit max_value_bytes = {limit} (bytes of its JSON text)"
        ),
        Oversize::Depth => {
            format!("value nested deeper than the limit of {MAX_DEPTH} lists and objects")
        }
    };
    fail(Code::LimitExceeded, at, message)
}

/// The size of `v` in bytes of JSON, or AP-002 past `limit`.
pub(super) fn fits(v: &Value, limit: usize, at: Span) -> Result<usize, EvalError> {
    v.measure(limit, MAX_DEPTH)
        .map_err(|o| oversize(o, limit, at))
}

/// What is left of the limit while a list or object is built, item by item: each item is
/// measured before it is added, so nothing much past the limit is ever held.
struct Room {
    used: usize,
    limit: usize,
    at: Span,
}

impl Room {
    fn new(env: &dyn Env, at: Span) -> Self {
        Self {
            used: 1,
            limit: env.max_value_bytes(),
            at,
        }
    }

    /// Adds an item written with `extra` bytes besides its own (an object's key and colon).
    fn item(&mut self, v: Value, extra: usize) -> Result<Value, EvalError> {
        let left = self.limit.saturating_sub(self.used + extra + 1);
        let n = v
            .measure(left, MAX_DEPTH - 1)
            .map_err(|o| oversize(o, self.limit, self.at))?;
        self.used += n + extra + 1;
        Ok(v)
    }
}

fn all(items: &[Expr], env: &dyn Env) -> Result<Vec<Value>, EvalError> {
    items.iter().map(|e| eval(e, env)).collect()
}

/// A symbol (AG-001 when unbound), a local (AG-001) or a placeholder (AG-006).
fn name(expr: &Expr, env: &dyn Env) -> Result<Value, EvalError> {
    let (value, code, message) = match &expr.kind {
        ExprKind::Symbol(n) => (
            env.symbol(n),
            Code::UndefinedSymbol,
            format!("symbol {n} is not bound"),
        ),
        ExprKind::Local(n) => (
            env.local(n),
            Code::UndefinedSymbol,
            format!("{n} is not bound here"),
        ),
        ExprKind::Placeholder(n) => (
            env.placeholder(n),
            Code::UnresolvedPlaceholder,
            format!("placeholder <{n}> is unresolved"),
        ),
        _ => (None, Code::AssertInvalid, "not a name".to_string()),
    };
    value.ok_or_else(|| fail(code, expr.span, message))
}

fn member(base: Value, name: &str, at: Span) -> Result<Value, EvalError> {
    match base {
        Value::Object(mut map) => map
            .remove(name)
            .ok_or_else(|| fail(Code::AssertInvalid, at, format!("no member {name}"))),
        other => Err(type_error(at, &format!(".{name}"), &other)),
    }
}

fn index_of(base: Value, index: Value, at: Span) -> Result<Value, EvalError> {
    match (base, index) {
        (Value::List(items), Value::Num(n)) => usize::try_from(n.trunc().mantissa())
            .ok()
            .filter(|_| n.fract().is_zero())
            .and_then(|i| items.into_iter().nth(i))
            .ok_or_else(|| fail(Code::AssertInvalid, at, format!("index {n} out of range"))),
        (Value::Object(mut map), Value::Str(k)) => map
            .remove(&k)
            .ok_or_else(|| fail(Code::AssertInvalid, at, format!("no member {k}"))),
        (base, _) => Err(type_error(at, "[…]", &base)),
    }
}

pub(super) fn type_error(at: Span, op: &str, v: &Value) -> EvalError {
    fail(
        Code::AssertInvalid,
        at,
        format!("{op} cannot apply to a {}", v.kind()),
    )
}

fn unary(op: UnOp, v: Value, at: Span) -> Result<Value, EvalError> {
    match (op, v) {
        (UnOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (UnOp::Neg, Value::Num(n)) => Ok(Value::Num(-n)),
        (UnOp::Not, v) => Err(type_error(at, "NOT", &v)),
        (UnOp::Neg, v) => Err(type_error(at, "-", &v)),
    }
}

fn truth(v: Value, at: Span) -> Result<bool, EvalError> {
    match v {
        Value::Bool(b) => Ok(b),
        other => Err(type_error(at, "a condition", &other)),
    }
}

fn binary(op: BinOp, a: &Expr, b: &Expr, env: &dyn Env, at: Span) -> Result<Value, EvalError> {
    match op {
        BinOp::And => Ok(Value::Bool(
            truth(eval(a, env)?, a.span)? && truth(eval(b, env)?, b.span)?,
        )),
        BinOp::Or => Ok(Value::Bool(
            truth(eval(a, env)?, a.span)? || truth(eval(b, env)?, b.span)?,
        )),
        _ => super::ops::apply(op, eval(a, env)?, eval(b, env)?, at, env.max_value_bytes()),
    }
}

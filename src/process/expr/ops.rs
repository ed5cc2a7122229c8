//! Binary operators on values: comparisons, membership and exact decimal arithmetic.

use std::cmp::Ordering;

use rust_decimal::Decimal;

use super::BinOp;
use super::eval::{EvalError, Value, fail, fits, type_error};
use crate::process::code::Code;
use crate::process::diagnostic::Span;

pub(super) fn apply(
    op: BinOp,
    a: Value,
    b: Value,
    at: Span,
    limit: usize,
) -> Result<Value, EvalError> {
    use BinOp::*;
    match op {
        Eq => Ok(Value::Bool(equal(&a, &b))),
        Ne => Ok(Value::Bool(!equal(&a, &b))),
        Lt | Le | Gt | Ge => {
            let ord = order(&a, &b).ok_or_else(|| type_error(at, "a comparison", &b))?;
            Ok(Value::Bool(match op {
                Lt => ord == Ordering::Less,
                Le => ord != Ordering::Greater,
                Gt => ord == Ordering::Greater,
                _ => ord != Ordering::Less,
            }))
        }
        In => member(a, b, at).map(Value::Bool),
        Add => add(a, b, at, limit),
        Sub | Mul | Div | Rem => arithmetic(op, a, b, at),
        // `eval` short-circuits these; with both sides evaluated the result is the same.
        And | Or => match (a, b) {
            (Value::Bool(x), Value::Bool(y)) => {
                Ok(Value::Bool(if op == And { x && y } else { x || y }))
            }
            (Value::Bool(_), other) | (other, _) => Err(type_error(at, "a condition", &other)),
        },
    }
}

/// Equality, with numbers compared by value (`1.0 = 1`).
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Num(x), Value::Num(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q))
        }
        _ => a == b,
    }
}

fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Num(x), Value::Num(y)) => Some(x.cmp(y)),
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn member(item: Value, container: Value, at: Span) -> Result<bool, EvalError> {
    match (&item, container) {
        (_, Value::List(items)) => Ok(items.iter().any(|x| equal(x, &item))),
        (Value::Str(k), Value::Object(map)) => Ok(map.contains_key(k)),
        (Value::Str(s), Value::Str(text)) => Ok(text.contains(s.as_str())),
        (_, other) => Err(type_error(at, "IN", &other)),
    }
}

/// `+`: numbers add; strings and lists join, their size checked before they are joined.
fn add(a: Value, b: Value, at: Span, limit: usize) -> Result<Value, EvalError> {
    let shared = match (&a, &b) {
        (Value::Str(_), Value::Str(_)) => 2,
        (Value::List(x), Value::List(y)) if x.is_empty() || y.is_empty() => 2,
        (Value::List(_), Value::List(_)) => 1,
        _ => return arithmetic(BinOp::Add, a, b, at),
    };
    joined(&a, &b, shared, at, limit)?;
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Ok(Value::Str(x + &y)),
        (Value::List(mut x), Value::List(y)) => {
            x.extend(y);
            Ok(Value::List(x))
        }
        (a, b) => arithmetic(BinOp::Add, a, b, at),
    }
}

/// AP-002 unless `a` and `b` joined (their JSON texts sharing `shared` bytes: the quotes or
/// brackets between them) fit `limit`.
fn joined(a: &Value, b: &Value, shared: usize, at: Span, limit: usize) -> Result<(), EvalError> {
    let n = fits(a, limit, at)? + fits(b, limit, at)?;
    if n.saturating_sub(shared) > limit {
        return Err(super::eval::oversize(
            crate::value::Oversize::Bytes { limit },
            limit,
            at,
        ));
    }
    Ok(())
}

fn arithmetic(op: BinOp, a: Value, b: Value, at: Span) -> Result<Value, EvalError> {
    let (x, y) = match (a, b) {
        (Value::Num(x), Value::Num(y)) => (x, y),
        (Value::Num(_), other) | (other, _) => return Err(type_error(at, "arithmetic", &other)),
    };
    if matches!(op, BinOp::Div | BinOp::Rem) && y.is_zero() {
        return Err(fail(Code::AssertInvalid, at, "division by zero".into()));
    }
    let result: Option<Decimal> = match op {
        BinOp::Add => x.checked_add(y),
        BinOp::Sub => x.checked_sub(y),
        BinOp::Mul => x.checked_mul(y),
        BinOp::Div => x.checked_div(y),
        _ => x.checked_rem(y),
    };
    result
        .map(Value::Num)
        .ok_or_else(|| fail(Code::AssertInvalid, at, "decimal overflow".into()))
}

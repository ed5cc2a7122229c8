//! What each [`Func`] computes.

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};

use super::Func;
use crate::process::expr::Value;

/// A value as an error message shows it: its text, cut after 40 characters.
fn brief(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

fn num(v: &Value) -> Result<Decimal, String> {
    match v {
        Value::Num(n) => Ok(*n),
        other => Err(format!("expected a number, found {}", brief(other))),
    }
}

fn text(v: &Value) -> Result<&str, String> {
    match v {
        Value::Str(s) => Ok(s),
        other => Err(format!("expected a string, found {}", brief(other))),
    }
}

fn list(v: &Value) -> Result<&[Value], String> {
    match v {
        Value::List(items) => Ok(items),
        other => Err(format!("expected a list, found {}", brief(other))),
    }
}

impl Func {
    /// Applies the function to evaluated arguments (the parser has checked their number).
    ///
    /// # Errors
    ///
    /// A message when an argument has the wrong type or the result does not exist (square
    /// root of a negative number, first item of an empty list).
    pub fn apply(self, args: Vec<Value>) -> Result<Value, String> {
        let a = args.first().unwrap_or(&Value::Null);
        let b = args.get(1).unwrap_or(&Value::Null);
        Ok(match self {
            Func::Len => Value::Num(Decimal::from(match a {
                Value::Str(s) => s.chars().count(),
                Value::List(items) => items.len(),
                Value::Object(map) => map.len(),
                other => return Err(format!("len() of {}", brief(other))),
            })),
            Func::Upper => Value::Str(text(a)?.to_uppercase()),
            Func::Lower => Value::Str(text(a)?.to_lowercase()),
            Func::Trim => Value::Str(text(a)?.trim().to_string()),
            Func::Concat => Value::Str(args.iter().map(Value::to_string).collect()),
            Func::Contains => Value::Bool(match a {
                Value::List(items) => items.contains(b),
                Value::Object(map) => map.contains_key(text(b)?),
                _ => text(a)?.contains(text(b)?),
            }),
            Func::StartsWith => Value::Bool(text(a)?.starts_with(text(b)?)),
            Func::EndsWith => Value::Bool(text(a)?.ends_with(text(b)?)),
            Func::Split => Value::List(
                text(a)?
                    .split(text(b)?)
                    .map(|s| Value::Str(s.into()))
                    .collect(),
            ),
            Func::Join => {
                let parts: Vec<String> = list(a)?.iter().map(Value::to_string).collect();
                Value::Str(parts.join(text(b)?))
            }
            Func::Append => Value::List(list(a)?.iter().chain([b]).cloned().collect()),
            Func::First => list(a)?
                .first()
                .cloned()
                .ok_or("first() of an empty list")?,
            Func::Last => list(a)?.last().cloned().ok_or("last() of an empty list")?,
            Func::Range => range(&args)?,
            Func::Abs => Value::Num(num(a)?.abs()),
            Func::Round => round(a, args.get(1))?,
            Func::Min | Func::Max => extreme(self, &args)?,
            Func::Sqrt => {
                Value::Num(crate::value::sqrt(num(a)?).ok_or("sqrt() of a negative number")?)
            }
            Func::Number => Value::Num(
                Decimal::from_str_exact(text(a)?.trim()).map_err(|e| format!("number(): {e}"))?,
            ),
            Func::Text => Value::Str(a.to_string()),
            Func::Keys => match a {
                Value::Object(map) => Value::List(map.keys().cloned().map(Value::Str).collect()),
                other => return Err(format!("keys() of {}", brief(other))),
            },
        })
    }
}

fn count(v: &Value) -> Result<i64, String> {
    let n = num(v)?;
    n.fract()
        .is_zero()
        .then(|| n.to_i64())
        .flatten()
        .ok_or_else(|| format!("expected a whole number, found {n}"))
}

/// At most a million items: a range is data, and a FOREACH over it runs under the governor.
fn range(args: &[Value]) -> Result<Value, String> {
    let (from, to) = match args {
        [n] => (0, count(n)?),
        [a, b, ..] => (count(a)?, count(b)?),
        [] => (0, 0),
    };
    if to.saturating_sub(from) > 1_000_000 {
        return Err("range() of more than 1 000 000 items".into());
    }
    Ok(Value::List(
        (from..to).map(|i| Value::Num(i.into())).collect(),
    ))
}

fn round(a: &Value, places: Option<&Value>) -> Result<Value, String> {
    let dp = places.map(count).transpose()?.unwrap_or(0);
    let dp = u32::try_from(dp).map_err(|_| "round() to negative places")?;
    Ok(Value::Num(num(a)?.round_dp_with_strategy(
        dp,
        RoundingStrategy::MidpointNearestEven,
    )))
}

fn extreme(f: Func, args: &[Value]) -> Result<Value, String> {
    let values = args.iter().map(num).collect::<Result<Vec<_>, _>>()?;
    let pick = if f == Func::Min {
        values.iter().min()
    } else {
        values.iter().max()
    };
    pick.copied()
        .map(Value::Num)
        .ok_or_else(|| "no arguments".into())
}

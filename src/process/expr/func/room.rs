//! Whether a function's result can fit the value limit, judged from its arguments before it
//! is built: a `concat`, `join`, `append`, `split` or `range` can make a value far larger than
//! its arguments, so it is measured (at least, or exactly) first. The other functions make at
//! most a small multiple of their arguments and are measured after.

use super::Func;
use crate::value::size::{number_len, string_len};
use crate::value::{MAX_DEPTH, Oversize, Value};

impl Func {
    /// `Ok` unless applying the function to `args` surely makes a value larger than `limit`
    /// bytes of JSON.
    ///
    /// # Errors
    ///
    /// [`Oversize`] when it would be larger (or an argument already is).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::process::expr::Func;
    /// use agentpump::value::Value;
    /// let s = Value::from("x".repeat(600));
    /// assert!(Func::Concat.fits(&[s.clone()], 1000).is_ok());
    /// assert!(Func::Concat.fits(&[s.clone(), s], 1000).is_err());
    /// ```
    pub fn fits(self, args: &[Value], limit: usize) -> Result<(), Oversize> {
        let least = match (self, args) {
            (Func::Concat, _) => 2 + text_len(args, limit)?,
            (Func::Join, [Value::List(items), Value::Str(sep)]) => {
                let seps = sep.len().saturating_mul(items.len().saturating_sub(1));
                (2 + text_len(items, limit)?).saturating_add(seps)
            }
            (Func::Append, [list @ Value::List(items), item]) => {
                let comma = usize::from(!items.is_empty());
                list.measure(limit, MAX_DEPTH)? + comma + item.measure(limit, MAX_DEPTH - 1)?
            }
            (Func::Split, [Value::Str(s), Value::Str(sep)]) => split_len(s, sep, limit),
            (Func::Range, _) => range_len(args),
            _ => 0,
        };
        if least > limit {
            return Err(Oversize::Bytes { limit });
        }
        Ok(())
    }
}

/// The least length of the values written as text and joined: a string's bytes, the JSON of
/// anything else (its text has a space after each comma and colon besides).
fn text_len(values: &[Value], limit: usize) -> Result<usize, Oversize> {
    values.iter().try_fold(0usize, |n, v| {
        let len = match v {
            Value::Str(s) => s.len(),
            other => other.measure(limit, MAX_DEPTH)?,
        };
        Ok(n.saturating_add(len))
    })
}

/// The JSON length of `split(s, sep)`, counted up to just past `limit`.
fn split_len(s: &str, sep: &str, limit: usize) -> usize {
    let mut n = 1;
    for part in s.split(sep) {
        n += string_len(part) + 1;
        if n > limit {
            break;
        }
    }
    n
}

/// The JSON length of `range(…)`'s list (0 for arguments `range` refuses).
fn range_len(args: &[Value]) -> usize {
    let whole = |v: &Value| match v {
        Value::Num(n) if n.fract().is_zero() => i64::try_from(*n).ok(),
        _ => None,
    };
    let (from, to) = match args {
        [n] => (Some(0), whole(n)),
        [a, b, ..] => (whole(a), whole(b)),
        [] => (Some(0), Some(0)),
    };
    let (Some(from), Some(to)) = (from, to) else {
        return 0;
    };
    if to.saturating_sub(from) > 1_000_000 {
        return 0;
    }
    (from..to).map(|i| number_len(i.into()) + 1).sum::<usize>() + 1
}

//! How big a value is: the length of its compact JSON text ([`Value::to_json`]) and how deep
//! it nests, measured without writing it and stopping as soon as a bound is passed.

use std::fmt::Write as _;

use rust_decimal::Decimal;

use super::{MAX_DEPTH, Value};

/// Why a value does not fit its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Oversize {
    /// Its JSON text is longer than `limit` bytes.
    #[error("value larger than {limit} bytes as JSON")]
    Bytes {
        /// The bound it went past, in bytes.
        limit: usize,
    },
    /// It nests more lists and objects than [`MAX_DEPTH`].
    #[error("value nested deeper than {MAX_DEPTH} lists and objects")]
    Depth,
}

impl Value {
    /// The length in bytes of [`Value::to_json`]'s text, when it is at most `max_bytes` and the
    /// value nests at most `max_depth` lists and objects (at most [`MAX_DEPTH`]). Costs at most
    /// one walk over the first `max_bytes` of the value, and never recurses deeper than
    /// [`MAX_DEPTH`].
    ///
    /// # Errors
    ///
    /// [`Oversize`] naming the bound the value goes past.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::value::{MAX_DEPTH, Oversize, Value};
    /// let v = Value::from_json(r#"{"a": [1.50, "x\n"]}"#)?;
    /// assert_eq!(v.measure(100, MAX_DEPTH), Ok(v.to_json().len()));
    /// assert_eq!(v.measure(10, MAX_DEPTH), Err(Oversize::Bytes { limit: 10 }));
    /// assert_eq!(v.measure(100, 1), Err(Oversize::Depth));
    /// # Ok::<(), agentpump::value::JsonError>(())
    /// ```
    pub fn measure(&self, max_bytes: usize, max_depth: usize) -> Result<usize, Oversize> {
        let mut meter = Meter {
            used: 0,
            limit: max_bytes,
            depth: max_depth.min(MAX_DEPTH),
        };
        meter.value(self, 0)?;
        Ok(meter.used)
    }
}

struct Meter {
    used: usize,
    limit: usize,
    depth: usize,
}

impl Meter {
    fn add(&mut self, n: usize) -> Result<(), Oversize> {
        self.used = self.used.saturating_add(n);
        if self.used > self.limit {
            return Err(Oversize::Bytes { limit: self.limit });
        }
        Ok(())
    }

    fn value(&mut self, v: &Value, depth: usize) -> Result<(), Oversize> {
        match v {
            Value::Null | Value::Bool(true) => self.add(4),
            Value::Bool(false) => self.add(5),
            Value::Num(n) => self.add(number_len(*n)),
            Value::Str(s) => self.add(string_len(s)),
            Value::List(items) => {
                self.open(depth, items.len())?;
                items
                    .iter()
                    .try_for_each(|item| self.value(item, depth + 1))
            }
            Value::Object(map) => {
                self.open(depth, map.len())?;
                map.iter().try_for_each(|(k, item)| {
                    self.add(string_len(k) + 1)?;
                    self.value(item, depth + 1)
                })
            }
        }
    }

    /// A list or object of `n` items at `depth`: its brackets and commas.
    fn open(&mut self, depth: usize, n: usize) -> Result<(), Oversize> {
        if depth >= self.depth {
            return Err(Oversize::Depth);
        }
        self.add(2 + n.saturating_sub(1))
    }
}

/// The length of `s` written as a JSON string: quotes, and escapes as serde_json writes them.
pub(crate) fn string_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The length of `n` written as [`super::write_number`] writes it.
pub(crate) fn number_len(n: Decimal) -> usize {
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = write!(count, "{}", n.normalize());
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measure is the length of the text `to_json` writes, escapes and numbers included.
    #[test]
    fn the_measure_is_the_length_of_the_json_text() {
        let texts = [
            r#"null"#,
            r#"[true, false, 0, -0.5, 1.50, 1e3, 123456789012345678]"#,
            r#"{"a": "q\"b\\n\n\t\u0001\u001f é ∑", "b": {}, "c": [[], [{}]]}"#,
            r#"["", "x", {"k": null}]"#,
        ];
        for text in texts {
            let v = Value::from_json(text).unwrap();
            assert_eq!(
                v.measure(usize::MAX, MAX_DEPTH),
                Ok(v.to_json().len()),
                "{text}"
            );
        }
    }

    /// Depth counts lists and objects, as `from_json` does: 128 nested lists fit, 129 do not.
    #[test]
    fn depth_counts_lists_and_objects_like_the_json_reader() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let fits = Value::from_json(&deep(MAX_DEPTH)).unwrap();
        assert!(fits.measure(usize::MAX, MAX_DEPTH).is_ok());
        let deeper = Value::List(vec![fits]);
        assert_eq!(deeper.measure(usize::MAX, MAX_DEPTH), Err(Oversize::Depth));
        assert!(Value::from_json(&deep(MAX_DEPTH + 1)).is_err());
    }
}

//! [`Value`]: JSON's shapes with exact decimals — what a tool's arguments and results, a
//! process's symbols and its RETURN hold. Numbers are never floats: `0.1 + 0.2` is `0.3`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;

pub(crate) mod size;

pub use size::Oversize;

/// A value: `null`, a boolean, an exact decimal, a string, a list or an object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true`, `false`.
    Bool(bool),
    /// An exact decimal.
    Num(Decimal),
    /// A string.
    Str(String),
    /// A list.
    List(Vec<Value>),
    /// An object, keys sorted.
    Object(BTreeMap<String, Value>),
}

/// Why a text is not a JSON value: what and at which byte.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON at byte {at}: {what}")]
pub struct JsonError {
    /// What was expected or found.
    pub what: &'static str,
    /// The byte offset (0-based) where reading stopped.
    pub at: usize,
}

impl Value {
    /// The kind's name as users read it: `null`, `boolean`, `number`, `string`, `list`,
    /// `object`.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::value::Value;
    /// assert_eq!(Value::from_json("[1, 2]")?.kind(), "list");
    /// assert_eq!(Value::from_json("2.50")?.kind(), "number");
    /// # Ok::<(), agentpump::value::JsonError>(())
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Num(_) => "number",
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Object(_) => "object",
        }
    }

    /// The value as compact JSON (numbers normalized: `1.50` is `1.5`).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::value::Value;
    /// let v = Value::from_json(r#"{"b": [1.50, true], "a": "x"}"#)?;
    /// assert_eq!(v.to_json(), r#"{"a":"x","b":[1.5,true]}"#);
    /// # Ok::<(), agentpump::value::JsonError>(())
    /// ```
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.append_json(&mut out);
        out
    }

    /// [`Value::to_json`] appended to `out` (a buffer reused across values).
    pub(crate) fn append_json(&self, out: &mut String) {
        self.write_json(out, "", ":");
    }

    fn write_json(&self, out: &mut String, comma: &str, colon: &str) {
        match self {
            Value::Str(s) => out.push_str(&quote(s)),
            Value::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        out.push_str(comma);
                    }
                    item.write_json(out, comma, colon);
                }
                out.push(']');
            }
            Value::Object(map) => {
                out.push('{');
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        out.push_str(comma);
                    }
                    out.push_str(&quote(k));
                    out.push_str(colon);
                    v.write_json(out, comma, colon);
                }
                out.push('}');
            }
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Num(n) => write_number(out, *n),
        }
    }

    /// Reads a JSON text; numbers become exact decimals (exponents allowed, at most 28
    /// significant digits), duplicate keys keep the last.
    ///
    /// # Errors
    ///
    /// A [`JsonError`] naming what does not fit and where.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::value::Value;
    /// let value = Value::from_json(r#"{"x": 0.1, "ok": true}"#)?;
    /// assert_eq!(value.to_string(), r#"{"ok": true, "x": 0.1}"#); // exact decimals, keys sorted
    /// assert!(Value::from_json("[1,").is_err());
    /// # Ok::<(), agentpump::value::JsonError>(())
    /// ```
    pub fn from_json(text: &str) -> Result<Value, JsonError> {
        let mut r = JsonReader {
            text: text.as_bytes(),
            at: 0,
            depth: 0,
        };
        let v = r.value()?;
        r.space();
        if r.at < r.text.len() {
            return Err(r.fail("text after the value"));
        }
        Ok(v)
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

impl fmt::Display for Value {
    /// Strings as themselves, numbers normalized, lists and objects as JSON with a space after
    /// each comma and colon.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => f.write_str(s),
            other => {
                let mut out = String::new();
                other.write_json(&mut out, " ", ": ");
                f.write_str(&out)
            }
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<Decimal> for Value {
    fn from(n: Decimal) -> Self {
        Value::Num(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// The most lists and objects a value nests: deep enough for any real document, shallow
/// enough that hostile nesting cannot overflow the stack of anything that walks a value
/// (reading, writing, comparing, dropping). [`Value::from_json`] refuses deeper text and
/// [`Value::measure`] deeper values.
pub const MAX_DEPTH: usize = 128;

struct JsonReader<'a> {
    text: &'a [u8],
    at: usize,
    depth: usize,
}

impl JsonReader<'_> {
    fn fail(&self, what: &'static str) -> JsonError {
        JsonError { what, at: self.at }
    }

    fn space(&mut self) {
        while matches!(self.text.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.space();
        let hit = self.text.get(self.at) == Some(&c);
        self.at += usize::from(hit);
        hit
    }

    fn word(&mut self, word: &str, v: Value) -> Result<Value, JsonError> {
        if self.text[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(v)
        } else {
            Err(self.fail("expected a value"))
        }
    }

    fn value(&mut self) -> Result<Value, JsonError> {
        self.space();
        match self.text.get(self.at) {
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::list),
            Some(b'"') => self.string().map(Value::Str),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.fail("expected a value")),
            None => Err(self.fail("unexpected end")),
        }
    }

    fn nested(&mut self, f: fn(&mut Self) -> Result<Value, JsonError>) -> Result<Value, JsonError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.fail("nested too deep"));
        }
        self.at += 1;
        let v = f(self);
        self.depth -= 1;
        v
    }

    fn list(&mut self) -> Result<Value, JsonError> {
        let mut items = Vec::new();
        if self.eat(b']') {
            return Ok(Value::List(items));
        }
        loop {
            items.push(self.value()?);
            if self.eat(b']') {
                return Ok(Value::List(items));
            }
            if !self.eat(b',') {
                return Err(self.fail("expected `,` or `]`"));
            }
        }
    }

    fn object(&mut self) -> Result<Value, JsonError> {
        let mut map = BTreeMap::new();
        if self.eat(b'}') {
            return Ok(Value::Object(map));
        }
        loop {
            self.space();
            if self.text.get(self.at) != Some(&b'"') {
                return Err(self.fail("expected a key string"));
            }
            let key = self.string()?;
            if !self.eat(b':') {
                return Err(self.fail("expected `:`"));
            }
            map.insert(key, self.value()?);
            if self.eat(b'}') {
                return Ok(Value::Object(map));
            }
            if !self.eat(b',') {
                return Err(self.fail("expected `,` or `}`"));
            }
        }
    }

    /// A string literal, escapes read by serde_json (the one JSON string reader we trust).
    fn string(&mut self) -> Result<String, JsonError> {
        let start = self.at;
        self.at += 1;
        loop {
            match self.text.get(self.at) {
                Some(b'"') => break,
                Some(b'\\') => self.at += 2,
                Some(_) => self.at += 1,
                None => return Err(self.fail("unterminated string")),
            }
        }
        self.at += 1;
        let literal = std::str::from_utf8(&self.text[start..self.at]).map_err(|_| JsonError {
            what: "invalid UTF-8",
            at: start,
        })?;
        serde_json::from_str(literal).map_err(|_| JsonError {
            what: "invalid string escape",
            at: start,
        })
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.at;
        while matches!(
            self.text.get(self.at),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.at += 1;
        }
        let literal = std::str::from_utf8(&self.text[start..self.at]).unwrap_or("");
        parse_number(literal).map(Value::Num).ok_or(JsonError {
            what: "invalid number",
            at: start,
        })
    }
}

/// Writes `n` normalized (`1.50` as `1.5`), as its `Display` does; a whole number's digits are
/// written directly (one per tool argument and result field: the common case).
pub(crate) fn write_number(out: &mut String, n: Decimal) {
    let n = n.normalize();
    if n.scale() == 0 && n.mantissa() > 0 {
        let mut buf = [0u8; 40]; // |i128| < 10^39
        let (mut m, mut at) = (n.mantissa().unsigned_abs(), buf.len());
        while m > 0 {
            at -= 1;
            buf[at] = b'0' + (m % 10) as u8;
            m /= 10;
        }
        out.push_str(std::str::from_utf8(&buf[at..]).expect("ascii digits"));
    } else {
        use std::fmt::Write as _;
        let _ = write!(out, "{n}");
    }
}

/// A JSON number as an exact decimal; `None` when it is not JSON number syntax or does not fit.
///
/// # Example
///
/// ```
/// use agentpump::value::parse_number;
/// assert_eq!(parse_number("1.4142135623730950488").unwrap().to_string(), "1.4142135623730950488");
/// assert_eq!(parse_number("2.5e3").unwrap().to_string(), "2500");
/// assert!(parse_number("01").is_none() && parse_number("1.").is_none());
/// ```
pub fn parse_number(text: &str) -> Option<Decimal> {
    // The common case, a whole number that fits 18 digits (no sign: `-0` keeps its way).
    if (1..=18).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text.len() == 1 || !text.starts_with('0'))
    {
        return text.parse::<u64>().ok().map(Decimal::from);
    }
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    let digits = mantissa.strip_prefix('-').unwrap_or(mantissa);
    let (int, frac) = match digits.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (digits, None),
    };
    let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !plain(int) || (int.len() > 1 && int.starts_with('0')) || frac.is_some_and(|f| !plain(f)) {
        return None;
    }
    let value = Decimal::from_str(mantissa).ok()?;
    match exponent {
        None => Some(value),
        Some(e) => {
            let e: i64 = e.strip_prefix('+').unwrap_or(e).parse().ok()?;
            let ten = Decimal::TEN;
            let mut v = value;
            for _ in 0..e.unsigned_abs().min(64) {
                v = if e > 0 {
                    v.checked_mul(ten)?
                } else {
                    v.checked_div(ten)?
                };
            }
            (e.unsigned_abs() <= 64).then_some(v.normalize())
        }
    }
}

/// The square root of `n`, to a decimal's precision; `None` for a negative number.
///
/// `rust_decimal`'s own `sqrt` panics ("geo mean circuit breaker") when Newton's steps end up
/// alternating between two neighbours in the last digit, which some inputs reach (the
/// calculator fuzz target found one): this one stops there, on the smaller of the two, and
/// never takes more than 1 000 steps.
///
/// # Example
///
/// ```
/// use agentpump::value::sqrt;
/// use rust_decimal::Decimal;
/// assert_eq!(sqrt(Decimal::from(16)), Some(Decimal::from(4)));
/// assert_eq!(sqrt(Decimal::from(-1)), None);
/// ```
pub fn sqrt(n: Decimal) -> Option<Decimal> {
    if n.is_zero() {
        return Some(Decimal::ZERO);
    }
    if n.is_sign_negative() {
        return None;
    }
    let two = Decimal::TWO;
    let mut x = match n / two {
        half if half.is_zero() => n,
        half => half,
    };
    let mut before = None;
    for _ in 0..1_000 {
        let Some(next) = n
            .checked_div(x)
            .and_then(|q| q.checked_add(x))
            .map(|s| s / two)
        else {
            return Some(x);
        };
        if next == x {
            return Some(x);
        }
        if before == Some(next) {
            return Some(x.min(next)); // a two-step cycle in the last digit
        }
        (before, x) = (Some(x), next);
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    /// The short ways for whole numbers agree with rust_decimal's own parse and display.
    #[test]
    fn whole_numbers_take_the_short_way_to_the_same_place() {
        use std::str::FromStr as _;
        let mut texts: Vec<String> = (0..2_000u64).map(|n| n.to_string()).collect();
        texts.extend(
            [
                "999999999999999999",
                "1000000000000000000",
                "00",
                "01",
                "-0",
                "-7",
                "+1",
                "",
            ]
            .map(String::from),
        );
        for t in &texts {
            let short = parse_number(t);
            let long = Decimal::from_str(t).ok().filter(|_| {
                t.bytes().all(|b| b.is_ascii_digit() || b == b'-')
                    && !t.is_empty()
                    && !(t.trim_start_matches('-').len() > 1
                        && t.trim_start_matches('-').starts_with('0'))
            });
            assert_eq!(short, long, "{t}");
            if let Some(n) = short {
                assert_eq!(short.map(|d| d.scale()), long.map(|d| d.scale()), "{t}");
                let mut out = String::new();
                write_number(&mut out, n);
                assert_eq!(out, n.normalize().to_string(), "{t}");
            }
        }
        for d in [
            "1.50",
            "-1.50",
            "-0",
            "0.000",
            "120.0",
            "-120",
            "79228162514264337593543950335",
        ] {
            let n = Decimal::from_str(d).unwrap();
            let mut out = String::new();
            write_number(&mut out, n);
            assert_eq!(out, n.normalize().to_string(), "{d}");
        }
    }

    use super::*;

    #[test]
    fn exact_numbers_survive_a_round_trip() {
        let text = r#"{"x":0.1,"y":[1.4142135623730950488,-3,1e-3],"z":{"s":"a\"b\u00e9"}}"#;
        let v = Value::from_json(text).unwrap();
        assert_eq!(
            v.to_json(),
            r#"{"x":0.1,"y":[1.4142135623730950488,-3,0.001],"z":{"s":"a\"bé"}}"#
        );
        assert_eq!(Value::from_json(&v.to_json()).unwrap(), v);
    }

    #[test]
    fn bad_json_names_where() {
        assert_eq!(Value::from_json("[1,]").unwrap_err().at, 3);
        assert_eq!(
            Value::from_json("{\"a\" 1}").unwrap_err().what,
            "expected `:`"
        );
        assert!(Value::from_json("1 2").is_err());
        assert!(Value::from_json(&"[".repeat(200)).is_err());
    }

    /// The input the calculator fuzz target found, where `rust_decimal`'s `sqrt` panics
    /// ("geo mean circuit breaker"): every square root of a small fraction answers.
    #[test]
    fn square_roots_never_panic() {
        for digits in 1..=28u32 {
            for m in [1u64, 2, 3, 7, 33, 99, 12345] {
                let n = Decimal::from_i128_with_scale(i128::from(m), digits);
                let root = super::sqrt(n).unwrap();
                assert!(root >= Decimal::ZERO, "{n}");
            }
        }
        assert_eq!(
            super::sqrt(Decimal::from(2))
                .unwrap()
                .round_dp(10)
                .to_string(),
            "1.4142135624"
        );
    }
}

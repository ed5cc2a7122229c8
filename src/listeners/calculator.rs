//! [`Calculator`]: a tool that evaluates arithmetic exactly, in decimals.

use async_trait::async_trait;
use quick_xml::escape::escape;
use rust_decimal::{Decimal, MathematicalOps};

use crate::{Context, Delivery, Listener, ListenerError, QName};

/// Namespace of the calculator's messages.
pub const CALC_NS: &str = "urn:agentpump:calc:v1";

/// Answers `<calc xmlns="urn:agentpump:calc:v1">(1 + 2/3) * 4</calc>` with
/// `<result xmlns="…">…</result>`, or `<calc-error xmlns="…">what and where</calc-error>`.
///
/// Numbers are exact decimals (28 significant digits, as `rust_decimal`); operators `+ - * /`,
/// parentheses, unary minus, and `sqrt(x)`. Never a float.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

impl Calculator {
    /// The root it accepts.
    pub fn root() -> QName {
        QName::new(CALC_NS, "calc")
    }
}

#[async_trait]
impl Listener for Calculator {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        #[derive(serde::Deserialize)]
        struct Calc {
            #[serde(rename = "$text", default)]
            expression: String,
        }
        if msg.is_system() {
            return Ok(());
        }
        let Calc { expression } = msg.decode()?;
        match evaluate(&expression) {
            Ok(value) => cx.reply(format!(
                "<result xmlns=\"{CALC_NS}\">{}</result>",
                value.normalize()
            )),
            Err(e) => cx.reply(format!(
                "<calc-error xmlns=\"{CALC_NS}\">{}</calc-error>",
                escape(e.as_str())
            )),
        }
        Ok(())
    }
}

/// Evaluates an expression exactly.
///
/// # Errors
///
/// A message naming the position and the problem (unexpected character, division by zero,
/// overflow, square root of a negative number).
///
/// # Example
///
/// ```
/// use agentpump::listeners::calculator::evaluate;
/// assert_eq!(evaluate("(1 + 2) * 0.1")?.to_string(), "0.3");
/// # Ok::<(), String>(())
/// ```
pub fn evaluate(expression: &str) -> Result<Decimal, String> {
    let mut p = Parser {
        text: expression.as_bytes(),
        at: 0,
    };
    let value = p.sum()?;
    p.space();
    if p.at < p.text.len() {
        return Err(format!(
            "unexpected `{}` at position {}",
            p.text[p.at] as char,
            p.at + 1
        ));
    }
    Ok(value)
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.space();
        let hit = self.text.get(self.at) == Some(&c);
        self.at += usize::from(hit);
        hit
    }

    fn sum(&mut self) -> Result<Decimal, String> {
        let mut value = self.product()?;
        loop {
            if self.eat(b'+') {
                value = value.checked_add(self.product()?).ok_or("overflow in +")?;
            } else if self.eat(b'-') {
                value = value.checked_sub(self.product()?).ok_or("overflow in -")?;
            } else {
                return Ok(value);
            }
        }
    }

    fn product(&mut self) -> Result<Decimal, String> {
        let mut value = self.unary()?;
        loop {
            if self.eat(b'*') {
                value = value.checked_mul(self.unary()?).ok_or("overflow in *")?;
            } else if self.eat(b'/') {
                self.space();
                let at = self.at + 1;
                let divisor = self.unary()?;
                if divisor.is_zero() {
                    return Err(format!("division by zero at position {at}"));
                }
                value = value.checked_div(divisor).ok_or("overflow in /")?;
            } else {
                return Ok(value);
            }
        }
    }

    fn unary(&mut self) -> Result<Decimal, String> {
        if self.eat(b'-') {
            return Ok(-self.unary()?);
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Decimal, String> {
        self.space();
        if self.eat(b'(') {
            let value = self.sum()?;
            return if self.eat(b')') {
                Ok(value)
            } else {
                Err(format!("expected `)` at position {}", self.at + 1))
            };
        }
        if self.text[self.at..].starts_with(b"sqrt") {
            self.at += 4;
            if !self.eat(b'(') {
                return Err(format!(
                    "expected `(` after sqrt at position {}",
                    self.at + 1
                ));
            }
            let value = self.sum()?;
            if !self.eat(b')') {
                return Err(format!("expected `)` at position {}", self.at + 1));
            }
            return value
                .sqrt()
                .ok_or_else(|| format!("square root of negative {value}"));
        }
        let start = self.at;
        while self
            .text
            .get(self.at)
            .is_some_and(|c| c.is_ascii_digit() || *c == b'.')
        {
            self.at += 1;
        }
        let number = std::str::from_utf8(&self.text[start..self.at]).unwrap_or_default();
        match self.text.get(start) {
            _ if !number.is_empty() => Decimal::from_str_exact(number)
                .map_err(|_| format!("`{number}` at position {} is not a number", start + 1)),
            Some(c) => Err(format!(
                "unexpected `{}` at position {}",
                *c as char,
                start + 1
            )),
            None => Err("unexpected end of expression".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_exactly() {
        let cases = [
            ("1 + 2 * 3", "7"),
            ("(1 + 2) * 3", "9"),
            ("0.1 + 0.2", "0.3"),
            ("-2 * -3", "6"),
            ("10 / 4", "2.5"),
            ("sqrt(16)", "4"),
        ];
        for (expression, expected) in cases {
            assert_eq!(
                evaluate(expression).unwrap().normalize().to_string(),
                expected,
                "{expression}"
            );
        }
    }

    #[test]
    fn says_what_is_wrong_and_where() {
        let cases = [
            ("1 / 0", "division by zero at position 5"),
            ("2 +", "unexpected end of expression"),
            ("2 $ 3", "unexpected `$` at position 3"),
            ("(1 + 2", "expected `)` at position 7"),
            ("sqrt(-4)", "square root of negative -4"),
            ("1.2.3", "`1.2.3` at position 1 is not a number"),
        ];
        for (expression, expected) in cases {
            assert_eq!(evaluate(expression).unwrap_err(), expected, "{expression}");
        }
    }
}

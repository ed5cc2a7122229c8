//! [`Calculator`]: a tool that evaluates arithmetic exactly, in decimals.

use std::sync::LazyLock;

use async_trait::async_trait;
use quick_xml::escape::escape;
use rust_decimal::{Decimal, MathematicalOps};

use crate::tool::{self, Call, ErrorType, Signature, TOOL_NS, Tool, ToolError, ToolResult};
use crate::{Context, Delivery, Listener, ListenerError, QName};

/// Namespace of the calculator's own messages.
pub const CALC_NS: &str = "urn:agentpump:calc:v1";

/// The calculator's signature as a tool, made once.
static SIGNATURE: LazyLock<Signature> = LazyLock::new(|| {
    Signature::new("calculator", "evaluates arithmetic exactly, in decimals")
        .arg(
            "expression",
            "string",
            "numbers, + - * /, parentheses, unary minus and sqrt(x)",
            true,
        )
        .field("value", "number", "the exact value")
});

/// Evaluates arithmetic exactly, in two protocols:
///
/// - its own: `<calc xmlns="urn:agentpump:calc:v1">(1 + 2/3) * 4</calc>` answered with
///   `<result xmlns="…">…</result>`, or `<calc-error xmlns="…">what and where</calc-error>`;
/// - the tool protocol, as tool `calculator`: `<call tool="calculator"><arg
///   name="expression">…</arg></call>` answered with a `<result>` whose field `value` is a
///   number, or an `<error type="invalid-argument">` with the same message as `calc-error`.
///
/// Numbers are exact decimals (28 significant digits, as `rust_decimal`); operators `+ - * /`,
/// parentheses, unary minus, and `sqrt(x)`. Never a float.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

impl Calculator {
    /// The root of its own protocol.
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
        if msg.qname().namespace() == TOOL_NS {
            return tool::answer(self, &SIGNATURE, msg, cx).await;
        }
        let Calc { expression } = msg.decode()?;
        match evaluate(&expression) {
            Ok(value) => cx.reply(format!(
                "<result xmlns=\"{CALC_NS}\">{}</result>",
                value.normalize()
            )),
            Err(e) => cx.reply(format!(
                "<calc-error xmlns=\"{CALC_NS}\">{}</calc-error>",
                escape(e.to_string().as_str())
            )),
        }
        Ok(())
    }

    /// Its tool calls go through [`tool::answer`], which answers `timeout-ms` itself.
    fn answers_call_timeouts(&self) -> bool {
        true
    }
}

#[async_trait]
impl Tool for Calculator {
    fn signature(&self) -> Signature {
        SIGNATURE.clone()
    }

    async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        let expression = call.args["expression"].to_string();
        match evaluate(&expression) {
            Ok(value) => Ok(call.result().field("value", value.normalize())),
            Err(e) => Err(call.error(ErrorType::InvalidArgument, e.to_string())),
        }
    }
}

/// Why an expression has no value: what and where (positions count bytes from 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalcError {
    /// A character that cannot come here.
    #[error("unexpected `{found}` at position {at}")]
    Unexpected {
        /// The character.
        found: char,
        /// Where.
        at: usize,
    },
    /// The expression stops where an operand is due.
    #[error("unexpected end of expression")]
    End,
    /// A closing parenthesis is missing.
    #[error("expected `)` at position {at}")]
    Unclosed {
        /// Where it was due.
        at: usize,
    },
    /// `sqrt` without its `(`.
    #[error("expected `(` after sqrt at position {at}")]
    SqrtParen {
        /// Where it was due.
        at: usize,
    },
    /// A digit run that is not a number (`1.2.3`).
    #[error("`{text}` at position {at} is not a number")]
    NotANumber {
        /// The text.
        text: String,
        /// Where it starts.
        at: usize,
    },
    /// A division by zero.
    #[error("division by zero at position {at}")]
    DivisionByZero {
        /// Where the divisor starts.
        at: usize,
    },
    /// A result beyond 28 significant digits' range.
    #[error("overflow in {op}")]
    Overflow {
        /// The operator: `+ - * /`.
        op: char,
    },
    /// The square root of a negative number.
    #[error("square root of negative {value}")]
    NegativeSqrt {
        /// The number.
        value: Decimal,
    },
}

/// Evaluates an expression exactly.
///
/// # Errors
///
/// A [`CalcError`] naming the position and the problem (unexpected character, division by
/// zero, overflow, square root of a negative number).
///
/// # Example
///
/// ```
/// use agentpump::listeners::calculator::{CalcError, evaluate};
/// assert_eq!(evaluate("(1 + 2) * 0.1")?.to_string(), "0.3");
/// assert_eq!(evaluate("1 / 0").unwrap_err().to_string(), "division by zero at position 5");
/// # Ok::<(), CalcError>(())
/// ```
pub fn evaluate(expression: &str) -> Result<Decimal, CalcError> {
    let mut p = Parser {
        text: expression.as_bytes(),
        at: 0,
    };
    let value = p.sum()?;
    p.space();
    if p.at < p.text.len() {
        return Err(CalcError::Unexpected {
            found: p.text[p.at] as char,
            at: p.at + 1,
        });
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

    fn sum(&mut self) -> Result<Decimal, CalcError> {
        let mut value = self.product()?;
        loop {
            if self.eat(b'+') {
                value = value
                    .checked_add(self.product()?)
                    .ok_or(CalcError::Overflow { op: '+' })?;
            } else if self.eat(b'-') {
                value = value
                    .checked_sub(self.product()?)
                    .ok_or(CalcError::Overflow { op: '-' })?;
            } else {
                return Ok(value);
            }
        }
    }

    fn product(&mut self) -> Result<Decimal, CalcError> {
        let mut value = self.unary()?;
        loop {
            if self.eat(b'*') {
                value = value
                    .checked_mul(self.unary()?)
                    .ok_or(CalcError::Overflow { op: '*' })?;
            } else if self.eat(b'/') {
                self.space();
                let at = self.at + 1;
                let divisor = self.unary()?;
                if divisor.is_zero() {
                    return Err(CalcError::DivisionByZero { at });
                }
                value = value
                    .checked_div(divisor)
                    .ok_or(CalcError::Overflow { op: '/' })?;
            } else {
                return Ok(value);
            }
        }
    }

    fn unary(&mut self) -> Result<Decimal, CalcError> {
        if self.eat(b'-') {
            return Ok(-self.unary()?);
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Decimal, CalcError> {
        self.space();
        if self.eat(b'(') {
            let value = self.sum()?;
            return if self.eat(b')') {
                Ok(value)
            } else {
                Err(CalcError::Unclosed { at: self.at + 1 })
            };
        }
        if self.text[self.at..].starts_with(b"sqrt") {
            self.at += 4;
            if !self.eat(b'(') {
                return Err(CalcError::SqrtParen { at: self.at + 1 });
            }
            let value = self.sum()?;
            if !self.eat(b')') {
                return Err(CalcError::Unclosed { at: self.at + 1 });
            }
            return value.sqrt().ok_or(CalcError::NegativeSqrt { value });
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
            _ if !number.is_empty() => {
                Decimal::from_str_exact(number).map_err(|_| CalcError::NotANumber {
                    text: number.to_owned(),
                    at: start + 1,
                })
            }
            Some(c) => Err(CalcError::Unexpected {
                found: *c as char,
                at: start + 1,
            }),
            None => Err(CalcError::End),
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
            assert_eq!(
                evaluate(expression).unwrap_err().to_string(),
                expected,
                "{expression}"
            );
        }
    }
}

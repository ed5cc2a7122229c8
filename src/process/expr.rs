//! The engine-defined `<expr>` (conditions of IF, ASSERT, GIVEN/WHEN/THEN; values of SET,
//! `where:` and RETURN) and `<path>` (CAPTURE maps), which 05 leaves to the engine.
//!
//! The grammar is in `docs/process-grammar.ebnf`. In short: `OR`, `AND`, `NOT` over
//! comparisons (`= == != < <= > >= ≥ ≤ ≠ IN`), `+ - * / %` on exact decimals (`+` also joins
//! strings and lists), unary minus, member paths (`err.type`, `RESULT.items[0]`), literals
//! (string, number, `true`/`false`/`null`, `[…]` lists, `{"k": …}` objects, `enum(A,B)`),
//! symbols, lowercase locals (loop variables, the RECOVER variable, process arguments),
//! placeholders and the functions of [`Func`]. An expression has no side effects.

use rust_decimal::Decimal;

use super::diagnostic::Span;

mod eval;
mod func;
mod ops;
mod parse;
mod path;
mod primary;

pub use eval::{Env, EvalError, Value, eval};
pub use func::Func;
pub use parse::parse_expr;
pub use path::{Path, PathSeg, parse_path};

/// An expression and where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is.
    pub span: Span,
}

/// The forms of an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExprKind {
    /// `"text"`.
    Str(String),
    /// `1.5`.
    Num(Decimal),
    /// `true`, `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// `UPPER_SNAKE`: a symbol (constant, runtime value, or bound by CAPTURE/SET).
    Symbol(String),
    /// `lower_id`: a loop variable, the RECOVER variable or a process argument.
    Local(String),
    /// `<NAME>`: resolved INP → constants → runtime.
    Placeholder(String),
    /// `enum(A,B)`: a choice set.
    Enum(Vec<String>),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{"key": value}` (keys in source order).
    Object(Vec<(String, Expr)>),
    /// `base.name`.
    Member(Box<Expr>, String),
    /// `base[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// `NOT e`, `-e`.
    Unary(UnOp, Box<Expr>),
    /// `a op b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `len(x)` and the other functions.
    Call(Func, Vec<Expr>),
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    /// `NOT`.
    Not,
    /// `-`.
    Neg,
}

/// Binary operators, loosest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `OR` (short-circuit).
    Or,
    /// `AND` (short-circuit).
    And,
    /// `=` or `==`.
    Eq,
    /// `!=`, `≠`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`, `≤`.
    Le,
    /// `>`.
    Gt,
    /// `>=`, `≥`.
    Ge,
    /// `IN`: membership in a list, key of an object, substring of a string.
    In,
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Rem,
}

impl Expr {
    /// Calls `f` on this expression and every expression inside it, outermost first.
    pub fn walk(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match &self.kind {
            ExprKind::List(items) | ExprKind::Call(_, items) => {
                items.iter().for_each(|e| e.walk(f));
            }
            ExprKind::Object(pairs) => pairs.iter().for_each(|(_, e)| e.walk(f)),
            ExprKind::Member(base, _) | ExprKind::Unary(_, base) => base.walk(f),
            ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            _ => {}
        }
    }

    /// Whether the expression can only be a number or a string (an ASSERT of it is invalid).
    pub fn is_plain_value(&self) -> bool {
        use ExprKind::*;
        match &self.kind {
            Str(_) | Num(_) | Null | List(_) | Object(_) | Enum(_) => true,
            Binary(op, _, _) => matches!(
                op,
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem
            ),
            Unary(UnOp::Neg, _) => true,
            _ => false,
        }
    }
}

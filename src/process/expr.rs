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

pub use eval::{DEFAULT_MAX_VALUE_BYTES, Env, EvalError, Value, eval};
pub use func::Func;
pub use parse::parse_expr;
pub use path::{Path, PathSeg, parse_path};

/// The deepest an expression may nest: each parenthesis, list, object, call, index, member,
/// `NOT`, unary minus and each operator of a chain (`1 + 1 + 1` is two levels over its
/// operands) counts one level. Deeper is AP-002 `LimitExceeded` where the limit is crossed:
/// the parser, the evaluator and every walk over an expression recurse, and a bound here is
/// what keeps hostile text from overflowing a thread's stack.
pub const MAX_DEPTH: u32 = 64;

/// An expression and where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is.
    pub span: Span,
    /// Levels of nesting, this one included (see [`Expr::depth`]).
    depth: u32,
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

impl ExprKind {
    /// Calls `f` on each expression directly inside this one, in order.
    fn parts<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        match self {
            ExprKind::List(items) | ExprKind::Call(_, items) => items.iter().for_each(f),
            ExprKind::Object(pairs) => pairs.iter().for_each(|(_, e)| f(e)),
            ExprKind::Member(base, _) | ExprKind::Unary(_, base) => f(base),
            ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) => {
                f(a);
                f(b);
            }
            _ => {}
        }
    }
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
    /// An expression of `kind` written at `span`; its depth is one more than its deepest part.
    pub(crate) fn new(kind: ExprKind, span: Span) -> Expr {
        let mut deepest = 0;
        kind.parts(&mut |e| deepest = deepest.max(e.depth));
        Expr {
            kind,
            span,
            depth: deepest + 1,
        }
    }

    /// How deep it nests: 1 for a literal or a name, one more than its deepest part
    /// otherwise. A parsed expression is at most [`MAX_DEPTH`] deep.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Calls `f` on this expression and every expression inside it, outermost first.
    pub fn walk(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        self.kind.parts(&mut |e| e.walk(f));
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

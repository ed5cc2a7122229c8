//! The typed syntax tree of a process body (05 grammar), one variant per statement.
//!
//! Values are [`Expr`]s everywhere: the 05 `Value` (string, number, boolean, JSON, symbol,
//! placeholder, `enum(…)`) is the part of the engine's `<expr>` without operators.

use rust_decimal::Decimal;
use std::collections::BTreeSet;

use super::diagnostic::Span;
use super::expr::{Expr, Path};

/// A name as written, and where: a symbol, a process or tool id, a key, a loop variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    /// The name (without backticks).
    pub name: String,
    /// Where it is written.
    pub span: Span,
}

/// `key=VALUE` in `where:`, in `RETURN:` pairs and in `WITH {…}` defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The key.
    pub key: Ident,
    /// The value.
    pub value: Expr,
}

/// `(atomic, timeout_ms=N, retry=N)` after a USE; each part optional, in this order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Modifiers {
    /// `atomic`: the call is not retried once it may have had an effect (see docs/processes.md).
    pub atomic: bool,
    /// `timeout_ms=N` and where N is written.
    pub timeout_ms: Option<(Decimal, Span)>,
    /// `retry=N` and where N is written.
    pub retry: Option<(Decimal, Span)>,
}

/// ``USE `tool` where: k=V, … (modifiers)``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// The tool.
    pub tool: Ident,
    /// Its named arguments, as written.
    pub params: Vec<Param>,
    /// The modifiers, if a parenthesis follows.
    pub modifiers: Option<Modifiers>,
    /// The whole statement.
    pub span: Span,
}

/// `"path"→SYMBOL` in a CAPTURE map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    /// The path into the tool's result.
    pub path: Path,
    /// The symbol it binds.
    pub symbol: Ident,
}

/// ``CAPTURE S1, S2 from `tool` map: "p"→S1, …``: the only binding point for tool results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The symbols bound.
    pub symbols: Vec<Ident>,
    /// The tool whose last result is read.
    pub tool: Ident,
    /// The map, empty when there is none.
    pub map: Vec<MapEntry>,
    /// The whole statement.
    pub span: Span,
}

/// Where a SET value comes from: `(from …)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `` (from `tool`) ``.
    Tool(Ident),
    /// `(from INP)`: the process input.
    Inp,
    /// `(from SYMBOL)`.
    Symbol(Ident),
    /// `(from "Agent Inference")`.
    AgentInference,
}

/// What a RETURN returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Return {
    /// `RETURN: A, B`.
    Symbols(Vec<Ident>),
    /// `RETURN: key=V, …` (a value may be an artifact reference object).
    Pairs(Vec<Param>),
}

/// `level=brief|full` of a TELL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `brief`.
    Brief,
    /// `full`.
    Full,
}

/// `TELL "message" why:SYMBOL level=… outcome:"…"`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tell {
    /// The message.
    pub message: Option<String>,
    /// `why:SYMBOL`.
    pub why: Option<Ident>,
    /// `level=`.
    pub level: Option<Level>,
    /// `outcome:"…"`.
    pub outcome: Option<String>,
}

/// `SNAP [A, B] delta=… redact=[…]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snap {
    /// The symbols snapshotted.
    pub symbols: Vec<Ident>,
    /// `delta=`.
    pub delta: Option<bool>,
    /// `redact=[…]`.
    pub redact: Vec<Ident>,
}

/// `IF cond:` or `ELSE IF cond:` and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch {
    /// The condition.
    pub cond: Expr,
    /// The body.
    pub body: Block,
}

/// Which BDD keyword opens a condition block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bdd {
    /// `GIVEN`: a precondition.
    Given,
    /// `WHEN`: a trigger condition.
    When,
    /// `THEN`: a postcondition.
    Then,
}

/// A statement and its keyword's span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stmt {
    /// What it is.
    pub kind: StmtKind,
    /// Where its line starts (the keyword), to the end of the line.
    pub span: Span,
}

/// An indented block of statements.
pub type Block = Vec<Stmt>;

/// Every statement of the 05 grammar; `ELSE IF`/`ELSE` are folded into [`StmtKind::If`] and
/// `RECOVER` into [`StmtKind::Try`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StmtKind {
    /// ``RUN `process` where: …``.
    Run {
        /// The process.
        process: Ident,
        /// Its arguments.
        params: Vec<Param>,
    },
    /// ``USE `tool` …``.
    Use(Use),
    /// ``CAPTURE … from `tool` …``.
    Capture(Capture),
    /// `SET S := VALUE (from …)`.
    Set {
        /// The symbol.
        symbol: Ident,
        /// The value.
        value: Expr,
        /// The origin, if given.
        origin: Option<Origin>,
    },
    /// `UNSET S`.
    Unset(Ident),
    /// `RETURN: …`.
    Return(Return),
    /// `ASSERT expr`.
    Assert(Expr),
    /// `ASSERT ALL: [e1, e2]`.
    AssertAll(Vec<Expr>),
    /// `TELL …`.
    Tell(Tell),
    /// `MILESTONE "title"`.
    Milestone(String),
    /// `SNAP […] …`.
    Snap(Snap),
    /// `IF`, any `ELSE IF`s and an optional `ELSE`.
    If {
        /// `IF` then each `ELSE IF`, in order.
        branches: Vec<Branch>,
        /// The `ELSE` body.
        otherwise: Option<Block>,
    },
    /// `GIVEN`/`WHEN`/`THEN cond:` and its (possibly empty) body.
    Condition {
        /// Which keyword.
        kind: Bdd,
        /// The condition.
        cond: Expr,
        /// The body.
        body: Block,
    },
    /// `WITH {defaults}:` and its body.
    With {
        /// The defaults, keys in source order.
        defaults: Vec<Param>,
        /// The body.
        body: Block,
    },
    /// `PAR:` and its USE statements in lexical order.
    Par(Vec<Use>),
    /// `JOIN:` and its CAPTURE statements.
    Join(Vec<Capture>),
    /// `FOREACH var IN LIST:`.
    Foreach {
        /// The loop variable.
        var: Ident,
        /// The list symbol.
        list: Ident,
        /// The body.
        body: Block,
    },
    /// `TRY:` … `RECOVER (err):` ….
    Try {
        /// The guarded body.
        body: Block,
        /// The error variable.
        err: Ident,
        /// The recovery body.
        recover: Block,
    },
}

/// A declared argument of a process: `args="amount: Number"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// The name (lowercase id).
    pub name: Ident,
    /// The declared type, as written (`Number`).
    pub ty: String,
}

/// A parsed `<process>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// `id`.
    pub id: Ident,
    /// `name`, if given.
    pub name: Option<String>,
    /// `args`, in order.
    pub args: Vec<Arg>,
    /// The body.
    pub body: Block,
    /// The names (words and placeholders) on the lines the parser left out of `body` — broken
    /// lines and the bodies they open — so a name used there still counts as used: a use is
    /// a use whatever else is wrong on its line.
    pub left_out: BTreeSet<String>,
    /// The opening tag.
    pub span: Span,
}

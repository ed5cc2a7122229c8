//! Compiling a process body into a flat list of [`Op`]s with jumps, so that a running process
//! is a program counter and a few stacks — state that can stop at any USE and go on later.

use crate::process::ast::{self, Bdd, Block, Capture, Param, Return, Snap, StmtKind, Tell, Use};
use crate::process::diagnostic::Span;
use crate::process::expr::Expr;

/// One instruction. Jump targets are indices into the process's ops.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// `SET S := V`; `inferred` for `(from "Agent Inference")`.
    Set {
        symbol: String,
        value: Expr,
        inferred: bool,
    },
    /// `UNSET S`.
    Unset(String),
    /// A USE outside PAR: call, wait for the answer.
    Use(Use),
    /// `PAR:`: launch every USE, in lexical order, each in a child thread.
    Par(Vec<Use>),
    /// `CAPTURE … from tool`.
    Capture(Capture),
    /// `JOIN:`: wait for every PAR child, then capture in lexical order.
    Join(Vec<Capture>),
    /// ``RUN `process` where: …``: the process in a child thread, its RETURN captured.
    Run { process: String, params: Vec<Param> },
    /// `RETURN: …`.
    Return(Return),
    /// `ASSERT e` and `ASSERT ALL: […]`.
    Assert(Vec<Expr>),
    /// `GIVEN`/`THEN`: the condition must hold; `WHEN`: skip to `skip` when it does not.
    Condition { kind: Bdd, cond: Expr, skip: usize },
    /// `TELL …`.
    Tell(Tell),
    /// `MILESTONE "title"`.
    Milestone(String),
    /// `SNAP …`.
    Snap(Snap),
    /// Go to `to` when `cond` is false (IF, ELSE IF).
    Unless { cond: Expr, to: usize },
    /// Go to `to`.
    Jump(usize),
    /// `WITH {defaults}:` opens.
    WithPush(Vec<Param>),
    /// A WITH block closes.
    WithPop,
    /// `FOREACH var IN LIST:` opens: an empty list goes to `end`.
    Foreach {
        var: String,
        list: String,
        end: usize,
    },
    /// The end of a FOREACH body: the next item goes back to `body`.
    Next { body: usize },
    /// `TRY:` opens; a hard error goes to `recover` with the error bound to `err`.
    TryPush { recover: usize, err: String },
    /// The TRY body ended without error: drop the handler, go to `end`.
    TryPop { end: usize },
    /// The RECOVER body ended: the error variable goes out of scope.
    RecoverEnd,
    /// The process body ended without RETURN.
    End,
}

/// A compiled process: ops and the line each comes from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Code {
    pub ops: Vec<Op>,
    pub spans: Vec<Span>,
}

impl Code {
    /// Compiles a process body.
    pub fn compile(body: &Block, end: Span) -> Code {
        let mut code = Code::default();
        code.block(body);
        code.push(Op::End, end);
        code
    }

    fn push(&mut self, op: Op, span: Span) -> usize {
        self.ops.push(op);
        self.spans.push(span);
        self.ops.len() - 1
    }

    fn here(&self) -> usize {
        self.ops.len()
    }

    fn patch(&mut self, at: usize, target: usize) {
        match &mut self.ops[at] {
            Op::Unless { to, .. } | Op::Jump(to) => *to = target,
            Op::Condition { skip, .. } => *skip = target,
            Op::Foreach { end, .. } | Op::TryPop { end } => *end = target,
            Op::TryPush { recover, .. } => *recover = target,
            _ => unreachable!("only jumps are patched"),
        }
    }

    fn block(&mut self, body: &Block) {
        for stmt in body {
            self.stmt(&stmt.kind, stmt.span);
        }
    }

    fn stmt(&mut self, kind: &StmtKind, span: Span) {
        match kind {
            StmtKind::Run { process, params } => {
                let op = Op::Run {
                    process: process.name.clone(),
                    params: params.clone(),
                };
                self.push(op, span);
            }
            StmtKind::Use(u) => {
                self.push(Op::Use(u.clone()), span);
            }
            StmtKind::Capture(c) => {
                self.push(Op::Capture(c.clone()), span);
            }
            StmtKind::Set {
                symbol,
                value,
                origin,
            } => {
                let op = Op::Set {
                    symbol: symbol.name.clone(),
                    value: value.clone(),
                    inferred: matches!(origin, Some(ast::Origin::AgentInference)),
                };
                self.push(op, span);
            }
            StmtKind::Unset(s) => {
                self.push(Op::Unset(s.name.clone()), span);
            }
            StmtKind::Return(r) => {
                self.push(Op::Return(r.clone()), span);
            }
            StmtKind::Assert(e) => {
                self.push(Op::Assert(vec![e.clone()]), span);
            }
            StmtKind::AssertAll(es) => {
                self.push(Op::Assert(es.clone()), span);
            }
            StmtKind::Tell(t) => {
                self.push(Op::Tell(t.clone()), span);
            }
            StmtKind::Milestone(m) => {
                self.push(Op::Milestone(m.clone()), span);
            }
            StmtKind::Snap(s) => {
                self.push(Op::Snap(s.clone()), span);
            }
            StmtKind::If {
                branches,
                otherwise,
            } => self.branches(branches, otherwise.as_ref()),
            StmtKind::Condition { kind, cond, body } => {
                let at = self.push(
                    Op::Condition {
                        kind: *kind,
                        cond: cond.clone(),
                        skip: 0,
                    },
                    span,
                );
                self.block(body);
                let end = self.here();
                self.patch(at, end);
            }
            StmtKind::With { defaults, body } => {
                self.push(Op::WithPush(defaults.clone()), span);
                self.block(body);
                self.push(Op::WithPop, span);
            }
            StmtKind::Par(uses) => {
                self.push(Op::Par(uses.clone()), span);
            }
            StmtKind::Join(captures) => {
                self.push(Op::Join(captures.clone()), span);
            }
            StmtKind::Foreach { var, list, body } => {
                let at = self.push(
                    Op::Foreach {
                        var: var.name.clone(),
                        list: list.name.clone(),
                        end: 0,
                    },
                    span,
                );
                self.block(body);
                self.push(Op::Next { body: at + 1 }, span);
                let end = self.here();
                self.patch(at, end);
            }
            StmtKind::Try { body, err, recover } => {
                let at = self.push(
                    Op::TryPush {
                        recover: 0,
                        err: err.name.clone(),
                    },
                    span,
                );
                self.block(body);
                let pop = self.push(Op::TryPop { end: 0 }, span);
                let start = self.here();
                self.patch(at, start);
                self.block(recover);
                self.push(Op::RecoverEnd, span);
                let end = self.here();
                self.patch(pop, end);
            }
        }
    }

    fn branches(&mut self, branches: &[ast::Branch], otherwise: Option<&Block>) {
        let mut exits = Vec::new();
        for branch in branches {
            let at = self.push(
                Op::Unless {
                    cond: branch.cond.clone(),
                    to: 0,
                },
                branch.cond.span,
            );
            self.block(&branch.body);
            exits.push(self.push(Op::Jump(0), branch.cond.span));
            let next = self.here();
            self.patch(at, next);
        }
        if let Some(body) = otherwise {
            self.block(body);
        }
        let end = self.here();
        for exit in exits {
            self.patch(exit, end);
        }
    }
}

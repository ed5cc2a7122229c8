//! Statements that open blocks: IF/ELSE IF/ELSE, GIVEN/WHEN/THEN, WITH, PAR, JOIN, FOREACH,
//! TRY/RECOVER.

use super::ident::{local, symbol};
use super::{Line, Parser, stmt};
use crate::process::ast::{Bdd, Branch, Capture, Stmt, StmtKind, Use};
use crate::process::code::Code;
use crate::process::diagnostic::Diagnostic;
use crate::process::expr::{Expr, ExprKind, parse_expr};
use crate::process::lexer::Cursor;

/// `expr:` at the end of a line; AG-029 when the expression does not parse.
fn condition(cur: &mut Cursor<'_>) -> Result<Expr, Diagnostic> {
    let e = parse_expr(cur).map_err(|d| match d.code {
        Code::Syntax => Diagnostic {
            code: Code::AssertInvalid,
            ..d
        }
        .hint("conditions are <expr>: comparisons joined by AND, OR, NOT"),
        _ => d,
    })?;
    colon_end(cur)?;
    Ok(e)
}

fn colon_end(cur: &mut Cursor<'_>) -> Result<(), Diagnostic> {
    cur.expect_punct(":", Code::Syntax)?;
    cur.finish()
}

impl<'a> Parser<'a> {
    pub(super) fn block_statement(
        &mut self,
        word: &str,
        line: &'a Line,
        cur: &mut Cursor<'_>,
    ) -> Result<StmtKind, Diagnostic> {
        Ok(match word {
            "IF" => {
                let cond = condition(cur)?;
                self.if_chain(line, cond)?
            }
            "GIVEN" => self.bdd(Bdd::Given, line, cur)?,
            "WHEN" => self.bdd(Bdd::When, line, cur)?,
            "THEN" => self.bdd(Bdd::Then, line, cur)?,
            "WITH" => {
                let defaults = with_header(cur)?;
                let body = self.nonempty_body(line, Code::WithScopeError)?;
                StmtKind::With { defaults, body }
            }
            "PAR" => {
                colon_end(cur)?;
                StmtKind::Par(self.par(line)?)
            }
            "JOIN" => {
                colon_end(cur)?;
                StmtKind::Join(self.join(line)?)
            }
            "FOREACH" => self.foreach(line, cur)?,
            _ => {
                colon_end(cur)?;
                self.try_recover(line)?
            }
        })
    }

    /// `GIVEN`/`WHEN`/`THEN cond:` with a body that may be empty.
    fn bdd(
        &mut self,
        kind: Bdd,
        line: &'a Line,
        cur: &mut Cursor<'_>,
    ) -> Result<StmtKind, Diagnostic> {
        let cond = condition(cur)?;
        let body = self.body(line);
        Ok(StmtKind::Condition { kind, cond, body })
    }

    fn foreach(&mut self, line: &'a Line, cur: &mut Cursor<'_>) -> Result<StmtKind, Diagnostic> {
        let var = local(cur)?;
        cur.expect_word("IN", Code::Syntax)?;
        let list = symbol(cur)?;
        colon_end(cur)?;
        let body = self.nonempty_body(line, Code::Syntax)?;
        Ok(StmtKind::Foreach { var, list, body })
    }

    fn if_chain(&mut self, line: &'a Line, cond: Expr) -> Result<StmtKind, Diagnostic> {
        let body = self.nonempty_body(line, Code::Syntax)?;
        let mut branches = vec![Branch { cond, body }];
        let mut otherwise = None;
        while let Some(next) = self.next_at(line.indent, "ELSE") {
            self.i += 1;
            let mut cur = next.cursor();
            cur.bump();
            if cur.eat_word("IF") {
                let cond = condition(&mut cur)?;
                let body = self.nonempty_body(next, Code::Syntax)?;
                branches.push(Branch { cond, body });
            } else {
                colon_end(&mut cur)?;
                otherwise = Some(self.nonempty_body(next, Code::Syntax)?);
                break;
            }
        }
        Ok(StmtKind::If {
            branches,
            otherwise,
        })
    }

    fn try_recover(&mut self, line: &'a Line) -> Result<StmtKind, Diagnostic> {
        let body = self.nonempty_body(line, Code::Syntax)?;
        let Some(next) = self.next_at(line.indent, "RECOVER") else {
            let msg = "TRY without RECOVER";
            let hint = "follow the TRY block with RECOVER (err): at the same indentation";
            return Err(Diagnostic::new(Code::Syntax, line.span, msg).hint(hint));
        };
        self.i += 1;
        let mut cur = next.cursor();
        cur.bump();
        cur.expect_punct("(", Code::Syntax)?;
        let err = local(&mut cur)?;
        cur.expect_punct(")", Code::Syntax)?;
        colon_end(&mut cur)?;
        let recover = self.nonempty_body(next, Code::Syntax)?;
        Ok(StmtKind::Try { body, err, recover })
    }

    /// The body of PAR: USE statements only (AG-018 otherwise).
    fn par(&mut self, line: &'a Line) -> Result<Vec<Use>, Diagnostic> {
        let body = self.nonempty_body(line, Code::ConcurrencyPolicy)?;
        body.into_iter()
            .map(|s| match s.kind {
                StmtKind::Use(u) => Ok(u),
                _ => Err(only(&s, "PAR", "USE")),
            })
            .collect()
    }

    /// The body of JOIN: CAPTURE statements only (AG-018 otherwise).
    fn join(&mut self, line: &'a Line) -> Result<Vec<Capture>, Diagnostic> {
        let body = self.nonempty_body(line, Code::ConcurrencyPolicy)?;
        body.into_iter()
            .map(|s| match s.kind {
                StmtKind::Capture(c) => Ok(c),
                _ => Err(only(&s, "JOIN", "CAPTURE")),
            })
            .collect()
    }
}

fn only(s: &Stmt, block: &str, allowed: &str) -> Diagnostic {
    let msg = format!("only {allowed} statements may appear in {block}");
    let hint = "PAR launches USE statements; JOIN captures their results";
    Diagnostic::new(Code::ConcurrencyPolicy, s.span, msg).hint(hint)
}

/// `{"key": value, …}:` after WITH; AG-023 unless it is a JSON object.
fn with_header(cur: &mut Cursor<'_>) -> Result<Vec<crate::process::ast::Param>, Diagnostic> {
    let at = cur.here();
    let e = parse_expr(cur)?;
    let ExprKind::Object(pairs) = e.kind else {
        let msg = "WITH needs a JSON object of defaults";
        return Err(
            Diagnostic::new(Code::WithScopeError, at, msg).hint("WITH {\"endpoint\": \"…\"}:")
        );
    };
    colon_end(cur)?;
    Ok(stmt::object_params(pairs, e.span))
}

//! The statements that run inside the machine without asking the pump: SET, PAR's launch,
//! ASSERT, GIVEN/WHEN/THEN, TELL, SNAP, IF, WITH, FOREACH and its next pass, TRY. One method
//! per statement kind; [`Machine::op`] dispatches to them. Calls (USE, RUN, JOIN, CAPTURE) are
//! in `calls.rs`, agent inference in `inference.rs`.

use super::*;
use crate::process::ast::{Snap, Tell};

impl Machine {
    /// `SET S := expr` (or inferred, see `inference.rs`): binds the value; the symbol is
    /// sensitive when the expression reads a sensitive one.
    pub(super) fn set(
        &mut self,
        symbol: &str,
        value: &Expr,
        inferred: bool,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Flow, Value> {
        if inferred {
            return self.infer(symbol, value, span, turn);
        }
        let v = self.value(value)?;
        if privacy::reads_any(value, &self.redacted) {
            self.redacted.insert(symbol.to_owned());
        }
        self.bind(symbol, v, turn);
        Ok(Flow::Next)
    }

    /// PAR: sends every child's call at once, each remembered for its JOIN, and records the
    /// `par` event naming this PAR's tools.
    pub(super) fn par(
        &mut self,
        uses: &[Use],
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Flow, Value> {
        for (i, u) in uses.iter().enumerate() {
            self.lax_time(u, i, span, turn);
            let args = self.args(&u.tool.name, &u.params)?;
            let tool = &u.tool.name;
            let id = self.call_with(tool, args.clone(), timeout(u), true, span, turn)?;
            self.par.push(ParChild {
                tool: tool.clone(),
                id,
                args,
                timeout_ms: timeout(u),
                retry: Retry::of(u),
                attempt: 0,
            });
        }
        let tools: Vec<String> = uses.iter().map(|u| u.tool.name.clone()).collect();
        self.event(
            Event::Par {
                tools,
                line: span.line,
            },
            turn,
        );
        Ok(Flow::Next)
    }

    /// ASSERT (ALL): every condition must hold.
    pub(super) fn assert(&self, conds: &[Expr]) -> Result<Flow, Value> {
        for cond in conds {
            match self.value(cond)? {
                Value::Bool(true) => {}
                Value::Bool(false) => {
                    return Err(error("assert-failed", "ASSERT does not hold", cond.span));
                }
                other => {
                    return Err(coded(
                        Code::AssertInvalid,
                        format!("ASSERT needs a boolean, found a {}", other.kind()),
                        cond.span,
                    ));
                }
            }
        }
        Ok(Flow::Next)
    }

    /// GIVEN / WHEN / THEN: a WHEN that does not hold skips its block; a GIVEN or THEN that
    /// does not hold is an error.
    pub(super) fn condition(
        &self,
        kind: Bdd,
        cond: &Expr,
        skip: usize,
        span: Span,
    ) -> Result<Flow, Value> {
        let holds = match self.value(cond)? {
            Value::Bool(b) => b,
            other => {
                return Err(coded(
                    Code::AssertInvalid,
                    format!("a condition needs a boolean, found a {}", other.kind()),
                    cond.span,
                ));
            }
        };
        match (kind, holds) {
            (_, true) => Ok(Flow::Next),
            (Bdd::When, false) => Ok(Flow::Go(skip)),
            (Bdd::Given, false) => Err(error("precondition-failed", "GIVEN does not hold", span)),
            (Bdd::Then, false) => Err(error("postcondition-failed", "THEN does not hold", span)),
        }
    }

    /// IF's test: falls through when it holds, jumps to `to` when it does not.
    pub(super) fn unless(&self, cond: &Expr, to: usize) -> Result<Flow, Value> {
        match self.value(cond)? {
            Value::Bool(true) => Ok(Flow::Next),
            Value::Bool(false) => Ok(Flow::Go(to)),
            other => Err(coded(
                Code::AssertInvalid,
                format!("IF needs a boolean, found a {}", other.kind()),
                cond.span,
            )),
        }
    }

    /// TELL: a story event; its `why` symbol is shown unless it is sensitive. Never changes
    /// state.
    pub(super) fn tell(&mut self, t: &Tell, span: Span, turn: &mut Turn<'_>) {
        let why = t.why.as_ref().map(|w| {
            let shown = if self.redacted.contains(&w.name) {
                None
            } else {
                self.symbol(&w.name)
            };
            (w.name.clone(), shown)
        });
        let event = Event::Tell {
            message: t.message.clone().unwrap_or_default(),
            why,
            level: t.level,
            outcome: t.outcome.clone(),
            line: span.line,
        };
        self.event(event, turn);
    }

    /// SNAP: the named symbols (or all), or only those changed since the last SNAP (`delta`);
    /// `redact=` marks symbols sensitive from here on, and sensitive ones show without a value.
    pub(super) fn snap(&mut self, s: &Snap, span: Span, turn: &mut Turn<'_>) {
        self.redacted
            .extend(s.redact.iter().map(|r| r.name.clone()));
        let names: Vec<String> = if s.symbols.is_empty() {
            self.symbols.keys().cloned().collect()
        } else {
            s.symbols.iter().map(|i| i.name.clone()).collect()
        };
        let mut values = Vec::new();
        for name in names {
            let v = self.symbol(&name).unwrap_or(Value::Null);
            let changed = self.snapped.get(&name) != Some(&v);
            self.snapped.insert(name.clone(), v.clone());
            if s.delta == Some(true) && !changed {
                continue;
            }
            let shown = (!self.redacted.contains(&name)).then_some(v);
            values.push((name, shown));
        }
        let event = Event::Snap {
            values,
            delta: s.delta.unwrap_or(false),
            line: span.line,
        };
        self.event(event, turn);
    }

    /// WITH: its defaults come into scope (each remembers whether it reads a sensitive value).
    pub(super) fn with_push(&mut self, defaults: &[Param]) -> Result<Flow, Value> {
        self.with_marks.push(self.with.len());
        for p in defaults {
            let v = self.value(&p.value)?;
            let secret = privacy::reads_any(&p.value, &self.redacted);
            self.with.push((p.key.name.clone(), v, secret));
        }
        Ok(Flow::Next)
    }

    /// The end of a WITH block: its defaults leave scope.
    pub(super) fn with_pop(&mut self) {
        let mark = self.with_marks.pop().unwrap_or(0);
        self.with.truncate(mark);
    }

    /// FOREACH: an empty list skips the body; otherwise the loop variable takes the first item
    /// (as sensitive as the list).
    pub(super) fn foreach(
        &mut self,
        var: &str,
        list: &str,
        end: usize,
        span: Span,
    ) -> Result<Flow, Value> {
        let items = match self.symbol(list) {
            Some(Value::List(items)) => items,
            Some(other) => {
                return Err(coded(
                    Code::AssertInvalid,
                    format!("FOREACH needs a list, {list} is a {}", other.kind()),
                    span,
                ));
            }
            None => {
                return Err(coded(
                    Code::UndefinedSymbol,
                    format!("symbol {list} is not bound"),
                    span,
                ));
            }
        };
        let Some(first) = items.first().cloned() else {
            return Ok(Flow::Go(end));
        };
        // The loop variable holds the list's items: as sensitive as the list.
        if self.redacted.contains(list) {
            self.redacted.insert(var.to_owned());
        } else {
            self.redacted.remove(var);
        }
        let locals = self.locals.len();
        self.locals.push((var.to_owned(), first));
        self.loops.push(Loop {
            var: var.to_owned(),
            items,
            index: 0,
            locals,
        });
        Ok(Flow::Next)
    }

    /// The end of a FOREACH body: the next item and back to `body`, or out of the loop.
    pub(super) fn next_pass(&mut self, body: usize) -> Flow {
        let l = self.loops.last_mut().expect("Next inside a loop");
        l.index += 1;
        // The body's locals go; the loop variable (just below them) takes the next item.
        self.locals.truncate(l.locals + 1);
        if let Some(item) = l.items.get(l.index).cloned() {
            match self.locals.get_mut(l.locals) {
                Some((name, slot)) if *name == l.var => *slot = item,
                _ => {
                    self.locals.truncate(l.locals);
                    self.locals.push((l.var.clone(), item));
                }
            }
            return Flow::Go(body);
        }
        self.locals.truncate(l.locals);
        self.loops.pop();
        Flow::Next
    }

    /// TRY: a handler that remembers the scopes to unwind to (and the PAR children launched
    /// before it, which outlive it).
    pub(super) fn try_push(&mut self, recover: usize, err: &str) {
        self.handlers.push(Handler {
            recover,
            err: err.to_owned(),
            locals: self.locals.len(),
            loops: self.loops.len(),
            with: self.with_marks.len(),
            par: self.par.len(),
        });
    }
}

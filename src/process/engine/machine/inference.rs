//! Agent inference (03's last resort): `SET S := question (from "Agent Inference")` and
//! placeholders no binding resolves, asked of the inference tool the organism allows, with the
//! deterministic input hash 03 asks for.

use super::calls::tool_error;
use super::*;

impl Machine {
    /// `SET S := question (from "Agent Inference")`: asks the inference tool the organism
    /// allows (a call like a USE, so a restart reads the answer back), binds its `value`, and
    /// records AG-W03 with the value and a hash of the inputs (03). Without one: AG-006.
    pub(super) fn infer(
        &mut self,
        symbol: &str,
        question: &Expr,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Flow, Value> {
        let question = self.value(question)?;
        match self.ask(symbol, question, span, turn)? {
            Some(value) => {
                self.bind(symbol, value, turn);
                Ok(Flow::Next)
            }
            None => Ok(Flow::Wait),
        }
    }

    /// Resolves, before `op` runs, each placeholder it reads that no argument, constant or
    /// runtime value resolves, by agent inference (03: "INP → constants → runtime → agent
    /// inference"), one at a time in the order they are written. False while an answer is
    /// awaited (the op runs again on the next turn).
    pub(super) fn infer_placeholders(
        &mut self,
        op: &Op,
        turn: &mut Turn<'_>,
    ) -> Result<bool, Value> {
        for (name, span) in placeholders(op) {
            if self.placeholder(&name).is_some() {
                continue;
            }
            let question = Value::from(format!(
                "the value of placeholder <{name}> in process {}",
                self.id()
            ));
            match self.ask(&format!("<{name}>"), question, span, turn)? {
                Some(value) => {
                    self.inferred.insert(name, value);
                }
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Asks the inference tool for `symbol`'s value (once: a turn that finds the answer takes
    /// it), recording AG-W03 with the value and the inputs' hash. `None` while it is awaited;
    /// AG-006 when the organism allows no inference.
    pub(super) fn ask(
        &mut self,
        symbol: &str,
        question: Value,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Option<Value>, Value> {
        let Some(tool) = self.inference.clone() else {
            return Err(coded(
                Code::UnresolvedPlaceholder,
                format!("{symbol} needs Agent Inference, which this organism does not allow"),
                span,
            ));
        };
        let hash = input_hash(self.id(), symbol, &question);
        if self.pending.is_none() {
            let mut args = BTreeMap::new();
            args.insert("symbol".to_owned(), Value::from(symbol));
            args.insert("question".to_owned(), question);
            args.insert("process".to_owned(), Value::from(self.id()));
            args.insert("input_hash".to_owned(), Value::from(hash.clone()));
            let id = self.call_with(&tool, args, None, false, span, turn)?;
            self.pending = Some(Pending { id, attempt: 0 });
        }
        let id = &self.pending.as_ref().expect("set above").id;
        let Some(answer) = turn.known.answers.remove(id) else {
            return Ok(None);
        };
        self.pending = None;
        match &*answer {
            Answer::Error(e) => Err(tool_error(&tool, e.kind.as_str(), &e.message, span)),
            Answer::Result(r) => {
                let value = r.fields.get("value").cloned().ok_or_else(|| {
                    coded(
                        Code::CapturePathError,
                        format!("the inference tool `{tool}` answered no `value`"),
                        span,
                    )
                })?;
                let shown = (!self.redacted.contains(symbol)).then(|| value.clone());
                let warning = Event::Inferred {
                    symbol: symbol.to_owned(),
                    value: shown,
                    hash,
                    line: span.line,
                };
                self.event(warning, turn);
                Ok(Some(value))
            }
        }
    }
}

/// `sha256:` of the process, the symbol and the question: the deterministic input hash 03
/// asks an inference to be logged with.
pub(super) fn input_hash(process: &str, symbol: &str, question: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [process, symbol, question.to_json().as_str()] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

/// The placeholders `op` reads, in the order they are written, with where.
fn placeholders(op: &Op) -> Vec<(String, Span)> {
    pub(super) fn values(ps: &[Param]) -> impl Iterator<Item = &Expr> {
        ps.iter().map(|p| &p.value)
    }
    let exprs: Vec<&Expr> = match op {
        Op::Set { value, .. } => vec![value],
        Op::Use(u) => values(&u.params).collect(),
        Op::Par(uses) => uses.iter().flat_map(|u| values(&u.params)).collect(),
        Op::Run { params: ps, .. } | Op::WithPush(ps) => values(ps).collect(),
        Op::Return(Return::Pairs(ps)) => values(ps).collect(),
        Op::Assert(conds) => conds.iter().collect(),
        Op::Condition { cond, .. } | Op::Unless { cond, .. } => vec![cond],
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for e in exprs {
        e.walk(&mut |e| {
            if let ExprKind::Placeholder(name) = &e.kind {
                out.push((name.clone(), e.span));
            }
        });
    }
    out
}

//! RUN, USE, CAPTURE, PAR and JOIN: processes and tools named, arguments, modifiers, the
//! binding rules of CAPTURE and the lexical order of PAR/JOIN.

use rust_decimal::Decimal;

use super::names;
use super::walk::Walker;
use crate::process::ast::{Capture, Ident, Param, Use};
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};
use crate::process::expr::ExprKind;

const RANDOM_WORDS: &[&str] = &["random", "rand", "shuffle", "sample", "uuid"];

/// The most USEs one PAR may launch: a PAR's children leave in one delivery, with the PAR's
/// event and (under the time policy) a warning for each, and the pump's default
/// `max_outputs` is 64 payloads per delivery (a process keeps 4 for its answer and its own
/// notices): 2 × 25 + 1 fits in 60 with room to spare. Wider is AP-002 in `process check`.
pub const MAX_PAR_WIDTH: usize = 25;

fn looks_random(tool: &str) -> bool {
    tool.contains("random") || tool.split(['-', '_']).any(|w| RANDOM_WORDS.contains(&w))
}

/// Whether a literal fits a declared argument type (`None` when it cannot be told statically).
fn fits(ty: &str, value: &ExprKind) -> Option<bool> {
    Some(match value {
        ExprKind::Str(_) => matches!(ty, "String" | "ISO8601" | "URI" | "Path" | "JSON"),
        ExprKind::Num(n) => {
            ty == "Number" || ty == "JSON" || (ty == "Integer" && n.fract().is_zero())
        }
        ExprKind::Bool(_) => matches!(ty, "Boolean" | "JSON"),
        ExprKind::List(_) => matches!(ty, "List" | "JSON"),
        ExprKind::Object(_) => ty == "JSON",
        _ => return None,
    })
}

impl Walker<'_, '_> {
    /// `where:` pairs, or WITH/RETURN pairs: keys spelled right, values read.
    pub(super) fn params(&mut self, params: &[Param], what: &str) {
        for p in params {
            names::lower(&p.key, what, self.diags);
            self.expr(&p.value);
        }
    }

    /// AG-012: `where:` keys in strictly lexicographic order.
    fn key_order(&mut self, params: &[Param]) {
        for pair in params.windows(2) {
            if pair[1].key.name <= pair[0].key.name {
                let (a, b) = (&pair[0].key.name, &pair[1].key.name);
                let msg = format!("key {b} after {a} in where:");
                let hint = "order where: keys lexicographically, each once";
                self.error(Code::KeyOrder, pair[1].key.span, msg, hint);
            }
        }
    }

    pub(super) fn run(&mut self, process: &Ident, params: &[Param]) {
        names::process_id(process, self.diags);
        self.tool_collision(process);
        self.key_order(params);
        self.params(params, "key");
        let Some(target) = self.cx.processes.get(process.name.as_str()).copied() else {
            let msg = format!("RUN names process {}, which is not defined", process.name);
            let hint = "define <process id=\"…\"> in <processes> or fix the id";
            return self.error(Code::ProcessIdMismatch, process.span, msg, hint);
        };
        let with: Vec<String> = self.with_keys.iter().flatten().cloned().collect();
        for p in params {
            match target.args.iter().find(|a| a.name.name == p.key.name) {
                None => {
                    let msg = format!("process {} takes no argument {}", process.name, p.key.name);
                    self.error(
                        Code::ProcessArgsMismatch,
                        p.key.span,
                        msg,
                        "remove it or declare it in args=\"…\"",
                    );
                }
                Some(a) => self.argument(&a.ty, p),
            }
        }
        for a in &target.args {
            let given =
                params.iter().any(|p| p.key.name == a.name.name) || with.contains(&a.name.name);
            if !given {
                let msg = format!(
                    "RUN of {} misses argument {}: {}",
                    process.name, a.name.name, a.ty
                );
                self.error(
                    Code::ProcessArgsMismatch,
                    process.span,
                    msg,
                    "pass it in where:",
                );
            }
        }
        // RUN binds the symbols the target RETURNs, and its result can be captured.
        self.used_tools.insert(process.name.clone());
        let secret = self.reads_sensitive(params);
        for sym in returned_symbols(&target.body) {
            self.bind(sym);
            if secret {
                self.sensitive.push(sym.name.clone());
            }
        }
    }

    fn argument(&mut self, ty: &str, p: &Param) {
        if fits(ty, &p.value.kind) == Some(false) {
            let msg = format!(
                "argument {} is declared {ty}; this value is not",
                p.key.name
            );
            self.error(
                Code::ProcessArgsMismatch,
                p.value.span,
                msg,
                "pass a value of the declared type",
            );
        } else if let ExprKind::Str(s) = &p.value.kind
            && ty == "ISO8601"
            && !names::is_iso8601(s)
        {
            let msg = format!("\"{s}\" is not an ISO 8601 date or time with an offset");
            self.error(
                Code::TimeFormat,
                p.value.span,
                msg,
                "2026-11-24 or 2026-11-24T16:50:00Z",
            );
        }
    }

    pub(super) fn use_stmt(&mut self, u: &Use, in_par: bool) {
        names::tool(&u.tool, self.diags);
        self.key_order(&u.params);
        self.params(&u.params, "key");
        if let Some(m) = &u.modifiers {
            self.limit("timeout_ms", m.timeout_ms, 1, 86_400_000);
            self.limit("retry", m.retry, 0, 10);
        }
        let timed = u.modifiers.as_ref().is_some_and(|m| m.timeout_ms.is_some());
        if self.cx.policy.require_timeout && !timed {
            let msg = format!("USE `{}` gives no timeout_ms", u.tool.name);
            let hint = "the time policy requires (timeout_ms=N) on every USE";
            self.diags
                .push(Diagnostic::new(Code::LaxTime, u.span, msg).hint(hint));
        }
        self.tool_collision(&u.tool);
        self.registered(&u.tool);
        let seeded = u.params.iter().any(|p| p.key.name == "seed")
            || self.with_keys.iter().flatten().any(|k| k == "seed");
        if looks_random(&u.tool.name) && !seeded {
            let msg = format!("tool {} looks random and is given no seed", u.tool.name);
            self.error(
                Code::RandomnessPolicy,
                u.tool.span,
                msg,
                "pass where: seed=N so a run can be repeated",
            );
        }
        if !in_par {
            self.used_tools.insert(u.tool.name.clone());
        }
    }

    /// AG-017: a USE of a tool the host does not register (when it says what it registers),
    /// which would be refused at run time.
    fn registered(&mut self, tool: &Ident) {
        let Some(known) = &self.cx.policy.registered else {
            return;
        };
        let name = &tool.name;
        if known.contains(name) || self.cx.processes.contains_key(name.as_str()) {
            return;
        }
        let msg = format!("tool `{name}` is not registered: no listener of that name");
        let hint = "register the tool in the organism, or correct the name";
        self.diags
            .push(Diagnostic::new(Code::ToolPolicy, tool.span, msg).hint(hint));
    }

    /// AG-034: a call of a process of this document whose id the host registers as a tool
    /// too; the process would run in a child thread addressed to that name, which the tool
    /// answers.
    fn tool_collision(&mut self, name: &Ident) {
        if self.cx.processes.contains_key(name.name.as_str())
            && self.cx.policy.tools.contains(&name.name)
        {
            let msg = format!(
                "`{}` is a process of this file and a tool the host registers",
                name.name
            );
            let hint = "rename the process or the tool: a call must have one target";
            self.error(Code::PredefinedToolCollision, name.span, msg, hint);
        }
    }

    fn limit(&mut self, name: &str, value: Option<(Decimal, Span)>, min: u32, max: u32) {
        let Some((n, at)) = value else { return };
        if !n.fract().is_zero() || n < Decimal::from(min) || n > Decimal::from(max) {
            let msg = format!("{name}={n} is not a whole number from {min} to {max}");
            self.error(
                Code::TimeoutRetryPolicy,
                at,
                msg,
                "timeout_ms is 1…86400000, retry 0…10",
            );
        }
    }

    pub(super) fn capture(&mut self, c: &Capture, in_join: bool) {
        names::tool(&c.tool, self.diags);
        let pending = self.pending_par.as_ref();
        let pending = pending.is_some_and(|(tools, ..)| tools.contains(&c.tool.name));
        if pending && !in_join {
            let msg = format!("CAPTURE from `{}` before the JOIN of its PAR", c.tool.name);
            let hint = "JOIN: is the first place to capture PAR results";
            self.error(Code::ConcurrencyPolicy, c.tool.span, msg, hint);
        } else if !pending && !self.used_tools.contains(&c.tool.name) {
            let msg = format!("CAPTURE from `{}`, which no earlier USE calls", c.tool.name);
            let hint = "USE the tool before capturing its result";
            self.error(Code::CaptureMissing, c.tool.span, msg, hint);
        }
        self.capture_map(c);
        c.symbols.iter().for_each(|s| self.bind(s));
    }

    /// AG-028: with a map, every mapped symbol is captured and every captured symbol mapped.
    fn capture_map(&mut self, c: &Capture) {
        if c.map.is_empty() {
            return;
        }
        for m in &c.map {
            if !c.symbols.iter().any(|s| s.name == m.symbol.name) {
                let msg = format!(
                    "map binds {}, which is not in the CAPTURE list",
                    m.symbol.name
                );
                let hint = "list every mapped symbol after CAPTURE";
                self.error(Code::CapturePathError, m.symbol.span, msg, hint);
            }
        }
        for s in &c.symbols {
            if !c.map.iter().any(|m| m.symbol.name == s.name) {
                let msg = format!("{} is captured but the map gives it no path", s.name);
                let hint = "add \"path\"→SYMBOL to map:";
                self.error(Code::CapturePathError, s.span, msg, hint);
            }
        }
    }

    /// AG-018 at the end of a block for a PAR of it not joined in it: a JOIN after the block
    /// (after a FOREACH, a TRY, an IF) would take children of passes or branches it cannot
    /// tell apart (03: "`CAPTURE` order MUST follow the **lexical order**").
    pub(super) fn unjoined_par(&mut self) {
        if let Some((_, at, _)) = self.pending_par.take_if(|(.., b)| *b == self.block) {
            self.error(
                Code::ConcurrencyPolicy,
                at,
                "PAR results are never joined in the block of the PAR".into(),
                "add a JOIN: block after the PAR, in the same block",
            );
        }
    }

    pub(super) fn par(&mut self, uses: &[Use], at: Span) {
        if let Some((_, earlier, _)) = self.pending_par.take() {
            let msg = "PAR results are never joined".to_string();
            self.error(
                Code::ConcurrencyPolicy,
                earlier,
                msg,
                "add a JOIN: block before the next PAR",
            );
        }
        if uses.len() > MAX_PAR_WIDTH {
            let msg = format!(
                "PAR launches {} USEs; at most {MAX_PAR_WIDTH} (its children leave in one \
                 delivery, which may carry at most max_outputs = 64 payloads)",
                uses.len()
            );
            let hint = "split it into several PAR/JOIN pairs";
            self.error(Code::LimitExceeded, at, msg, hint);
        }
        for u in uses {
            self.use_stmt(u, true);
        }
        let tools = uses.iter().map(|u| u.tool.name.clone()).collect();
        self.pending_par = Some((tools, at, self.block));
    }

    /// The k-th CAPTURE of a tool in JOIN takes the result of the k-th USE of that tool in
    /// the PAR; captures follow the PAR's lexical order.
    pub(super) fn join(&mut self, captures: &[Capture], at: Span) {
        let Some((tools, par, block)) = self.pending_par.clone() else {
            let msg = "JOIN without a PAR before it".to_string();
            return self.error(
                Code::ConcurrencyPolicy,
                at,
                msg,
                "JOIN captures the results of the PAR just before it",
            );
        };
        if block != self.block {
            self.pending_par = None;
            let msg = format!("JOIN is not in the block of its PAR (line {})", par.line);
            let hint = "a PAR and its JOIN are statements of one block";
            return self.error(Code::ConcurrencyPolicy, at, msg, hint);
        }
        let (mut last, mut taken) = (None::<usize>, vec![false; tools.len()]);
        for c in captures {
            let next = (0..tools.len()).find(|&i| tools[i] == c.tool.name && !taken[i]);
            let Some(index) = next else {
                let msg = format!(
                    "JOIN captures from `{}` more often than the PAR uses it",
                    c.tool.name
                );
                let hint = "each CAPTURE in JOIN takes the result of one USE of the PAR";
                self.error(Code::ConcurrencyPolicy, c.tool.span, msg, hint);
                continue;
            };
            taken[index] = true;
            if last.is_some_and(|l| index < l) {
                let msg = format!(
                    "CAPTURE from `{}` is out of the lexical order of the PAR",
                    c.tool.name
                );
                self.error(
                    Code::ConcurrencyPolicy,
                    c.span,
                    msg,
                    "capture in the order the USE statements are written",
                );
            }
            last = Some(index);
            self.capture(c, true);
        }
        self.used_tools.extend(tools);
        self.pending_par = None;
    }
}

/// The symbols a process body RETURNs by name (`RETURN: A, B`), anywhere in it.
fn returned_symbols(body: &[crate::process::ast::Stmt]) -> Vec<&Ident> {
    use crate::process::ast::{Return, StmtKind};
    let mut out = Vec::new();
    for stmt in body {
        match &stmt.kind {
            StmtKind::Return(Return::Symbols(symbols)) => out.extend(symbols),
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for b in branches {
                    out.extend(returned_symbols(&b.body));
                }
                out.extend(otherwise.iter().flat_map(|o| returned_symbols(o)));
            }
            StmtKind::Condition { body, .. }
            | StmtKind::With { body, .. }
            | StmtKind::Foreach { body, .. } => out.extend(returned_symbols(body)),
            StmtKind::Try { body, recover, .. } => {
                out.extend(returned_symbols(body));
                out.extend(returned_symbols(recover));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::looks_random;

    #[test]
    fn random_tools_are_recognised_by_word() {
        assert!(looks_random("random"));
        assert!(looks_random("rand-int"));
        assert!(looks_random("dice_shuffle"));
        assert!(!looks_random("operand"));
        assert!(!looks_random("calculator"));
    }
}

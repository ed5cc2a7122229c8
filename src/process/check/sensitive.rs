//! AG-032 SensitiveInLog, where the text shows it: a RETURN of a symbol that a `SNAP …
//! redact=` earlier on the same block path (this block or an enclosing one) made sensitive,
//! or that is derived from one: SET from it, a FOREACH variable over it, or bound by a RUN
//! given it. A RETURN is recorded (06: "Secrets/PII MUST be
//! redacted"), so it would put the secret in the log; the engine redacts what the text cannot
//! show (a redaction inside a branch) as `[REDACTED]` at run time.

use super::walk::Walker;
use crate::process::ast::{Ident, Param, Return};
use crate::process::code::Code;
use crate::process::expr::{Expr, ExprKind};

impl Walker<'_, '_> {
    /// `SNAP … redact=[…]`: the symbols are sensitive for the rest of the block path.
    pub(super) fn redact(&mut self, list: &[Ident]) {
        self.sensitive.extend(list.iter().map(|s| s.name.clone()));
    }

    /// `SET S := V`: `S` is sensitive when `V` reads a sensitive symbol.
    pub(super) fn taint(&mut self, symbol: &Ident, value: &Expr) {
        if self.first_sensitive(value).is_some() {
            self.sensitive.push(symbol.name.clone());
        }
    }

    /// Whether any of `params` reads a sensitive symbol (a RUN's: what it binds is derived).
    pub(super) fn reads_sensitive(&self, params: &[Param]) -> bool {
        params
            .iter()
            .any(|p| self.first_sensitive(&p.value).is_some())
    }

    /// A RETURN naming or computing from a sensitive symbol.
    pub(super) fn sensitive_return(&mut self, r: &Return) {
        let mut found = Vec::new();
        match r {
            Return::Symbols(list) => found.extend(
                list.iter()
                    .filter(|s| self.sensitive.contains(&s.name))
                    .cloned(),
            ),
            Return::Pairs(pairs) => {
                found.extend(pairs.iter().filter_map(|p| self.first_sensitive(&p.value)));
            }
        }
        for s in found {
            let msg = format!(
                "RETURN records {}, which a SNAP redacts or which is derived from one",
                s.name
            );
            let hint =
                "06: a redacted symbol's content may not appear in a log; return something else";
            self.error(Code::SensitiveInLog, s.span, msg, hint);
        }
    }

    /// The first sensitive symbol `e` reads, with where it is read.
    fn first_sensitive(&self, e: &Expr) -> Option<Ident> {
        let mut found = None;
        e.walk(&mut |e| {
            if let ExprKind::Symbol(name) | ExprKind::Local(name) = &e.kind
                && found.is_none()
                && self.sensitive.contains(name)
            {
                found = Some(Ident {
                    name: name.clone(),
                    span: e.span,
                });
            }
        });
        found
    }
}

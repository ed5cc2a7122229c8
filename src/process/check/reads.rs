//! What a walk reads: symbols, locals and placeholders in expressions, and conditions —
//! AG-001, AG-006 and AG-029 at the place of the read.

use super::names;
use super::walk::Walker;
use crate::process::ast::Ident;
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};
use crate::process::expr::{Expr, ExprKind};

/// How an unresolved placeholder's AG-006 ends: what [`is_unresolved_placeholder`] knows it by.
const UNRESOLVED: &str = "resolves from no argument, constant or runtime value";

/// Whether `d` is the AG-006 of a placeholder nothing resolves — the one an organism that
/// allows agent inference lets through, to be inferred at run time.
pub(crate) fn is_unresolved_placeholder(d: &Diagnostic) -> bool {
    d.code == Code::UnresolvedPlaceholder && d.message.ends_with(UNRESOLVED)
}

impl Walker<'_, '_> {
    pub(super) fn read_symbols(&mut self, list: &[Ident]) {
        list.iter().for_each(|s| self.read_symbol(s));
    }

    pub(super) fn is_defined(&self, name: &str) -> bool {
        self.bound.contains(name)
            || self.cx.constants.contains(name)
            || self.cx.runtime.contains(name)
            || name == "INP"
            || (name == "_INDEX" && self.loops > 0)
    }

    pub(super) fn read_symbol(&mut self, sym: &Ident) {
        self.symbol_at(&sym.name, sym.span);
    }

    pub(super) fn symbol_at(&mut self, name: &str, at: Span) {
        names::symbol_name(name, at, self.diags);
        self.reads.insert(name.to_string());
        if !self.is_defined(name) {
            let msg = format!("{name} is not defined here");
            let hint = "bind it first (CAPTURE, SET) or define it in <constants> or <runtime>";
            self.error(Code::UndefinedSymbol, at, msg, hint);
        }
    }

    /// A condition: AG-029 when it can only be a number, string or container.
    pub(super) fn condition(&mut self, e: &Expr) {
        if e.is_plain_value() {
            self.error(
                Code::AssertInvalid,
                e.span,
                "condition is not a boolean expression".into(),
                "compare it: X = 1, X > 0, NOT DONE",
            );
        }
        self.expr(e);
    }

    pub(super) fn expr(&mut self, e: &Expr) {
        e.walk(&mut |e| match &e.kind {
            ExprKind::Symbol(name) => self.symbol_at(name, e.span),
            ExprKind::Local(name) => self.local(name, e.span),
            ExprKind::Placeholder(name) => self.placeholder(name, e.span),
            _ => {}
        });
    }

    pub(super) fn local(&mut self, name: &str, at: Span) {
        self.reads.insert(name.to_string());
        if !self.locals.iter().any(|l| l == name) {
            let msg = format!("{name} is not a loop variable, RECOVER variable or argument here");
            self.error(
                Code::UndefinedSymbol,
                at,
                msg,
                "lowercase names are bound by FOREACH, RECOVER (…) and args=\"…\"",
            );
        }
    }

    /// INP (the process arguments) → constants → runtime; agent inference is off (03 default).
    pub(super) fn placeholder(&mut self, name: &str, at: Span) {
        let arg = self
            .process
            .args
            .iter()
            .find(|a| a.name.name.eq_ignore_ascii_case(name));
        if let Some(a) = arg {
            self.reads.insert(a.name.name.clone());
        } else if self.cx.constants.contains(name) || self.cx.runtime.contains(name) {
            self.reads.insert(name.to_string());
        } else {
            let msg = format!("placeholder <{name}> {UNRESOLVED}");
            let hint =
                "declare it in args=\"…\" of the process, or define it in <constants> or <runtime>";
            self.error(Code::UnresolvedPlaceholder, at, msg, hint);
        }
    }
}

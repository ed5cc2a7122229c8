//! The walk over one process in lexical order: which names are bound where, what is read,
//! and the rules of each statement.

use std::collections::HashSet;

use super::{Context, names};
use crate::process::ast::{Block, Ident, Origin, Process, Return, Stmt, StmtKind};
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};

/// The symbols the engine binds itself: the FOREACH index and the process input.
const ENGINE_SYMBOLS: &[&str] = &["_INDEX", "INP"];

/// The state of the walk over one process.
pub(super) struct Walker<'a, 'd> {
    pub(super) cx: &'a Context<'a>,
    pub(super) process: &'a Process,
    pub(super) diags: &'d mut Vec<Diagnostic>,
    /// Symbols bound so far (CAPTURE, SET), in lexical order.
    pub(super) bound: HashSet<String>,
    /// First binding of each symbol, for AG-W01.
    pub(super) first_bindings: Vec<Ident>,
    /// Lowercase names in scope: arguments, then loop and RECOVER variables (a stack).
    pub(super) locals: Vec<String>,
    /// Nesting depth of FOREACH (for `_INDEX`).
    pub(super) loops: usize,
    /// Every symbol and local read anywhere in the process.
    pub(super) reads: HashSet<String>,
    /// Tools a USE has called so far (outside or inside PAR).
    pub(super) used_tools: HashSet<String>,
    /// The tools of the last PAR, in lexical order, until a JOIN, and the PAR's span and
    /// block.
    pub(super) pending_par: Option<(Vec<String>, Span, usize)>,
    /// The block being walked (each block a number of its own) and how many were opened.
    pub(super) block: usize,
    blocks: usize,
    /// Keys of enclosing WITH defaults.
    pub(super) with_keys: Vec<Vec<String>>,
    /// Symbols redacted (or SET from redacted ones) on the current block path (AG-032).
    pub(super) sensitive: Vec<String>,
}

/// Walks `p`; returns every name read (constants included), for the document's AG-W01.
pub(super) fn process(
    cx: &Context<'_>,
    p: &Process,
    diags: &mut Vec<Diagnostic>,
) -> HashSet<String> {
    let mut w = Walker {
        cx,
        process: p,
        diags,
        bound: HashSet::new(),
        first_bindings: Vec::new(),
        locals: p.args.iter().map(|a| a.name.name.clone()).collect(),
        loops: 0,
        reads: HashSet::new(),
        used_tools: HashSet::new(),
        pending_par: None,
        block: 0,
        blocks: 0,
        with_keys: Vec::new(),
        sensitive: Vec::new(),
    };
    for a in &p.args {
        names::lower(&a.name, "argument", w.diags);
    }
    w.block(&p.body);
    // A name on a line left out of the tree is used there, whatever else is wrong on it.
    w.reads.extend(p.left_out.iter().cloned());
    let unused = w
        .first_bindings
        .iter()
        .chain(p.args.iter().map(|a| &a.name));
    for id in unused.filter(|id| !w.reads.contains(&id.name)) {
        let msg = format!("{} is bound but never used", id.name);
        w.diags
            .push(Diagnostic::new(Code::SymbolNotUsed, id.span, msg));
    }
    w.reads
}

impl Walker<'_, '_> {
    pub(super) fn error(&mut self, code: Code, at: Span, msg: String, hint: &str) {
        self.diags.push(Diagnostic::new(code, at, msg).hint(hint));
    }

    pub(super) fn block(&mut self, body: &Block) {
        // A redaction inside the block may not run: it does not count after the block.
        let sensitive = self.sensitive.len();
        let outer = self.block;
        self.blocks += 1;
        self.block = self.blocks;
        for s in body {
            self.stmt(s);
        }
        self.unjoined_par();
        self.block = outer;
        self.sensitive.truncate(sensitive);
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Run { process, params } => self.run(process, params),
            StmtKind::Use(u) => self.use_stmt(u, false),
            StmtKind::Capture(c) => self.capture(c, false),
            StmtKind::Set {
                symbol,
                value,
                origin,
            } => {
                self.expr(value);
                if let Some(o) = origin {
                    self.origin(o);
                }
                self.taint(symbol, value);
                self.bind(symbol);
            }
            StmtKind::Unset(sym) => {
                self.read_symbol(sym);
                if self.writable(sym) {
                    self.bound.remove(&sym.name);
                }
            }
            StmtKind::Return(r) => {
                match r {
                    Return::Symbols(list) => self.read_symbols(list),
                    Return::Pairs(pairs) => self.params(pairs, "key"),
                }
                self.sensitive_return(r);
            }
            StmtKind::Assert(e) => self.condition(e),
            StmtKind::AssertAll(list) => list.iter().for_each(|e| self.condition(e)),
            StmtKind::Tell(t) => t.why.iter().for_each(|s| self.read_symbol(s)),
            StmtKind::Milestone(_) => {}
            StmtKind::Snap(snap) => {
                self.read_symbols(&snap.symbols);
                self.read_symbols(&snap.redact);
                self.redact(&snap.redact);
            }
            _ => self.block_stmt(s),
        }
    }

    /// Statements with bodies.
    fn block_stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for b in branches {
                    self.condition(&b.cond);
                    self.block(&b.body);
                }
                otherwise.iter().for_each(|b| self.block(b));
            }
            StmtKind::Condition { cond, body, .. } => {
                self.condition(cond);
                self.block(body);
            }
            StmtKind::With { defaults, body } => {
                self.params(defaults, "WITH key");
                let keys = defaults.iter().map(|p| p.key.name.clone()).collect();
                self.with_keys.push(keys);
                self.block(body);
                self.with_keys.pop();
            }
            StmtKind::Par(uses) => self.par(uses, s.span),
            StmtKind::Join(captures) => self.join(captures, s.span),
            StmtKind::Foreach { var, list, body } => {
                self.read_symbol(list);
                let mark = self.sensitive.len();
                if self.sensitive.contains(&list.name) {
                    self.sensitive.push(var.name.clone());
                }
                self.scoped(var, "loop variable", body, true);
                self.sensitive.truncate(mark);
            }
            StmtKind::Try { body, err, recover } => {
                self.block(body);
                self.scoped(err, "RECOVER variable", recover, false);
            }
            _ => {}
        }
    }

    fn scoped(&mut self, var: &Ident, what: &str, body: &Block, is_loop: bool) {
        names::lower(var, what, self.diags);
        self.locals.push(var.name.clone());
        self.loops += usize::from(is_loop);
        self.block(body);
        self.loops -= usize::from(is_loop);
        self.locals.pop();
    }

    fn origin(&mut self, o: &Origin) {
        match o {
            Origin::Tool(t) if !self.used_tools.contains(&t.name) => {
                let msg = format!("SET origin `{}` is a tool no earlier USE calls", t.name);
                self.error(
                    Code::ForbiddenSymbolOrigin,
                    t.span,
                    msg,
                    "USE the tool before naming it as the origin",
                );
            }
            Origin::Symbol(s) if !self.is_defined(&s.name) => {
                let msg = format!("SET origin {} is not defined", s.name);
                self.error(
                    Code::ForbiddenSymbolOrigin,
                    s.span,
                    msg,
                    "the origin is a bound symbol, INP, a tool or \"Agent Inference\"",
                );
            }
            Origin::Symbol(s) => {
                self.reads.insert(s.name.clone());
            }
            _ => {}
        }
    }

    /// Binds a symbol (CAPTURE, SET): constants are read-only (AG-013).
    pub(super) fn bind(&mut self, sym: &Ident) {
        names::symbol(sym, self.diags);
        if !self.writable(sym) {
            return;
        }
        if self.bound.insert(sym.name.clone())
            && !self.first_bindings.iter().any(|i| i.name == sym.name)
        {
            self.first_bindings.push(sym.clone());
        }
    }

    /// Whether `sym` may be bound or unset: the engine's own symbols (`_INDEX`, `INP`) are
    /// read-only (AG-002), and so are constants (AG-013).
    fn writable(&mut self, sym: &Ident) -> bool {
        if ENGINE_SYMBOLS.contains(&sym.name.as_str()) {
            let msg = format!("{} is the engine's and cannot be bound or unset", sym.name);
            let hint = "_INDEX is the FOREACH index and INP the input; use another symbol";
            self.error(Code::ReservedTokenMisuse, sym.span, msg, hint);
            return false;
        }
        let constant = self.cx.constants.contains(sym.name.as_str());
        if constant {
            let msg = format!("{} is a constant and cannot be rebound", sym.name);
            let hint = "constants are read-only; use another symbol";
            self.error(Code::DuplicateSymbol, sym.span, msg, hint);
        }
        !constant
    }
}

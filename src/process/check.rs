//! Static checks: the codes of the APS error taxonomy (07) that can be decided from the text
//! of a process file, before anything runs.
//!
//! # Which codes are raised where
//!
//! **Static, raised here or by the reader, lexer and parser** (hard errors unless noted):
//! AG-001 a symbol or local read before any binding in lexical order (constants, runtime,
//! arguments, CAPTURE, SET, FOREACH and RECOVER variables, `INP`, `_INDEX` inside FOREACH), and
//! a constant that refers to itself or to a later one (as at load);
//! AG-002 a reserved word used as symbol, id, key (JSON keys too) or choice, and a SET, CAPTURE
//! or UNSET of the engine's `_INDEX` or `INP`; AG-003 a name not matching its regex (choices of
//! `enum(…)` and `{A|B}` are UpperSyms), an id not in backticks; AG-004 RUN or a trigger naming a missing process; AG-006 a placeholder
//! that resolves from neither the process arguments (INP) nor constants nor runtime, a symbol in
//! a JSON constant that is not a constant; AG-007 bad JSON, a number with a leading zero; AG-008 CAPTURE from a tool no earlier
//! USE calls; AG-009 unbalanced, misplaced, repeated or out-of-order section tags; AG-010
//! comments in `<triggers>`/`<processes>`; AG-011 tabs; AG-012 `where:` keys not in strictly
//! lexicographic order; AG-013 duplicate constants, process ids or arguments of SET/CAPTURE/
//! UNSET that name a constant; AG-014 a literal for an `ISO8601` argument that is not ISO 8601
//! with an offset; AG-015 booleans not in lower case, single or smart quotes; AG-016 a
//! `<process>` tag without id or with malformed attributes or args; AG-017 USE in `<triggers>`,
//! and a USE of a tool the host does not register ([`Policy::registered`], `process check
//! --organism`, `process run`);
//! AG-018 PAR holding anything but USE, CAPTURE of a PAR tool before JOIN, JOIN without PAR,
//! capturing out of lexical order or more often than the PAR uses the tool (the k-th CAPTURE of
//! a tool takes the k-th USE of it), a PAR its block never joins, a JOIN outside its PAR's
//! block; AG-019 a
//! SET origin that is malformed, a tool never used or an undefined symbol; AG-022 a call of
//! `random()` and the like, or USE of a random-looking tool (`random`, `rand`, `shuffle`,
//! `sample`, `uuid` in its name) without a `seed` key (in `where:` or an enclosing WITH);
//! AG-023 WITH without a JSON object or with an empty body; AG-027 modifiers out of order,
//! repeated, or out of range (`timeout_ms` a whole number 1…86 400 000, `retry` 0…10); AG-028 a
//! map path that does not parse, a map symbol not captured, a captured symbol without a path;
//! AG-029 a condition that does not parse or cannot be a boolean, an unknown function; AG-030
//! semicolons; AG-031 padding spaces; AG-032 a RETURN of a symbol that a `SNAP … redact=`
//! earlier on the same block path (this block or an enclosing one) made sensitive, or of one
//! derived from it (SET from it, a FOREACH variable over it, bound by a RUN given it); AG-034 a RUN or USE of a process of the file whose id the host registers as a
//! tool too ([`Policy::tools`], `process check --organism`); AG-035 `<config>`/`<import>`;
//! AG-044 RUN arguments missing, extra or of a literal type the signature refuses; AG-045/AG-046
//! block constants; AG-W01 (warning) constants, arguments and bound symbols never read; AG-W02
//! (warning) a USE without `timeout_ms` under [`Policy::require_timeout`]. AP-001 (not in 07)
//! names text outside the grammar, and a trigger `pattern` that is not a regular expression
//! (07 has no code for a trigger's pattern), at the place it stops compiling. AP-002 (not in
//! 07) names an expression nested deeper than `expr::MAX_DEPTH` or blocks deeper than
//! `parser::MAX_BLOCK_DEPTH`, where the limit is crossed; at run time, a value past
//! `max_value_bytes` or `value::MAX_DEPTH`.
//!
//! **Runtime, raised by the engine** (`src/process/engine`): AG-001/AG-008 along paths the
//! lexical order cannot see (a branch not taken); AG-006 a placeholder with no value at run
//! and `(from "Agent Inference")` when the organism allows no inference; AG-014 an `ISO8601` argument whose value (computed, or from a
//! trigger) is not ISO 8601 at the start of the process; AG-028 a path absent from a result; AG-029 a type error or a condition that is not
//! a boolean; AG-044 a start whose input lacks a declared argument or does not fit its type;
//! AG-W02 (a `warning` event) a USE without `timeout_ms` under the organism's
//! `require_timeout`; AG-W03 (a `warning` event) a value given by agent inference. Every AG
//! code at run time is fatal for the run (07): no RECOVER sees it. AG-032 is
//! not raised at run time: what the text cannot show (a redaction inside a branch) the engine
//! redacts as 06 prescribes — a RETURN of a sensitive symbol gives `[REDACTED]`, and a
//! sensitive value's text is cut out of error messages. AG-034 is also raised when the pump is
//! built: a process calling a process of its file by a name registered with another role.
//!
//! **Left out**: AG-021 (STE lints), AG-033 (`<instructions>` lines), AG-036…AG-043 (format
//! contracts, DICT references, WHERE sections of `<formats>`) — prompt formatting, not
//! processes; AG-024 — an ALIAS mapping exists only in `config.json` (04: external, "MUST NOT
//! appear in the prompt"; `<config>` in a document is AG-035), 05's grammar has no ALIAS
//! statement, and agentpump reads no `config.json`. AG-022 is static only: a tool's signature
//! declares no randomness and is not visible to a process.

use std::collections::{HashMap, HashSet};

use super::ast::Process;
use super::code::Code;
use super::diagnostic::{Diagnostic, Span};
use super::expr::ExprKind;
use super::source::{ConstValue, Constant, Document};

mod calls;
mod names;

pub use calls::MAX_PAR_WIDTH;

pub(crate) use names::{RESERVED, is_iso8601};
mod reads;
mod sensitive;

pub(crate) use reads::is_unresolved_placeholder;
mod walk;

/// What the host asks of the checks beyond the text: its time policy and the tools it
/// registers. The default (no policy, no tools known) is what `process check` assumes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// AG-W02 LaxTime: every USE must give `timeout_ms` (an organism's `require_timeout`).
    pub require_timeout: bool,
    /// Names the host registers as listeners that are not processes (its tools, agents): a
    /// process of the document with one of these ids, called by RUN or USE, is AG-034.
    pub tools: Vec<String>,
    /// Every name the host registers (its tools, agents and processes), when it is known: a
    /// USE of a name not among them nor a process of the document is AG-017 (it would be
    /// refused at run time). `None`: the tools are not known, nothing is checked.
    pub registered: Option<Vec<String>>,
}

/// What every process of a document can see.
struct Context<'a> {
    constants: HashSet<&'a str>,
    runtime: HashSet<&'a str>,
    processes: HashMap<&'a str, &'a Process>,
    policy: &'a Policy,
}

/// Runs every static check on a read document and its parsed processes, under `policy`.
pub fn check(doc: &Document, processes: &[Process], policy: &Policy) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    let constants = bindings(&doc.constants, &mut diags);
    let runtime = bindings(&doc.runtime, &mut diags);
    let mut by_id: HashMap<&str, &Process> = HashMap::new();
    for p in processes.iter().filter(|p| !p.id.name.is_empty()) {
        names::process_id(&p.id, &mut diags);
        if by_id.insert(&p.id.name, p).is_some() {
            let msg = format!("process id {} is defined twice", p.id.name);
            diags.push(
                Diagnostic::new(Code::DuplicateSymbol, p.id.span, msg)
                    .hint("process ids are unique"),
            );
        }
    }
    for t in &doc.triggers {
        if !by_id.contains_key(t.target.name.as_str()) {
            let msg = format!("trigger target {} is not a process", t.target.name);
            diags.push(Diagnostic::new(Code::ProcessIdMismatch, t.target.span, msg));
        }
        if let Some((pattern, at)) = &t.pattern
            && let Err(d) = trigger_pattern(pattern, *at)
        {
            diags.push(d);
        }
    }
    let cx = Context {
        constants,
        runtime,
        processes: by_id,
        policy,
    };
    let mut reads = json_references(doc, &cx, &mut diags);
    for p in processes {
        reads.extend(walk::process(&cx, p, &mut diags));
    }
    for c in doc.constants.iter().chain(&doc.runtime) {
        if !reads.contains(&c.name.name) {
            let msg = format!("{} is defined but never used", c.name.name);
            diags.push(Diagnostic::new(Code::SymbolNotUsed, c.name.span, msg));
        }
    }
    diags
}

/// A trigger's `pattern` compiled (a regular expression of the `regex` crate's syntax), or
/// AP-001 where it stops compiling: 07 has no code for a trigger, and a pattern that does not
/// compile is text outside the grammar. `at` is the attribute value's span.
pub(crate) fn trigger_pattern(pattern: &str, at: Span) -> Result<regex::Regex, Diagnostic> {
    let hint = "a regular expression (Rust regex syntax) matched against the payload's text";
    let (message, span) = match regex_syntax::Parser::new().parse(pattern) {
        Err(regex_syntax::Error::Parse(e)) => (e.kind().to_string(), Some(*e.span())),
        Err(regex_syntax::Error::Translate(e)) => (e.kind().to_string(), Some(*e.span())),
        Err(e) => (e.to_string(), None),
        Ok(_) => match regex::Regex::new(pattern) {
            Ok(re) => return Ok(re),
            Err(e) => (e.to_string(), None),
        },
    };
    let span = span.map_or(at, |s| {
        let inside = |offset: usize| pattern.get(..offset).map_or(0, |t| t.chars().count());
        let (from, to) = (inside(s.start.offset), inside(s.end.offset));
        Span::new(at.line, at.column + from as u32, (to - from).max(1) as u32)
    });
    let message = format!("trigger pattern does not compile: {message}");
    Err(Diagnostic::new(Code::Syntax, span, message).hint(hint))
}

/// The names of a constants or runtime list, with AG-002/AG-003/AG-013 on them.
fn bindings<'a>(list: &'a [Constant], diags: &mut Vec<Diagnostic>) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for c in list {
        names::symbol(&c.name, diags);
        if !names.insert(c.name.name.as_str()) {
            let msg = format!("{} is defined twice", c.name.name);
            diags.push(Diagnostic::new(Code::DuplicateSymbol, c.name.span, msg));
        }
    }
    names
}

/// Symbols referenced inside constant and runtime values: each must be a constant (AG-006)
/// defined before the value that reads it (AG-001, as at load: constants are evaluated in
/// order, so a constant that refers to itself or to a later one has nothing to read).
fn json_references(
    doc: &Document,
    cx: &Context<'_>,
    diags: &mut Vec<Diagnostic>,
) -> HashSet<String> {
    let mut reads = HashSet::new();
    let mut defined: HashSet<&str> = HashSet::new();
    let runtime = doc.runtime.iter().map(|c| (c, true));
    for (c, is_runtime) in doc.constants.iter().map(|c| (c, false)).chain(runtime) {
        if let ConstValue::Value(e) = &c.value {
            e.walk(&mut |e| {
                if let ExprKind::Symbol(name) = &e.kind {
                    let order = !is_runtime && !defined.contains(name.as_str());
                    if let Some(d) = constant_reference(cx, &c.name.name, name, e.span, order) {
                        diags.push(d);
                    }
                    reads.insert(name.clone());
                }
            });
        }
        if !is_runtime {
            defined.insert(&c.name.name);
        }
    }
    reads
}

/// The error of `name` read in the value of constant `of` at `at`, if any: not a constant
/// (AG-006), or — when `order` says it is not defined yet — itself or a later one (AG-001).
fn constant_reference(
    cx: &Context<'_>,
    of: &str,
    name: &str,
    at: Span,
    order: bool,
) -> Option<Diagnostic> {
    if !cx.constants.contains(name) {
        let msg = format!("{name} in the value of {of} is not a constant");
        let hint = "symbols inside JSON values resolve from <constants>";
        return Some(Diagnostic::new(Code::UnresolvedPlaceholder, at, msg).hint(hint));
    }
    if !order {
        return None;
    }
    let msg = if name == of {
        format!("{of} refers to itself")
    } else {
        format!("{of} refers to {name}, which is defined after it")
    };
    let hint = "a constant reads only constants defined above it";
    Some(Diagnostic::new(Code::UndefinedSymbol, at, msg).hint(hint))
}

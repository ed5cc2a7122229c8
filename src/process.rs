//! Processes: the agentic control language (APS, seed 001) — reading a process file, parsing
//! its processes into a typed tree, checking it statically, and running it on the pump
//! ([`engine`]: a [`engine::Program`] and one [`engine::ProcessListener`] per process).
//!
//! [`check_source`] is the front end's whole pipeline: [`source::read`] splits the APS document into
//! constants, runtime values, triggers and process bodies, [`parser::parse_process`] builds each
//! [`ast::Process`], and [`check::check`] raises the static codes of 07.

pub mod ast;
pub mod check;
pub mod code;
pub mod diagnostic;
pub mod engine;
pub mod expr;
pub mod lexer;
pub mod parser;
pub mod source;

pub use code::{Code, Severity};
pub use diagnostic::{Diagnostic, Span};

/// A checked document: its parts and everything found wrong with it, sorted by position.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The document's constants, runtime values and triggers.
    pub document: source::Document,
    /// Its processes, parsed (broken lines left out).
    pub processes: Vec<ast::Process>,
    /// Errors and warnings, by line and column.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    /// Whether any diagnostic is a hard error (07: fatal).
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity() == Severity::Error)
    }
}

/// Reads, parses and checks the text of a process file.
///
/// # Example
///
/// ```
/// let text = "<processes>\n<process id=\"hello\">\n  TELL \"hi\"\n</process>\n</processes>\n";
/// let checked = agentpump::process::check_source(text);
/// assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
/// assert_eq!(checked.processes[0].id.name, "hello");
/// ```
pub fn check_source(text: &str) -> Checked {
    check_source_with(text, &check::Policy::default())
}

/// [`check_source`] under a host's [`check::Policy`]: its time policy (AG-W02) and the tools
/// it registers (AG-034).
///
/// # Example
///
/// ```
/// use agentpump::process::{Code, check::Policy, check_source_with};
/// let text = "<processes>\n<process id=\"hello\">\n  USE `clock`\n</process>\n</processes>\n";
/// let policy = Policy { require_timeout: true, ..Policy::default() };
/// let checked = check_source_with(text, &policy);
/// assert_eq!(checked.diagnostics[0].code, Code::LaxTime);
/// ```
pub fn check_source_with(text: &str, policy: &check::Policy) -> Checked {
    let (document, mut diagnostics) = source::read(text);
    let mut processes = Vec::new();
    for src in &document.processes {
        let (process, diags) = parser::parse_process(src);
        diagnostics.extend(diags);
        processes.push(process);
    }
    diagnostics.extend(check::check(&document, &processes, policy));
    diagnostics.sort_by_key(|d| (d.span.line, d.span.column, d.code));
    diagnostics.dedup();
    Checked {
        document,
        processes,
        diagnostics,
    }
}

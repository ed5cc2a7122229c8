//! The process language front end: every construct of the 05 grammar parsed into the typed
//! AST, every static AG code raised at its position, the engine-defined `<expr>` and `<path>`,
//! and `agentpump process check`.

mod support;

mod process_parse {
    pub mod blocks;
    #[cfg(feature = "host")] // runs the binary
    pub mod cli;
    pub mod codes;
    pub mod expr;
    pub mod grammar;
    pub mod robust;
    pub mod safety;
    pub mod source;
}

use agentpump::process::ast::{Block, Process};
use agentpump::process::{Checked, Code, check_source, parser, source};

/// A document with one process `main` (args as given) whose body is `body`; body line 1 is file
/// line 3.
pub fn wrap(args: &str, body: &str) -> String {
    format!(
        "<processes>\n<process id=\"main\" args=\"{args}\">\n{body}\n</process>\n</processes>\n"
    )
}

/// Reads and parses `text`, asserting that reading and parsing report nothing.
pub fn parse_doc(text: &str) -> Vec<Process> {
    let (doc, diags) = source::read(text);
    assert!(diags.is_empty(), "{diags:#?}");
    doc.processes
        .iter()
        .map(|src| {
            let (p, diags) = parser::parse_process(src);
            assert!(diags.is_empty(), "{diags:#?}");
            p
        })
        .collect()
}

/// The parsed body of a one-process document.
pub fn parse_body(body: &str) -> Block {
    parse_doc(&wrap("", body)).remove(0).body
}

/// Every code found in `text`, with line and column.
pub fn codes(text: &str) -> Vec<(Code, u32, u32)> {
    let Checked { diagnostics, .. } = check_source(text);
    diagnostics
        .iter()
        .map(|d| (d.code, d.span.line, d.span.column))
        .collect()
}

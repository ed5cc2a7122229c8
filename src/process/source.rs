//! The APS document a process file holds (00 Structure): its sections, `<constants>`,
//! `<runtime>`, `<triggers>` and the `<process>` tags of `<processes>`, read line by line.
//!
//! Sections are recognised by a line that is exactly the tag (02 asks for a newline after an
//! opening and before a closing tag). `<instructions>`, `<formats>` and `<input>` are prompt
//! text and are skipped; the process bodies are handed to the parser as indented lines.

use super::ast::{Arg, Ident};
use super::code::Code;
use super::diagnostic::{Diagnostic, Span};
use super::expr::Expr;

mod constants;
mod sections;
mod tag;

/// A binding of `<constants>` or `<runtime>`: `SYMBOL: VALUE` or a block constant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constant {
    /// The symbol.
    pub name: Ident,
    /// The value.
    pub value: ConstValue,
}

/// The value of a [`Constant`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstValue {
    /// An inline value or a `JSON<<` block, parsed.
    Value(Expr),
    /// A `TEXT<<` block, verbatim.
    Text(String),
}

/// `<trigger event="…" pattern="…" target="…" />`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// `event`: for agentpump, the root of an incoming payload (`{ns}name` or `name`).
    pub event: String,
    /// `pattern`, if given: a regular expression the payload's text content must match, and
    /// where its value is.
    pub pattern: Option<(String, Span)>,
    /// `target`: the process id started.
    pub target: Ident,
}

/// One line of a process body: its number, its indentation in spaces and its text after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyLine {
    /// 1-based line number in the file.
    pub number: u32,
    /// Leading spaces.
    pub indent: u32,
    /// The text after them (tabs already reported and replaced by spaces).
    pub text: String,
}

/// A `<process>` tag's attributes and its body lines, before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSource {
    /// `id`.
    pub id: Ident,
    /// `name`.
    pub name: Option<String>,
    /// `args`.
    pub args: Vec<Arg>,
    /// The opening tag.
    pub span: Span,
    /// The body's non-blank lines.
    pub lines: Vec<BodyLine>,
}

/// The executable parts of an APS document.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Document {
    /// `<constants>`, in order.
    pub constants: Vec<Constant>,
    /// `<runtime>`, in order (same syntax as constants; constants win on a clash).
    pub runtime: Vec<Constant>,
    /// `<triggers>`.
    pub triggers: Vec<Trigger>,
    /// `<processes>`.
    pub processes: Vec<ProcessSource>,
}

/// Reads a document. Never fails: what cannot be read is reported and skipped. A UTF-8
/// byte-order mark at its start is skipped.
///
/// # Example
///
/// ```
/// let text = "<constants>\nLIMIT: 3\n</constants>\n<processes>\n<process id=\"p1\">\n  TELL\n</process>\n</processes>\n";
/// let (doc, diags) = agentpump::process::source::read(text);
/// assert!(diags.is_empty());
/// assert_eq!(doc.constants[0].name.name, "LIMIT");
/// assert_eq!(doc.processes[0].lines[0].number, 6);
/// ```
pub fn read(text: &str) -> (Document, Vec<Diagnostic>) {
    // A byte-order mark (some editors write one) is not text of the document.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n");
    let mut diags = Vec::new();
    let lines: Vec<(u32, String)> = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let number = i as u32 + 1;
            tabs(line, number, &mut diags);
            (number, line.replace('\t', " "))
        })
        .collect();
    let mut reader = sections::Reader::new(&lines, &mut diags);
    reader.run();
    let doc = reader.into_document();
    (doc, diags)
}

/// AG-011 for the first tab of a line.
fn tabs(line: &str, number: u32, diags: &mut Vec<Diagnostic>) {
    if let Some(i) = line.chars().position(|c| c == '\t') {
        let at = Span::new(number, i as u32 + 1, 1);
        diags.push(
            Diagnostic::new(Code::TabDetected, at, "tab character")
                .hint("indent and separate with spaces"),
        );
    }
}

/// Leading spaces of a line, and the rest.
pub(crate) fn split_indent(line: &str) -> (u32, &str) {
    let rest = line.trim_start_matches(' ');
    ((line.len() - rest.len()) as u32, rest)
}

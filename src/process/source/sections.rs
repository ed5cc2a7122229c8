//! The section reader: which top-level section each line is in, and what it does with it.

use super::{BodyLine, Document, ProcessSource, split_indent};
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};

/// The top-level sections of 00, in their required order.
pub(super) const SECTIONS: [&str; 7] = [
    "instructions",
    "constants",
    "formats",
    "runtime",
    "triggers",
    "processes",
    "input",
];

pub(super) struct Reader<'a> {
    lines: &'a [(u32, String)],
    pub(super) diags: &'a mut Vec<Diagnostic>,
    pub(super) doc: Document,
    /// The open section: index into SECTIONS and where it opened.
    open: Option<(usize, Span)>,
    /// The open `<process>` inside `<processes>`.
    process: Option<ProcessSource>,
    /// The last section opened, for the order check.
    last: Option<usize>,
    seen: [bool; 7],
    pub(super) i: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(lines: &'a [(u32, String)], diags: &'a mut Vec<Diagnostic>) -> Self {
        Reader {
            lines,
            diags,
            doc: Document::default(),
            open: None,
            process: None,
            last: None,
            seen: [false; 7],
            i: 0,
        }
    }

    pub(super) fn into_document(self) -> Document {
        self.doc
    }

    pub(super) fn lines(&self) -> &'a [(u32, String)] {
        self.lines
    }

    pub(super) fn error(&mut self, code: Code, at: Span, msg: impl Into<String>, hint: &str) {
        self.diags.push(Diagnostic::new(code, at, msg).hint(hint));
    }

    pub(super) fn run(&mut self) {
        while self.i < self.lines.len() {
            let (number, line) = &self.lines[self.i];
            self.i += 1;
            let (indent, text) = split_indent(line);
            let at = Span::new(*number, indent + 1, text.chars().count().max(1) as u32);
            self.line(*number, indent, text.trim_end(), at);
        }
        if let Some(p) = self.process.take() {
            let hint = "close it with </process>";
            self.error(Code::TagMismatch, p.span, "<process> is never closed", hint);
        }
        if let Some((s, at)) = self.open {
            let msg = format!("<{}> is never closed", SECTIONS[s]);
            self.error(
                Code::TagMismatch,
                at,
                msg,
                "add the closing tag on its own line",
            );
        }
        let tags_ok = !self.diags.iter().any(|d| d.code == Code::TagMismatch);
        if self.doc.processes.is_empty() && tags_ok {
            let at = Span::new(1, 1, 1);
            let hint = "a process file holds <processes> with at least one <process id=\"…\">";
            self.error(Code::TagMismatch, at, "no <process> in the document", hint);
        }
    }

    fn line(&mut self, number: u32, indent: u32, text: &str, at: Span) {
        if self.process.is_some() {
            return self.process_line(number, indent, text, at);
        }
        let open = self.open.map(|(s, _)| SECTIONS[s]);
        let closing = text.strip_prefix("</").and_then(|t| t.strip_suffix('>'));
        // Prompt text (instructions, formats, input) ends only at its own closing tag.
        let prose = matches!(open, Some("instructions" | "formats" | "input"));
        if let Some(name) = closing.filter(|n| !prose || open == Some(*n)) {
            return self.close(name, at);
        }
        match open {
            None => self.outside(text, at),
            Some("constants") => self.constant(number, indent, text, false),
            Some("runtime") => self.constant(number, indent, text, true),
            Some("triggers") => self.trigger_line(text, at),
            Some("processes") => self.processes_line(text, at),
            Some(_) => {}
        }
    }

    fn outside(&mut self, text: &str, at: Span) {
        if text.is_empty() || text.starts_with("//") {
            return;
        }
        let inner = text.strip_prefix('<').and_then(|t| t.strip_suffix('>'));
        let name = inner.map(|t| t.split(' ').next().unwrap_or(t));
        match name {
            Some("config" | "import") => self.error(
                Code::InPromptConfigOrImports,
                at,
                format!("{text} in the document"),
                "configuration and imports live outside the prompt (04)",
            ),
            Some(n) if inner == Some(n) && SECTIONS.contains(&n) => {
                let index = SECTIONS.iter().position(|x| *x == n).unwrap_or_default();
                self.open_section(index, at)
            }
            _ => self.error(
                Code::TagMismatch,
                at,
                format!("unexpected text outside a section: {text}"),
                "top-level sections are <instructions>, <constants>, <formats>, <runtime>, \
                 <triggers>, <processes>, <input>, each tag on its own line",
            ),
        }
    }

    fn open_section(&mut self, s: usize, at: Span) {
        let name = SECTIONS[s];
        if self.seen[s] {
            let msg = format!("<{name}> appears a second time");
            self.error(
                Code::TagMismatch,
                at,
                msg,
                "each section appears at most once",
            );
        } else if let Some(l) = self.last.filter(|&l| l > s) {
            let msg = format!("<{name}> after <{}>", SECTIONS[l]);
            let hint = "sections go in the order instructions, constants, formats, runtime, \
                        triggers, processes, input";
            self.error(Code::TagMismatch, at, msg, hint);
        }
        self.seen[s] = true;
        self.last = Some(s);
        self.open = Some((s, at));
    }

    fn close(&mut self, name: &str, at: Span) {
        match self.open {
            Some((s, _)) if SECTIONS[s] == name => self.open = None,
            Some((s, _)) => {
                let msg = format!("</{name}> closes <{}>", SECTIONS[s]);
                self.error(
                    Code::TagMismatch,
                    at,
                    msg,
                    "close the innermost open tag first",
                );
            }
            None => {
                let msg = format!("</{name}> closes nothing");
                self.error(
                    Code::TagMismatch,
                    at,
                    msg,
                    "remove it or add the opening tag",
                );
            }
        }
    }

    fn process_line(&mut self, number: u32, indent: u32, text: &str, at: Span) {
        if text == "</process>" {
            self.doc.processes.extend(self.process.take());
            return;
        }
        if text.starts_with("</") {
            let msg = format!("{text} inside <process>");
            return self.error(
                Code::TagMismatch,
                at,
                msg,
                "close the process first: </process>",
            );
        }
        if text.starts_with("//") {
            let hint = "comments are forbidden in executable sections; remove the line";
            return self.error(Code::CommentDetected, at, "comment in a process body", hint);
        }
        if text.is_empty() {
            return;
        }
        // Keep trailing spaces: the lexer reports them (AG-031).
        let full = &self.lines[self.i - 1].1;
        let text = full[indent as usize..].to_string();
        let p = self.process.as_mut().expect("open process");
        p.lines.push(BodyLine {
            number,
            indent,
            text,
        });
    }

    fn processes_line(&mut self, text: &str, at: Span) {
        if text.is_empty() {
            return;
        }
        if text.starts_with("<process ") || text == "<process>" {
            self.process = self.process_tag(text, at);
        } else if text.starts_with("//") {
            let hint = "comments are forbidden in executable sections; remove the line";
            self.error(Code::CommentDetected, at, "comment in <processes>", hint);
        } else {
            let msg = format!("unexpected text in <processes>: {text}");
            self.error(
                Code::TagMismatch,
                at,
                msg,
                "statements go inside <process id=\"…\">",
            );
        }
    }
}

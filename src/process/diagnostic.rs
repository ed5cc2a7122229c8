//! [`Diagnostic`]: one error or warning with its position, rendered rustc-style or as JSON.

use std::fmt::Write as _;

use super::code::{Code, Severity};

/// A place in a source file: 1-based line and column (in characters) and a length in
/// characters (at least 1 when rendered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in characters.
    pub column: u32,
    /// Length in characters.
    pub len: u32,
}

impl Span {
    /// A span of `len` characters at `line`, `column`.
    pub fn new(line: u32, column: u32, len: u32) -> Span {
        Span { line, column, len }
    }
}

/// One finding: a code of 07, where, what and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} at {}:{}: {message}", span.line, span.column)]
pub struct Diagnostic {
    /// The code (its severity follows from it).
    pub code: Code,
    /// Where.
    pub span: Span,
    /// What is wrong, lowercase, naming the thing.
    pub message: String,
    /// How to fix it, if there is something useful to say.
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A diagnostic without a hint.
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            span,
            message: message.into(),
            hint: None,
        }
    }

    /// The same diagnostic with a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    /// Error or warning.
    pub fn severity(&self) -> Severity {
        self.code.severity()
    }

    /// Renders like rustc: header, `--> file:line:column`, the source line and a caret line under
    /// the span, then the hint.
    pub fn render(&self, file: &str, source: &str) -> String {
        let Span { line, column, len } = self.span;
        let gutter = line.to_string().len();
        let pad = " ".repeat(gutter);
        let mut out = format!(
            "{}[{} {}]: {}\n{pad}--> {file}:{line}:{column}\n",
            self.severity().as_str(),
            self.code.as_str(),
            self.code.name(),
            self.message
        );
        if let Some(text) = source.lines().nth(line.saturating_sub(1) as usize) {
            let shown = text.replace('\t', " ");
            let carets = "^".repeat(len.max(1) as usize);
            let indent = " ".repeat(column.saturating_sub(1) as usize);
            let _ = write!(out, "{pad} |\n{line} | {shown}\n{pad} | {indent}{carets}\n");
        }
        if let Some(hint) = &self.hint {
            let _ = writeln!(out, "{pad} = hint: {hint}");
        }
        out
    }

    /// One JSON object for editors: file, line, column, code, name, severity, message, hint.
    pub fn to_json(&self, file: &str) -> serde_json::Value {
        serde_json::json!({
            "file": file,
            "line": self.span.line,
            "column": self.span.column,
            "length": self.span.len,
            "code": self.code.as_str(),
            "name": self.code.name(),
            "severity": self.severity().as_str(),
            "message": self.message,
            "hint": self.hint,
        })
    }
}

//! `<process id name args>` and `<trigger event pattern target />` tags and their attributes.

use super::sections::Reader;
use super::{ProcessSource, Trigger};
use crate::process::ast::{Arg, Ident};
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};

/// Argument types a process may declare (the `TypeConst` names of 05 and 04, plus `JSON` and
/// `List`).
pub const ARG_TYPES: &[&str] = &[
    "String", "Number", "Integer", "Boolean", "ISO8601", "URI", "Path", "JSON", "List",
];

/// An attribute: name, value, and the span of the value (inside the quotes).
type Attr = (String, String, Span);

/// Parses ` name="value"` pairs from `rest`, which starts at column `col` of line `line`.
fn attributes(rest: &str, line: u32, col: u32) -> Result<Vec<Attr>, (u32, String)> {
    let chars: Vec<char> = rest.chars().collect();
    let (mut i, mut out) = (0, Vec::new());
    loop {
        while chars.get(i) == Some(&' ') {
            i += 1;
        }
        if i >= chars.len() {
            return Ok(out);
        }
        let start = i;
        while chars
            .get(i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            i += 1;
        }
        if i == start || chars.get(i) != Some(&'=') || chars.get(i + 1) != Some(&'"') {
            return Err((col + i as u32, "expected name=\"value\"".into()));
        }
        let name: String = chars[start..i].iter().collect();
        let vstart = i + 2;
        let Some(len) = chars[vstart..].iter().position(|c| *c == '"') else {
            return Err((col + i as u32, format!("attribute {name} is not closed")));
        };
        let value: String = chars[vstart..vstart + len].iter().collect();
        out.push((
            name,
            value,
            Span::new(line, col + vstart as u32, len.max(1) as u32),
        ));
        i = vstart + len + 1;
    }
}

fn args(text: &str, at: Span) -> Result<Vec<Arg>, Diagnostic> {
    let mut out: Vec<Arg> = Vec::new();
    let mut offset = 0;
    for part in text.split(',') {
        let lead = part.len() - part.trim_start().len();
        let col = at.column + (offset + lead) as u32;
        offset += part.len() + 1;
        let part = part.trim();
        let (name, ty) = part
            .split_once(':')
            .map_or((part, ""), |(n, t)| (n.trim(), t.trim()));
        let span = Span::new(at.line, col, part.chars().count().max(1) as u32);
        if !ARG_TYPES.contains(&ty) {
            let msg = format!(
                "argument `{part}` needs a type: name: {}",
                ARG_TYPES.join("|")
            );
            return Err(Diagnostic::new(Code::ProcessNameAttrMismatch, span, msg)
                .hint("args=\"amount: Number, region: String\""));
        }
        let name = Ident {
            name: name.to_string(),
            span: Span::new(at.line, col, name.len() as u32),
        };
        if out.iter().any(|a| a.name.name == name.name) {
            let msg = format!("argument {} is declared twice", name.name);
            return Err(Diagnostic::new(
                Code::ProcessNameAttrMismatch,
                name.span,
                msg,
            ));
        }
        out.push(Arg {
            name,
            ty: ty.to_string(),
        });
    }
    Ok(out)
}

impl Reader<'_> {
    /// Reads `<process …>`; a malformed tag is reported and still opens a process (id `""`),
    /// so its body is not reported a second time as stray text.
    pub(super) fn process_tag(&mut self, text: &str, at: Span) -> Option<ProcessSource> {
        let mut p = ProcessSource {
            id: Ident {
                name: String::new(),
                span: at,
            },
            name: None,
            args: Vec::new(),
            span: at,
            lines: Vec::new(),
        };
        let hint = "<process id=\"process_id\" name=\"…\" args=\"a: Number\">";
        let Some(inner) = text.strip_suffix('>') else {
            self.error(
                Code::ProcessNameAttrMismatch,
                at,
                "<process> tag is not closed by >",
                hint,
            );
            return Some(p);
        };
        let rest = &inner["<process".len()..];
        let col = at.column + "<process".len() as u32;
        let attrs = match attributes(rest, at.line, col) {
            Ok(a) => a,
            Err((c, msg)) => {
                let span = Span::new(at.line, c, 1);
                self.error(Code::ProcessNameAttrMismatch, span, msg, hint);
                return Some(p);
            }
        };
        self.process_attrs(&mut p, attrs, hint);
        if p.id.name.is_empty() {
            self.error(
                Code::ProcessNameAttrMismatch,
                at,
                "<process> has no id",
                hint,
            );
        }
        Some(p)
    }

    fn process_attrs(&mut self, p: &mut ProcessSource, attrs: Vec<Attr>, hint: &str) {
        for (name, value, span) in attrs {
            match name.as_str() {
                "id" => p.id = Ident { name: value, span },
                "name" => p.name = Some(value),
                "args" if value.trim().is_empty() => {}
                "args" => match args(&value, span) {
                    Ok(a) => p.args = a,
                    Err(d) => self.diags.push(d),
                },
                _ => {
                    let msg = format!("unknown attribute {name} on <process>");
                    self.error(Code::ProcessNameAttrMismatch, span, msg, hint);
                }
            }
        }
    }

    /// Reads one line of `<triggers>`.
    pub(super) fn trigger_line(&mut self, text: &str, at: Span) {
        let hint = "<trigger event=\"…\" target=\"process_id\" />";
        if text.is_empty() {
        } else if text.starts_with("//") {
            let hint = "comments are forbidden in executable sections; remove the line";
            self.error(Code::CommentDetected, at, "comment in <triggers>", hint);
        } else if text.starts_with("USE ") || text.contains(" USE `") {
            let msg = "tool used in <triggers>";
            self.error(
                Code::ToolPolicy,
                at,
                msg,
                "triggers start processes; USE belongs in a process",
            );
        } else if let Some(inner) = text
            .strip_prefix("<trigger")
            .and_then(|t| t.strip_suffix("/>"))
        {
            let col = at.column + "<trigger".len() as u32;
            match attributes(inner, at.line, col) {
                Ok(attrs) => self.trigger(attrs, at, hint),
                Err((c, msg)) => self.error(Code::Syntax, Span::new(at.line, c, 1), msg, hint),
            }
        } else {
            let msg = format!("unexpected text in <triggers>: {text}");
            self.error(Code::TagMismatch, at, msg, hint);
        }
    }

    fn trigger(&mut self, attrs: Vec<Attr>, at: Span, hint: &str) {
        let (mut event, mut pattern, mut target) = (None, None, None);
        for (name, value, span) in attrs {
            match name.as_str() {
                "event" => event = Some(value),
                "pattern" => pattern = Some((value, span)),
                "target" => target = Some(Ident { name: value, span }),
                _ => self.error(
                    Code::Syntax,
                    span,
                    format!("unknown attribute {name}"),
                    hint,
                ),
            }
        }
        match (event, target) {
            (Some(event), Some(target)) => self.doc.triggers.push(Trigger {
                event,
                pattern,
                target,
            }),
            _ => self.error(Code::Syntax, at, "a trigger needs event and target", hint),
        }
    }
}

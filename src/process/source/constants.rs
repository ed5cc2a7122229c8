//! `<constants>` and `<runtime>` bindings: `SYMBOL: VALUE` and block constants
//! (`SYMBOL: JSON<<` … `>>`, `SYMBOL: TEXT<<` … `>>`).

use super::sections::Reader;
use super::{ConstValue, Constant};
use crate::process::ast::Ident;
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};
use crate::process::expr::{Expr, ExprKind, parse_expr};
use crate::process::lexer::{Cursor, Token, lex};

/// Whether a value is JSON (with symbol references), as constants require.
pub(crate) fn is_json(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Str(_) | ExprKind::Num(_) | ExprKind::Bool(_) | ExprKind::Null => true,
        ExprKind::Symbol(_) => true,
        ExprKind::List(items) => items.iter().all(is_json),
        ExprKind::Object(pairs) => pairs.iter().all(|(_, v)| is_json(v)),
        _ => false,
    }
}

/// Parses the tokens of a value; everything must be read and the result must be JSON.
fn value(tokens: &[Token], end: Span) -> Result<Expr, Diagnostic> {
    let mut cur = Cursor::new(tokens, end);
    let e = parse_expr(&mut cur)?;
    cur.finish()?;
    if !is_json(&e) {
        let msg = "a constant is a string, number, boolean, null or JSON value";
        return Err(Diagnostic::new(Code::BadJson, e.span, msg));
    }
    Ok(e)
}

impl Reader<'_> {
    pub(super) fn constant(&mut self, number: u32, indent: u32, text: &str, runtime: bool) {
        if text.is_empty() || text.starts_with("//") {
            return;
        }
        let col = indent + 1;
        let Some((name, rest)) = text.split_once(':') else {
            let at = Span::new(number, col, text.chars().count() as u32);
            let hint = "SYMBOL: VALUE, or SYMBOL: JSON<< … >>";
            return self.error(
                Code::Syntax,
                at,
                format!("expected SYMBOL: VALUE, found {text}"),
                hint,
            );
        };
        let name = Ident {
            name: name.to_string(),
            span: Span::new(number, col, name.len() as u32),
        };
        let vcol = col + name.name.len() as u32 + 1;
        if !rest.starts_with(' ') || rest.starts_with("  ") {
            let at = Span::new(number, vcol, 1);
            let hint = "exactly one space after the colon";
            self.error(Code::PaddingWhitespace, at, "spacing after the colon", hint);
        }
        let rest = rest.trim_start_matches(' ');
        let vcol = vcol + (text.len() - name.name.len() - 1 - rest.len()) as u32;
        let value = match rest.strip_suffix("<<") {
            Some(kind) => self.block(number, vcol, kind),
            None => self.inline(number, vcol, rest),
        };
        let Some(value) = value else { return };
        let list = if runtime {
            &mut self.doc.runtime
        } else {
            &mut self.doc.constants
        };
        list.push(Constant { name, value });
    }

    /// `VALUE` of `SYMBOL: VALUE`, at column `col`.
    fn inline(&mut self, number: u32, col: u32, rest: &str) -> Option<ConstValue> {
        let (tokens, diags) = lex(rest, number, col);
        self.diags.extend(diags);
        let end = Span::new(number, col + rest.chars().count() as u32, 1);
        let parsed = value(&tokens, end);
        parsed
            .map(ConstValue::Value)
            .map_err(|d| self.diags.push(d))
            .ok()
    }

    /// A block constant whose opening line ends in `kind<<`; reads its body up to `>>`.
    fn block(&mut self, number: u32, col: u32, kind: &str) -> Option<ConstValue> {
        let at = Span::new(number, col, kind.len() as u32 + 2);
        if kind.ends_with(' ') {
            self.error(
                Code::PaddingWhitespace,
                at,
                "space before <<",
                "write JSON<< or TEXT<<",
            );
        }
        let body = self.block_body(at);
        match kind.trim_end() {
            "TEXT" => Some(ConstValue::Text(
                body.iter()
                    .map(|(_, l)| l.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )),
            "JSON" => self.json_block(&body, at),
            other => {
                let msg = format!("unknown block type {other}");
                self.error(
                    Code::BlockConstantTypeUnknown,
                    at,
                    msg,
                    "block constants are JSON<< or TEXT<<",
                );
                None
            }
        }
    }

    /// A `JSON<<` body: one JSON value over its lines (padding inside is allowed, 02).
    fn json_block(&mut self, body: &[(u32, String)], at: Span) -> Option<ConstValue> {
        let mut tokens = Vec::new();
        for (n, line) in body {
            let (t, d) = lex(line, *n, 1);
            tokens.extend(t);
            let d = d.into_iter().filter(|d| d.code != Code::PaddingWhitespace);
            self.diags.extend(d);
        }
        let end = body
            .last()
            .map_or(at, |(n, l)| Span::new(*n, l.len() as u32 + 1, 1));
        let parsed = value(&tokens, end);
        parsed
            .map(ConstValue::Value)
            .map_err(|d| self.diags.push(d))
            .ok()
    }

    /// The lines up to the first line that is exactly `>>`. Without one: AG-045, and the body
    /// ends before the section's closing tag so the rest of the document is still read.
    fn block_body(&mut self, at: Span) -> Vec<(u32, String)> {
        let lines = self.lines();
        let mut body = Vec::new();
        while let Some((n, line)) = lines.get(self.i) {
            if line == ">>" {
                self.i += 1;
                return body;
            }
            if line.trim() == "</constants>" || line.trim() == "</runtime>" {
                break;
            }
            body.push((*n, line.clone()));
            self.i += 1;
        }
        let hint = "end the block with a line that is exactly >> at column 1";
        self.error(
            Code::BlockConstantUnterminated,
            at,
            "block constant is not closed",
            hint,
        );
        body
    }
}

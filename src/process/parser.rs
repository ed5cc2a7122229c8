//! The parser: a process body's indented lines into a typed [`Process`].
//!
//! Each line is one statement (05: `Program = { Statement, EOL }`). A line ending in `:` opens
//! a block; its body is the following lines indented deeper than it, all at the indentation of
//! the first of them (05 notes: indentation is significant). `ELSE IF`/`ELSE` continue an `IF`
//! and `RECOVER` closes a `TRY` at the same indentation. An error skips its line (and the body
//! of a block it opens) and parsing goes on, so one run reports every broken line.

use std::collections::BTreeSet;

use super::ast::{Block, Process, Stmt, StmtKind};
use super::code::Code;
use super::diagnostic::{Diagnostic, Span};
use super::lexer::{Cursor, Tok, Token, lex};
use super::source::ProcessSource;

mod blocks;
mod ident;
mod stmt;
mod story;

/// The deepest blocks may nest, the process body counting as the first: a line that opens a
/// block 33 levels down is AP-002 `LimitExceeded`, and its body is skipped. The parser, the
/// checks and the compiler recurse once per block, so a bound keeps a hostile file (a line
/// indented one space deeper than the last, thousands of times) from overflowing the stack.
pub const MAX_BLOCK_DEPTH: u32 = 32;

/// One lexed body line.
#[derive(Debug)]
struct Line {
    indent: u32,
    tokens: Vec<Token>,
    /// The whole line's text, for its span.
    span: Span,
    /// Just past the last character.
    end: Span,
}

impl Line {
    fn cursor(&self) -> Cursor<'_> {
        Cursor::new(&self.tokens, self.end)
    }

    fn first_word(&self) -> Option<&str> {
        match self.tokens.first().map(|t| &t.tok) {
            Some(Tok::Word(w)) => Some(w),
            _ => None,
        }
    }

    fn opens_block(&self) -> bool {
        self.tokens.last().is_some_and(|t| t.is_punct(":"))
    }
}

/// Parses a process body. Never fails: broken lines are reported and left out of the tree.
///
/// # Example
///
/// ```
/// use agentpump::process::{ast::StmtKind, parser, source};
/// let text = "<processes>\n<process id=\"p1\">\n  IF 1 < 2:\n    TELL \"yes\"\n</process>\n</processes>\n";
/// let (doc, _) = source::read(text);
/// let (process, diags) = parser::parse_process(&doc.processes[0]);
/// assert!(diags.is_empty());
/// assert!(matches!(process.body[0].kind, StmtKind::If { .. }));
/// ```
pub fn parse_process(src: &ProcessSource) -> (Process, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let lines: Vec<Line> = src
        .lines
        .iter()
        .map(|l| {
            let (tokens, d) = lex(&l.text, l.number, l.indent + 1);
            diags.extend(d);
            let len = l.text.chars().count() as u32;
            Line {
                indent: l.indent,
                tokens,
                span: Span::new(l.number, l.indent + 1, len.max(1)),
                end: Span::new(l.number, l.indent + 1 + len, 1),
            }
        })
        .collect();
    let mut p = Parser {
        lines: &lines,
        i: 0,
        depth: 0,
        diags,
        left_out: BTreeSet::new(),
    };
    let base = lines.first().map_or(0, |l| l.indent);
    let body = p.block(base);
    let process = Process {
        id: src.id.clone(),
        name: src.name.clone(),
        args: src.args.clone(),
        body,
        left_out: p.left_out,
        span: src.span,
    };
    (process, p.diags)
}

struct Parser<'a> {
    lines: &'a [Line],
    i: usize,
    /// Blocks the parser is inside (at most [`MAX_BLOCK_DEPTH`]).
    depth: u32,
    diags: Vec<Diagnostic>,
    /// The names on the lines left out of the tree ([`Process::left_out`]).
    left_out: BTreeSet<String>,
}

impl<'a> Parser<'a> {
    /// The statements at exactly `indent`, up to the first line indented less; past
    /// [`MAX_BLOCK_DEPTH`], AP-002 at its first line and nothing (its lines are skipped).
    fn block(&mut self, indent: u32) -> Block {
        if self.depth >= MAX_BLOCK_DEPTH {
            self.too_deep(indent);
            return Vec::new();
        }
        self.depth += 1;
        let out = self.statements(indent);
        self.depth -= 1;
        out
    }

    /// AP-002 for a block nested past the limit; skips it, without recursing.
    fn too_deep(&mut self, indent: u32) {
        if let Some(line) = self.lines.get(self.i) {
            let msg = format!("blocks nested deeper than {MAX_BLOCK_DEPTH} levels (the limit)");
            let hint = "move the inner part into a process of its own and RUN it";
            self.diags
                .push(Diagnostic::new(Code::LimitExceeded, line.span, msg).hint(hint));
        }
        let from = self.i;
        while self.lines.get(self.i).is_some_and(|l| l.indent >= indent) {
            self.i += 1;
        }
        self.leave_out(from..self.i);
    }

    fn statements(&mut self, indent: u32) -> Block {
        let mut out = Vec::new();
        while let Some(line) = self.lines.get(self.i) {
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                let msg = "unexpected indentation";
                let hint = "only the body of a line ending in `:` is indented deeper";
                self.diags
                    .push(Diagnostic::new(Code::Syntax, line.span, msg).hint(hint));
                self.leave_out(self.i..self.i + 1);
                self.i += 1;
                continue;
            }
            self.i += 1;
            match self.statement(line) {
                Ok(kind) => out.push(Stmt {
                    kind,
                    span: line.span,
                }),
                Err(d) => {
                    self.diags.push(d);
                    let from = self.i - 1;
                    self.skip_rest(line);
                    self.leave_out(from..self.i);
                }
            }
        }
        out
    }

    /// Notes the names on `lines`, left out of the tree: a word, and a placeholder's name
    /// as written and lowercased (the argument it resolves from).
    fn leave_out(&mut self, lines: std::ops::Range<usize>) {
        for token in self.lines[lines].iter().flat_map(|l| &l.tokens) {
            match &token.tok {
                Tok::Word(w) => {
                    self.left_out.insert(w.clone());
                }
                Tok::Placeholder(p) => {
                    self.left_out.insert(p.clone());
                    self.left_out.insert(p.to_lowercase());
                }
                _ => {}
            }
        }
    }

    /// After a broken line: skips the body it opens and, for a broken IF or TRY, the ELSE and
    /// RECOVER lines that continue it, so they are not reported again as strays.
    fn skip_rest(&mut self, line: &'a Line) {
        if !line.opens_block() {
            return;
        }
        self.body(line);
        if !matches!(line.first_word(), Some("IF" | "ELSE" | "TRY")) {
            return;
        }
        while let Some(next) = self.lines.get(self.i) {
            let continuation = matches!(next.first_word(), Some("ELSE" | "RECOVER"));
            if next.indent != line.indent || !continuation {
                break;
            }
            self.i += 1;
            self.body(next);
        }
    }

    /// The body of the block `opener` opens (possibly empty).
    fn body(&mut self, opener: &Line) -> Block {
        match self.lines.get(self.i) {
            Some(next) if next.indent > opener.indent => self.block(next.indent),
            _ => Vec::new(),
        }
    }

    /// The body of `opener`, which must not be empty (a body whose every line is broken is
    /// not empty: those lines were reported already).
    fn nonempty_body(&mut self, opener: &Line, code: Code) -> Result<Block, Diagnostic> {
        let has_lines = self
            .lines
            .get(self.i)
            .is_some_and(|l| l.indent > opener.indent);
        if !has_lines {
            let msg = "empty block";
            let hint = "indent at least one statement under the line ending in `:`";
            return Err(Diagnostic::new(code, opener.span, msg).hint(hint));
        }
        Ok(self.body(opener))
    }

    /// The next line, if it is at `indent` and starts with `word`.
    fn next_at(&self, indent: u32, word: &str) -> Option<&'a Line> {
        self.lines
            .get(self.i)
            .filter(|l| l.indent == indent && l.first_word() == Some(word))
    }

    /// One statement, with the body of a block it opens.
    fn statement(&mut self, line: &'a Line) -> Result<StmtKind, Diagnostic> {
        let mut cur = line.cursor();
        let word = line.first_word().unwrap_or_default();
        let kind = match word {
            "IF" | "GIVEN" | "WHEN" | "THEN" | "WITH" | "PAR" | "JOIN" | "FOREACH" | "TRY" => {
                cur.bump();
                self.block_statement(word, line, &mut cur)?
            }
            "ELSE" => return Err(Diagnostic::new(Code::Syntax, line.span, "ELSE without IF")),
            "RECOVER" => {
                return Err(Diagnostic::new(
                    Code::Syntax,
                    line.span,
                    "RECOVER without TRY",
                ));
            }
            _ => stmt::simple(&mut cur)?,
        };
        Ok(kind)
    }
}

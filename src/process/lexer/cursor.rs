//! [`Cursor`]: reads the tokens of one line for the statement and expression parsers.

use super::{Tok, Token};
use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};

/// A position in the tokens of one line. `end` is the span just past the last token, used to
/// point at "the end of the line" when something is missing.
#[derive(Debug)]
pub struct Cursor<'a> {
    toks: &'a [Token],
    pos: usize,
    end: Span,
    /// Levels of expression nesting the parser is inside (see `expr::MAX_DEPTH`).
    depth: u32,
}

impl<'a> Cursor<'a> {
    /// A cursor at the first of `toks`; `end` is where the line ends.
    pub fn new(toks: &'a [Token], end: Span) -> Cursor<'a> {
        Cursor {
            toks,
            pos: 0,
            end,
            depth: 0,
        }
    }

    /// One level deeper into a nested expression; the new depth.
    pub(crate) fn descend(&mut self) -> u32 {
        self.depth += 1;
        self.depth
    }

    /// Back out of a level [`Cursor::descend`] entered.
    pub(crate) fn ascend(&mut self) {
        self.depth -= 1;
    }

    /// The next token, if any.
    pub fn peek(&self) -> Option<&'a Token> {
        self.toks.get(self.pos)
    }

    /// The token `n` after the next one.
    pub fn peek_at(&self, n: usize) -> Option<&'a Token> {
        self.toks.get(self.pos + n)
    }

    /// Takes the next token.
    pub fn bump(&mut self) -> Option<&'a Token> {
        let t = self.toks.get(self.pos);
        self.pos += usize::from(t.is_some());
        t
    }

    /// Whether every token has been read.
    pub fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    /// The span of the next token, or the end of the line.
    pub fn here(&self) -> Span {
        self.peek().map_or(self.end, |t| t.span)
    }

    /// The span of the token just read.
    pub fn last(&self) -> Span {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.toks.get(i))
            .map_or(self.end, |t| t.span)
    }

    /// Takes the word `w` if it is next.
    pub fn eat_word(&mut self, w: &str) -> bool {
        let hit = self.peek().is_some_and(|t| t.is_word(w));
        self.pos += usize::from(hit);
        hit
    }

    /// Takes the punctuation `p` if it is next.
    pub fn eat_punct(&mut self, p: &str) -> bool {
        let hit = self.peek().is_some_and(|t| t.is_punct(p));
        self.pos += usize::from(hit);
        hit
    }

    /// An error at the next token: "expected `what`, found …".
    pub fn expected(&self, code: Code, what: &str) -> Diagnostic {
        let found = match self.peek() {
            None => "the end of the line".to_string(),
            Some(t) => describe(&t.tok),
        };
        Diagnostic::new(code, self.here(), format!("expected {what}, found {found}"))
    }

    /// Takes the punctuation `p` or fails with `code`.
    pub fn expect_punct(&mut self, p: &str, code: Code) -> Result<Span, Diagnostic> {
        if self.eat_punct(p) {
            Ok(self.last())
        } else {
            Err(self.expected(code, &format!("`{p}`")))
        }
    }

    /// Takes the word `w` or fails with `code`.
    pub fn expect_word(&mut self, w: &str, code: Code) -> Result<Span, Diagnostic> {
        if self.eat_word(w) {
            Ok(self.last())
        } else {
            Err(self.expected(code, &format!("`{w}`")))
        }
    }

    /// Fails unless every token has been read.
    pub fn finish(&self) -> Result<(), Diagnostic> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.expected(Code::Syntax, "the end of the statement"))
        }
    }
}

/// How a token is named in messages.
pub fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Word(w) => format!("`{w}`"),
        Tok::Tick(id) => format!("`` `{id}` ``"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Num(n) => format!("number {n}"),
        Tok::Placeholder(p) => format!("placeholder <{p}>"),
        Tok::Punct(p) => format!("`{p}`"),
    }
}

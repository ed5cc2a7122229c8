//! The lexer: one line of a process body (or of a constant) into [`Token`]s with their columns.
//!
//! Lexical policy codes are raised here, once per offence: `;` (AG-030), more than one space
//! between tokens or trailing spaces (AG-031), single or smart quotes and booleans not in lower
//! case (AG-015). Tabs (AG-011) and comments (AG-010) are found per line by the source reader.

use rust_decimal::Decimal;

use super::code::Code;
use super::diagnostic::{Diagnostic, Span};

/// What a token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A word: keyword, symbol (`UPPER_SNAKE`), lowercase id (may contain `-`), `true`, `null`.
    Word(String),
    /// A backticked id: `` `calculator` `` (the text between the backticks).
    Tick(String),
    /// A double-quoted string, unescaped.
    Str(String),
    /// An exact decimal number.
    Num(Decimal),
    /// `<UPPER_SNAKE>`: the name between the angle brackets.
    Placeholder(String),
    /// Punctuation and operators; `→ ≥ ≤ ≠` are normalized to `-> >= <= !=`.
    Punct(&'static str),
}

/// A token and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub tok: Tok,
    /// Where it is.
    pub span: Span,
}

impl Token {
    /// Whether this is the word `w`.
    pub fn is_word(&self, w: &str) -> bool {
        matches!(&self.tok, Tok::Word(x) if x == w)
    }

    /// Whether this is the punctuation `p`.
    pub fn is_punct(&self, p: &str) -> bool {
        matches!(self.tok, Tok::Punct(x) if x == p)
    }
}

const PUNCT: &[(&str, &str)] = &[
    (":=", ":="),
    ("==", "=="),
    ("!=", "!="),
    ("<=", "<="),
    (">=", ">="),
    ("->", "->"),
    ("→", "->"),
    ("≥", ">="),
    ("≤", "<="),
    ("≠", "!="),
    (":", ":"),
    ("=", "="),
    ("<", "<"),
    (">", ">"),
    (",", ","),
    ("(", "("),
    (")", ")"),
    ("[", "["),
    ("]", "]"),
    ("{", "{"),
    ("}", "}"),
    ("+", "+"),
    ("-", "-"),
    ("*", "*"),
    ("/", "/"),
    ("%", "%"),
    (".", "."),
    ("?", "?"),
    ("|", "|"),
];

/// Lexes `text`, which starts at column `first_column` of line `line`. Returns the tokens and
/// the lexical diagnostics; a character the lexer does not know is skipped with an AP-001.
pub fn lex(text: &str, line: u32, first_column: u32) -> (Vec<Token>, Vec<Diagnostic>) {
    let mut lx = Lexer {
        chars: text.chars().collect(),
        pos: 0,
        line,
        base: first_column,
        tokens: Vec::new(),
        diags: Vec::new(),
    };
    lx.run();
    (lx.tokens, lx.diags)
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: u32,
    base: u32,
    tokens: Vec<Token>,
    diags: Vec<Diagnostic>,
}

impl Lexer {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(
            self.line,
            self.base + start as u32,
            (end - start).max(1) as u32,
        )
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn push(&mut self, tok: Tok, start: usize) {
        let span = self.span(start, self.pos);
        self.tokens.push(Token { tok, span });
    }

    fn error(&mut self, code: Code, start: usize, end: usize, message: String, hint: &str) {
        let d = Diagnostic::new(code, self.span(start, end), message).hint(hint);
        self.diags.push(d);
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            let start = self.pos;
            match c {
                ' ' => self.spaces(),
                '"' | '\'' | '“' | '”' => self.string(c),
                '`' => self.backtick(),
                ';' => {
                    self.pos += 1;
                    let hint = "end the statement with a newline instead";
                    self.error(
                        Code::SemicolonDetected,
                        start,
                        self.pos,
                        "semicolon".into(),
                        hint,
                    );
                }
                '<' if self.placeholder_ahead() => self.placeholder(),
                '-' if self.negative_number_ahead() => self.number(),
                c if c.is_ascii_digit() => self.number(),
                c if c.is_ascii_alphabetic() || c == '_' => self.word(),
                _ => self.punct(),
            }
            debug_assert!(self.pos > start, "the lexer took nothing at {start}");
            if self.pos == start {
                self.punct(); // never lex one place forever in a release build
            }
        }
    }

    fn spaces(&mut self) {
        let start = self.pos;
        while self.peek(0) == Some(' ') {
            self.pos += 1;
        }
        let (n, end) = (self.pos - start, self.pos == self.chars.len());
        if n > 1 || end {
            let what = if end {
                "trailing whitespace"
            } else {
                "more than one space between tokens"
            };
            let hint = "use exactly one ASCII space between tokens";
            self.error(Code::PaddingWhitespace, start, self.pos, what.into(), hint);
        }
    }

    fn placeholder_ahead(&self) -> bool {
        let mut i = 1;
        while let Some(c) = self.peek(i) {
            match c {
                'A'..='Z' | '0'..='9' | '_' => i += 1,
                '>' => return i > 1,
                _ => return false,
            }
        }
        false
    }

    fn placeholder(&mut self) {
        let start = self.pos;
        self.pos += 1;
        let mut name = String::new();
        while let Some(c) = self.peek(0).filter(|&c| c != '>') {
            name.push(c);
            self.pos += 1;
        }
        self.pos += 1;
        self.push(Tok::Placeholder(name), start);
    }

    fn negative_number_ahead(&self) -> bool {
        let digit = self.peek(1).is_some_and(|c| c.is_ascii_digit());
        let after_value = self.tokens.last().is_some_and(|t| match &t.tok {
            Tok::Punct(p) => [")", "]", "}"].contains(p),
            _ => true,
        });
        digit && !after_value
    }
}

mod cursor;
mod scan;

pub use cursor::{Cursor, describe};

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        let (t, d) = lex(text, 1, 1);
        assert!(d.is_empty(), "{d:?}");
        t.into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn placeholders_are_not_comparisons() {
        assert_eq!(toks("<AB_1>"), [Tok::Placeholder("AB_1".into())]);
        let cmp = toks("A < B");
        assert_eq!(cmp[1], Tok::Punct("<"));
        assert_eq!(toks("A<=B")[1], Tok::Punct("<="));
    }

    #[test]
    fn minus_is_a_sign_only_where_a_value_cannot_end() {
        assert_eq!(toks("x=-1")[2], Tok::Num(Decimal::from(-1)));
        assert_eq!(toks("X - 1")[1], Tok::Punct("-"));
        assert_eq!(toks("X -1")[1], Tok::Punct("-"));
        assert_eq!(toks("(-2)")[1], Tok::Num(Decimal::from(-2)));
    }

    /// Found by the `process` fuzz target in `.ci/run`: `-` before a digit after an operator
    /// reads as a negative number, and `-11s` then falls back to a word — which cannot start
    /// with `-`, so the lexer took nothing and looped on the same place (a panic in a debug
    /// build, a hung host in a release one). The `-` is an operator; the rest a word.
    #[test]
    fn a_minus_before_a_symbol_that_starts_with_a_digit_is_an_operator() {
        assert_eq!(
            toks("(-11s"),
            [Tok::Punct("("), Tok::Punct("-"), Tok::Word("11s".into())]
        );
        assert_eq!(
            toks("[-2ND_TRY"),
            [
                Tok::Punct("["),
                Tok::Punct("-"),
                Tok::Word("2ND_TRY".into())
            ]
        );
    }

    #[test]
    fn words_keep_inner_dashes_only_when_lowercase() {
        assert_eq!(toks("rand-int"), [Tok::Word("rand-int".into())]);
        assert_eq!(toks("A-B").len(), 3);
        assert_eq!(toks("2ND_TRY"), [Tok::Word("2ND_TRY".into())]);
    }

    #[test]
    fn columns_count_characters() {
        let (t, _) = lex("\"é\" → X", 4, 3);
        assert_eq!(t[1].span, Span::new(4, 7, 1));
        assert_eq!(t[1].tok, Tok::Punct("->"));
        assert_eq!(t[2].span, Span::new(4, 9, 1));
    }

    #[test]
    fn lexical_policy_codes() {
        let codes = |text: &str| {
            lex(text, 1, 1)
                .1
                .into_iter()
                .map(|d| d.code)
                .collect::<Vec<_>>()
        };
        assert_eq!(codes("A;"), [Code::SemicolonDetected]);
        assert_eq!(
            codes("A  B "),
            [Code::PaddingWhitespace, Code::PaddingWhitespace]
        );
        assert_eq!(codes("TRUE 'x'"), [Code::CasePolicy, Code::CasePolicy]);
        assert_eq!(codes("\"a\\n\""), [Code::Syntax]);
        assert_eq!(codes("`open"), [Code::InvalidId]);
    }
}

//! The lexer's scanners for strings, backticked ids, numbers, words and punctuation.

use rust_decimal::Decimal;

use super::{Code, Lexer, PUNCT, Tok};

impl Lexer {
    pub(super) fn string(&mut self, open: char) {
        let start = self.pos;
        if open != '"' {
            let hint = "strings use ASCII double quotes (\"…\")";
            let msg = format!("string quoted with {open} instead of \"");
            self.error(Code::CasePolicy, start, start + 1, msg, hint);
        }
        let closers: &[char] = if open == '"' {
            &['"']
        } else {
            &['\'', '”', '“']
        };
        self.pos += 1;
        let mut text = String::new();
        loop {
            match self.peek(0) {
                None => {
                    let hint = "close the string with \" on the same line";
                    let msg = "unterminated string".to_string();
                    self.error(Code::Syntax, start, self.pos, msg, hint);
                    break;
                }
                Some(c) if closers.contains(&c) => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => self.escape(&mut text),
                Some(c) => {
                    text.push(c);
                    self.pos += 1;
                }
            }
        }
        self.push(Tok::Str(text), start);
    }

    fn escape(&mut self, text: &mut String) {
        let at = self.pos;
        self.pos += 1;
        match self.peek(0) {
            Some(c @ ('"' | '\\')) => {
                text.push(c);
                self.pos += 1;
            }
            other => {
                let msg = match other {
                    Some(c) => format!("unknown escape \\{c} in string"),
                    None => "backslash at the end of the line".to_string(),
                };
                let hint = "the grammar knows only \\\" and \\\\";
                self.error(Code::Syntax, at, self.pos + 1, msg, hint);
                self.pos = (self.pos + 1).min(self.chars.len());
            }
        }
    }

    pub(super) fn backtick(&mut self) {
        let start = self.pos;
        self.pos += 1;
        let mut id = String::new();
        while let Some(c) = self.peek(0).filter(|&c| c != '`') {
            id.push(c);
            self.pos += 1;
        }
        if self.peek(0).is_none() {
            let msg = "unterminated backticked id".to_string();
            self.error(Code::InvalidId, start, self.pos, msg, "close it with `");
        } else {
            self.pos += 1;
        }
        self.push(Tok::Tick(id), start);
    }

    /// A JSON number (03: "numbers: grammar: JSON_number, thousands: forbidden"): digits, an
    /// optional fraction and an optional exponent (`1e3`, `1.5e-2`); a leading zero before
    /// another digit (`007`) is AG-007. A number followed by a letter or `_` is a word after
    /// all: a symbol may start with a digit (`2ND_TRY`).
    pub(super) fn number(&mut self) {
        let start = self.pos;
        if self.peek(0) == Some('-') {
            self.pos += 1;
        }
        self.digits();
        let fraction =
            self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit());
        if fraction {
            self.pos += 1;
            self.digits();
        }
        self.exponent();
        if self
            .peek(0)
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        {
            // A leading `-` is then an operator of its own, taken first: a word cannot start
            // with it, and a `word()` from the `-` would take nothing and lex the same place
            // forever.
            self.pos = start;
            return if self.peek(0) == Some('-') {
                self.punct()
            } else {
                self.word()
            };
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        let unsigned = text.trim_start_matches('-');
        if unsigned.len() > 1
            && unsigned.starts_with('0')
            && unsigned.as_bytes()[1].is_ascii_digit()
        {
            let msg = format!("number {text} has a leading zero, which JSON numbers do not");
            let hint = "write it without leading zeros, or quote it as a string";
            self.error(Code::BadJson, start, self.pos, msg, hint);
        }
        let parsed = if text.contains(['e', 'E']) {
            Decimal::from_scientific(&text)
        } else {
            Decimal::from_str_exact(&text)
        };
        match parsed {
            Ok(n) => self.push(Tok::Num(n), start),
            Err(e) => {
                let msg = format!("number {text} out of range: {e}");
                self.error(
                    Code::Syntax,
                    start,
                    self.pos,
                    msg,
                    "at most 28 significant digits",
                );
                self.push(Tok::Num(Decimal::ZERO), start);
            }
        }
    }

    /// An exponent, `e`/`E`, an optional sign and digits, when one follows.
    fn exponent(&mut self) {
        if !matches!(self.peek(0), Some('e' | 'E')) {
            return;
        }
        let sign = usize::from(matches!(self.peek(1), Some('+' | '-')));
        if self.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1 + sign;
            self.digits();
        }
    }

    fn digits(&mut self) {
        while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    pub(super) fn word(&mut self) {
        let start = self.pos;
        let lower = self.peek(0).is_some_and(|c| c.is_ascii_lowercase());
        while let Some(c) = self.peek(0) {
            let inner_dash =
                c == '-' && lower && self.peek(1).is_some_and(|n| n.is_ascii_alphanumeric());
            if c.is_ascii_alphanumeric() || c == '_' || inner_dash {
                self.pos += 1;
            } else {
                break;
            }
        }
        let word: String = self.chars[start..self.pos].iter().collect();
        let bool_like = ["true", "false"].contains(&word.to_ascii_lowercase().as_str());
        if bool_like && word != word.to_ascii_lowercase() {
            let msg = format!("boolean {word} is not lower case");
            let hint = "write true or false";
            self.error(Code::CasePolicy, start, self.pos, msg, hint);
        }
        self.push(Tok::Word(word), start);
    }

    pub(super) fn punct(&mut self) {
        let start = self.pos;
        let rest: String = self.chars[self.pos..].iter().take(2).collect();
        for (text, tok) in PUNCT {
            if rest.starts_with(text) {
                self.pos += text.chars().count();
                return self.push(Tok::Punct(tok), start);
            }
        }
        self.pos += 1;
        let c = self.chars[start];
        let msg = format!("unexpected character {c:?}");
        self.error(
            Code::Syntax,
            start,
            self.pos,
            msg,
            "not part of the process grammar",
        );
    }
}

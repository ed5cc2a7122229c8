//! [`Path`]: the `<path>` of a CAPTURE map, `"result.items[0].name?"`.
//!
//! ```text
//! path    = segment , { "." , field | "[" , digits , "]" } , [ "?" ] ;
//! segment = field | "[" , digits , "]" ;
//! field   = ( letter | "_" | "$" ) , { letter | digit | "_" | "-" | "$" } ;
//! ```
//!
//! A trailing `?` makes the field optional: when it is missing the symbol keeps its value.

use std::fmt;

use crate::process::code::Code;
use crate::process::diagnostic::{Diagnostic, Span};

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    /// `.name` (or the leading `name`).
    Field(String),
    /// `[n]`.
    Index(usize),
}

/// A parsed `<path>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    /// The steps from the result's root.
    pub segs: Vec<PathSeg>,
    /// Whether it ends in `?`.
    pub optional: bool,
    /// The string literal holding it.
    pub span: Span,
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.segs.iter().enumerate() {
            match seg {
                PathSeg::Field(name) if i == 0 => write!(f, "{name}")?,
                PathSeg::Field(name) => write!(f, ".{name}")?,
                PathSeg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        if self.optional {
            write!(f, "?")?;
        }
        Ok(())
    }
}

fn field_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$' || (!first && (c.is_ascii_digit() || c == '-'))
}

/// Parses the text of a map path; `span` is the string literal (its column is the opening
/// quote), so errors point at the character inside the literal.
///
/// # Errors
///
/// AG-028 naming the first character that does not fit the path grammar.
///
/// # Example
///
/// ```
/// use agentpump::process::{Span, expr::parse_path};
/// let path = parse_path("items[0].name?", Span::new(1, 20, 16))?;
/// assert!(path.optional);
/// assert_eq!(path.to_string(), "items[0].name?");
/// assert_eq!(parse_path("a..b", Span::new(1, 20, 6)).unwrap_err().span.column, 23);
/// # Ok::<(), agentpump::process::Diagnostic>(())
/// ```
pub fn parse_path(text: &str, span: Span) -> Result<Path, Diagnostic> {
    let chars: Vec<char> = text.chars().collect();
    let err = |(i, what): (usize, &str)| {
        let at = Span::new(span.line, span.column + 1 + i as u32, 1);
        let msg = format!("invalid CAPTURE map path \"{text}\": {what}");
        Diagnostic::new(Code::CapturePathError, at, msg)
            .hint("a path is field names joined by `.`, indices `[n]`, optionally ending in `?`")
    };
    let optional = chars.last() == Some(&'?');
    let end = chars.len() - usize::from(optional);
    let mut scan = Scan {
        chars: &chars[..end],
        i: 0,
    };
    let mut segs = Vec::new();
    while scan.i < end {
        let seg = if chars[scan.i] == '[' {
            scan.index()
        } else {
            scan.field(!segs.is_empty())
        };
        segs.push(seg.map_err(err)?);
    }
    if segs.is_empty() {
        return Err(err((0, "empty path")));
    }
    Ok(Path {
        segs,
        optional,
        span,
    })
}

/// A position in a path's characters (without its `?`); errors are (offset, what).
struct Scan<'a> {
    chars: &'a [char],
    i: usize,
}

impl Scan<'_> {
    fn index(&mut self) -> Result<PathSeg, (usize, &'static str)> {
        let start = self.i + 1;
        self.i = start;
        while self.chars.get(self.i).is_some_and(char::is_ascii_digit) {
            self.i += 1;
        }
        if self.i == start || self.chars.get(self.i) != Some(&']') {
            return Err((self.i, "expected digits and `]`"));
        }
        let n: String = self.chars[start..self.i].iter().collect();
        self.i += 1;
        n.parse()
            .map(PathSeg::Index)
            .map_err(|_| (start, "index too large"))
    }

    fn field(&mut self, after_segment: bool) -> Result<PathSeg, (usize, &'static str)> {
        if after_segment {
            if self.chars[self.i] != '.' {
                return Err((self.i, "expected `.` or `[`"));
            }
            self.i += 1;
        }
        let start = self.i;
        while self
            .chars
            .get(self.i)
            .is_some_and(|&c| field_char(c, self.i == start))
        {
            self.i += 1;
        }
        if self.i == start {
            return Err((self.i, "expected a field name"));
        }
        Ok(PathSeg::Field(self.chars[start..self.i].iter().collect()))
    }
}

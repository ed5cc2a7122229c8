//! [`EnvelopeError`]: why an envelope or payload was refused, and where.

use std::fmt;

/// Where in a text an error was found: byte offset plus 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Byte offset from the start of the text.
    pub offset: usize,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
}

impl Position {
    /// Locates a byte offset in `text` (offsets past the end are clamped to the end).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Position;
    /// let at = Position::locate("<a>\n  <b>", 6); // the `<` of `<b>`
    /// assert_eq!((at.line, at.column, at.offset), (2, 3, 6));
    /// assert_eq!(Position::locate("ab", 99).offset, 2); // clamped to the end
    /// ```
    pub fn locate(text: &str, offset: usize) -> Self {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Self {
            offset,
            line,
            column,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Why an envelope or a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// The text is larger than [`Limits::max_bytes`](crate::Limits::max_bytes).
    #[error("message is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Size of the refused text.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The bytes are not UTF-8.
    #[error("invalid UTF-8 at byte {offset}")]
    InvalidUtf8 {
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// A character XML forbids (a NUL or another C0 control character).
    #[error("character U+{code:04X} is not allowed in XML at {at}")]
    ForbiddenChar {
        /// The code point.
        code: u32,
        /// Where it is.
        at: Position,
    },
    /// A `<!DOCTYPE …>` declaration; DTDs are never processed.
    #[error("DOCTYPE declarations are refused, found one at {at}")]
    Doctype {
        /// Where it starts.
        at: Position,
    },
    /// An entity reference other than the five predefined ones and character references.
    #[error(
        "undeclared entity `&{name};` at {at}; only &lt; &gt; &amp; &apos; &quot; and character references are allowed"
    )]
    UnknownEntity {
        /// The entity name.
        name: String,
        /// Where it is.
        at: Position,
    },
    /// Elements nested deeper than [`Limits::max_depth`](crate::Limits::max_depth).
    #[error("element <{element}> at {at} is nested deeper than the limit of {limit}")]
    TooDeep {
        /// The element that crossed the limit.
        element: String,
        /// The configured limit.
        limit: usize,
        /// Where it starts.
        at: Position,
    },
    /// More attributes on one element than [`Limits::max_attributes`](crate::Limits::max_attributes).
    #[error("element <{element}> at {at} has more than {limit} attributes")]
    TooManyAttributes {
        /// The element.
        element: String,
        /// The configured limit.
        limit: usize,
        /// Where it starts.
        at: Position,
    },
    /// More namespace declarations in scope than the parser keeps track of.
    #[error("more than {limit} namespace declarations in scope at {at}")]
    TooManyNamespaces {
        /// The parser's limit.
        limit: usize,
        /// Where the declaration over the limit is.
        at: Position,
    },
    /// A namespace prefix that is not declared inside the payload.
    #[error(
        "prefix `{prefix}` of <{element}> at {at} is not declared; declare it on the payload root"
    )]
    UnknownPrefix {
        /// The undeclared prefix.
        prefix: String,
        /// The element or attribute that uses it.
        element: String,
        /// Where it is.
        at: Position,
    },
    /// An XML declaration names an encoding other than UTF-8.
    #[error("the XML declaration at {at} names encoding `{found}`: only UTF-8 is accepted")]
    Encoding {
        /// The encoding it names.
        found: String,
        /// Where the declaration starts.
        at: Position,
    },
    /// Not well-formed XML.
    #[error("malformed XML at {at}: {message}")]
    Malformed {
        /// What the parser found wrong.
        message: String,
        /// Where.
        at: Position,
    },
    /// No payload element where one was expected.
    #[error("no payload element found")]
    NoPayload,
    /// A second element after the payload; a message carries exactly one.
    #[error("second payload element <{element}> at {at}; a message carries exactly one payload")]
    SecondPayload {
        /// The second element.
        element: String,
        /// Where it starts.
        at: Position,
    },
    /// Text outside the payload element.
    #[error("text outside the payload element at {at}")]
    StrayText {
        /// Where the text starts.
        at: Position,
    },
    /// The root element is not a known envelope.
    #[error(
        "root element is <{found}>, expected <message> in urn:agentpump:envelope:v1 or https://xml-pipeline.org/ns/envelope/v1"
    )]
    NotAnEnvelope {
        /// The root that was found, in Clark notation.
        found: String,
    },
    /// An element inside `<meta>` this dialect does not define, or a missing/misplaced `<meta>`.
    #[error("unexpected <{found}> at {at}, expected {expected}")]
    Unexpected {
        /// What was found.
        found: String,
        /// What was expected instead.
        expected: &'static str,
        /// Where.
        at: Position,
    },
    /// A meta field that must be a UUID is not one.
    #[error("<{field}> is `{value}`, not a UUID")]
    BadId {
        /// The meta field.
        field: &'static str,
        /// Its text.
        value: String,
    },
}

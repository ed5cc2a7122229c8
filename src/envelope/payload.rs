//! [`Payload`]: one namespaced XML element, kept byte for byte as it was received.

use std::any::Any;
use std::sync::{Arc, OnceLock};

use super::{EnvelopeError, Limits, Position, QName, scan};

/// One payload element: its routing [`QName`] and its exact text.
///
/// A payload is self-contained: every prefix it uses is declared inside it, so it means the same
/// on its own, inside an envelope, and in history. Whitespace around the element is not part of it.
///
/// # Example
///
/// ```
/// use agentpump::{Limits, Payload};
/// let payload = Payload::parse(r#"<c:add xmlns:c="urn:example:calc:v1"><a>1</a></c:add>"#, &Limits::default())?;
/// assert!(payload.qname().is("urn:example:calc:v1", "add"));
/// let refused = Payload::parse("<add><a>1</add>", &Limits::default());
/// assert!(refused.is_err());
/// # Ok::<(), agentpump::EnvelopeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    qname: QName,
    text: Arc<str>,
    declares_default_ns: bool,
    carries_reserved: bool,
    reading: Reading,
}

/// What the pump's own check read of a payload's text (a tool call, a tool's answer), kept
/// with the payload so that its receiver does not read the same bytes again. Only code of
/// this crate fills it, from exactly this payload's text, after the checks every payload
/// passes; the text never changes. A payload parsed anew (from history, from a worker)
/// starts without one. Two payloads with the same text are equal whatever they keep.
#[derive(Clone, Default)]
struct Reading(OnceLock<Arc<dyn Any + Send + Sync>>);

impl std::fmt::Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "kept"
        } else {
            "none"
        })
    }
}

impl PartialEq for Reading {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Reading {}

impl Payload {
    /// Parses a text that holds exactly one element (surrounding whitespace allowed), after an
    /// optional prolog: an XML declaration (encoding UTF-8 or none), whitespace and comments.
    ///
    /// # Errors
    ///
    /// Any [`EnvelopeError`] about size, characters, DTDs, entities, depth, attributes, undeclared
    /// prefixes or well-formedness; [`EnvelopeError::NoPayload`] for blank text;
    /// [`EnvelopeError::SecondPayload`] / [`EnvelopeError::StrayText`] for anything after the element.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Limits, Payload};
    /// let p = Payload::parse(r#"<c:add xmlns:c="urn:example:calc:v1"><a>1</a></c:add>"#, &Limits::default())?;
    /// assert!(p.qname().is("urn:example:calc:v1", "add"));
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn parse(text: &str, limits: &Limits) -> Result<Self, EnvelopeError> {
        if text.len() > limits.max_bytes {
            return Err(EnvelopeError::TooLarge {
                size: text.len(),
                limit: limits.max_bytes,
            });
        }
        scan::check_chars(text)?;
        let start = text.len() - text.trim_start().len();
        let start = super::prolog::skip(text, start)?;
        if start == text.len() {
            return Err(EnvelopeError::NoPayload);
        }
        if !text[start..].starts_with('<') {
            return Err(EnvelopeError::StrayText {
                at: Position::locate(text, start),
            });
        }
        let (payload, end) = Self::parse_at(text, start, 0, limits)?;
        check_nothing_after(text, end)?;
        Ok(payload)
    }

    /// Parses the element that starts at byte `start` of `full`, nested in `outer_depth` elements.
    /// Returns the payload and the offset just past it.
    pub(crate) fn parse_at(
        full: &str,
        start: usize,
        outer_depth: usize,
        limits: &Limits,
    ) -> Result<(Self, usize), EnvelopeError> {
        let element = scan::element(full, start, outer_depth, limits)?;
        let payload = Self {
            qname: element.qname,
            text: Arc::from(&full[start..element.end]),
            declares_default_ns: element.declares_default_ns,
            carries_reserved: element.reserved_inside,
            reading: Reading::default(),
        };
        Ok((payload, element.end))
    }

    /// Wraps text the pump rendered itself (system messages), skipping the parse.
    pub(crate) fn from_trusted(qname: QName, text: String, declares_default_ns: bool) -> Self {
        Self {
            qname,
            text: Arc::from(text),
            declares_default_ns,
            carries_reserved: false,
            reading: Reading::default(),
        }
    }

    /// Wraps a text that a reading of the crate's own proved to be one element that `parse`
    /// accepts under the same limits — the root in `qname`, declaring it as its default
    /// namespace, no element in a reserved namespace below it — and keeps that reading
    /// (`tool::wire`'s written form: a tool call or answer checked without an XML reader).
    pub(crate) fn from_read<T: Any + Send + Sync>(
        qname: QName,
        text: &str,
        reading: Arc<T>,
    ) -> Self {
        let kept = Reading::default();
        let _ = kept.0.set(reading);
        Self {
            qname,
            text: Arc::from(text),
            declares_default_ns: true,
            carries_reserved: false,
            reading: kept,
        }
    }

    /// The reading of type `T` of this payload's text that `read` makes, made once: the first
    /// caller (the pump checking a tool payload) reads, later ones (its receiver) share it.
    /// `read` must depend on the text alone. A failed reading is not kept.
    pub(crate) fn read_once<T, E>(
        &self,
        read: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Arc<T>, E>
    where
        T: Any + Send + Sync,
    {
        if let Some(kept) = self.reading.0.get() {
            if let Ok(t) = Arc::clone(kept).downcast::<T>() {
                return Ok(t);
            }
            // Kept as another type: read, keep nothing.
            return read(&self.text).map(Arc::new);
        }
        let value: Arc<T> = Arc::new(read(&self.text)?);
        let kept = self
            .reading
            .0
            .get_or_init(|| Arc::clone(&value) as Arc<dyn Any + Send + Sync>);
        Ok(Arc::clone(kept).downcast::<T>().unwrap_or(value))
    }

    /// The routing key: namespace URI and local name of the root element.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Limits, Payload};
    /// let payload = Payload::parse(r#"<c:add xmlns:c="urn:example:calc:v1"/>"#, &Limits::default())?;
    /// assert!(payload.qname().is("urn:example:calc:v1", "add")); // the prefix is not part of it
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn qname(&self) -> &QName {
        &self.qname
    }

    /// The element's exact text.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Limits, Payload};
    /// let text = r#"<add xmlns="urn:example:v1"  a = '1' />"#;
    /// assert_eq!(Payload::parse(text, &Limits::default())?.as_str(), text); // byte for byte
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The element's exact text, shared.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Limits, Payload};
    /// let payload = Payload::parse(r#"<add xmlns="urn:example:v1"/>"#, &Limits::default())?;
    /// let shared = payload.to_shared();
    /// assert_eq!(&*shared, payload.as_str());
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn to_shared(&self) -> Arc<str> {
        Arc::clone(&self.text)
    }

    /// Whether an element below the root is in a namespace only the pump may emit (system,
    /// governor, envelope): such a payload is refused from listeners and clients.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Limits, Payload};
    /// let smuggled = r#"<note xmlns="urn:example:v1"><halt xmlns="urn:agentpump:system:v1"/></note>"#;
    /// assert!(Payload::parse(smuggled, &Limits::default())?.carries_reserved_element());
    /// assert!(!Payload::parse(r#"<note xmlns="urn:example:v1"/>"#, &Limits::default())?.carries_reserved_element());
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn carries_reserved_element(&self) -> bool {
        self.carries_reserved
    }

    /// Whether the root element declares a default namespace itself, so that unprefixed
    /// descendants cannot pick up the namespace of an enclosing envelope.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Limits, Payload};
    /// assert!(Payload::parse(r#"<add xmlns="urn:example:v1"/>"#, &Limits::default())?.declares_default_namespace());
    /// assert!(!Payload::parse(r#"<c:add xmlns:c="urn:example:v1"/>"#, &Limits::default())?.declares_default_namespace());
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn declares_default_namespace(&self) -> bool {
        self.declares_default_ns
    }
}

impl Payload {
    /// The same payload with its root's default namespace declaration set to `namespace`
    /// (inserted when the root has none; `""` undeclares it). Only the root's start tag changes;
    /// unprefixed descendants follow the root unless they declare their own. Used at the
    /// AgentServer boundary, whose payloads are in no namespace. `namespace` is written as it is
    /// (XML allows no references in a namespace declaration); the builder checks it.
    ///
    /// # Errors
    ///
    /// The rewritten payload fails to parse under `limits` (it grew past a limit, or the root
    /// start tag cannot be read).
    pub(crate) fn with_default_namespace(
        &self,
        namespace: &str,
        limits: &Limits,
    ) -> Result<Self, EnvelopeError> {
        let text = &*self.text;
        let (name_end, declaration) = root_default_declaration(text);
        let value = namespace;
        let rewritten = match declaration {
            Some(span) => format!(
                "{}xmlns=\"{value}\"{}",
                &text[..span.start],
                &text[span.end..]
            ),
            None => format!(
                "{} xmlns=\"{value}\"{}",
                &text[..name_end],
                &text[name_end..]
            ),
        };
        Self::parse(&rewritten, limits)
    }
}

/// Where the root's name ends, and the byte span of its `xmlns="…"` attribute if it has one.
fn root_default_declaration(text: &str) -> (usize, Option<std::ops::Range<usize>>) {
    let name_end = text[1..]
        .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
        .map_or(text.len(), |i| i + 1);
    let mut at = name_end;
    let bytes = text.as_bytes();
    // Attributes of a parsed payload are well-formed: name, `=`, quoted value.
    loop {
        while at < text.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if at >= text.len() || matches!(bytes[at], b'>' | b'/') {
            return (name_end, None);
        }
        let start = at;
        let eq = at + text[at..].find('=').unwrap_or(text.len() - at);
        let name = text[start..eq].trim_end();
        let mut q = eq + 1;
        while q < text.len() && bytes[q].is_ascii_whitespace() {
            q += 1;
        }
        let quote = bytes.get(q).copied().unwrap_or(b'"') as char;
        let close = text[q + 1..].find(quote).map_or(text.len(), |i| q + 1 + i);
        let end = (close + 1).min(text.len());
        if name == "xmlns" {
            return (name_end, Some(start..end));
        }
        at = end;
    }
}

/// Fails unless only whitespace follows `end` in `text`.
fn check_nothing_after(text: &str, end: usize) -> Result<(), EnvelopeError> {
    let rest = &text[end..];
    let skip = rest.len() - rest.trim_start().len();
    if skip == rest.len() {
        return Ok(());
    }
    let at = Position::locate(text, end + skip);
    let tail = &rest[skip..];
    let name: String = tail
        .chars()
        .skip(1)
        .take_while(|c| !c.is_whitespace() && !matches!(c, '>' | '/'))
        .collect();
    let element_follows = tail
        .strip_prefix('<')
        .is_some_and(|r| r.starts_with(|c: char| c.is_alphabetic() || c == '_'));
    if element_follows {
        Err(EnvelopeError::SecondPayload { element: name, at })
    } else {
        Err(EnvelopeError::StrayText { at })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Payload, EnvelopeError> {
        Payload::parse(text, &Limits::default())
    }

    #[test]
    fn keeps_exact_bytes_and_routes_by_namespace_not_prefix() {
        let text = "<x:add xmlns:x='urn:calc'  ><a>1</a><!-- c --></x:add>";
        let p = parse(&format!("  \n{text}\n ")).unwrap();
        assert_eq!(p.as_str(), text);
        assert_eq!(p.qname(), &QName::new("urn:calc", "add"));
        assert!(!p.declares_default_namespace());
        let q = parse(r#"<add xmlns="urn:calc"/>"#).unwrap();
        assert_eq!(q.qname(), p.qname());
        assert!(q.declares_default_namespace());
    }

    #[test]
    fn refuses_what_a_payload_may_not_be() {
        let cases: &[(&str, &str)] = &[
            ("", "no payload element found"),
            (
                "hello",
                "text outside the payload element at line 1, column 1",
            ),
            ("<a/><b/>", "second payload element <b> at line 1, column 5"),
            (
                "<a/>tail",
                "text outside the payload element at line 1, column 5",
            ),
            (
                "<a>&ent;</a>",
                "undeclared entity `&ent;` at line 1, column 4",
            ),
            (
                "<a b='&x;'/>",
                "undeclared entity `&x;` at line 1, column 1",
            ),
            (
                "<!DOCTYPE a><a/>",
                "DOCTYPE declarations are refused, found one at line 1, column 1",
            ),
            (
                "<p:a/>",
                "prefix `p` of <p:a> at line 1, column 1 is not declared",
            ),
            ("<a>\n<b></a>", "malformed XML at line 2, column"),
            (
                "<a>\0</a>",
                "character U+0000 is not allowed in XML at line 1, column 4",
            ),
            (
                "<a>",
                "malformed XML at line 1, column 4: unclosed element <a>",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(
                err.starts_with(expected),
                "{text:?}: got {err:?}, expected {expected:?}"
            );
        }
    }

    #[test]
    fn enforces_limits() {
        let limits = Limits {
            max_depth: 3,
            max_attributes: 2,
            max_bytes: 64,
            ..Limits::default()
        };
        let deep = Payload::parse("<a><b><c><d/></c></b></a>", &limits).unwrap_err();
        assert!(matches!(deep, EnvelopeError::TooDeep { ref element, .. } if element == "d"));
        let wide = Payload::parse("<a x='1' y='2' z='3'/>", &limits).unwrap_err();
        assert!(matches!(wide, EnvelopeError::TooManyAttributes { .. }));
        let big = Payload::parse(&format!("<a>{}</a>", "x".repeat(64)), &limits).unwrap_err();
        assert!(matches!(
            big,
            EnvelopeError::TooLarge {
                size: 71,
                limit: 64
            }
        ));
    }

    #[test]
    fn the_root_default_namespace_is_set_and_released_exactly() {
        let set = |text: &str, ns: &str| {
            let p = Payload::parse(text, &Limits::default()).unwrap();
            let q = p.with_default_namespace(ns, &Limits::default()).unwrap();
            (q.qname().to_string(), q.as_str().to_owned())
        };
        let cases = [
            (
                r#"<G xmlns=""><N>W</N></G>"#,
                "urn:x",
                "{urn:x}G",
                r#"<G xmlns="urn:x"><N>W</N></G>"#,
            ),
            ("<G/>", "urn:x", "{urn:x}G", r#"<G xmlns="urn:x"/>"#),
            (
                r#"<G a="1"><N/></G>"#,
                "urn:x",
                "{urn:x}G",
                r#"<G xmlns="urn:x" a="1"><N/></G>"#,
            ),
            (
                r#"<G t='xmlns="no"' xmlns:p="urn:p" xmlns = '' />"#,
                "urn:x",
                "{urn:x}G",
                r#"<G t='xmlns="no"' xmlns:p="urn:p" xmlns="urn:x" />"#,
            ),
            (
                r#"<R xmlns="urn:x"><m/></R>"#,
                "",
                "R",
                r#"<R xmlns=""><m/></R>"#,
            ),
            (
                r#"<G xmlns="">&amp;</G>"#,
                "urn:a",
                "{urn:a}G",
                r#"<G xmlns="urn:a">&amp;</G>"#,
            ),
        ];
        for (text, ns, qname, expected) in cases {
            assert_eq!(
                set(text, ns),
                (qname.to_owned(), expected.to_owned()),
                "{text}"
            );
        }
    }
}

//! [`Incoming`]: an envelope as a client sent it, before the pump assigns id, sender and thread.

use quick_xml::NsReader;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;

use super::{
    AGENTSERVER_NS, Dialect, ENVELOPE_NS, EnvelopeError, Limits, MessageId, Payload, Position, scan,
};

/// A parsed envelope from outside. Nothing in it is trusted: the pump assigns the id and the
/// sender, and checks the thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    dialect: Dialect,
    to: Option<String>,
    thread: Option<String>,
    in_reply_to: Option<MessageId>,
    payload: Payload,
}

/// The `<meta>` fields as text.
#[derive(Default)]
struct Meta {
    seen: Vec<&'static str>,
    to: Option<String>,
    thread: Option<String>,
    in_reply_to: Option<String>,
}

impl Incoming {
    /// Parses an envelope in either dialect (see [`Dialect`]). A leading UTF-8 byte order mark,
    /// which XML allows before a document, is skipped.
    ///
    /// # Errors
    ///
    /// [`EnvelopeError::NotAnEnvelope`] for another root, [`EnvelopeError::Unexpected`] for a
    /// misplaced or unknown element, [`EnvelopeError::BadId`] for an `<in-reply-to>` that is not a
    /// UUID, and every payload error of [`Payload::parse`].
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Incoming, Limits};
    /// let xml = r#"<message xmlns="urn:agentpump:envelope:v1"><meta><to>calc</to></meta>
    ///   <add xmlns="urn:example:calc:v1"><a>1</a><b>2</b></add></message>"#;
    /// let msg = Incoming::parse(xml.as_bytes(), &Limits::default())?;
    /// assert_eq!(msg.to(), Some("calc"));
    /// assert_eq!(msg.payload().qname().local(), "add");
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Self, EnvelopeError> {
        if bytes.len() > limits.max_bytes {
            return Err(EnvelopeError::TooLarge {
                size: bytes.len(),
                limit: limits.max_bytes,
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|e| EnvelopeError::InvalidUtf8 {
            offset: e.valid_up_to(),
        })?;
        // The reader would skip a byte order mark without counting it, so every offset taken
        // from it would be three bytes short of `text`.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        scan::check_chars(text)?;
        let mut reader = NsReader::from_str(text);
        let (dialect, root) = read_root(&mut reader, text, limits)?;
        let meta = read_meta(&mut reader, text, dialect, limits)?;
        let after_meta = reader.buffer_position() as usize;
        let start = after_meta + (text[after_meta..].len() - text[after_meta..].trim_start().len());
        if !text[start..].starts_with('<') || text[start..].starts_with("</") {
            return Err(match text[start..].starts_with("</") {
                true => EnvelopeError::NoPayload,
                false => EnvelopeError::StrayText {
                    at: Position::locate(text, start),
                },
            });
        }
        let (payload, end) = Payload::parse_at(text, start, 1, limits)?;
        check_close(text, end, &root)?;
        let in_reply_to = match meta.in_reply_to {
            None => None,
            Some(value) => Some(value.parse().map_err(|_| EnvelopeError::BadId {
                field: "in-reply-to",
                value,
            })?),
        };
        Ok(Self {
            dialect,
            to: meta.to,
            thread: meta.thread,
            in_reply_to,
            payload,
        })
    }

    /// Which envelope the client used; answers go back in the same one.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Dialect, Incoming, Limits};
    /// let xml = r#"<message xmlns="https://xml-pipeline.org/ns/envelope/v1"><meta><from>app</from></meta><hi xmlns="urn:example:v1"/></message>"#;
    /// assert_eq!(Incoming::parse(xml.as_bytes(), &Limits::default())?.dialect(), Dialect::AgentServer);
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The listener the client addressed, if any.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Incoming, Limits};
    /// let xml = r#"<message xmlns="urn:agentpump:envelope:v1"><meta><to>calc</to></meta><add xmlns="urn:example:v1"/></message>"#;
    /// assert_eq!(Incoming::parse(xml.as_bytes(), &Limits::default())?.to(), Some("calc"));
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn to(&self) -> Option<&str> {
        self.to.as_deref()
    }

    /// The thread the client named, as written (absent = start a new thread).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Incoming, Limits};
    /// let xml = r#"<message xmlns="urn:agentpump:envelope:v1"><meta><thread>6f1c</thread></meta><add xmlns="urn:example:v1"/></message>"#;
    /// assert_eq!(Incoming::parse(xml.as_bytes(), &Limits::default())?.thread(), Some("6f1c")); // checked by the pump
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn thread(&self) -> Option<&str> {
        self.thread.as_deref()
    }

    /// The message this one answers, if any.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Incoming, Limits, MessageId};
    /// let id = MessageId::new();
    /// let xml = format!(r#"<message xmlns="urn:agentpump:envelope:v1"><meta><in-reply-to>{id}</in-reply-to></meta><ok xmlns="urn:example:v1"/></message>"#);
    /// assert_eq!(Incoming::parse(xml.as_bytes(), &Limits::default())?.in_reply_to(), Some(id));
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn in_reply_to(&self) -> Option<MessageId> {
        self.in_reply_to
    }

    /// The payload.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Incoming, Limits};
    /// let xml = r#"<message xmlns="urn:agentpump:envelope:v1"><meta/><add xmlns="urn:example:v1"><a>1</a></add></message>"#;
    /// let msg = Incoming::parse(xml.as_bytes(), &Limits::default())?;
    /// assert_eq!(msg.payload().as_str(), r#"<add xmlns="urn:example:v1"><a>1</a></add>"#);
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    /// Takes the payload out.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Incoming, Limits};
    /// let xml = r#"<message xmlns="urn:agentpump:envelope:v1"><meta/><add xmlns="urn:example:v1"/></message>"#;
    /// let payload = Incoming::parse(xml.as_bytes(), &Limits::default())?.into_payload();
    /// assert_eq!(payload.qname().local(), "add");
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn into_payload(self) -> Payload {
        self.payload
    }
}

/// Reads up to the root `<message>` and returns the dialect and the root's raw name.
fn read_root(
    reader: &mut NsReader<&[u8]>,
    text: &str,
    limits: &Limits,
) -> Result<(Dialect, String), EnvelopeError> {
    loop {
        // Where this event starts, turned into line and column only when an error needs it
        // (counting lines on every event would make a long comment run quadratic).
        let offset = reader.buffer_position() as usize;
        let at = || Position::locate(text, offset);
        let (resolved, event) = match reader.read_resolved_event() {
            Ok(pair) => pair,
            Err(err) => return Err(malformed(err, text, reader, offset)),
        };
        match event {
            Event::Decl(ref decl) => super::prolog::check_encoding(decl, at)?,
            Event::Comment(_) | Event::PI(_) => {}
            Event::Text(t) if t.trim().is_empty() => {}
            Event::DocType(_) => return Err(EnvelopeError::Doctype { at: at() }),
            Event::Start(ref e) | Event::Empty(ref e) => {
                check_attribute_count(e, limits, at)?;
                let local = e.local_name();
                let namespace = match resolved {
                    ResolveResult::Bound(ns) => ns.0,
                    _ => "",
                };
                let dialect = match (namespace, local.as_ref()) {
                    (ENVELOPE_NS, "message") => Dialect::Agentpump,
                    (AGENTSERVER_NS, "message") => Dialect::AgentServer,
                    _ => {
                        let found = super::QName::new(namespace, local.as_ref()).to_string();
                        return Err(EnvelopeError::NotAnEnvelope { found });
                    }
                };
                if matches!(event, Event::Empty(_)) {
                    return Err(EnvelopeError::NoPayload);
                }
                return Ok((dialect, e.name().0.to_owned()));
            }
            _ => {
                return Err(EnvelopeError::NotAnEnvelope {
                    found: format!("{event:?}"),
                });
            }
        }
    }
}

/// Reads `<meta>…</meta>`, the first child of the root.
fn read_meta(
    reader: &mut NsReader<&[u8]>,
    text: &str,
    dialect: Dialect,
    limits: &Limits,
) -> Result<Meta, EnvelopeError> {
    let mut meta = Meta::default();
    let mut field: Option<&'static str> = None;
    let mut value = String::new();
    let mut opened = false;
    loop {
        // Where this event starts, turned into line and column only when an error needs it
        // (counting lines on every event would make a long comment run quadratic).
        let offset = reader.buffer_position() as usize;
        let at = || Position::locate(text, offset);
        let (resolved, event) = match reader.read_resolved_event() {
            Ok(pair) => pair,
            Err(err) => return Err(malformed(err, text, reader, offset)),
        };
        let in_envelope =
            matches!(resolved, ResolveResult::Bound(ns) if ns.0 == dialect.namespace());
        if let Event::Start(ref e) | Event::Empty(ref e) = event {
            check_attribute_count(e, limits, at)?;
        }
        match event {
            Event::Comment(_) => {}
            Event::Text(ref t) if field.is_none() && t.trim().is_empty() => {}
            Event::Start(ref e) if !opened && in_envelope && e.local_name().as_ref() == "meta" => {
                opened = true;
            }
            Event::Empty(ref e) if !opened && in_envelope && e.local_name().as_ref() == "meta" => {
                return Ok(meta);
            }
            Event::Start(ref e) | Event::Empty(ref e)
                if opened && field.is_none() && in_envelope =>
            {
                let name = meta_field(dialect, e.local_name().as_ref())
                    .ok_or_else(|| unexpected(e.name().0, dialect.meta_fields(), at()))?;
                if meta.seen.contains(&name) {
                    return Err(unexpected(
                        &format!("a second {}", e.name().0),
                        "each <meta> field once",
                        at(),
                    ));
                }
                meta.seen.push(name);
                value.clear();
                if matches!(event, Event::Start(_)) {
                    field = Some(name);
                } else {
                    meta.set(name, String::new());
                }
            }
            Event::Text(ref t) if field.is_some() => value.push_str(t),
            Event::GeneralRef(ref r) if field.is_some() => {
                // The same references as in a payload: `&#1;` here would be written back raw.
                value.push(scan::resolve_reference(r, &at)?);
            }
            Event::End(_) if field.is_some() => {
                meta.set(field.take().expect("checked"), value.trim().to_owned());
            }
            Event::End(_) if opened => return Ok(meta),
            Event::DocType(_) => return Err(EnvelopeError::Doctype { at: at() }),
            other => {
                let found = match &other {
                    Event::Start(e) | Event::Empty(e) => e.name().0.to_owned(),
                    Event::Text(_) => "text".to_owned(),
                    _ => format!("{other:?}"),
                };
                let expected = if opened {
                    dialect.meta_fields()
                } else {
                    "<meta>"
                };
                return Err(unexpected(&found, expected, at()));
            }
        }
    }
}

impl Meta {
    fn set(&mut self, field: &'static str, value: String) {
        let slot = match field {
            "to" => &mut self.to,
            "thread" => &mut self.thread,
            "in-reply-to" => &mut self.in_reply_to,
            _ => return, // `id` and `from` are the pump's to assign; what a client says is ignored
        };
        *slot = (!value.is_empty()).then_some(value);
    }
}

fn meta_field(dialect: Dialect, local: &str) -> Option<&'static str> {
    let fields: &[&'static str] = match dialect {
        Dialect::Agentpump => &["id", "from", "to", "thread", "in-reply-to"],
        Dialect::AgentServer => &["from", "to", "thread"],
    };
    fields.iter().copied().find(|f| *f == local)
}

/// Fails unless the root's end tag, and only whitespace, follows the payload.
fn check_close(text: &str, end: usize, root: &str) -> Result<(), EnvelopeError> {
    let rest = text[end..].trim_start();
    let at = Position::locate(text, text.len() - rest.len());
    let closed = rest
        .strip_prefix("</")
        .and_then(|r| r.strip_prefix(root))
        .map(|r| r.trim_start())
        .and_then(|r| r.strip_prefix('>'))
        .is_some_and(|r| r.trim().is_empty());
    if closed {
        return Ok(());
    }
    if rest.starts_with('<') && !rest.starts_with("</") {
        let element = rest[1..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, '>' | '/'))
            .collect();
        return Err(EnvelopeError::SecondPayload { element, at });
    }
    Err(EnvelopeError::Malformed {
        message: format!("expected </{root}> after the payload"),
        at,
    })
}

fn unexpected(found: &str, expected: &'static str, at: Position) -> EnvelopeError {
    EnvelopeError::Unexpected {
        found: found.to_owned(),
        expected,
        at,
    }
}

/// The error for what the reader refused in the event that starts at `offset`: a namespace
/// error is placed at that tag (quick-xml gives it no position), any other where quick-xml
/// found it.
fn malformed(
    err: quick_xml::Error,
    text: &str,
    reader: &NsReader<&[u8]>,
    offset: usize,
) -> EnvelopeError {
    let at = match err {
        quick_xml::Error::Namespace(_) => offset,
        _ => reader.error_position() as usize,
    };
    scan::malformed(&err, Position::locate(text, at))
}

/// Fails when `e` carries more attributes than [`Limits::max_attributes`].
fn check_attribute_count(
    e: &BytesStart<'_>,
    limits: &Limits,
    at: impl FnOnce() -> Position,
) -> Result<(), EnvelopeError> {
    if e.attributes().count() <= limits.max_attributes {
        return Ok(());
    }
    Err(EnvelopeError::TooManyAttributes {
        element: e.name().0.to_owned(),
        limit: limits.max_attributes,
        at: at(),
    })
}

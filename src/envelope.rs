//! The wire format: [`Envelope`] (what the pump routes), [`Incoming`] (what a client sent),
//! [`Payload`], [`QName`], the typed ids and the [`Limits`] every message is checked against.
//!
//! An envelope carries pump-owned `<meta>` and exactly one payload element, whose bytes are kept
//! exactly as received. Parsing is namespace-aware (routing uses the namespace URI, never the
//! prefix), refuses DTDs and undeclared entities, and enforces size, depth and attribute limits.

mod error;
mod ids;
mod incoming;
mod limits;
pub(crate) mod local;
mod namespaces;
mod payload;
mod plain;
mod prolog;
mod qname;
mod scan;
mod text;
mod vocabulary;

use std::fmt::Write as _;
use std::sync::Arc;

use quick_xml::escape::escape;

pub use error::{EnvelopeError, Position};
pub use ids::{IdError, MessageId, ThreadId};
pub use incoming::Incoming;
pub use limits::Limits;
pub use namespaces::{
    CLIENT_SENDER, GOVERNOR_NS, INBOX_NS, PROCESS_NS, SYSTEM_NS, SYSTEM_SENDER, TODO_NS,
    is_reserved_namespace,
};
pub use payload::Payload;
pub use qname::QName;
pub(crate) use scan::check_chars;
pub(crate) use text::{reference, text_between, text_content};
pub(crate) use vocabulary::{Vocabulary, unexpected_attribute};

/// Namespace of the agentpump envelope.
pub const ENVELOPE_NS: &str = "urn:agentpump:envelope:v1";
/// Namespace of the AgentServer v2.1 envelope, accepted on ingress and answered in kind.
pub const AGENTSERVER_NS: &str = "https://xml-pipeline.org/ns/envelope/v1";

/// Which envelope format a message uses.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// `urn:agentpump:envelope:v1`, with `id`, `from`, `to`, `thread`, `in-reply-to`.
    #[default]
    Agentpump,
    /// AgentServer v2.1, `https://xml-pipeline.org/ns/envelope/v1`, with `from`, `to`, `thread`.
    AgentServer,
}

impl Dialect {
    /// The envelope namespace URI of this dialect.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Dialect;
    /// assert_eq!(Dialect::Agentpump.namespace(), "urn:agentpump:envelope:v1");
    /// assert_eq!(Dialect::AgentServer.namespace(), "https://xml-pipeline.org/ns/envelope/v1");
    /// ```
    pub fn namespace(self) -> &'static str {
        match self {
            Self::Agentpump => ENVELOPE_NS,
            Self::AgentServer => AGENTSERVER_NS,
        }
    }

    /// Whether this is the agentpump dialect (the default).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Dialect;
    /// assert!(Dialect::default().is_agentpump());
    /// assert!(!Dialect::AgentServer.is_agentpump());
    /// ```
    pub fn is_agentpump(&self) -> bool {
        *self == Self::Agentpump
    }

    fn meta_fields(self) -> &'static str {
        match self {
            Self::Agentpump => "<id>, <from>, <to>, <thread> or <in-reply-to>",
            Self::AgentServer => "<from>, <to> or <thread>",
        }
    }
}

/// A message as the pump routes it: every field assigned by the pump, the payload as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    id: MessageId,
    from: Arc<str>,
    to: Option<Arc<str>>,
    thread: ThreadId,
    in_reply_to: Option<MessageId>,
    payload: Payload,
}

impl Envelope {
    /// Creates an envelope with a fresh id.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let thread = ThreadId::new();
    /// let env = Envelope::new("client".into(), thread, payload);
    /// assert_eq!((env.from(), env.thread(), env.to()), ("client", thread, None));
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn new(from: Arc<str>, thread: ThreadId, payload: Payload) -> Self {
        Self {
            id: MessageId::new(),
            from,
            to: None,
            thread,
            in_reply_to: None,
            payload,
        }
    }

    /// Sets the id (the pump assigns ids; this is for messages it builds around a known id).
    pub(crate) fn with_id(mut self, id: MessageId) -> Self {
        self.id = id;
        self
    }

    /// Sets the addressee.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let env = Envelope::new("client".into(), ThreadId::new(), payload).with_to(Some("echo".into()));
    /// assert_eq!(env.to(), Some("echo"));
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn with_to(mut self, to: Option<Arc<str>>) -> Self {
        self.to = to;
        self
    }

    /// Sets the message this one answers.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Envelope, Limits, MessageId, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let asked = MessageId::new();
    /// let env = Envelope::new("echo".into(), ThreadId::new(), payload).with_in_reply_to(Some(asked));
    /// assert_eq!(env.in_reply_to(), Some(asked));
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn with_in_reply_to(mut self, id: Option<MessageId>) -> Self {
        self.in_reply_to = id;
        self
    }

    /// The message id.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let (a, b) = (Envelope::new("c".into(), ThreadId::new(), payload.clone()), Envelope::new("c".into(), ThreadId::new(), payload));
    /// assert!(a.id() < b.id()); // fresh ids, in creation order
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn id(&self) -> MessageId {
        self.id
    }

    /// Who sent it (a listener name, `client`, or `system`).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// assert_eq!(Envelope::new("researcher".into(), ThreadId::new(), payload).from(), "researcher");
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn from(&self) -> &str {
        &self.from
    }

    /// The sender's name, shared.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let name: Arc<str> = Arc::from("researcher");
    /// let env = Envelope::new(name.clone(), ThreadId::new(), payload);
    /// assert!(Arc::ptr_eq(env.from_shared(), &name)); // no copy of the name
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn from_shared(&self) -> &Arc<str> {
        &self.from
    }

    /// The addressee, when the message was directed at one listener.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let env = Envelope::new("client".into(), ThreadId::new(), payload);
    /// assert_eq!(env.to(), None); // routed by root
    /// assert_eq!(env.with_to(Some("echo".into())).to(), Some("echo"));
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn to(&self) -> Option<&str> {
        self.to.as_deref()
    }

    /// The addressee, shared.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let echo: Arc<str> = Arc::from("echo");
    /// let env = Envelope::new("client".into(), ThreadId::new(), payload).with_to(Some(echo.clone()));
    /// assert!(Arc::ptr_eq(env.to_shared().expect("addressed"), &echo));
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn to_shared(&self) -> Option<&Arc<str>> {
        self.to.as_ref()
    }

    /// The thread it belongs to.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let thread: ThreadId = "6f1c2a3b-0000-4000-8000-000000000000".parse().expect("a UUID");
    /// assert_eq!(Envelope::new("client".into(), thread, payload).thread().to_string(), "6f1c2a3b-0000-4000-8000-000000000000");
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn thread(&self) -> ThreadId {
        self.thread
    }

    /// The message it answers, if any.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let question = Envelope::new("client".into(), ThreadId::new(), payload.clone());
    /// assert_eq!(question.in_reply_to(), None);
    /// let answer = Envelope::new("echo".into(), question.thread(), payload).with_in_reply_to(Some(question.id()));
    /// assert_eq!(answer.in_reply_to(), Some(question.id()));
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
    /// use agentpump::{Envelope, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<say xmlns="urn:example:v1">hi</say>"#, &Limits::default())?;
    /// let env = Envelope::new("client".into(), ThreadId::new(), payload);
    /// assert_eq!(env.payload().as_str(), r#"<say xmlns="urn:example:v1">hi</say>"#);
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    /// Writes the envelope as XML in the given dialect, the payload byte for byte.
    ///
    /// When the payload does not declare its own default namespace, the envelope is written with
    /// a prefix (`<env:message xmlns:env="…">`) so that the payload's unprefixed elements stay in no
    /// namespace for any reader.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Dialect, Envelope, Incoming, Limits, Payload, ThreadId};
    /// let payload = Payload::parse(r#"<ping xmlns="urn:example:ping"/>"#, &Limits::default())?;
    /// let env = Envelope::new("alice".into(), ThreadId::new(), payload);
    /// let xml = env.to_xml(Dialect::Agentpump);
    /// let back = Incoming::parse(xml.as_bytes(), &Limits::default())?;
    /// assert_eq!(back.payload(), env.payload());
    /// # Ok::<(), agentpump::EnvelopeError>(())
    /// ```
    pub fn to_xml(&self, dialect: Dialect) -> String {
        let p = if self.payload.declares_default_namespace() {
            ""
        } else {
            "env:"
        };
        let ns_attr = if p.is_empty() { "xmlns" } else { "xmlns:env" };
        let mut out = String::with_capacity(self.payload.as_str().len() + 256);
        let _ = write!(
            out,
            "<{p}message {ns_attr}=\"{}\"><{p}meta>",
            dialect.namespace()
        );
        if dialect == Dialect::Agentpump {
            let _ = write!(out, "<{p}id>{}</{p}id>", self.id);
        }
        let _ = write!(out, "<{p}from>{}</{p}from>", escape(&*self.from));
        if let Some(to) = &self.to {
            let _ = write!(out, "<{p}to>{}</{p}to>", escape(&**to));
        }
        let _ = write!(out, "<{p}thread>{}</{p}thread>", self.thread);
        if let (Dialect::Agentpump, Some(id)) = (dialect, self.in_reply_to) {
            let _ = write!(out, "<{p}in-reply-to>{id}</{p}in-reply-to>");
        }
        let _ = write!(out, "</{p}meta>{}</{p}message>", self.payload.as_str());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn agentserver_envelope_is_accepted_and_answered_in_kind() {
        let xml = r#"<?xml version="1.0"?>
<message xmlns="https://xml-pipeline.org/ns/envelope/v1">
  <meta><from>legacy</from><to>calc</to><thread>sess-1</thread></meta>
  <add xmlns="urn:calc"><a>1</a></add>
</message>"#;
        let msg = Incoming::parse(xml.as_bytes(), &limits()).unwrap();
        assert_eq!(msg.dialect(), Dialect::AgentServer);
        assert_eq!(msg.thread(), Some("sess-1"));
        assert_eq!(msg.to(), Some("calc"));
        let env = Envelope::new("calc".into(), ThreadId::new(), msg.payload().clone());
        let answer = env.to_xml(msg.dialect());
        assert!(answer.starts_with(r#"<message xmlns="https://xml-pipeline.org/ns/envelope/v1">"#));
        assert!(!answer.contains("<id>"));
    }

    #[test]
    fn unprefixed_payload_children_stay_out_of_the_envelope_namespace() {
        let payload =
            Payload::parse(r#"<c:add xmlns:c="urn:calc"><a>1</a></c:add>"#, &limits()).unwrap();
        let env = Envelope::new("me".into(), ThreadId::new(), payload);
        let xml = env.to_xml(Dialect::Agentpump);
        assert!(
            xml.starts_with(r#"<env:message xmlns:env="urn:agentpump:envelope:v1"><env:meta>"#)
        );
        let back = Incoming::parse(xml.as_bytes(), &limits()).unwrap();
        assert_eq!(
            back.payload().as_str(),
            r#"<c:add xmlns:c="urn:calc"><a>1</a></c:add>"#
        );
    }

    #[test]
    fn envelope_errors_name_what_failed() {
        let ok_meta = r#"<message xmlns="urn:agentpump:envelope:v1"><meta/>"#;
        let cases: &[(String, &str)] = &[
            ("<other xmlns='urn:x'/>".into(), "root element is <{urn:x}other>"),
            (
                "<message xmlns='urn:agentpump:envelope:v1'><meta><color>red</color></meta></message>".into(),
                "unexpected <color> at line 1, column 50, expected <id>, <from>",
            ),
            (format!("{ok_meta}</message>"), "no payload element found"),
            (format!("{ok_meta}<a xmlns='urn:a'/><b xmlns='urn:b'/></message>"), "second payload element <b>"),
            (format!("{ok_meta}<p:a/></message>"), "prefix `p` of <p:a>"),
            // A namespace error points at the tag that declares it, in the envelope and in the payload.
            (
                "<message xmlns='urn:agentpump:envelope:v1'>\n <meta xmlns:xml='urn:x'/></message>".into(),
                "malformed XML at line 2, column 2",
            ),
            (format!("{ok_meta}\n  <a xmlns:xml='urn:x'/></message>"), "malformed XML at line 2, column 3"),
            (format!("{ok_meta}<a xmlns='urn:a'/>"), "malformed XML at line 1, column 69: expected </message>"),
            (
                "<!DOCTYPE m [<!ENTITY x SYSTEM 'file:///etc/passwd'>]><message/>".into(),
                "DOCTYPE declarations are refused",
            ),
            (
                "<message xmlns='urn:agentpump:envelope:v1'><meta><in-reply-to>nope</in-reply-to></meta><a xmlns='urn:a'/></message>".into(),
                "<in-reply-to> is `nope`, not a UUID",
            ),
        ];
        for (xml, expected) in cases {
            let err = Incoming::parse(xml.as_bytes(), &limits())
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(expected),
                "{xml}: got {err:?}, expected {expected:?}"
            );
        }
        let bad_utf8 = Incoming::parse(b"<message>\xff</message>", &limits()).unwrap_err();
        assert_eq!(bad_utf8, EnvelopeError::InvalidUtf8 { offset: 9 });
    }
}

//! [`Request`]: what a listener may ask of the pump — `spawn-thread`, `clear-context`, `thread-done`.

use std::fmt::Write as _;

use quick_xml::NsReader;
use quick_xml::escape::escape;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;

use super::{HuhCode, SYSTEM_NS, is_reserved_namespace};
use crate::envelope::unexpected_attribute;
use crate::governor::{BUDGET_ATTRIBUTES, Budget, budget_xml, parse_budget};
use crate::{EnvelopeError, Limits, Payload};

/// A request a listener made in the system namespace, parsed and validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Start a child thread with an initial payload.
    Spawn {
        /// The sub-id suggested for the child's display path.
        suggested_sub_id: Option<String>,
        /// The listener the initial payload is directed at, if any.
        to: Option<String>,
        /// The child's first message.
        initial: Payload,
        /// The carve-out asked for (`<budget …/>`); empty when none.
        budget: Budget,
    },
    /// Shrink the requesting listener's history view to the last `keep` messages.
    ClearContext {
        /// Messages to keep.
        keep: usize,
    },
    /// End this thread; the payload goes to the spawner as `<thread-result>`.
    ThreadDone {
        /// The final answer, if any.
        payload: Option<Payload>,
    },
}

/// A `spawn-thread` request; build one with [`Spawn::new`] and hand it to
/// [`Context::spawn`](crate::Context::spawn).
///
/// # Example
///
/// ```
/// use agentpump::{Spawn, governor::Budget};
/// let spawn = Spawn::new(r#"<search xmlns="urn:example:v1">rust</search>"#)
///     .sub_id("web")
///     .to("searcher")
///     .budget(Budget { turns: Some(20), ..Budget::unlimited() });
/// assert!(spawn.to_xml().starts_with(r#"<sys:spawn-thread xmlns:sys="urn:agentpump:system:v1" suggested-sub-id="web" to="searcher">"#));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawn {
    suggested_sub_id: Option<String>,
    to: Option<String>,
    budget: Budget,
    initial: String,
}

impl Spawn {
    /// A spawn whose child starts with `initial_payload` (routed by its root, like an emit).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Spawn;
    /// let spawn = Spawn::new(r#"<q xmlns="urn:example:v1"/>"#);
    /// assert_eq!((spawn.initial_payload(), spawn.suggested_sub_id(), spawn.addressee()), (r#"<q xmlns="urn:example:v1"/>"#, None, None));
    /// ```
    pub fn new(initial_payload: impl Into<String>) -> Self {
        Self {
            suggested_sub_id: None,
            to: None,
            budget: Budget::default(),
            initial: initial_payload.into(),
        }
    }

    /// Suggests a sub-id for the child's display path (`parent.sub-id`).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Spawn;
    /// let spawn = Spawn::new(r#"<q xmlns="urn:example:v1"/>"#).sub_id("research");
    /// assert_eq!(spawn.suggested_sub_id(), Some("research"));
    /// assert!(spawn.to_xml().contains(r#"suggested-sub-id="research""#));
    /// ```
    pub fn sub_id(mut self, id: impl Into<String>) -> Self {
        self.suggested_sub_id = Some(id.into());
        self
    }

    /// Directs the initial payload at one listener.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Spawn;
    /// let spawn = Spawn::new(r#"<q xmlns="urn:example:v1"/>"#).to("researcher");
    /// assert_eq!(spawn.addressee(), Some("researcher"));
    /// ```
    pub fn to(mut self, listener: impl Into<String>) -> Self {
        self.to = Some(listener.into());
        self
    }

    /// Carves a budget for the child out of the spawner's: at most what the spawner has left,
    /// reserved so that siblings cannot take it.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Spawn, governor::Budget};
    /// let spawn = Spawn::new(r#"<q xmlns="urn:example:v1"/>"#).budget(Budget { turns: Some(5), ..Budget::unlimited() });
    /// assert!(spawn.to_xml().contains(r#"<sys:budget turns="5"/>"#)); // a carve-out of five turns
    /// ```
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// The suggested sub-id, if any.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Spawn;
    /// assert_eq!(Spawn::new("<q xmlns=\"urn:example:v1\"/>").sub_id("web").suggested_sub_id(), Some("web"));
    /// ```
    pub fn suggested_sub_id(&self) -> Option<&str> {
        self.suggested_sub_id.as_deref()
    }

    /// The listener the initial payload is directed at, if any.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Spawn;
    /// assert_eq!(Spawn::new("<q xmlns=\"urn:example:v1\"/>").addressee(), None); // routed by root
    /// ```
    pub fn addressee(&self) -> Option<&str> {
        self.to.as_deref()
    }

    /// The initial payload's text.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Spawn;
    /// assert_eq!(Spawn::new("<q xmlns=\"urn:example:v1\"/>").initial_payload(), "<q xmlns=\"urn:example:v1\"/>");
    /// ```
    pub fn initial_payload(&self) -> &str {
        &self.initial
    }

    /// Renders the request as the `spawn-thread` element a listener emits.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Spawn;
    /// let xml = Spawn::new("<q xmlns=\"urn:example:v1\"/>").sub_id("web").to_xml();
    /// assert_eq!(xml, r#"<sys:spawn-thread xmlns:sys="urn:agentpump:system:v1" suggested-sub-id="web"><sys:initial-payload><q xmlns="urn:example:v1"/></sys:initial-payload></sys:spawn-thread>"#);
    /// ```
    pub fn to_xml(&self) -> String {
        let mut x = format!("<sys:spawn-thread xmlns:sys=\"{SYSTEM_NS}\"");
        if let Some(id) = &self.suggested_sub_id {
            let _ = write!(x, " suggested-sub-id=\"{}\"", escape(id.as_str()));
        }
        if let Some(to) = &self.to {
            let _ = write!(x, " to=\"{}\"", escape(to.as_str()));
        }
        let budget = budget_xml(&self.budget, "sys:");
        let _ = write!(
            x,
            ">{budget}<sys:initial-payload>{}</sys:initial-payload></sys:spawn-thread>",
            self.initial
        );
        x
    }
}

/// Why a system-namespace payload is not a request the pump carries out.
pub type RequestError = (HuhCode, String);

impl Request {
    /// Parses a payload of the system namespace as a request.
    ///
    /// # Errors
    ///
    /// `(ReservedNamespace, …)` for an element only the pump may emit or one the namespace does
    /// not define; `(InvalidRequest, …)` for a request that does not follow its schema.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Limits, Payload, system::Request};
    /// let xml = r#"<clear-context xmlns="urn:agentpump:system:v1" keep-messages="3"/>"#;
    /// let payload = Payload::parse(xml, &Limits::default()).expect("well-formed");
    /// assert!(matches!(Request::parse(&payload, &Limits::default()), Ok(Request::ClearContext { keep: 3 })));
    /// let halt = Payload::parse(r#"<halt xmlns="urn:agentpump:system:v1"/>"#, &Limits::default()).expect("well-formed");
    /// assert_eq!(Request::parse(&halt, &Limits::default()).unwrap_err().0.as_str(), "reserved-namespace"); // the pump's own
    /// ```
    pub fn parse(payload: &Payload, limits: &Limits) -> Result<Self, RequestError> {
        let text = payload.as_str();
        let mut reader = NsReader::from_str(text);
        let root = match reader.read_event() {
            Ok(Event::Start(e)) => (e, false),
            Ok(Event::Empty(e)) => (e, true),
            _ => return Err(invalid("the request is not an element")),
        };
        let (start, empty) = root;
        match payload.qname().local() {
            "spawn-thread" if !empty => parse_spawn(&mut reader, &start, text, limits),
            "spawn-thread" => Err(invalid("<spawn-thread> needs an <initial-payload>")),
            "clear-context" => {
                // Seed 003 spells it `keep_messages`: a documented alias.
                unexpected_attribute(&start, "clear-context", &["keep-messages", "keep_messages"])
                    .map_err(|m| invalid(&m))?;
                let keep =
                    attribute(&start, "keep-messages")?.or(attribute(&start, "keep_messages")?);
                let keep = match keep {
                    None => 0,
                    Some(v) => v.parse().map_err(|_| {
                        invalid(&format!("keep-messages=\"{v}\" is not a whole number"))
                    })?,
                };
                Ok(Self::ClearContext { keep })
            }
            "thread-done" if empty => {
                unexpected_attribute(&start, "thread-done", &[]).map_err(|m| invalid(&m))?;
                Ok(Self::ThreadDone { payload: None })
            }
            "thread-done" => {
                unexpected_attribute(&start, "thread-done", &[]).map_err(|m| invalid(&m))?;
                let span = reader
                    .read_to_end(start.name())
                    .map_err(|e| invalid(&e.to_string()))?;
                let payload =
                    inner_payload(text, span.start as usize, span.end as usize, 1, limits)?;
                Ok(Self::ThreadDone { payload })
            }
            other => Err((
                HuhCode::ReservedNamespace,
                format!(
                    "<{other}> in {SYSTEM_NS} is not a request; listeners may emit only \
                     spawn-thread, clear-context and thread-done, the rest is the pump's"
                ),
            )),
        }
    }
}

fn parse_spawn(
    reader: &mut NsReader<&[u8]>,
    root: &BytesStart<'_>,
    text: &str,
    limits: &Limits,
) -> Result<Request, RequestError> {
    // Seed 003 spells it `suggested_sub_id`: a documented alias.
    let spellings = ["suggested-sub-id", "suggested_sub_id", "to"];
    unexpected_attribute(root, "spawn-thread", &spellings).map_err(|m| invalid(&m))?;
    let suggested_sub_id =
        attribute(root, "suggested-sub-id")?.or(attribute(root, "suggested_sub_id")?);
    let to = attribute(root, "to")?;
    let mut initial = None;
    let mut budget = None;
    loop {
        let (resolved, event) = reader
            .read_resolved_event()
            .map_err(|e| invalid(&e.to_string()))?;
        let in_system = matches!(resolved, ResolveResult::Bound(ns) if ns.0 == SYSTEM_NS);
        match event {
            Event::Start(e)
                if in_system
                    && e.local_name().as_ref() == "initial-payload"
                    && initial.is_none() =>
            {
                let span = reader
                    .read_to_end(e.name())
                    .map_err(|e| invalid(&e.to_string()))?;
                initial = inner_payload(text, span.start as usize, span.end as usize, 2, limits)?;
                if initial.is_none() {
                    return Err(invalid("<initial-payload> is empty"));
                }
            }
            Event::Start(ref e) | Event::Empty(ref e)
                if in_system && e.local_name().as_ref() == "budget" && budget.is_none() =>
            {
                // `<budget …/>` and `<budget …></budget>` are the same element.
                unexpected_attribute(e, "budget", BUDGET_ATTRIBUTES).map_err(|m| invalid(&m))?;
                let element = format!("<budget {}/>", e.attributes_raw());
                budget = Some(parse_budget(&element).map_err(|m| invalid(&m.to_string()))?);
                if matches!(event, Event::Start(_)) {
                    reader
                        .read_to_end(e.name())
                        .map_err(|e| invalid(&e.to_string()))?;
                }
            }
            Event::Start(e) | Event::Empty(e) => {
                return Err(invalid(&format!(
                    "unexpected <{}> in <spawn-thread>, expected an optional <budget/> and one <initial-payload>",
                    e.name().0
                )));
            }
            Event::End(_) | Event::Eof => break,
            _ => {}
        }
    }
    let initial = initial.ok_or_else(|| invalid("<spawn-thread> needs an <initial-payload>"))?;
    Ok(Request::Spawn {
        suggested_sub_id,
        to,
        initial,
        budget: budget.unwrap_or_default(),
    })
}

/// The one payload element between `start` and `end` of `text`, or `None` when there is only whitespace.
fn inner_payload(
    text: &str,
    start: usize,
    end: usize,
    depth: usize,
    limits: &Limits,
) -> Result<Option<Payload>, RequestError> {
    let content = &text[start..end];
    let lead = content.len() - content.trim_start().len();
    if lead == content.len() {
        return Ok(None);
    }
    let (payload, payload_end) = Payload::parse_at(text, start + lead, depth, limits)
        .map_err(|e: EnvelopeError| invalid(&e.to_string()))?;
    if !text[payload_end..end].trim().is_empty() {
        return Err(invalid(
            "more than one payload element where one was expected",
        ));
    }
    if is_reserved_namespace(payload.qname().namespace()) || payload.carries_reserved_element() {
        let message = format!(
            "{} is in a namespace only the pump emits; a request cannot carry it",
            payload.qname()
        );
        return Err((HuhCode::ReservedNamespace, message));
    }
    Ok(Some(payload))
}

fn attribute(e: &BytesStart<'_>, name: &str) -> Result<Option<String>, RequestError> {
    match e.try_get_attribute(name) {
        Ok(Some(a)) => a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map(|v| Some(v.into_owned()))
            .map_err(|err| invalid(&err.to_string())),
        Ok(None) => Ok(None),
        Err(err) => Err(invalid(&err.to_string())),
    }
}

fn invalid(message: &str) -> RequestError {
    (HuhCode::InvalidRequest, message.to_owned())
}

//! Addressing wrappers in model text: `<reply>…</reply>` answers the sender of the message being
//! handled, `<send to="NAME">…</send>` addresses one listener by name (a peer, the agent itself,
//! or `client`, the outside sender of the thread). Everything else is routed by its root.
//!
//! The wrappers are in no namespace. No listener can accept a root in no namespace (registration
//! refuses one), so a wrapper never shadows a real payload.

use std::ops::Range;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use super::{ExtractError, check_room, check_text, elements};
use crate::{Limits, Payload, Position};

/// Where an extracted payload goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// Routed by its root, like [`Context::emit`](crate::Context::emit).
    Route,
    /// To the sender of the delivery being handled, like [`Context::reply`](crate::Context::reply).
    Reply,
    /// To the listener of this name, like [`Context::send`](crate::Context::send).
    To(String),
}

/// A payload found in text, with where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addressed {
    /// Where it goes.
    pub address: Address,
    /// The payload, exactly as written inside its wrapper (or alone).
    pub payload: Payload,
}

/// Extracts every payload from `text` as [`extract`](super::extract) does, and reads the
/// addressing wrappers: each payload inside `<reply>` is addressed to the sender of the message
/// being handled, each inside `<send to="NAME">` to `NAME`; the wrappers themselves are not
/// payloads. A wrapper holds one or more payloads and prose around them; wrappers do not nest.
///
/// # Errors
///
/// As [`extract`](super::extract), and [`ExtractError::Address`] for a wrapper that holds no
/// payload, a `<send>` without `to`, an unknown attribute on a wrapper, or a nested wrapper.
///
/// # Example
///
/// ```
/// use agentpump::{Limits, extract::{Address, addressed}};
/// let text = r#"Done: <send to="client"><answer xmlns="urn:a">42</answer></send>"#;
/// let found = addressed(text, &Limits::default())?;
/// assert_eq!(found[0].address, Address::To("client".into()));
/// assert_eq!(found[0].payload.as_str(), r#"<answer xmlns="urn:a">42</answer>"#);
/// # Ok::<(), agentpump::extract::ExtractError>(())
/// ```
pub fn addressed(text: &str, limits: &Limits) -> Result<Vec<Addressed>, ExtractError> {
    check_text(text, limits)?;
    let mut out = Vec::new();
    for (start, payload) in elements(text, 0..text.len(), 0, limits)? {
        if !is_wrapper(&payload) {
            check_room(out.len(), limits)?;
            out.push(Addressed {
                address: Address::Route,
                payload,
            });
            continue;
        }
        let fail = |message: String| ExtractError::Address {
            message,
            at: Position::locate(text, start),
        };
        let (address, inside) = open(&payload).map_err(fail)?;
        let inside = (start + inside.start)..(start + inside.end);
        let found = elements(text, inside, 1, limits)?;
        if found.is_empty() {
            return Err(fail(format!(
                "<{}> holds no payload element",
                payload.qname().local()
            )));
        }
        for (at, inner) in found {
            if is_wrapper(&inner) {
                return Err(ExtractError::Address {
                    message: format!(
                        "<{}> inside a wrapper: wrappers do not nest",
                        inner.qname().local()
                    ),
                    at: Position::locate(text, at),
                });
            }
            check_room(out.len(), limits)?;
            out.push(Addressed {
                address: address.clone(),
                payload: inner,
            });
        }
    }
    Ok(out)
}

/// Whether a payload is an addressing wrapper: `reply` or `send` in no namespace.
fn is_wrapper(payload: &Payload) -> bool {
    let name = payload.qname();
    name.namespace().is_empty() && matches!(name.local(), "reply" | "send")
}

/// Reads a wrapper's start tag: its address, and the byte range of its content within it.
fn open(wrapper: &Payload) -> Result<(Address, Range<usize>), String> {
    let text = wrapper.as_str();
    let mut reader = Reader::from_str(text);
    let start = match reader.read_event() {
        Ok(Event::Start(start)) => start,
        Ok(Event::Empty(start)) => {
            let name = start.local_name().into_inner().to_owned();
            return Err(format!("<{name}/> holds no payload element"));
        }
        Ok(other) => return Err(format!("expected a wrapper element, found {other:?}")),
        Err(e) => return Err(e.to_string()),
    };
    let address = address_of(&start)?;
    let content = reader.buffer_position() as usize;
    let end = text.rfind("</").ok_or("the wrapper has no end tag")?;
    Ok((address, content..end))
}

/// The address a wrapper's start tag gives.
fn address_of(start: &BytesStart<'_>) -> Result<Address, String> {
    let reply = start.local_name().into_inner() == "reply";
    let mut to = None;
    for attribute in start.attributes() {
        let attribute = attribute.map_err(|e| e.to_string())?;
        let key = attribute.key.into_inner().to_owned();
        if reply || key != "to" {
            let expected = if reply { "none" } else { "`to`" };
            return Err(format!(
                "unexpected attribute `{key}` on <{}>, expected {expected}",
                if reply { "reply" } else { "send" }
            ));
        }
        let value = attribute
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| e.to_string())?;
        to = Some(value.trim().to_owned());
    }
    if reply {
        return Ok(Address::Reply);
    }
    match to {
        Some(name) if !name.is_empty() => Ok(Address::To(name)),
        _ => Err("<send> needs to=\"NAME\": the listener (or `client`) to address".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(Address, String)> {
        addressed(text, &Limits::default())
            .unwrap()
            .into_iter()
            .map(|a| (a.address, a.payload.as_str().to_owned()))
            .collect()
    }

    #[test]
    fn wrappers_address_their_payloads_and_the_rest_is_routed() {
        let text = "Here.\n```xml\n<reply>\n  <a xmlns=\"urn:a\">1</a> and <b xmlns=\"urn:b\"/>\n</reply>\n```\n\
            <send to=\" client \"><c xmlns=\"urn:c\">3</c></send> <d xmlns=\"urn:d\"/>";
        assert_eq!(
            found(text),
            [
                (Address::Reply, r#"<a xmlns="urn:a">1</a>"#.to_owned()),
                (Address::Reply, r#"<b xmlns="urn:b"/>"#.to_owned()),
                (
                    Address::To("client".into()),
                    r#"<c xmlns="urn:c">3</c>"#.to_owned()
                ),
                (Address::Route, r#"<d xmlns="urn:d"/>"#.to_owned()),
            ]
        );
        // A namespaced `reply` is an ordinary payload.
        assert_eq!(
            found(r#"<reply xmlns="urn:r">x</reply>"#),
            [(
                Address::Route,
                r#"<reply xmlns="urn:r">x</reply>"#.to_owned()
            )]
        );
    }

    #[test]
    fn a_wrapper_that_cannot_be_read_says_what_is_wrong() {
        let cases = [
            (
                "<send><a xmlns='urn:a'/></send>",
                "<send> needs to=\"NAME\"",
            ),
            (
                "x <reply/>",
                "<reply/> holds no payload element at line 1, column 3",
            ),
            (
                "<reply>just prose</reply>",
                "<reply> holds no payload element",
            ),
            (
                "<reply to='x'><a xmlns='urn:a'/></reply>",
                "unexpected attribute `to` on <reply>",
            ),
            (
                "<send to='x' cc='y'><a xmlns='urn:a'/></send>",
                "unexpected attribute `cc` on <send>",
            ),
            (
                "<reply><send to='x'><a xmlns='urn:a'/></send></reply>",
                "wrappers do not nest",
            ),
        ];
        for (text, words) in cases {
            let err = addressed(text, &Limits::default()).unwrap_err().to_string();
            assert!(err.contains(words), "{text}: {err}");
        }
        let limits = Limits {
            max_outputs: 2,
            ..Limits::default()
        };
        let err = addressed(
            "<reply><a xmlns='urn:a'/><a xmlns='urn:a'/><a xmlns='urn:a'/></reply>",
            &limits,
        );
        assert_eq!(err.unwrap_err(), ExtractError::TooMany { limit: 2 });
    }
}

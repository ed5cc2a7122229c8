//! The tool protocol's messages in the exact form this crate writes them, read without an
//! XML reader: the common case (every call a process makes, every answer of a tool written
//! with [`super::Call::to_xml`] or [`super::ToolResult::to_xml`]) costs a walk over the bytes.
//!
//! Anything else — a prefix, single quotes, whitespace between elements, a reference, a
//! comment, CDATA, an attribute the element does not allow — is left to the general reader
//! (`None`), which reads it and names any fault. What this reader accepts, the general reader
//! reads to the same [`Message`], with the same checks in the same order (a test compares
//! the two); it trusts nothing the general reader would not.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    Answer, Attributes, CALL_ATTRIBUTES, Call, ERROR_ATTRIBUTES, ItemType, Message,
    RESULT_ATTRIBUTES, WireError, invalid_name,
};
use crate::envelope::check_chars;
use crate::tool::TOOL_NS;
use crate::{Limits, Payload, QName};

/// A listener's output that is a tool call or answer in the written form, checked and read in
/// one walk: the payload, with its reading kept for the pump's protocol check and for its
/// receiver. `None` sends the text the general way ([`Payload::parse`], then the protocol
/// check), which also names any fault; so does a written form with a fault in it.
///
/// What this accepts, [`Payload::parse`] accepts under the same `limits` with the same root,
/// and the protocol check reads to the same message (a test compares them): the written form
/// is one element with one namespace declaration, its own, two levels deep, at most five
/// attributes on an element, no reference, comment, CDATA or processing instruction, and no
/// character XML forbids.
pub(crate) fn payload(text: &str, limits: &Limits) -> Option<Payload> {
    let element = match text.as_bytes().get(1)? {
        b'c' => "call",
        b'r' => "result",
        b'e' => "error",
        _ => return None,
    };
    let (allowed, item) = match element {
        "call" => (CALL_ATTRIBUTES, "arg"),
        "result" => (RESULT_ATTRIBUTES, "field"),
        _ => (ERROR_ATTRIBUTES, ""),
    };
    if !fits(text, limits) {
        return None;
    }
    // Another element, or another form of this one, stops the walk at its first bytes.
    let message = read(text, element, allowed, item)?.ok()?;
    if check_chars(text).is_err() || text.contains("]]>") {
        return None;
    }
    let qname = QName::recent(TOOL_NS, element);
    if element == "call" {
        let call = Call::from_message(message).ok()?;
        return Some(Payload::from_read(qname, text, Arc::new(call)));
    }
    let answer = Answer::from_message(message).ok()?;
    Some(Payload::from_read(qname, text, Arc::new(answer)))
}

/// Whether a tool message in the written form is within `limits`: its size, its two levels,
/// its at most five attributes on an element (`<error>`'s four and its namespace).
pub(crate) fn fits(text: &str, limits: &Limits) -> bool {
    text.len() <= limits.max_bytes && limits.max_depth >= 2 && limits.max_attributes >= 5
}

/// Reads `xml` when it has the written form: `<element xmlns="…" a="…"…>` then
/// `<item name="…" type="…">text</item>`… (or only text when `item` is empty) then
/// `</element>`, nothing before or after. `None` for any other form.
pub(super) fn read(
    xml: &str,
    element: &'static str,
    allowed: &'static [&'static str],
    item: &'static str,
) -> Option<Result<Message, WireError>> {
    let mut c = Cursor(xml);
    c.eat("<")?;
    c.eat(element)?;
    c.eat(" xmlns=\"")?;
    c.eat(TOOL_NS)?;
    c.eat("\"")?;
    let mut attributes = Attributes::default();
    while c.eat(">").is_none() {
        c.eat(" ")?;
        let (name, rest) = c.0.split_once("=\"")?;
        let at = allowed.iter().position(|a| *a == name)?;
        c.0 = rest;
        let value = c.value()?;
        if attributes[at].replace(value.to_owned()).is_some() {
            return None;
        }
    }
    let mut m = Message {
        element,
        allowed,
        attributes,
        items: BTreeMap::new(),
        text: String::new(),
    };
    if item.is_empty() {
        m.text = c.text()?.to_owned();
    } else {
        while c.0.starts_with('<') && !c.0.starts_with("</") {
            c.eat("<")?;
            c.eat(item)?;
            c.eat(" name=\"")?;
            let name = c.value()?;
            let ty = match c.eat(" type=\"") {
                Some(()) => Some(c.value()?),
                None => None,
            };
            c.eat(">")?;
            let text = c.text()?;
            c.eat("</")?;
            c.eat(item)?;
            c.eat(">")?;
            if let Err(e) = item_into(&mut m, name, ty, text, item) {
                return Some(Err(e));
            }
        }
    }
    c.eat("</")?;
    c.eat(element)?;
    c.eat(">")?;
    c.0.is_empty().then_some(Ok(m))
}

/// One item's checks, as the general reader makes them: name, type, value, repetition.
fn item_into(
    m: &mut Message,
    name: &str,
    ty: Option<&str>,
    text: &str,
    item: &str,
) -> Result<(), WireError> {
    if let Some(e) = invalid_name(name, item) {
        return Err(e);
    }
    let ty = ItemType::of(name, ty, item)?;
    m.close_item(name.to_owned(), ty, text, item)
}

/// The text not read yet.
struct Cursor<'a>(&'a str);

impl<'a> Cursor<'a> {
    /// Steps over `s` if the text goes on with it.
    fn eat(&mut self, s: &str) -> Option<()> {
        self.0 = self.0.strip_prefix(s)?;
        Some(())
    }

    /// An attribute value up to its closing `"` (stepped over), when it is what it says: no
    /// reference to resolve and no whitespace character to normalize.
    fn value(&mut self) -> Option<&'a str> {
        let end = self
            .0
            .find(['"', '&', '<', '\t', '\n', '\r'])
            .filter(|&i| self.0.as_bytes()[i] == b'"')?;
        let value = &self.0[..end];
        self.0 = &self.0[end + 1..];
        Some(value)
    }

    /// Character data up to the next `<`, when it is what it says: no reference, no carriage
    /// return.
    fn text(&mut self) -> Option<&'a str> {
        let end = self
            .0
            .find(['<', '&', '\r'])
            .filter(|&i| self.0.as_bytes()[i] == b'<')?;
        let text = &self.0[..end];
        self.0 = &self.0[end..];
        Some(text)
    }
}

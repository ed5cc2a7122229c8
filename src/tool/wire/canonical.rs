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

use super::{Attributes, ItemType, Message, WireError, invalid_name};
use crate::tool::TOOL_NS;

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

//! The text of a payload: its text nodes in document order, references resolved.

use quick_xml::Reader;
use quick_xml::events::Event as XmlEvent;

/// The text content of a payload: every text node in document order, references resolved,
/// trimmed at both ends — what a trigger's `pattern` is matched against.
pub(crate) fn text_content(xml: &str) -> String {
    text_between(xml, "")
}

/// The text content of `xml` with `between` written at each tag (so `<a>1</a><b>2</b>` reads
/// `1 2` with a space), trimmed at both ends. Stops quietly where the XML stops being readable
/// (a payload cut short gives the text up to the cut).
pub(crate) fn text_between(xml: &str, between: &str) -> String {
    let mut text = String::new();
    let mut reader = Reader::from_str(xml);
    loop {
        match reader.read_event() {
            Ok(XmlEvent::Text(t)) => text.push_str(&t),
            Ok(XmlEvent::CData(t)) => text.push_str(&t),
            Ok(XmlEvent::GeneralRef(r)) => text.extend(reference(&r)),
            Ok(XmlEvent::Start(_) | XmlEvent::End(_) | XmlEvent::Empty(_)) => {
                text.push_str(between);
            }
            Ok(XmlEvent::Eof) | Err(_) => break,
            _ => {}
        }
    }
    text.trim().to_owned()
}

/// The character a reference in a payload stands for (the pump let only valid ones in).
pub(crate) fn reference(r: &quick_xml::events::BytesRef<'_>) -> Option<char> {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return Some(c);
    }
    quick_xml::escape::resolve_predefined_entity(r).and_then(|s| s.chars().next())
}

//! What a thread is, for a list of threads: its first message — the payload's root, the
//! listener it went to and the start of its text — read from the thread's first record.

use quick_xml::Reader;
use quick_xml::events::Event;
use serde::{Deserialize, Serialize};

use crate::QName;
use crate::envelope::text_between;

/// Most characters of [`Opening::text`].
pub const OPENING_CHARS: usize = 80;

/// Most payload characters read for the text: a first message can be large, its start is
/// enough.
pub(crate) const OPENING_READ: usize = 4096;

/// A thread's first message as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opening {
    /// The payload's root (`{urn:example:calc:v1}add`).
    pub root: QName,
    /// The listener it was delivered to, when the record names one.
    pub to: Option<String>,
    /// The payload's text content — or, when it has none, its root's attributes as
    /// `name=value` — whitespace collapsed, cut at [`OPENING_CHARS`] characters (ending in `…`
    /// when cut).
    pub text: String,
}

impl Opening {
    /// The opening of a record with this root, addressee and payload (or its first
    /// 4 096 characters, as SQLite reads it: a payload cut short gives the text up to the cut).
    pub fn new(root: QName, to: Option<&str>, payload: &str) -> Self {
        Self {
            root,
            to: to.map(str::to_owned),
            text: text_of(payload, OPENING_CHARS),
        }
    }
}

/// The text content of `xml` — or, when it has none, its root's attributes as `name=value` —
/// whitespace collapsed to single spaces, at most `max` characters (the last one `…` when cut).
fn text_of(xml: &str, max: usize) -> String {
    let mut text = text_between(xml, " ");
    if text.is_empty() {
        text = root_attributes(xml);
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let text = words.join(" ");
    if text.chars().count() <= max {
        return text;
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// The root element's attributes but its namespace declarations, `name=value` each, in order
/// (`<claim expr="6 * 7" equals="42"/>` → `expr=6 * 7 equals=42`).
fn root_attributes(xml: &str) -> String {
    let mut reader = Reader::from_str(xml);
    let root = loop {
        match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) => break e,
            Ok(Event::Eof) | Err(_) => return String::new(),
            Ok(_) => {}
        }
    };
    let pairs: Vec<String> = root
        .attributes()
        .flatten()
        .filter_map(|a| {
            let key: &str = a.key.as_ref();
            if key == "xmlns" || key.starts_with("xmlns:") {
                return None;
            }
            let value = a
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()?;
            Some(format!("{key}={value}"))
        })
        .collect();
    pairs.join(" ")
}

#[cfg(test)]
mod tests {
    use super::text_of;

    #[test]
    fn reads_the_text_of_a_payload_collapsed_and_cut() {
        let cases = [
            ("<add xmlns=\"urn:c\"><a>1</a><b>2</b></add>", 80, "1 2"),
            (
                "<ask>What  is\n the &amp; <b>square</b> root?</ask>",
                80,
                "What is the & square root?",
            ),
            ("<call/>", 80, ""),
            // No text: the root's attributes say what it is (not its namespaces).
            (
                "<claim xmlns=\"urn:d\" xmlns:p=\"urn:p\" expr=\"6 * 7\" equals=\"42\"/>",
                80,
                "expr=6 * 7 equals=42",
            ),
            ("<sqrt target=\"2\"></sqrt>", 80, "target=2"),
            ("<say><![CDATA[a <raw> text]]></say>", 80, "a <raw> text"),
            ("<say>one two three four</say>", 10, "one two t…"),
            ("<say>one two three four</say>", 9, "one two…"),
            ("<say>abcdefghijklmnop</say>", 5, "abcd…"),
            // A payload cut short keeps what was read.
            ("<say>kept text</say><say>and mo", 80, "kept text and mo"),
        ];
        for (xml, max, text) in cases {
            assert_eq!(text_of(xml, max), text, "{xml}");
        }
    }
}

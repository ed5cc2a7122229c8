//! Tolerant extraction of payload elements from listener or model text output: prose around
//! XML, markdown code fences, several root elements, a leading XML declaration, comments.
//!
//! A `<` counts as the start of an element only when a name follows it and it does not stand
//! right after a word character (so `a<b` and `Vec<String>` stay prose). What looks like an
//! element must then be a well-formed, self-contained payload, or extraction fails saying where
//! and what — an agent gets that message back as `huh` and can correct itself.

mod address;

use std::ops::Range;

use quick_xml::escape::escape;

pub use address::{Address, Addressed, addressed};

use crate::envelope::GOVERNOR_NS;
use crate::governor::MAGIC_PREFIX;
use crate::{EnvelopeError, Limits, Payload, Position};

/// Why extraction failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// Something that starts like an element is not a valid payload.
    #[error(transparent)]
    Payload(#[from] EnvelopeError),
    /// More payloads than [`Limits::max_outputs`].
    #[error("more than {limit} payloads in one output")]
    TooMany {
        /// The configured limit.
        limit: usize,
    },
    /// An Ask-Loop text-form control (`<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:…>>>`) that cannot be read.
    #[error("Ask-Loop control at {at}: {message}")]
    Magic {
        /// What is wrong with it.
        message: String,
        /// Where it starts.
        at: Position,
    },
    /// A `<reply>` or `<send to="…">` wrapper that cannot be read (see [`addressed`]).
    #[error("{message} at {at}")]
    Address {
        /// What is wrong with it.
        message: String,
        /// Where the wrapper starts.
        at: Position,
    },
    /// A declaration, comment or CDATA section that never ends.
    #[error("unterminated {what} starting at {at}")]
    Unterminated {
        /// `XML declaration`, `comment` or `CDATA section`.
        what: &'static str,
        /// Where it starts.
        at: Position,
    },
}

/// Extracts every payload element from `text`, in order. Zero payloads is not an error here.
///
/// # Errors
///
/// [`ExtractError`] for the first element that is not a valid payload, too many payloads, or an
/// unterminated declaration or comment.
///
/// # Example
///
/// ````
/// use agentpump::{Limits, extract::extract};
/// let answer = "Let me add those.\n```xml\n<add xmlns=\"urn:calc\"><a>1</a><b>2</b></add>\n```\nDone.";
/// let payloads = extract(answer, &Limits::default())?;
/// assert_eq!(payloads[0].qname().local(), "add");
/// # Ok::<(), agentpump::extract::ExtractError>(())
/// ````
pub fn extract(text: &str, limits: &Limits) -> Result<Vec<Payload>, ExtractError> {
    check_text(text, limits)?;
    let found = elements(text, 0..text.len(), 0, limits)?;
    Ok(found.into_iter().map(|(_, payload)| payload).collect())
}

/// Refuses text over the size limit or with forbidden characters.
fn check_text(text: &str, limits: &Limits) -> Result<(), ExtractError> {
    if text.len() > limits.max_bytes {
        return Err(EnvelopeError::TooLarge {
            size: text.len(),
            limit: limits.max_bytes,
        }
        .into());
    }
    crate::envelope::check_chars(text)?;
    Ok(())
}

/// Every payload element in `text[range]`, with where it starts; `depth` is how deep the range
/// sits inside other elements (a wrapper's content is at depth 1).
fn elements(
    text: &str,
    range: Range<usize>,
    depth: usize,
    limits: &Limits,
) -> Result<Vec<(usize, Payload)>, ExtractError> {
    let mut found = Vec::new();
    let mut i = range.start;
    while let Some(rel) = text[i..range.end].find('<') {
        let at = i + rel;
        let rest = &text[at..range.end];
        if rest.starts_with(MAGIC_PREFIX) {
            check_room(found.len(), limits)?;
            let (payload, len) = magic(rest).map_err(|message| ExtractError::Magic {
                message,
                at: Position::locate(text, at),
            })?;
            found.push((at, payload));
            i = at + len;
            continue;
        }
        if let Some((what, close)) = skipped_markup(rest) {
            let end = rest.find(close).ok_or(ExtractError::Unterminated {
                what,
                at: Position::locate(text, at),
            })?;
            i = at + end + close.len();
            continue;
        }
        if !starts_element(text, at) {
            i = at + 1;
            continue;
        }
        check_room(found.len(), limits)?;
        let (payload, end) = Payload::parse_at(text, at, depth, limits)?;
        found.push((at, payload));
        i = end;
    }
    Ok(found)
}

/// Fails when `found` payloads already reach [`Limits::max_outputs`] (Ask-Loop controls count).
fn check_room(found: usize, limits: &Limits) -> Result<(), ExtractError> {
    if found >= limits.max_outputs {
        return Err(ExtractError::TooMany {
            limit: limits.max_outputs,
        });
    }
    Ok(())
}

/// Reads an Ask-Loop `LOOP` control at the start of `rest` as the equivalent `<loop>` payload;
/// returns it and the length of the text form.
fn magic(rest: &str) -> Result<(Payload, usize), String> {
    let body = &rest[MAGIC_PREFIX.len()..];
    let end = body.find("}>>>").ok_or("no closing `}>>>`")?;
    let (kind, json) = body[..=end]
        .split_once(':')
        .ok_or("no `KIND:` before the JSON")?;
    if kind != "LOOP" {
        return Err(format!(
            "`{kind}` cannot come from an agent; agents send LOOP"
        ));
    }
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("invalid JSON: {e}"))?;
    let object = value.as_object().ok_or("the JSON is not an object")?;
    let control = object
        .get("control")
        .and_then(|c| c.as_str())
        .filter(|c| matches!(*c, "continue" | "done" | "abort"))
        .ok_or("`control` must be \"continue\", \"done\" or \"abort\"")?;
    let mut xml = format!("<loop xmlns=\"{GOVERNOR_NS}\" control=\"{control}\"");
    let mut fields = String::new();
    for (key, value) in object {
        let text = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        match key.as_str() {
            "control" => {}
            "notes" | "reason" => xml.push_str(&format!(" {key}=\"{}\"", escape(text.as_str()))),
            _ => fields.push_str(&format!(
                "<field name=\"{}\">{}</field>",
                escape(key.as_str()),
                escape(text.as_str())
            )),
        }
    }
    xml.push_str(&format!(">{fields}</loop>"));
    let payload = Payload::parse(&xml, &Limits::default()).map_err(|e| e.to_string())?;
    Ok((payload, MAGIC_PREFIX.len() + end + "}>>>".len()))
}

/// Markup between payloads that is skipped whole: `(what it is, how it ends)`.
fn skipped_markup(rest: &str) -> Option<(&'static str, &'static str)> {
    if rest.starts_with("<?") {
        Some(("XML declaration", "?>"))
    } else if rest.starts_with("<!--") {
        Some(("comment", "-->"))
    } else if rest.starts_with("<![CDATA[") {
        Some(("CDATA section", "]]>"))
    } else {
        None
    }
}

/// Whether the `<` at `at` starts an element: a name follows, and no word character precedes it.
fn starts_element(text: &str, at: usize) -> bool {
    let after = text[at + 1..].chars().next();
    let before = text[..at].chars().next_back();
    after.is_some_and(|c| c.is_alphabetic() || c == '_')
        && !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(text: &str) -> Vec<String> {
        extract(text, &Limits::default())
            .unwrap()
            .iter()
            .map(|p| p.qname().to_string())
            .collect()
    }

    #[test]
    fn finds_payloads_in_prose_fences_and_declarations() {
        let text = "I think a<b and Vec<String> matter; 3 < 4.\n\
            ```xml\n<?xml version=\"1.0\"?>\n<!-- first -->\n<a xmlns=\"urn:x\"><i>1</i></a>\n```\n\
            and then <b xmlns=\"urn:y\"/> <c xmlns=\"urn:z\">&lt;</c> done.";
        assert_eq!(roots(text), ["{urn:x}a", "{urn:y}b", "{urn:z}c"]);
        assert!(roots("no xml here, just a < b and x<y").is_empty());
    }

    #[test]
    fn keeps_each_payload_exactly() {
        let text = "Answer: <r:result xmlns:r='urn:r'>\n  <v>42</v>\n</r:result>!";
        let p = &extract(text, &Limits::default()).unwrap()[0];
        assert_eq!(
            p.as_str(),
            "<r:result xmlns:r='urn:r'>\n  <v>42</v>\n</r:result>"
        );
    }

    #[test]
    fn the_ask_loop_text_form_reads_as_a_loop_signal() {
        let text = r#"Plan ready. <<<NSENVELOPE_MAGIC_9E3B6F2D:V2:LOOP:{"control":"done","notes":"all <green>","plan_digest":"sha256:ab"}>>> bye"#;
        let found = extract(text, &Limits::default()).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].as_str(),
            r#"<loop xmlns="urn:agentpump:governor:v1" control="done" notes="all &lt;green&gt;"><field name="plan_digest">sha256:ab</field></loop>"#
        );
        let bad = [
            (
                r#"<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:HALT:{"reason":"x"}>>>"#,
                "`HALT` cannot come from an agent",
            ),
            (
                r#"<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:LOOP:{"control":"maybe"}>>>"#,
                "`control` must be",
            ),
            (
                r#"<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:LOOP:{"control":"done"}"#,
                "no closing",
            ),
        ];
        for (text, words) in bad {
            let err = extract(text, &Limits::default()).unwrap_err().to_string();
            assert!(err.contains(words), "{err}");
        }
    }

    #[test]
    fn malformed_output_says_where_and_what() {
        let err = extract("ok\n<a xmlns='urn:a'><b></a>", &Limits::default()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("malformed XML at line 2, column"),
            "{err}"
        );
        let err = extract("see <a xmlns='urn:a'>", &Limits::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed XML at line 1, column 22: unclosed element <a>"
        );
        let err = extract("x <!-- never closed", &Limits::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unterminated comment starting at line 1, column 3"
        );
        let limits = Limits {
            max_outputs: 2,
            ..Limits::default()
        };
        let err = extract("<a/><a/><a/>", &limits).unwrap_err();
        assert_eq!(err, ExtractError::TooMany { limit: 2 });
    }
}

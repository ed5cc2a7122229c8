//! Checking a pump-owned element against its vocabulary: which attributes it may carry and
//! which child elements (with theirs). A word the pump does not know is refused by name, never
//! silently ignored — `keep_mesages="10"` must not quietly mean "keep nothing".

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// What an element may contain: its attributes, and its child elements with their attributes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Vocabulary<'a> {
    /// The element's local name, for messages.
    pub element: &'a str,
    /// Attributes the element may carry (namespace declarations always may).
    pub attributes: &'a [&'a str],
    /// Child elements (by local name) and the attributes each may carry.
    pub children: &'a [(&'a str, &'a [&'a str])],
}

impl Vocabulary<'_> {
    /// Checks the root element of `xml` and its direct children.
    ///
    /// # Errors
    ///
    /// A message naming the unknown attribute or element and what was expected.
    pub fn check(&self, xml: &str) -> Result<(), String> {
        let mut reader = Reader::from_str(xml);
        let mut depth = 0usize;
        loop {
            let event = reader.read_event().map_err(|e| e.to_string())?;
            let (start, opens) = match &event {
                Event::Start(e) => (e, true),
                Event::Empty(e) => (e, false),
                Event::End(_) => {
                    depth = depth.saturating_sub(1);
                    continue;
                }
                Event::Eof => return Ok(()),
                _ => continue,
            };
            match depth {
                0 => unexpected_attribute(start, self.element, self.attributes)?,
                1 => self.check_child(start)?,
                _ => {}
            }
            depth += usize::from(opens);
        }
    }

    fn check_child(&self, child: &BytesStart<'_>) -> Result<(), String> {
        let qualified = child.name();
        let name = local(qualified.as_ref());
        match self.children.iter().find(|(n, _)| *n == name) {
            Some((n, attributes)) => unexpected_attribute(child, n, attributes),
            None => Err(format!(
                "unknown element <{name}> in <{}>, expected {}",
                self.element,
                expected(
                    &self.children.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
                    "<",
                    ">"
                )
            )),
        }
    }
}

/// Fails on the first attribute of `e` that is neither in `allowed` nor a namespace declaration.
pub(crate) fn unexpected_attribute(
    e: &BytesStart<'_>,
    element: &str,
    allowed: &[&str],
) -> Result<(), String> {
    for attribute in e.attributes().with_checks(false).flatten() {
        let name = attribute.key.as_ref();
        if name == "xmlns" || name.starts_with("xmlns:") {
            continue;
        }
        if !allowed.contains(&name) {
            return Err(format!(
                "unknown attribute `{name}` on <{element}>, expected {}",
                expected(allowed, "`", "`")
            ));
        }
    }
    Ok(())
}

fn local(name: &str) -> &str {
    name.rsplit(':').next().unwrap_or(name)
}

fn expected(words: &[&str], open: &str, close: &str) -> String {
    if words.is_empty() {
        return "none".to_owned();
    }
    let quoted: Vec<String> = words.iter().map(|w| format!("{open}{w}{close}")).collect();
    quoted.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOAL: Vocabulary<'static> = Vocabulary {
        element: "goal",
        attributes: &["r-p"],
        children: &[("text", &[]), ("criterion", &["id"])],
    };

    #[test]
    fn unknown_words_are_named_and_known_ones_pass() {
        let ok = r#"<g:goal xmlns:g="urn:g" r-p="1"><g:text>t</g:text><g:criterion id="a">x<b/></g:criterion></g:goal>"#;
        assert_eq!(GOAL.check(ok), Ok(()));
        assert_eq!(
            GOAL.check(r#"<goal rp="1"/>"#),
            Err("unknown attribute `rp` on <goal>, expected `r-p`".to_owned())
        );
        assert_eq!(
            GOAL.check(r#"<goal><criteria/></goal>"#),
            Err("unknown element <criteria> in <goal>, expected <text>, <criterion>".to_owned())
        );
        assert_eq!(
            GOAL.check(r#"<goal><criterion ID="a"/></goal>"#),
            Err("unknown attribute `ID` on <criterion>, expected `id`".to_owned())
        );
    }
}

//! The plain form of an element, checked by one walk over its bytes instead of the XML reader:
//! what the pump's own listeners, the tool protocol and most clients write. A payload in another
//! form, or with anything this walk does not vouch for, goes to the reader ([`super::scan`]),
//! which checks every form and names every fault.
//!
//! The plain form: names of ASCII letters, digits, `_`, `-` and `.` (no prefix); attributes
//! written `name="value"` after whitespace, the value without `<`, `>`, `&`, tab, line feed or
//! carriage return; the only namespace declaration `xmlns="…"`, binding neither the `xml` nor
//! the `xmlns` namespace; text without `&` or `]]>`; no comment, CDATA section, processing
//! instruction or declaration. Characters XML forbids are the caller's check
//! ([`super::check_chars`] over the whole text), as for the reader. Within [`Limits`], a plain element is
//! exactly what the reader accepts, to the same [`Element`] (a test compares the two on every
//! one-character change of a corpus); past a limit, a repeated attribute or a mismatched end
//! tag, the walk leaves the text to the reader, which refuses it naming the fault.

use smallvec::SmallVec;

use super::is_reserved_namespace;
use super::scan::Element;
use super::{Limits, QName};

/// The namespaces XML reserves: no default namespace may be either.
const XML_NS: &[u8] = b"http://www.w3.org/XML/1998/namespace";
const XMLNS_NS: &[u8] = b"http://www.w3.org/2000/xmlns/";

/// Where some bytes are: start and end offsets.
type Span = (usize, usize);

/// An open element: where its name is, and the default namespace in scope inside it (`None`
/// when none is declared; an empty span when `xmlns=""` undeclared it).
type Open = (Span, Option<Span>);

/// A start tag's end: where it ends, its own `xmlns="…"` value, whether it is empty (`/>`).
type TagEnd = (usize, Option<Span>, bool);

/// The element that starts at byte `base` of `full` (a `<`), nested in `outer_depth` elements,
/// when it is plain and within `limits`; `None` leaves it to the reader.
pub(super) fn element(
    full: &str,
    base: usize,
    outer_depth: usize,
    limits: &Limits,
) -> Option<Element> {
    let b = full.as_bytes();
    let mut open: SmallVec<[Open; 8]> = SmallVec::new();
    let mut root: Option<(QName, bool)> = None;
    let mut reserved_inside = false;
    let mut i = base;
    loop {
        if b.get(i) != Some(&b'<') {
            return None;
        }
        i += 1;
        if b.get(i) == Some(&b'/') {
            let ((start, end), _) = open.pop()?;
            i += 1;
            if !b[i..].starts_with(&b[start..end]) {
                return None;
            }
            i = skip_space(b, i + (end - start));
            if b.get(i) != Some(&b'>') {
                return None;
            }
            i += 1;
            if open.is_empty() {
                return finish(root, i, reserved_inside);
            }
        } else {
            let start = i;
            i = name_end(b, i)?;
            let name = (start, i);
            let (after, declared, empty) = attributes(b, i, limits)?;
            i = after;
            if outer_depth + open.len() + 1 > limits.max_depth {
                return None;
            }
            let scope = declared.or_else(|| open.last().and_then(|o| o.1));
            let namespace = scope.map_or("", |(s, e)| &full[s..e]);
            if open.is_empty() {
                let qname = QName::recent(namespace, &full[name.0..name.1]);
                root = Some((qname, declared.is_some()));
            } else {
                reserved_inside |= is_reserved_namespace(namespace);
            }
            if !empty {
                open.push((name, scope));
            } else if open.is_empty() {
                return finish(root, i, reserved_inside);
            }
        }
        // Text up to the next tag.
        let text_len = b[i..].iter().position(|&c| c == b'<')?;
        let text = &b[i..i + text_len];
        if text.contains(&b'&') || has_cdata_end(text) {
            return None;
        }
        i += text_len;
    }
}

/// The root element, ended at `end`.
fn finish(root: Option<(QName, bool)>, end: usize, reserved_inside: bool) -> Option<Element> {
    let (qname, declares_default_ns) = root?;
    Some(Element {
        qname,
        end,
        declares_default_ns,
        reserved_inside,
    })
}

/// The attributes of a start tag whose name ends at `i`: where the tag ends, the span of its
/// `xmlns="…"` value if it has one, and whether it is empty (`/>`).
fn attributes(b: &[u8], mut i: usize, limits: &Limits) -> Option<TagEnd> {
    let mut declared = None;
    let mut keys: SmallVec<[Span; 8]> = SmallVec::new();
    loop {
        let j = skip_space(b, i);
        match b.get(j)? {
            b'>' => return Some((j + 1, declared, false)),
            b'/' if b.get(j + 1) == Some(&b'>') => return Some((j + 2, declared, true)),
            _ if j == i => return None,
            _ => {}
        }
        let key_end = name_end(b, j)?;
        if !b[key_end..].starts_with(b"=\"") {
            return None;
        }
        let value_start = key_end + 2;
        let value_end = value_start + b[value_start..].iter().position(|&c| c == b'"')?;
        let value = &b[value_start..value_end];
        let plain = |&c: &u8| !matches!(c, b'<' | b'>' | b'&') && c >= b' ';
        if !value.iter().all(plain) {
            return None;
        }
        let key = &b[j..key_end];
        if key.starts_with(b"xml") {
            if key != b"xmlns" || value == XML_NS || value == XMLNS_NS {
                return None;
            }
            declared = Some((value_start, value_end));
        }
        if keys.iter().any(|&(s, e)| &b[s..e] == key) {
            return None;
        }
        keys.push((j, key_end));
        if keys.len() > limits.max_attributes {
            return None;
        }
        i = value_end + 1;
    }
}

/// The end of the plain name that starts at `i`: a letter or `_`, then letters, digits, `_`,
/// `-`, `.`; `None` unless it is followed by whitespace, `=`, `/` or `>`.
fn name_end(b: &[u8], i: usize) -> Option<usize> {
    let first = *b.get(i)?;
    if !(first.is_ascii_alphabetic() || first == b'_') {
        return None;
    }
    let len = b[i..]
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')))?;
    let end = i + len;
    matches!(b[end], b' ' | b'\t' | b'\n' | b'\r' | b'=' | b'/' | b'>').then_some(end)
}

fn skip_space(b: &[u8], i: usize) -> usize {
    i + b[i..]
        .iter()
        .position(|&c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        .unwrap_or(b.len() - i)
}

fn has_cdata_end(text: &[u8]) -> bool {
    text.windows(3).any(|w| w == b"]]>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::scan::read_element;

    /// Forms the walk should take, and some near them it must not.
    const FORMS: [&str; 18] = [
        r#"<ping xmlns="urn:bench:echo:v1"/>"#,
        r#"<ping xmlns="urn:bench:echo:v1">hello</ping>"#,
        r#"<go xmlns="urn:x:v1" a="1" b="two words" c=""><n>5</n><m k="v"/></go>"#,
        "<a xmlns=\"urn:a\">\n  <b>text with > and ünïcode ✓</b>\n  <c\n    d=\"1\"\t/>\n</a >",
        r#"<a xmlns="urn:a"><b xmlns=""><c/></b><d xmlns="urn:d">x</d></a>"#,
        r#"<a xmlns="urn:a"><s xmlns="urn:agentpump:system:v1"/></a>"#,
        r#"<bare attr="1"><inner/></bare>"#,
        r#"<a.b-c_d xmlns="urn:a"><e.f/></a.b-c_d>"#,
        r#"<a xmlns="urn:a"><b/><b/><b><b/></b></a>"#,
        r#"<a xmlns="urn:a">x]]>y</a>"#,
        r#"<a xmlns="urn:a">&amp;</a>"#,
        r#"<p:a xmlns:p="urn:p"/>"#,
        r#"<a xmlns="urn:a"><!-- c --></a>"#,
        r#"<a xmlns="urn:a" a='1'/>"#,
        r#"<a xmlns="urn:a" a="1" a="2"/>"#,
        r#"<a xmlns="http://www.w3.org/XML/1998/namespace"/>"#,
        r#"<a xml:lang="en"/>"#,
        r#"<a><b></c></a>"#,
    ];

    /// Whatever the walk takes from `text` at `base` is what the reader makes of it; returns
    /// whether the walk took it.
    fn agree(text: &str, base: usize, outer: usize, limits: &Limits) -> bool {
        let Some(plain) = element(text, base, outer, limits) else {
            return false;
        };
        match read_element(text, base, outer, limits) {
            Ok(read) => assert_eq!(plain, read, "{text:?} at {base}"),
            Err(e) => panic!("the reader refuses what the walk took: {text:?} at {base}: {e}"),
        }
        true
    }

    fn limits_to_try() -> [Limits; 3] {
        let tight = Limits {
            max_depth: 2,
            max_attributes: 1,
            ..Limits::default()
        };
        let three = Limits {
            max_depth: 3,
            max_attributes: 3,
            ..Limits::default()
        };
        [Limits::default(), tight, three]
    }

    /// Every form and every one-character change of it (inserted, replaced, removed, at every
    /// place), under three sets of limits, at the start and nested after other text.
    #[test]
    fn what_the_walk_takes_the_reader_reads_the_same() {
        let marks = [
            '<', '>', '"', '\'', '&', ' ', '\n', '=', '/', ':', ']', '!', '?', '\u{1}', 'x',
        ];
        let (mut tried, mut taken) = (0usize, 0usize);
        for form in FORMS {
            let places: Vec<usize> = (0..=form.len())
                .filter(|&i| form.is_char_boundary(i))
                .collect();
            let mut texts = vec![form.to_owned()];
            for (n, &i) in places.iter().enumerate() {
                texts.extend(
                    marks
                        .iter()
                        .map(|m| format!("{}{m}{}", &form[..i], &form[i..])),
                );
                if let Some(&j) = places.get(n + 1) {
                    texts.push(format!("{}{}", &form[..i], &form[j..]));
                    texts.extend(
                        marks
                            .iter()
                            .map(|m| format!("{}{m}{}", &form[..i], &form[j..])),
                    );
                }
            }
            for text in texts {
                if !text.starts_with('<') {
                    continue;
                }
                for limits in limits_to_try() {
                    tried += 1;
                    taken += usize::from(agree(&text, 0, 0, &limits));
                    let nested = format!("<outer>{text}");
                    agree(&nested, 7, 1, &limits);
                }
            }
        }
        assert!(
            tried > 20_000 && taken > 2_000,
            "{tried} tried, {taken} taken"
        );
    }

    /// The common forms take the walk; the others are left to the reader.
    #[test]
    fn plain_forms_take_the_walk_and_others_do_not() {
        let limits = Limits::default();
        for (i, form) in FORMS.iter().enumerate() {
            assert_eq!(agree(form, 0, 0, &limits), i < 9, "{form}");
        }
    }

    /// Every element of the schema examples and of the fuzz corpus, at every start tag.
    #[test]
    fn the_corpora_agree_at_every_element() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut taken = 0usize;
        for dir in ["schemas/examples", "fuzz/corpus/envelope"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let Ok(text) = std::fs::read_to_string(entry.unwrap().path()) else {
                    continue;
                };
                for (base, _) in text.match_indices('<') {
                    for limits in limits_to_try() {
                        taken += usize::from(agree(&text, base, 0, &limits));
                    }
                }
            }
        }
        assert!(taken > 100, "{taken}");
    }
}

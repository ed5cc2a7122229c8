//! The checked element scanner shared by payload and envelope parsing: one pass of quick-xml's
//! reader, with namespace scopes kept in a resolver reused per OS thread, that enforces the
//! [`Limits`], refuses DTDs and undeclared entities, and resolves the root's [`QName`] with only
//! the element's own namespace declarations in scope, so a payload means the same inside an
//! envelope and on its own.

use std::cell::RefCell;
use std::collections::HashSet;

use quick_xml::errors::Error as XmlError;
use quick_xml::escape::EscapeError;
use quick_xml::events::attributes::AttrError;
use quick_xml::events::{BytesRef, BytesStart, Event};
use quick_xml::name::{NamespaceError, NamespaceResolver, ResolveResult};
use quick_xml::{Reader, XmlVersion};
use smallvec::SmallVec;

use super::is_reserved_namespace;
use super::{EnvelopeError, Limits, Position, QName};

/// The five entities XML predefines; every other named entity is refused.
/// The five entities XML predefines, and the characters they stand for.
const PREDEFINED_ENTITIES: [(&str, char); 5] = [
    ("lt", '<'),
    ("gt", '>'),
    ("amp", '&'),
    ("apos", '\''),
    ("quot", '"'),
];

/// One complete element found by [`element`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Element {
    /// The root's namespace-resolved name.
    pub qname: QName,
    /// Offset just past the element's last byte, relative to the scanned text.
    pub end: usize,
    /// Whether the root declares a default namespace (`xmlns="…"`) itself.
    pub declares_default_ns: bool,
    /// Whether an element below the root is in a namespace only the pump may emit.
    pub reserved_inside: bool,
}

/// Checks that `text` contains no character XML forbids (NUL and other C0 controls).
pub(crate) fn check_chars(text: &str) -> Result<(), EnvelopeError> {
    let bad = text.bytes().position(|b| is_forbidden(char::from(b)));
    match bad {
        None => Ok(()),
        Some(offset) => Err(EnvelopeError::ForbiddenChar {
            code: u32::from(text.as_bytes()[offset]),
            at: Position::locate(text, offset),
        }),
    }
}

/// Scans exactly one element that starts at byte `base` of `full` (which must be `<`).
/// `outer_depth` is how many elements enclose it, counted against [`Limits::max_depth`].
/// [`Element::end`] and error positions are absolute offsets in `full`.
pub(crate) fn element(
    full: &str,
    base: usize,
    outer_depth: usize,
    limits: &Limits,
) -> Result<Element, EnvelopeError> {
    match super::plain::element(full, base, outer_depth, limits) {
        Some(plain) => Ok(plain),
        None => read_element(full, base, outer_depth, limits),
    }
}

/// [`element`] by the XML reader, for every form.
pub(super) fn read_element(
    full: &str,
    base: usize,
    outer_depth: usize,
    limits: &Limits,
) -> Result<Element, EnvelopeError> {
    let fresh = || {
        scan(
            &mut NamespaceResolver::default(),
            full,
            base,
            outer_depth,
            limits,
        )
    };
    let reused = RESOLVER.try_with(|cell| {
        let Ok(mut resolver) = cell.try_borrow_mut() else {
            return fresh();
        };
        resolver.set_level(0);
        let scanned = scan(&mut resolver, full, base, outer_depth, limits);
        // A huge element may have left huge bindings behind: not kept for the next scan.
        if full.len() - base > RETAINED_SCAN_BYTES {
            *resolver = NamespaceResolver::default();
        }
        scanned
    });
    // Only while this OS thread is being torn down is there no resolver to reuse.
    reused.unwrap_or_else(|_| fresh())
}

/// Texts longer than this do not leave their namespace bindings' memory behind in [`RESOLVER`].
const RETAINED_SCAN_BYTES: usize = 64 * 1024;

thread_local! {
    /// The namespace bindings in scope during a scan, kept from one scan to the next on the same
    /// OS thread: a scan then allocates no binding stack of its own.
    static RESOLVER: RefCell<NamespaceResolver> = RefCell::new(NamespaceResolver::default());
}

/// [`element`] with a resolver that holds only the predefined bindings.
fn scan(
    resolver: &mut NamespaceResolver,
    full: &str,
    base: usize,
    outer_depth: usize,
    limits: &Limits,
) -> Result<Element, EnvelopeError> {
    let at = |offset: u64| Position::locate(full, base + offset as usize);
    let mut reader = Reader::from_str(&full[base..]);
    reader.config_mut().check_comments = true;
    let mut depth = 0usize;
    let mut root: Option<(QName, bool)> = None;
    let mut reserved_inside = false;
    // The scope of an empty element or of an end tag ends after the event is handled.
    let mut pending_pop = false;
    loop {
        if std::mem::take(&mut pending_pop) {
            resolver.pop();
        }
        // Positions are computed only for errors: locating one rescans the text.
        let offset = reader.buffer_position();
        let start = || at(offset);
        let event = match reader.read_event() {
            Ok(event) => event,
            Err(err) => return Err(malformed(&err, at(reader.error_position()))),
        };
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                resolver
                    .push(e)
                    .map_err(|err| malformed(&XmlError::Namespace(err), start()))?;
                pending_pop = empty;
                // Only the root's name is kept; below it, only whether it is reserved.
                let (reserved, root_name) = match resolver.resolve_element(e.name()).0 {
                    ResolveResult::Bound(ns) => (
                        is_reserved_namespace(ns.0),
                        (depth == 0).then(|| QName::recent(ns.0, e.local_name().as_ref())),
                    ),
                    ResolveResult::Unbound => (
                        false,
                        (depth == 0).then(|| QName::recent("", e.local_name().as_ref())),
                    ),
                    ResolveResult::Unknown(prefix) => {
                        let element = e.name().0.to_owned();
                        return Err(unknown_prefix(prefix, element, start()));
                    }
                };
                if outer_depth + depth + 1 > limits.max_depth {
                    let element = e.name().0.to_owned();
                    let limit = limits.max_depth;
                    return Err(EnvelopeError::TooDeep {
                        element,
                        limit,
                        at: start(),
                    });
                }
                let declares = check_attributes(e, resolver, limits, &start)?;
                if let Some(name) = root_name {
                    root = Some((name, declares));
                } else if reserved {
                    reserved_inside = true;
                }
                if empty && depth == 0 {
                    return Ok(finish(
                        root,
                        base + reader.buffer_position() as usize,
                        reserved_inside,
                    ));
                }
                if !empty {
                    depth += 1;
                }
            }
            Event::End(_) => {
                pending_pop = true;
                depth -= 1;
                if depth == 0 {
                    let end = base + reader.buffer_position() as usize;
                    return Ok(finish(root, end, reserved_inside));
                }
            }
            Event::GeneralRef(ref r) => {
                resolve_reference(r, &start)?;
            }
            Event::DocType(_) => return Err(EnvelopeError::Doctype { at: start() }),
            Event::Decl(_) => {
                let message = "XML declaration inside a message".to_owned();
                return Err(EnvelopeError::Malformed {
                    message,
                    at: start(),
                });
            }
            Event::Eof => {
                let message = match &root {
                    Some((name, _)) => format!("unclosed element <{}>", name.local()),
                    None => "expected an element".to_owned(),
                };
                return Err(EnvelopeError::Malformed {
                    message,
                    at: start(),
                });
            }
            Event::Text(_) | Event::CData(_) | Event::Comment(_) | Event::PI(_) if depth == 0 => {
                let message = "expected an element".to_owned();
                return Err(EnvelopeError::Malformed {
                    message,
                    at: start(),
                });
            }
            Event::Text(_) | Event::CData(_) | Event::Comment(_) | Event::PI(_) => {}
        }
    }
}

fn finish(root: Option<(QName, bool)>, end: usize, reserved_inside: bool) -> Element {
    let (qname, declares_default_ns) = root.expect("an element was read before its end");
    Element {
        qname,
        end,
        declares_default_ns,
        reserved_inside,
    }
}

/// Counts attributes, checks their values' entities and prefixes; reports `xmlns="…"` on the way.
fn check_attributes(
    e: &BytesStart<'_>,
    resolver: &NamespaceResolver,
    limits: &Limits,
    at: &dyn Fn() -> Position,
) -> Result<bool, EnvelopeError> {
    let mut count = 0usize;
    let mut declares_default_ns = false;
    let mut keys = Keys::default();
    for attr in e.attributes().with_checks(false) {
        let attr = attr.map_err(|err| malformed(&XmlError::InvalidAttr(err), at()))?;
        keys.insert(e, attr.key.0)
            .map_err(|err| malformed(&XmlError::InvalidAttr(err), at()))?;
        count += 1;
        if count > limits.max_attributes {
            let element = e.name().0.to_owned();
            let limit = limits.max_attributes;
            return Err(EnvelopeError::TooManyAttributes {
                element,
                limit,
                at: at(),
            });
        }
        let key = attr.key.0;
        if attr.value.contains('<') {
            let message = format!("`<` in the value of attribute `{key}`");
            return Err(EnvelopeError::Malformed { message, at: at() });
        }
        declares_default_ns |= key == "xmlns";
        if !key.starts_with("xmlns")
            && let ResolveResult::Unknown(prefix) = resolver.resolve_attribute(attr.key).0
        {
            return Err(unknown_prefix(prefix, key.to_owned(), at()));
        }
        let value = attr
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|err| match err {
                XmlError::Escape(EscapeError::UnrecognizedEntity(_, name)) => {
                    EnvelopeError::UnknownEntity { name, at: at() }
                }
                other => malformed(&other, at()),
            })?;
        if let Some(c) = value.chars().find(|&c| is_forbidden(c)) {
            let message = format!(
                "attribute `{key}` refers to U+{:04X}, which XML forbids",
                c as u32
            );
            return Err(EnvelopeError::Malformed { message, at: at() });
        }
        // quick-xml binds namespaces to the raw value; a reference would make the pump see
        // another namespace than every other XML reader does.
        if (key == "xmlns" || key.starts_with("xmlns:")) && value != attr.value {
            let message = format!(
                "the namespace URI of `{key}` must be written literally, without references"
            );
            return Err(EnvelopeError::Malformed { message, at: at() });
        }
    }
    Ok(declares_default_ns)
}

/// The attribute names of one start tag seen so far, to refuse a repeated one without an
/// allocation for the usual few: names are compared one by one until there are
/// [`Keys::LINEAR`] of them, then looked up in a set.
#[derive(Default)]
struct Keys<'a> {
    names: SmallVec<[&'a str; Keys::LINEAR]>,
    set: Option<HashSet<&'a str>>,
}

impl<'a> Keys<'a> {
    const LINEAR: usize = 16;

    /// Adds the attribute name `key` of tag `e`; fails as quick-xml does when it was there
    /// already (positions relative to the tag).
    fn insert(&mut self, e: &'a BytesStart<'_>, key: &'a str) -> Result<(), AttrError> {
        let position = |name: &str| name.as_ptr() as usize - e.as_ptr() as usize;
        let seen = match &mut self.set {
            Some(set) => !set.insert(key),
            None => self.names.contains(&key),
        };
        if seen {
            let previous = self.names.iter().find(|n| **n == key).copied();
            let previous = previous.map_or(0, position);
            return Err(AttrError::Duplicated(position(key), previous));
        }
        self.names.push(key);
        if self.set.is_none() && self.names.len() > Self::LINEAR {
            self.set = Some(self.names.iter().copied().collect());
        }
        Ok(())
    }
}

/// The character a reference stands for: a character reference to a character XML permits,
/// or one of the five predefined entities; anything else is refused.
pub(crate) fn resolve_reference(
    r: &BytesRef<'_>,
    at: &dyn Fn() -> Position,
) -> Result<char, EnvelopeError> {
    if r.is_char_ref() {
        return match r.resolve_char_ref() {
            Ok(Some(c)) if !is_forbidden(c) => Ok(c),
            Ok(Some(_)) | Ok(None) | Err(_) => Err(EnvelopeError::Malformed {
                message: format!("invalid character reference `&{};`", &**r),
                at: at(),
            }),
        };
    }
    PREDEFINED_ENTITIES
        .iter()
        .find(|(name, _)| *name == &**r)
        .map(|(_, c)| *c)
        .ok_or_else(|| EnvelopeError::UnknownEntity {
            name: r.to_string(),
            at: at(),
        })
}

/// C0 control characters other than tab, line feed and carriage return.
fn is_forbidden(c: char) -> bool {
    c < ' ' && !matches!(c, '\t' | '\n' | '\r')
}

fn unknown_prefix(prefix: String, element: String, at: Position) -> EnvelopeError {
    EnvelopeError::UnknownPrefix {
        prefix,
        element,
        at,
    }
}

/// The error for what the parser refused at `at`. Its limit on namespace bindings in scope is
/// a limit like ours, not malformed XML.
pub(crate) fn malformed(err: &XmlError, at: Position) -> EnvelopeError {
    if let XmlError::Namespace(NamespaceError::TooManyBindings(limit)) = err {
        let limit = *limit;
        return EnvelopeError::TooManyNamespaces { limit, at };
    }
    EnvelopeError::Malformed {
        message: err.to_string(),
        at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_text(text: &str) -> Result<Element, EnvelopeError> {
        element(text, 0, 0, &Limits::default())
    }

    #[test]
    fn bindings_of_one_scan_are_gone_in_the_next() {
        let declared = scan_text("<p:a xmlns:p='urn:p'><p:b/></p:a>").unwrap();
        assert_eq!(declared.qname, QName::new("urn:p", "a"));
        // The same prefix, undeclared: refused, whether the scan before it ended well or not.
        let undeclared = scan_text("<p:a/>").unwrap_err();
        assert!(
            matches!(undeclared, EnvelopeError::UnknownPrefix { ref prefix, .. } if prefix == "p")
        );
        scan_text("<q:a xmlns:q='urn:q'><q:b>").unwrap_err();
        let after_error = scan_text("<a><q:b/></a>").unwrap_err();
        assert!(
            matches!(after_error, EnvelopeError::UnknownPrefix { ref prefix, .. } if prefix == "q")
        );
        // A default namespace does not outlive its scan either.
        scan_text("<a xmlns='urn:d'/>").unwrap();
        assert_eq!(scan_text("<a/>").unwrap().qname, QName::new("", "a"));
    }

    #[test]
    fn a_repeated_attribute_is_refused_among_few_and_among_many() {
        let few = scan_text("<a x='1' y='2' x='3'/>").unwrap_err().to_string();
        assert!(few.contains("duplicated attribute"), "{few}");
        let many: String = (0..40).map(|i| format!(" k{i}='v'")).collect();
        let ok = scan_text(&format!("<a{many}/>")).unwrap();
        assert_eq!(ok.qname, QName::new("", "a"));
        let repeated = scan_text(&format!("<a{many} k7='again'/>"))
            .unwrap_err()
            .to_string();
        assert!(repeated.contains("duplicated attribute"), "{repeated}");
        // Positions are those quick-xml reports: the repeated name, then the first one.
        assert!(
            few.contains("position 14") && few.contains("position 2"),
            "{few}"
        );
    }

    #[test]
    fn a_namespace_error_points_at_its_tag() {
        let err = scan_text("<a>\n  <b xmlns:xml='urn:x'/></a>").unwrap_err();
        let EnvelopeError::Malformed { at, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!((at.line, at.column), (2, 3));
    }

    #[test]
    fn a_mismatched_end_tag_is_named() {
        let err = scan_text("<a><b></c></a>").unwrap_err().to_string();
        assert!(
            err.contains("expected `</b>`, but `</c>` was found"),
            "{err}"
        );
    }
}

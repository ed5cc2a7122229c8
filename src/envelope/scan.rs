//! The checked element scanner shared by payload and envelope parsing: one pass of quick-xml's
//! namespace-aware reader that enforces the [`Limits`], refuses DTDs and undeclared entities,
//! and resolves the root's [`QName`] with only the element's own namespace declarations in scope,
//! so a payload means the same inside an envelope and on its own.

use quick_xml::NsReader;
use quick_xml::XmlVersion;
use quick_xml::errors::Error as XmlError;
use quick_xml::escape::EscapeError;
use quick_xml::events::{BytesRef, BytesStart, Event};
use quick_xml::name::{NamespaceError, ResolveResult};

use super::{EnvelopeError, Limits, Position, QName};
use crate::system::is_reserved_namespace;

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
#[derive(Debug)]
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
    let at = |offset: u64| Position::locate(full, base + offset as usize);
    let mut reader = NsReader::from_str(&full[base..]);
    reader.config_mut().check_comments = true;
    let mut depth = 0usize;
    let mut root: Option<(QName, bool)> = None;
    let mut reserved_inside = false;
    loop {
        // Positions are computed only for errors: locating one rescans the text.
        let offset = reader.buffer_position();
        let start = || at(offset);
        let (resolved, event) = match reader.read_resolved_event() {
            Ok(pair) => pair,
            Err(err) => return Err(malformed(&err, at(reader.error_position()))),
        };
        // Only the root's namespace is kept (owned); below it, only whether it is reserved.
        let (reserved, root_namespace) = match resolved {
            ResolveResult::Bound(ns) => (
                is_reserved_namespace(ns.0),
                (depth == 0).then(|| ns.0.to_owned()),
            ),
            ResolveResult::Unbound => (false, (depth == 0).then(String::new)),
            ResolveResult::Unknown(prefix) => {
                let element = event_name(&event);
                return Err(unknown_prefix(prefix, element, start()));
            }
        };
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                if outer_depth + depth + 1 > limits.max_depth {
                    let element = e.name().0.to_owned();
                    let limit = limits.max_depth;
                    return Err(EnvelopeError::TooDeep {
                        element,
                        limit,
                        at: start(),
                    });
                }
                let declares = check_attributes(e, &reader, limits, &start)?;
                if depth == 0 {
                    let local = e.local_name();
                    let local = local.as_ref();
                    root = Some((
                        QName::new(root_namespace.unwrap_or_default(), local),
                        declares,
                    ));
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
    reader: &NsReader<&[u8]>,
    limits: &Limits,
    at: &dyn Fn() -> Position,
) -> Result<bool, EnvelopeError> {
    let mut count = 0usize;
    let mut declares_default_ns = false;
    for attr in e.attributes() {
        let attr = attr.map_err(|err| malformed(&XmlError::InvalidAttr(err), at()))?;
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
        if !key.starts_with("xmlns") {
            if let ResolveResult::Unknown(prefix) = reader.resolver().resolve_attribute(attr.key).0
            {
                return Err(unknown_prefix(prefix, key.to_owned(), at()));
            }
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

fn event_name(event: &Event<'_>) -> String {
    match event {
        Event::Start(e) | Event::Empty(e) => e.name().0.to_owned(),
        Event::End(e) => e.name().0.to_owned(),
        _ => String::new(),
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

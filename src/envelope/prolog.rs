//! The prolog before a bare payload: an XML declaration (UTF-8 or no encoding), then whitespace
//! and comments — what XML libraries write by default. An envelope's prolog is read by the
//! envelope parser itself; both check a declaration's encoding here.

use quick_xml::Reader;
use quick_xml::events::{BytesDecl, Event};

use super::{EnvelopeError, Position, scan};

/// The offset of the payload element in `text`, past the prolog that starts at `start`.
///
/// # Errors
///
/// A declaration that names an encoding other than UTF-8, a second declaration, a comment or
/// declaration that is not well-formed, text before the element.
pub(crate) fn skip(text: &str, start: usize) -> Result<usize, EnvelopeError> {
    let rest = &text[start..];
    // Most payloads have no prolog: nothing to read.
    if !rest.starts_with("<?") && !rest.starts_with("<!--") {
        return Ok(start);
    }
    let mut reader = Reader::from_str(rest);
    let mut first = true;
    loop {
        let offset = start + reader.buffer_position() as usize;
        let at = || Position::locate(text, offset);
        let event = reader.read_event().map_err(|err| {
            let pos = start + reader.error_position() as usize;
            scan::malformed(&err, Position::locate(text, pos))
        })?;
        match event {
            Event::Decl(ref decl) if first => check_encoding(decl, at)?,
            Event::Decl(_) => {
                let message = "XML declaration after the start of the document".to_owned();
                return Err(EnvelopeError::Malformed { message, at: at() });
            }
            Event::Comment(_) => {}
            Event::Text(ref t) if t.trim().is_empty() => {}
            _ => return Ok(offset),
        }
        first = false;
    }
}

/// Fails when `decl` names an encoding other than UTF-8 (no encoding means UTF-8).
pub(crate) fn check_encoding(
    decl: &BytesDecl<'_>,
    at: impl FnOnce() -> Position,
) -> Result<(), EnvelopeError> {
    let found = match decl.encoding() {
        None => return Ok(()),
        Some(Ok(name)) if name.eq_ignore_ascii_case("UTF-8") => return Ok(()),
        Some(Ok(name)) => name.into_owned(),
        Some(Err(err)) => {
            let message = format!("XML declaration: {err}");
            return Err(EnvelopeError::Malformed { message, at: at() });
        }
    };
    Err(EnvelopeError::Encoding { found, at: at() })
}

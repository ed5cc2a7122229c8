//! `agentpump check`: parse files the way the pump parses input and say what they are.

use std::io::{Read as _, Write};
use std::path::Path;

use crate::host::HostError;
use crate::{EnvelopeError, Incoming, Limits, Payload};

/// Checks each file (an envelope in either dialect, or a bare payload) and writes one line per
/// file to `out`.
///
/// # Errors
///
/// A one-line message naming the first file that cannot be read or parsed, and why.
pub fn run(files: &[impl AsRef<Path>], out: &mut impl Write) -> Result<(), HostError> {
    let limits = Limits::default();
    for file in files {
        let file = file.as_ref();
        let bytes = read(file).map_err(|e| HostError::io(file, e))?;
        let line = describe(&bytes, &limits).map_err(|source| HostError::Envelope {
            path: file.to_path_buf(),
            source,
        })?;
        writeln!(out, "{}: {line}", file.display()).map_err(HostError::System)?;
    }
    Ok(())
}

fn read(file: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if file == Path::new("-") {
        std::io::stdin().read_to_end(&mut bytes)?;
    } else {
        bytes = std::fs::read(file)?;
    }
    Ok(bytes)
}

/// One line about a valid envelope or payload, or the parser's error.
fn describe(bytes: &[u8], limits: &Limits) -> Result<String, EnvelopeError> {
    match Incoming::parse(bytes, limits) {
        Ok(msg) => Ok(format!(
            "{:?} envelope, to {}, thread {}, payload {} ({} bytes)",
            msg.dialect(),
            msg.to().unwrap_or("(by root)"),
            msg.thread().unwrap_or("(new)"),
            msg.payload().qname(),
            msg.payload().as_str().len()
        )),
        Err(EnvelopeError::NotAnEnvelope { .. }) => {
            let text = std::str::from_utf8(bytes).map_err(|e| EnvelopeError::InvalidUtf8 {
                offset: e.valid_up_to(),
            })?;
            let payload = Payload::parse(text, limits)?;
            Ok(format!(
                "payload {} ({} bytes)",
                payload.qname(),
                payload.as_str().len()
            ))
        }
        Err(e) => Err(e),
    }
}

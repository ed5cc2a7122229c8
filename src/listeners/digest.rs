//! [`Digest`]: a fixed amount of CPU per delivery — a CPU-heavy tool for measuring how remote
//! workers scale.

use async_trait::async_trait;
use sha2::{Digest as _, Sha256};

use crate::{Context, Delivery, Listener, ListenerError};

/// The namespace of [`Digest`]'s answer.
pub const DIGEST_NS: &str = "urn:agentpump:digest:v1";

/// The most rounds [`Digest`] computes, whatever the payload asks (about a few seconds of CPU).
pub const DIGEST_MAX_ROUNDS: u64 = 10_000_000;

/// Hashes its payload with SHA-256, then the hash again, as many times as the payload's
/// `rounds` attribute says (at most [`DIGEST_MAX_ROUNDS`]; 1 when absent), on a blocking thread,
/// and replies `<digest xmlns="urn:agentpump:digest:v1" rounds="N">HEX</digest>`. The work is
/// the same for the same `rounds` whatever the payload's size, so a delivery costs a fixed
/// amount of CPU. System notices are ignored.
#[derive(Debug, Clone, Copy, Default)]
pub struct Digest;

#[async_trait]
impl Listener for Digest {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let text = msg.payload().as_str().to_owned();
        let rounds = attribute(&text, "rounds")
            .unwrap_or(1)
            .clamp(1, DIGEST_MAX_ROUNDS);
        let hex = tokio::task::spawn_blocking(move || {
            let mut hash = Sha256::digest(text.as_bytes());
            for _ in 1..rounds {
                hash = Sha256::digest(hash);
            }
            hex::encode(hash)
        })
        .await
        .map_err(|e| ListenerError::Failed(format!("the digest did not finish: {e}")))?;
        cx.reply(format!(
            "<digest xmlns=\"{DIGEST_NS}\" rounds=\"{rounds}\">{hex}</digest>"
        ));
        Ok(())
    }
}

/// The number in `name="…"` of `text`, if there is one.
fn attribute(text: &str, name: &str) -> Option<u64> {
    let (_, rest) = text.split_once(&format!("{name}="))?;
    let rest = rest.trim_start_matches(['"', '\'']);
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_read_from_the_attribute() {
        let cases = [
            (r#"<a rounds="250"/>"#, Some(250)),
            ("<a rounds='7'>x</a>", Some(7)),
            ("<a>rounds</a>", None),
            (r#"<a rounds="many"/>"#, None),
        ];
        for (text, rounds) in cases {
            assert_eq!(attribute(text, "rounds"), rounds, "{text}");
        }
    }
}

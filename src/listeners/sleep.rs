//! [`Sleep`]: waits, then answers with the payload — a slow tool for trying timeouts and
//! remote workers.

use std::time::Duration;

use async_trait::async_trait;

use crate::{Context, Delivery, Listener, ListenerError};

/// The longest [`Sleep`] waits, whatever the payload asks.
pub const SLEEP_MAX: Duration = Duration::from_secs(60);

/// Waits the number of milliseconds its payload's `ms` attribute gives (at most [`SLEEP_MAX`];
/// 0 when absent), then replies with the payload, byte for byte. System notices are ignored.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sleep;

#[async_trait]
impl Listener for Sleep {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let text = msg.payload().as_str();
        let ms = text
            .split_once("ms=")
            .and_then(|(_, rest)| {
                let rest = rest.trim_start_matches(['"', '\'']);
                let end = rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
                rest[..end].parse::<u64>().ok()
            })
            .unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms).min(SLEEP_MAX)).await;
        cx.reply(text);
        Ok(())
    }
}

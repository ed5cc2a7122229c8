//! [`Echo`]: answers every payload with itself.

use async_trait::async_trait;

use crate::{Context, Delivery, Listener, ListenerError};

/// Replies to the sender with the payload it received, byte for byte. System notices are ignored.
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

#[async_trait]
impl Listener for Echo {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if !msg.is_system() {
            cx.reply(msg.payload().as_str());
        }
        Ok(())
    }
}

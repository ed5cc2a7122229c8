//! `scripted-ping` / `scripted-pong`: two agents that answer each other with the same message —
//! stuck, and stopped as no-progress.

use async_trait::async_trait;

use super::DEMO_NS;
use crate::{Context, Delivery, Listener, ListenerError};

/// Sends `<ball/>` to its partner whenever it gets one.
#[derive(Debug, Clone)]
pub struct ScriptedPingPong {
    partner: &'static str,
}

impl ScriptedPingPong {
    /// A player that returns the ball to `partner`.
    pub fn new(partner: &'static str) -> Self {
        Self { partner }
    }
}

#[async_trait]
impl Listener for ScriptedPingPong {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if !msg.is_system() {
            cx.send(self.partner, format!(r#"<ball xmlns="{DEMO_NS}"/>"#));
        }
        Ok(())
    }
}

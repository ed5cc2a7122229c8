//! `scripted-runaway`: an agent that never decides it is done — the governor stops it.

use async_trait::async_trait;

use super::{DEMO_NS, text};
use crate::governor::{Budget, CertificateType, Goal};
use crate::{Context, Delivery, Listener, ListenerError};

/// On `<ruminate>`: declares a goal that allows 12 turns, then keeps thinking a new thought by
/// messaging itself, forever.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedRunaway;

#[async_trait]
impl Listener for ScriptedRunaway {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let n: u64 = text(msg).parse().unwrap_or(0);
        if n == 0 {
            cx.goal(&Goal {
                text: "think it over".into(),
                // It would stop on a residual below r-p; it never reports one.
                certificates: vec![CertificateType::Converged],
                budget: Budget {
                    turns: Some(12),
                    ..Budget::default()
                },
                ..Goal::default()
            });
        }
        cx.emit(format!(
            r#"<ruminate xmlns="{DEMO_NS}">{}</ruminate>"#,
            n + 1
        ));
        Ok(())
    }
}

//! `scripted-newton`: approaches √N by Newton's method, one tool call and one self-message per
//! iteration, reporting the exact residual |x² − N| to the governor until CONVERGED.

use async_trait::async_trait;
use rust_decimal::Decimal;

use super::{DEMO_NS, attribute, text};
use crate::governor::{CertificateType, Goal};
use crate::listeners::calculator::CALC_NS;
use crate::{Context, Delivery, Listener, ListenerError};

/// See the module documentation. Starts on `<sqrt xmlns="urn:agentpump:demo:v1" of="2"/>`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedNewton;

#[async_trait]
impl Listener for ScriptedNewton {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        match msg.qname().local() {
            "sqrt" => {
                let n = attribute(msg, "of").unwrap_or("2").to_owned();
                cx.goal(&Goal {
                    text: format!("the square root of {n}, to 27 decimal places"),
                    certificates: vec![CertificateType::Converged, CertificateType::Diverged],
                    r_p: Some(Decimal::new(1, 27)),
                    ..Goal::default()
                });
                cx.emit(format!(r#"<guess xmlns="{DEMO_NS}" of="{n}">1</guess>"#));
            }
            "guess" => {
                let (n, x) = (attribute(msg, "of").unwrap_or("2"), text(msg));
                cx.send(
                    "calculator",
                    format!(r#"<calc xmlns="{CALC_NS}">({x} + {n} / {x}) / 2</calc>"#),
                );
            }
            "result" => {
                // The thread is the memory: the last guess says which root we are after.
                let history = cx.history().await.map_err(ListenerError::failed)?;
                let guess = history.iter().rev().find(|r| r.root.local() == "guess");
                let n = guess
                    .and_then(|r| {
                        r.payload
                            .split("of=\"")
                            .nth(1)
                            .and_then(|s| s.split('"').next())
                            .map(str::to_owned)
                    })
                    .ok_or_else(|| ListenerError::failed("no guess in this thread"))?;
                let x: Decimal = text(msg)
                    .parse()
                    .map_err(|_| ListenerError::InvalidPayload(text(msg).to_owned()))?;
                let target: Decimal = n
                    .parse()
                    .map_err(|_| ListenerError::failed(format!("`{n}` is not a number")))?;
                cx.residual((x * x - target).abs().normalize());
                cx.emit(format!(r#"<guess xmlns="{DEMO_NS}" of="{n}">{x}</guess>"#));
            }
            _ => {}
        }
        Ok(())
    }
}

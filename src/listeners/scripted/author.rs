//! `scripted-author` and `scripted-verifier`: a claim certified EXACT only because another
//! listener checked it.

use async_trait::async_trait;

use super::{DEMO_NS, attribute, text};
use crate::governor::{CertificateType, Control, Goal, Signal};
use crate::listeners::calculator::CALC_NS;
use crate::{Context, Delivery, Listener, ListenerError};

/// On `<claim expr="6 * 7" equals="42"/>`: declares a goal whose criterion `checked` only the
/// verifier can meet, asks for the check, and says done when the verdict is in.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedAuthor;

#[async_trait]
impl Listener for ScriptedAuthor {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        match msg.qname().local() {
            "claim" => {
                let (expr, equals) = (
                    attribute(msg, "expr").unwrap_or(""),
                    attribute(msg, "equals").unwrap_or(""),
                );
                cx.goal(&Goal {
                    text: format!("show that {expr} = {equals}"),
                    criteria: vec![(
                        "checked".into(),
                        format!("an independent check computes {expr} = {equals}"),
                    )],
                    certificates: vec![CertificateType::Exact],
                    ..Goal::default()
                });
                cx.send(
                    "scripted-verifier",
                    format!(r#"<check xmlns="{DEMO_NS}" expr="{expr}" equals="{equals}"/>"#),
                );
            }
            "verdict" => {
                let signal = if attribute(msg, "ok") == Some("true") {
                    Control::Done
                } else {
                    Control::Abort
                };
                cx.signal(Signal::new(signal).notes(text(msg)));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Recomputes a claim with the calculator and reports the criterion, with the calculator's
/// answer as evidence.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedVerifier;

#[async_trait]
impl Listener for ScriptedVerifier {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        match msg.qname().local() {
            "check" => {
                let expr = attribute(msg, "expr").unwrap_or("");
                cx.send(
                    "calculator",
                    format!(r#"<calc xmlns="{CALC_NS}">{expr}</calc>"#),
                );
            }
            "result" => {
                let history = cx.history().await.map_err(ListenerError::failed)?;
                let equals = history
                    .iter()
                    .rev()
                    .find(|r| r.root.local() == "check")
                    .and_then(|r| {
                        r.payload
                            .split("equals=\"")
                            .nth(1)?
                            .split('"')
                            .next()
                            .map(str::to_owned)
                    })
                    .unwrap_or_default();
                let ok = text(msg) == equals;
                let evidence = format!("message {}", msg.id());
                cx.criterion("checked", ok, &evidence);
                let verdict = format!("the calculator says {}", text(msg));
                cx.send(
                    "scripted-author",
                    format!(r#"<verdict xmlns="{DEMO_NS}" ok="{ok}">{verdict}</verdict>"#),
                );
            }
            _ => {}
        }
        Ok(())
    }
}

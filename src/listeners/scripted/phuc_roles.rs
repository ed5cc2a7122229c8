//! `scripted-scout`, `scripted-solver` and `scripted-skeptic`: the three roles of the demo's
//! phuc-loop (seed 002 §7.2), approximating √2 by Newton steps. Each reads only its capsule:
//! the iteration number and the artifact links (path and sha256), never another role's prose.

use async_trait::async_trait;
use rust_decimal::Decimal;

use super::attribute;
use crate::listeners::phuc_loop::{LOOP_NS, capsule_of, sha256};
use crate::{Context, Delivery, Listener, ListenerError};

/// The residual below which the demo's criterion `close` is met (the loop's R_p).
const CLOSE: Decimal = Decimal::from_parts(1, 0, 0, false, 4);

/// The iteration a capsule is for.
fn iteration(msg: &Delivery) -> Option<u32> {
    attribute(msg, "iteration")?.parse().ok()
}

/// The Solver's guess after iteration `n`: `n + 1` Newton steps for √2 from 1, to 12 places.
fn guess(n: u32) -> Decimal {
    let two = Decimal::TWO;
    let x = (0..=n).fold(Decimal::ONE, |x, _| (x + two / x) / two);
    x.round_dp(12)
}

/// Where iteration `n`'s guess is written (relative to the loop's workspace).
fn artifact(n: u32) -> String {
    format!("out/sqrt2_iter{n}.txt")
}

/// Plans one Newton step per iteration.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedScout;

#[async_trait]
impl Listener for ScriptedScout {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if let Some(n) = iteration(msg).filter(|_| msg.qname().is(LOOP_NS, "scout")) {
            cx.reply(format!(
                "<plan xmlns=\"{LOOP_NS}\">iteration {n}: one Newton step x ← (x + 2/x) / 2 from the last guess; write it to {}</plan>",
                artifact(n)
            ));
        }
        Ok(())
    }
}

/// Takes the Newton step and hands the guess in as an artifact.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedSolver;

#[async_trait]
impl Listener for ScriptedSolver {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if let Some(n) = iteration(msg).filter(|_| msg.qname().is(LOOP_NS, "solver")) {
            cx.reply(format!(
                "<artifacts xmlns=\"{LOOP_NS}\"><artifact path=\"{}\" role=\"artifact\">{}\n</artifact></artifacts>",
                artifact(n),
                guess(n)
            ));
        }
        Ok(())
    }
}

/// Checks the Solver's artifact by its sha256 in the capsule (the file holds the guess it
/// recomputes), measures |x² − 2|, and meets `close` below 0.0001 with the file as evidence.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedSkeptic;

#[async_trait]
impl Listener for ScriptedSkeptic {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let Some(n) = iteration(msg).filter(|_| msg.qname().is(LOOP_NS, "skeptic")) else {
            return Ok(());
        };
        let (path, x) = (artifact(n), guess(n));
        let want = sha256(format!("{x}\n").as_bytes());
        let capsule: serde_json::Value =
            serde_json::from_str(&capsule_of(msg.payload().as_str())).unwrap_or_default();
        let checked = capsule["artifact_links"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|l| l["path"] == path.as_str() && l["sha256"] == want.as_str());
        cx.reply(if checked {
            let residual = (x * x - Decimal::TWO).abs().round_dp(12).normalize();
            let met = residual < CLOSE;
            format!(
                "<verdict xmlns=\"{LOOP_NS}\" residual=\"{residual}\"><criterion id=\"close\" met=\"{met}\" evidence=\"{path}\"/><tried>Newton step {n}: x = {x}</tried><succeeded lane=\"A\" evidence=\"{path}\">x = {x}, |x² − 2| = {residual}</succeeded><open>{}</open></verdict>",
                if met { "none" } else { "another step" }
            )
        } else {
            format!(
                "<verdict xmlns=\"{LOOP_NS}\"><failed lane=\"A\">{path} is not the guess of step {n}</failed></verdict>"
            )
        });
        Ok(())
    }
}

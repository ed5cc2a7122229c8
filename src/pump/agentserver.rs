//! The AgentServer v2.1 boundary: payloads in no namespace are taken into the namespace the
//! organism declares ([`AgentServerConfig`](super::AgentServerConfig)), and what went out to
//! the outside sender of a thread is rendered as envelopes in the dialect that started it.

use std::sync::Arc;

use super::route::Refusal;
use super::{PumpHandle, Shared};
use crate::history::{HistoryError, RecordKind};
use crate::{Dialect, Envelope, EnvelopeError, Payload, ThreadId};

impl Shared {
    /// Takes an AgentServer payload in: a root in no namespace moves into the declared
    /// namespace; any other payload is unchanged.
    pub(crate) fn adopt_payload(&self, payload: Payload) -> Result<Payload, EnvelopeError> {
        match &self.config.agentserver.namespace {
            Some(ns) if payload.qname().namespace().is_empty() => {
                payload.with_default_namespace(ns, &self.config.limits)
            }
            _ => Ok(payload),
        }
    }

    /// A routing refusal of an AgentServer payload in no namespace says how to route one.
    pub(crate) fn explain_refusal(&self, refusal: Refusal, payload: &Payload) -> Refusal {
        if !payload.qname().namespace().is_empty() || self.config.agentserver.namespace.is_some() {
            return refusal;
        }
        let hint = format!(
            "; <{}> is in no namespace: declare the namespace AgentServer payloads are taken into (`[agentserver] namespace = \"urn:…\"` in organism.toml, `PumpConfig::agentserver`)",
            payload.qname().local()
        );
        match refusal {
            Refusal::Huh(code, message) => Refusal::Huh(code, message + &hint),
            Refusal::Error(code, message) => Refusal::Error(code, message + &hint),
        }
    }

    /// An answer on its way to an AgentServer client: a payload in the declared namespace,
    /// declared on its root, goes back in no namespace.
    fn release_payload(&self, payload: Payload) -> Payload {
        match &self.config.agentserver.namespace {
            Some(ns)
                if payload.qname().namespace() == ns && payload.declares_default_namespace() =>
            {
                match payload.with_default_namespace("", &self.config.limits) {
                    Ok(released) if released.qname().namespace().is_empty() => released,
                    _ => payload,
                }
            }
            _ => payload,
        }
    }
}

impl PumpHandle {
    /// What went out of `thread` to its outside sender (`egress` records, in order), each as an
    /// envelope in the dialect of the envelope that started the thread: an AgentServer client
    /// gets AgentServer envelopes, with payloads of the declared namespace back in none.
    ///
    /// # Errors
    ///
    /// The history store cannot be read, or a stored payload no longer parses.
    pub async fn answers(&self, thread: ThreadId) -> Result<Vec<String>, HistoryError> {
        let shared = &self.shared;
        let dialect = shared
            .registry
            .get(thread)
            .map_or(Dialect::default(), |e| e.dialect);
        let records = shared.store.thread(thread, 0).await?;
        let mut out = Vec::new();
        for record in records.iter().filter(|r| r.kind == RecordKind::Egress) {
            let env = record.to_envelope(&shared.config.limits).map_err(|e| {
                HistoryError::query(format!("record {}: {e}", record.seq)).because(e)
            })?;
            let env = match dialect {
                Dialect::Agentpump => env,
                Dialect::AgentServer => {
                    let payload = shared.release_payload(env.payload().clone());
                    Envelope::new(Arc::clone(env.from_shared()), thread, payload)
                        .with_id(env.id())
                        .with_to(env.to_shared().cloned())
                }
            };
            out.push(env.to_xml(dialect));
        }
        Ok(out)
    }
}

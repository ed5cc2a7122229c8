//! Halting a thread: the governor's decision and report, the `halt` message, the cascade to
//! descendants (a `stop` to those on other pumps) and the result to the parent — from the gate,
//! after a delivery, or on a stop.

use std::sync::Arc;

use rust_decimal::Decimal;
use sha2::{Digest as _, Sha256};

use super::Shared;
use super::tx::Tx;
use crate::Envelope;
use crate::envelope::local::local;
use crate::governor::ledger::Ledger;
use crate::governor::report;
use crate::governor::{Decision, Verdict};
use crate::history::RecordKind;
use crate::system::{SystemMessage, ThreadStatus};
use crate::thread::registry::{Queued, ThreadEntry, ThreadInner};

impl Shared {
    /// Halts a thread at the gate: the message goes back to the front of the queue, so a resume
    /// continues exactly there.
    pub(crate) async fn halt_before(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        item: Queued,
        verdict: Verdict,
    ) {
        let committed = {
            let family = self.registry.family(entry);
            let (mut inner, mut parent_inner) = family.lock(entry);
            let to = local(&self.routes[item.target].name);
            inner.queue.push_front(item);
            if inner.state().is_closed() {
                return;
            }
            let mut tx = Tx::new();
            let parent = family.pair(&mut parent_inner).map(|(e, i)| (&**e, i));
            self.halt_locked(&mut tx, entry, &mut inner, parent, verdict, Some(&to));
            let pair = family.pair(&mut parent_inner);
            tx.commit(self, (entry, &mut inner), pair)
        };
        self.finish_commit(entry.id, committed).await;
    }

    /// Halts a locked thread: report, decision, `halt` message, descendants, parent.
    pub(crate) fn halt_locked(
        &self,
        tx: &mut Tx,
        entry: &ThreadEntry,
        inner: &mut ThreadInner,
        parent: Option<(&ThreadEntry, &mut ThreadInner)>,
        verdict: Verdict,
        to: Option<&str>,
    ) {
        inner.halt();
        let halt_id = crate::MessageId::new();
        let r_p = self.r_p(&inner.ledger);
        let mut report = report::build(
            entry.id,
            &entry.path,
            halt_id,
            &verdict,
            &inner.ledger,
            &inner.counters,
            r_p,
        );
        let limits = &self.config.governor.iteration;
        report
            .budget
            .extend(report::iteration_lines(limits, &inner.ledger));
        let json = serde_json::to_string(&report).expect("a report serializes");
        let certificate = verdict
            .class
            .certificate()
            .map_or("none", |c| c.as_str())
            .to_owned();
        self.decide(tx, entry, inner, &Decision::halt(&verdict));
        let report_digest = hex::encode(Sha256::digest(json.as_bytes()));
        let class = verdict.class.as_str();
        let traced = super::telemetry::Halted {
            class,
            reason: &verdict.reason,
            certificate: &certificate,
            digest: &report_digest,
        };
        self.telemetry.halted(&self.registry, entry, &traced);
        let halt = SystemMessage::Halt {
            reason: verdict.reason.clone(),
            class: class.to_owned(),
            certificate,
            report_digest,
        };

        let env = Envelope::new(
            local(&self.routes.names.system),
            entry.id,
            halt.to_payload(),
        )
        .with_id(halt_id)
        .with_to(to.map(Arc::from));
        tx.record(inner, env, RecordKind::System);
        tx.report(report);
        tracing::info!(thread = %entry.id, class = %verdict.class, reason = %verdict.reason, "thread halted");
        tx.snapshot(entry, inner);
        for child_id in inner.children.clone() {
            let Some(child) = self.registry.get(child_id) else {
                continue;
            };
            let mut child_inner = child.lock();
            if !child_inner.state().is_closed() {
                let cascade = Verdict::backpressure("parent-halted");
                self.halt_locked(
                    tx,
                    &child,
                    &mut child_inner,
                    Some((entry, inner)),
                    cascade,
                    None,
                );
            }
        }
        self.stop_remote_children(tx, entry, inner);
        let halt_info = Some((verdict.class.as_str().to_owned(), verdict.reason));
        let last = inner.last_payload.clone();
        let ended = (ThreadStatus::Halted, halt_info, last);
        self.tell_parent(tx, (entry, inner), parent, ended);
    }

    pub(crate) fn r_p(&self, ledger: &Ledger) -> Decimal {
        ledger
            .progress
            .as_ref()
            .and_then(|p| p.goal.as_ref())
            .and_then(|g| g.r_p)
            .unwrap_or(self.config.governor.r_p)
    }
}

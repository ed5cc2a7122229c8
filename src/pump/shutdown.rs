//! Graceful shutdown: decide (refuse new input), wait (let queues drain within a grace period),
//! tell (record every message still queued as not delivered, then `shutdown`).

use std::time::Duration;

use super::PumpHandle;
use super::notice::Recipient;
use super::tx::Tx;
use crate::system::{ErrorCode, SystemMessage};

/// What a shutdown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Whether every queue drained within the grace period.
    pub drained: bool,
    /// Messages accepted but not delivered in threads still open; each has a `system-error
    /// code="shutting-down"` record in its thread and stays pending in history (a durable store
    /// re-queues it on restart). Messages queued in halted or done threads are not counted.
    pub undelivered: usize,
}

impl PumpHandle {
    /// Stops the pump: new outside input is refused at once; queued messages keep being delivered
    /// for up to `grace`; then running handlers finish, every message still queued is recorded as
    /// not delivered, and `shutdown` is recorded in the system thread (committed when this returns).
    /// The store stays open: a new pump may be built on it, and a SQLite file is let go when
    /// the store is closed or its last handle dropped.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// # use std::time::Duration;
    /// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// let report = pump.shutdown(Duration::from_secs(1)).await;
    /// assert_eq!((report.drained, report.undelivered), (true, 0)); // the echo answered in time
    /// assert_eq!(pump.history(thread).await?.len(), 2);
    /// assert!(pump.post(None, None, r#"<say xmlns="urn:example:say:v1">late</say>"#).await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn shutdown(&self, grace: Duration) -> ShutdownReport {
        let shared = &self.shared;
        shared.lifecycle.close();
        let drained = tokio::time::timeout(grace, self.settle_all()).await.is_ok();
        shared.lifecycle.stop();
        self.wait_for_runners().await;
        shared.flush_refusals(true).await;
        let mut undelivered = 0;
        for entry in shared.registry.all() {
            let committed = {
                let mut inner = entry.lock();
                // A halted or done thread delivers nothing anyway: its queue stays pending (a
                // resume after restart delivers it) and it gets no shutdown notice.
                if inner.queue.is_empty() || inner.state().is_closed() {
                    continue;
                }
                let mut tx = Tx::new();
                let items: Vec<_> = inner.queue.drain(..).collect();
                undelivered += items.len();
                for item in items {
                    let message = format!(
                        "the pump shut down before delivering this message to `{}`",
                        shared.routes[item.target].name
                    );
                    let notice = SystemMessage::Error {
                        code: ErrorCode::ShuttingDown,
                        message,
                    };
                    let to = Recipient::RecordOnly(&shared.routes[item.target].name);
                    shared.notice(
                        &mut tx,
                        &entry,
                        &mut inner,
                        to,
                        notice,
                        Some(item.envelope.id()),
                    );
                }
                tx.commit(shared, (&entry, &mut inner), None)
            };
            shared.finish_commit(entry.id, committed).await;
        }
        shared.lifecycle.quiet_changed();
        // Waited for, so a reader of the store after `shutdown` returns sees the record.
        let recorded = match shared.record_system(SystemMessage::Shutdown { undelivered }) {
            Ok(ticket) => ticket.wait().await,
            Err(error) => Err(error),
        };
        if let Err(error) = recorded {
            tracing::error!(%error, "could not record shutdown");
        }
        // Spans and metrics still batched go out before the process may exit.
        shared.telemetry.flush().await;

        ShutdownReport {
            drained,
            undelivered,
        }
    }

    /// Waits until no thread has queued or running work.
    async fn settle_all(&self) {
        let roots: Vec<_> = self
            .shared
            .registry
            .all()
            .iter()
            .filter(|e| e.parent.is_none())
            .map(|e| e.id)
            .collect();
        for root in roots {
            self.settle_here(root).await;
        }
    }

    /// Waits until every runner task has ended (each finishes its current delivery first).
    async fn wait_for_runners(&self) {
        let shared = &self.shared;
        shared
            .lifecycle
            .wait_until(|| shared.lifecycle.no_runners())
            .await;
    }
}

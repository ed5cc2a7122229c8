//! Sending parcels: one task per pump takes each durable parcel and carries it with the courier,
//! again and again until it is taken or refused for good, or the pump is gone (its next start
//! sends it again); then records what came of it.

use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;

use super::{ChildResult, Parcel, Undelivered};
use crate::governor::{Budget, Decision};
use crate::pump::Shared;
use crate::pump::notice::Recipient;
use crate::pump::tx::Tx;
use crate::system::{ErrorCode, SystemMessage, ThreadStatus};

impl Shared {
    /// Starts the task that sends the pump's parcels (nothing to do without a courier). Needs a
    /// tokio runtime; without one the parcels wait for the next start.
    pub(crate) fn start_sending(self: &Arc<Self>) {
        let Some(courier) = self.spread.courier.clone() else {
            return;
        };
        let Some(mut waiting) = self
            .spread
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!("a pump with a courier needs a tokio runtime to send its parcels");
            return;
        };
        let pump = Arc::downgrade(self);
        runtime.spawn(async move {
            while let Some(parcel) = waiting.recv().await {
                let (pump, courier) = (pump.clone(), Arc::clone(&courier));
                tokio::spawn(async move {
                    let mut pause = Duration::from_millis(100);
                    loop {
                        let carried = courier.carry(&parcel).await;
                        let Some(shared) = pump.upgrade() else { return };
                        match carried {
                            Ok(()) => return shared.shipped(&parcel).await,
                            Err(Undelivered::Refused(why)) => {
                                return shared.refused(&parcel, &why).await;
                            }
                            Err(Undelivered::Later(why)) => {
                                tracing::debug!(thread = %parcel.thread(), %why, "parcel not taken yet; trying again");
                            }
                        }
                        if shared.lifecycle.is_stopped() {
                            return;
                        }
                        drop(shared);
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(2));
                    }
                });
            }
        });
    }

    /// A parcel was taken: a result's delivery is recorded in the child.
    async fn shipped(self: &Arc<Self>, parcel: &Parcel) {
        let Parcel::Result(result) = parcel else {
            return;
        };
        let Ok(Some(entry)) = self.load(result.child).await else {
            return; // not recorded: the next start sends it again, a no-op there
        };
        let committed = {
            let mut inner = entry.lock();
            let mut tx = Tx::new();
            let delivered = Decision::Delivered {
                thread: result.parent,
            };
            self.decide(&mut tx, &entry, &mut inner, &delivered);
            tx.commit(self, (&entry, &mut inner), None)
        };
        self.finish_commit(entry.id, committed).await;
    }

    /// A parcel was refused for good: a child that could not be opened returns at once,
    /// having spent nothing; a result or a stop refused is recorded, as a `system-error`, in
    /// the thread that sent it.
    async fn refused(self: &Arc<Self>, parcel: &Parcel, why: &str) {
        tracing::error!(thread = %parcel.thread(), %why, "another pump refused a parcel");
        let (from, what) = match parcel {
            Parcel::Adopt(_) => (None, ""),
            Parcel::Result(r) => (Some(r.child), "the result of this thread"),
            Parcel::Stop(s) => (Some(s.parent), "the stop of a child of this thread"),
        };
        if let Some(thread) = from
            && let Ok(Some(entry)) = self.load(thread).await
        {
            let committed = {
                let mut inner = entry.lock();
                let mut tx = Tx::new();
                let notice = SystemMessage::Error {
                    code: ErrorCode::NoRoute,
                    message: format!(
                        "the pump of thread {} refused {what} for good: {why}",
                        parcel.thread()
                    ),
                };
                let system = Arc::clone(&self.routes.names.system);
                self.notice(
                    &mut tx,
                    &entry,
                    &mut inner,
                    Recipient::RecordOnly(&system),
                    notice,
                    None,
                );
                tx.commit(self, (&entry, &mut inner), None)
            };
            self.finish_commit(thread, committed).await;
        }
        if let Parcel::Adopt(a) = parcel {
            let result = ChildResult {
                child: a.child,
                parent: a.parent,
                spawner: a.spawner.clone(),
                status: ThreadStatus::Halted.as_str().to_owned(),
                halt: Some((
                    "aborted".to_owned(),
                    format!("the child's pump refused it: {why}"),
                )),
                payload: None,
                spent: Budget::from_spent([Some(Decimal::ZERO); 5]),
            };
            if let Err(e) = self.take_result(result).await {
                tracing::error!(thread = %a.parent, error = %e, "a refused child could not be returned");
            }
        }
    }
}

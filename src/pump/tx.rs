//! [`Tx`]: the effects of one delivery or one outside send, gathered while the affected threads
//! are locked, then appended to history in one batch and only then pushed onto queues — so queue
//! order is history order, and nothing is delivered that is not recorded.

use std::sync::Arc;

use smallvec::SmallVec;

use super::Shared;
use crate::governor::HaltingReport;
use crate::history::{Batch, Delivered, HistoryError, NewRecord, RecordKind, Ticket, Timing};
use crate::listener::Usage;
use crate::pump::inbox::OpenRequest;
use crate::pump::spread::Parcel;
use crate::thread::registry::{Queued, ThreadEntry, ThreadInner};
use crate::{Envelope, MessageId, ThreadId};

/// Effects waiting to be committed.
///
/// A delivery usually queues one or two messages: those lists live inline, without allocating.
#[derive(Debug, Default)]
pub(crate) struct Tx {
    batch: Batch,
    here: SmallVec<[Queued; 2]>,
    parent: SmallVec<[Queued; 1]>,
    children: Vec<Arc<ThreadEntry>>,
    queued_ids: SmallVec<[MessageId; 2]>,
    opened: Vec<OpenRequest>,
    /// Parcels for pumps of other partitions, sent once the commit is durable.
    parcels: Vec<Parcel>,
}

/// Which locked thread a queued message goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// The thread the transaction is about.
    Here,
    /// Its parent.
    Parent,
}

impl Tx {
    /// A transaction that delivers nothing (an outside send, a halt, a shutdown notice).
    pub fn new() -> Self {
        Self::default()
    }

    /// A transaction that takes message `id` of `thread` off its queue.
    pub fn delivering(thread: ThreadId, id: MessageId) -> Self {
        let delivered = Delivered {
            thread,
            id,
            handled: false,
            usage: Usage::default(),
            free: false,
            failed: false,
            timing: None,
        };
        Self {
            batch: Batch {
                delivered: Some(delivered),
                ..Batch::default()
            },
            ..Self::default()
        }
    }

    /// Marks the taken message's handler as failed (kept with the delivered mark).
    pub fn failed(&mut self) {
        if let Some(d) = self.batch.delivered.as_mut() {
            d.failed = true;
        }
    }

    /// Marks the taken message as handled by a listener that reported `usage`; `free` when
    /// it was a governor notice that cost no turn; `timing` when its handler ran.
    pub fn handled(&mut self, usage: Usage, free: bool, timing: Timing) {
        if let Some(d) = self.batch.delivered.as_mut() {
            d.handled = true;
            d.usage = usage;
            d.free = free;
            d.timing = Some(timing);
        }
    }

    /// The usage [`Tx::handled`] marked the taken message with (none outside a delivery).
    pub fn handled_usage(&self) -> Option<&Usage> {
        self.batch.delivered.as_ref().map(|d| &d.usage)
    }

    /// Records a message that is not queued (egress, request, refusal kept for the record).
    pub fn record(&mut self, inner: &mut ThreadInner, envelope: Envelope, kind: RecordKind) {
        inner.records += 1;
        self.batch.records.push(NewRecord {
            envelope,
            kind,
            pending: false,
        });
    }

    /// Lists `request` (recorded in this transaction) in the inbox once the commit is durable.
    pub fn open(&mut self, request: OpenRequest) {
        self.opened.push(request);
    }

    /// Records a message and queues it for `target` in the thread at `place`.
    pub fn queue(
        &mut self,
        inner: &mut ThreadInner,
        place: Place,
        envelope: Envelope,
        target: usize,
        kind: RecordKind,
    ) {
        inner.records += 1;
        self.queued_ids.push(envelope.id());
        self.batch.records.push(NewRecord {
            envelope: envelope.clone(),
            kind,
            pending: true,
        });
        let item = Queued { envelope, target };
        match place {
            Place::Here => self.here.push(item),
            Place::Parent => self.parent.push(item),
        }
    }

    /// Records a message into a new child thread (not yet registered) and queues it there.
    pub fn queue_in_child(&mut self, child: &ThreadEntry, envelope: Envelope, target: usize) {
        let mut inner = child.lock();
        inner.records += 1;
        self.queued_ids.push(envelope.id());
        self.batch.records.push(NewRecord {
            envelope: envelope.clone(),
            kind: RecordKind::Message,
            pending: true,
        });
        inner.queue.push_back(Queued { envelope, target });
    }

    /// Adds a new child thread, registered at commit.
    pub fn add_child(&mut self, child: Arc<ThreadEntry>) {
        let inner = child.lock();
        self.batch.threads.push(child.stored_info(&inner));
        drop(inner);
        self.children.push(child);
    }

    /// Sends `parcel` to the pump of another partition once this transaction is durable
    /// (`pump/spread.rs`).
    pub fn ship(&mut self, parcel: Parcel) {
        self.parcels.push(parcel);
    }

    /// Saves a halting report with this transaction.
    pub fn report(&mut self, report: HaltingReport) {
        self.batch.reports.push(report);
    }

    /// Saves a snapshot of a thread with this transaction.
    pub fn snapshot(&mut self, entry: &ThreadEntry, inner: &ThreadInner) {
        self.batch.threads.push(entry.stored_info(inner));
    }

    /// How many messages this transaction queues in the thread it is about.
    pub fn queued_here(&self) -> usize {
        self.here.len()
    }

    /// The id of the last record added.
    pub fn last_id(&self) -> Option<MessageId> {
        self.batch.records.last().map(|r| r.envelope.id())
    }

    /// Ids of the messages queued by this transaction.
    pub fn queued_ids(&self) -> &[MessageId] {
        &self.queued_ids
    }

    /// The batch alone, for a transaction that queues nothing (used while recovering).
    pub fn into_batch(self) -> Batch {
        self.batch
    }

    /// Appends everything to history, then queues and wakes. Locks of `here` and `parent` are held
    /// by the caller; new children are registered here.
    ///
    /// # Errors
    ///
    /// [`HistoryError`] from the store; then nothing is queued, no child is registered, no
    /// request is listed, and the record and waiting counts of `here` and `parent` are as
    /// before the transaction. Requests opened are listed when the returned ticket resolves
    /// durable (and taken back when it fails).
    pub fn commit(
        self,
        shared: &Arc<Shared>,
        here: (&Arc<ThreadEntry>, &mut ThreadInner),
        parent: Option<(&Arc<ThreadEntry>, &mut ThreadInner)>,
    ) -> Result<Ticket, HistoryError> {
        if self.batch.records.is_empty()
            && self.batch.threads.is_empty()
            && self.batch.delivered.is_none()
        {
            return Ok(Ticket::ready());
        }
        let (entry, inner) = here;
        // The records this transaction counted in `here` and `parent`, taken back if the store
        // refuses (a new child's count goes with the child).
        let parent_id = parent.as_ref().map(|(p, _)| p.id);
        let (mut mine, mut theirs) = (0, 0);
        for thread in self.batch.records.iter().map(|r| r.envelope.thread()) {
            if thread == entry.id {
                mine += 1;
            } else if Some(thread) == parent_id {
                theirs += 1;
            }
        }
        let ticket = match shared.store.append(self.batch) {
            Ok(ticket) => ticket,
            Err(e) => {
                inner.records -= mine;
                if let Some((_, parent_inner)) = parent {
                    parent_inner.records -= theirs;
                }
                shared.unopen(inner, &self.opened);
                return Err(e);
            }
        };
        let ticket = if self.opened.is_empty() {
            ticket
        } else {
            shared.list_when_durable(ticket, Arc::clone(entry), self.opened)
        };
        let ticket = if self.parcels.is_empty() {
            ticket
        } else {
            shared.spread.when_durable(ticket, self.parcels)
        };
        if !self.here.is_empty() {
            inner.queue.extend(self.here);
            shared.wake(entry, inner);
        }
        if let Some((entry, inner)) = parent
            && !self.parent.is_empty()
        {
            inner.queue.extend(self.parent);
            shared.wake(entry, inner);
        }
        for child in self.children {
            shared.registry.insert(Arc::clone(&child));
            let mut inner = child.lock();
            shared.wake(&child, &mut inner);
        }
        Ok(ticket)
    }
}

impl Shared {
    /// Waits for a commit's durability; a failure is logged (the pump keeps serving) and returned.
    pub(crate) async fn await_commit(
        &self,
        thread: ThreadId,
        committed: Result<Ticket, HistoryError>,
    ) -> Result<(), HistoryError> {
        let started = self.telemetry.commit_started();
        let result = match committed {
            Ok(ticket) => ticket.wait().await,
            Err(e) => Err(e),
        };
        self.telemetry.committed(started, result.is_ok());
        if let Err(error) = &result {
            tracing::error!(thread = %thread, %error, "history commit failed");
        }
        result
    }

    /// Waits for an internal commit (a delivery's, a halt's): a failure is logged by
    /// [`Shared::await_commit`] and the pump keeps serving.
    pub(crate) async fn finish_commit(
        &self,
        thread: ThreadId,
        committed: Result<Ticket, HistoryError>,
    ) {
        let _ = self.await_commit(thread, committed).await;
    }
}

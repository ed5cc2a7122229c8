//! [`MemoryHistory`]: history kept in process memory, for tests and ephemeral runs.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use super::{
    Batch, HistoryError, HistoryStore, Record, RecordKind, Recovery, Ticket, verify_chain,
};
use crate::Counters;
use crate::governor::HaltingReport;
use crate::system::SYSTEM_NS;
use crate::{MessageId, ThreadId, ThreadInfo, ThreadState};

/// History in memory: complete and hash-chained like the durable store, gone when dropped.
#[derive(Debug, Default)]
pub struct MemoryHistory {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    records: Vec<Record>,
    by_thread: HashMap<ThreadId, ThreadLog>,
    by_id: HashMap<MessageId, usize>,
    pending: BTreeSet<usize>,
    threads: HashMap<ThreadId, ThreadInfo>,
    reports: HashMap<ThreadId, Vec<HaltingReport>>,
    counters: HashMap<ThreadId, Counters>,
    /// Snapshot ids in the order threads were first saved.
    thread_order: Vec<ThreadId>,
}

#[derive(Debug)]
struct ThreadLog {
    indexes: Vec<usize>,
    last_digest: [u8; 32],
}

impl MemoryHistory {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Microseconds since the Unix epoch, now.
pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

#[async_trait]
impl HistoryStore for MemoryHistory {
    fn append(&self, batch: Batch) -> Result<Ticket, HistoryError> {
        let time_us = now_us();
        let mut inner = self.lock();
        let inner = &mut *inner;
        if let Some(delivered) = &batch.delivered {
            if let Some(&index) = inner.by_id.get(&delivered.id) {
                inner.pending.remove(&index);
                if delivered.handled {
                    let thread = inner.records[index].thread;
                    let c = inner.counters.entry(thread).or_default();
                    c.deliveries += 1;
                    c.tokens_in += delivered.usage.tokens_in;
                    c.tokens_out += delivered.usage.tokens_out;
                    c.cost += delivered.usage.cost;
                    c.tool_calls += delivered.usage.tool_calls;
                    c.estimated_usage += u64::from(delivered.usage.estimated);
                }
            }
        }
        for new in &batch.records {
            let index = inner.records.len();
            let mut record = Record::from_new(new, index as u64 + 1, time_us);
            let log = inner
                .by_thread
                .entry(record.thread)
                .or_insert_with(|| ThreadLog {
                    indexes: Vec::new(),
                    last_digest: [0; 32],
                });
            record.seal(&log.last_digest);
            log.last_digest = record.digest;
            log.indexes.push(index);
            inner.by_id.insert(record.id, index);
            if new.pending {
                inner.pending.insert(index);
            }
            inner.records.push(record);
        }
        for info in batch.threads {
            if !inner.threads.contains_key(&info.id) {
                inner.thread_order.push(info.id);
            }
            inner.threads.insert(info.id, info);
        }
        for report in batch.reports {
            inner.reports.entry(report.thread).or_default().push(report);
        }
        Ok(Ticket::ready())
    }

    async fn thread(&self, thread: ThreadId, since: u64) -> Result<Vec<Record>, HistoryError> {
        let inner = self.lock();
        let Some(log) = inner.by_thread.get(&thread) else {
            return Ok(Vec::new());
        };
        let first = log.indexes.partition_point(|&i| (i as u64) + 1 < since);
        Ok(log.indexes[first..]
            .iter()
            .map(|&i| inner.records[i].clone())
            .collect())
    }

    async fn record(&self, id: MessageId) -> Result<Option<Record>, HistoryError> {
        let inner = self.lock();
        Ok(inner.by_id.get(&id).map(|&i| inner.records[i].clone()))
    }

    async fn pending(&self) -> Result<Vec<Record>, HistoryError> {
        let inner = self.lock();
        Ok(inner
            .pending
            .iter()
            .map(|&i| inner.records[i].clone())
            .collect())
    }

    async fn reports(&self, thread: ThreadId) -> Result<Vec<HaltingReport>, HistoryError> {
        Ok(self
            .lock()
            .reports
            .get(&thread)
            .cloned()
            .unwrap_or_default())
    }

    async fn threads(&self, state: Option<ThreadState>) -> Result<Vec<ThreadInfo>, HistoryError> {
        let inner = self.lock();
        let mut children: HashMap<ThreadId, Vec<ThreadId>> = HashMap::new();
        for id in &inner.thread_order {
            if let Some(parent) = inner.threads[id].parent {
                children.entry(parent).or_default().push(*id);
            }
        }
        let busy: std::collections::HashSet<ThreadId> = inner
            .pending
            .iter()
            .map(|&i| inner.records[i].thread)
            .collect();
        let mut out: Vec<ThreadInfo> = inner
            .threads
            .values()
            .cloned()
            .map(|mut t| {
                t.children = children.get(&t.id).cloned().unwrap_or_default();
                let counters = inner.counters.get(&t.id).cloned().unwrap_or_default();
                let busy = busy.contains(&t.id);
                t.with_live_state(busy, counters)
            })
            .filter(|t| state.is_none_or(|s| t.state == s))
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn recovery(&self) -> Result<Recovery, HistoryError> {
        let inner = self.lock();
        let of =
            |f: &dyn Fn(&Record) -> bool| inner.records.iter().filter(|r| f(r)).cloned().collect();
        Ok(Recovery {
            threads: inner
                .thread_order
                .iter()
                .map(|id| inner.threads[id].clone())
                .collect(),
            counters: inner.counters.clone(),
            records: inner
                .by_thread
                .iter()
                .map(|(id, log)| (*id, log.indexes.len() as u64))
                .collect(),
            pending: inner
                .pending
                .iter()
                .map(|&i| inner.records[i].clone())
                .collect(),
            governor: of(&|r| r.kind == RecordKind::Message && r.to.as_deref() == Some("governor")),
            halts: of(&|r| r.kind == RecordKind::System && r.root.is(SYSTEM_NS, "halt")),
        })
    }

    async fn verify(&self) -> Result<u64, HistoryError> {
        let inner = self.lock();
        Ok(verify_chain(&inner.records)?)
    }
}

//! History: complete, ordered, hash-chained; tampering is detected at the tampered record;
//! pending (accepted, undelivered) messages are tracked for recovery.

mod support;

use agentpump::history::{ChainBreak, Record, RecordKind, verify_chain};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, Registration, ThreadState};
use support::{Gate, p, q};

async fn busy_pump() -> (agentpump::PumpHandle, Vec<agentpump::ThreadId>) {
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let mut threads = Vec::new();
    for t in 0..3 {
        let thread = pump
            .post(None, None, &p("say", &format!("{t}-0")))
            .await
            .unwrap()
            .thread();
        for i in 1..4 {
            pump.post(Some(thread), None, &p("say", &format!("{t}-{i}")))
                .await
                .unwrap();
        }
        threads.push(thread);
    }
    for &t in &threads {
        pump.settle(t).await;
    }
    (pump, threads)
}

/// Every record of every thread, in seq order, as a JSON-lines export.
async fn export(pump: &agentpump::PumpHandle) -> Vec<String> {
    let mut all: Vec<Record> = Vec::new();
    for info in pump.threads() {
        all.extend(pump.history(info.id).await.unwrap());
    }
    all.sort_by_key(|r| r.seq);
    all.iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect()
}

#[tokio::test]
async fn every_chain_verifies_and_an_export_round_trips() {
    let (pump, threads) = busy_pump().await;
    let lines = export(&pump).await;
    assert_eq!(
        lines.len(),
        1 + 3 * 8,
        "boot + 4 messages and 4 echoes per thread"
    );
    assert_eq!(pump.verify().await.unwrap(), lines.len() as u64);
    let records: Vec<Record> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(verify_chain(&records), Ok(lines.len() as u64));
    // In seq order (on one OS thread, as here, seq is acceptance order across threads too);
    // each thread's history is that thread only, in order.
    assert!(records.windows(2).all(|w| w[0].seq < w[1].seq));
    for t in threads {
        let h = pump.history(t).await.unwrap();
        assert!(h.iter().all(|r| r.thread == t));
        let kinds: Vec<RecordKind> = h.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds.iter().filter(|k| **k == RecordKind::Egress).count(),
            4
        );
    }
}

#[tokio::test]
async fn altering_one_record_is_detected_at_that_record() {
    let (pump, threads) = busy_pump().await;
    let mut records: Vec<Record> = export(&pump)
        .await
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let second_thread: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.thread == threads[1])
        .map(|(i, _)| i)
        .collect();
    let victim = second_thread[5];
    let original = records[victim].clone();
    let tampered = original.payload.replace("1-", "9-");
    assert_ne!(tampered, *original.payload);
    records[victim].payload = tampered.into();
    let err: ChainBreak = verify_chain(&records).unwrap_err();
    assert_eq!((err.thread, err.seq), (threads[1], original.seq));
    assert_eq!(err.found, hex_of(&original.digest));
    assert_ne!(err.expected, err.found);
    assert!(
        err.to_string()
            .contains(&format!("breaks at seq {}", original.seq))
    );

    // Changing any other field is detected too, and so is dropping a record.
    let mut records: Vec<Record> = export(&pump)
        .await
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    records[victim].from = "intruder".into();
    assert_eq!(verify_chain(&records).unwrap_err().seq, original.seq);
    let mut records: Vec<Record> = export(&pump)
        .await
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let next = records[second_thread[6]].seq;
    records.remove(victim);
    assert_eq!(verify_chain(&records).unwrap_err().seq, next);
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn accepted_but_undelivered_messages_are_pending_until_delivered() {
    let gate = Gate::new();
    let pump = PumpBuilder::new()
        .register(Registration::new("gate", gate.clone()).accepts(q("wait")))
        .build()
        .unwrap();
    let first = pump.post(None, None, &p("wait", "0")).await.unwrap();
    gate.entered().await;
    let mut ids = first.ids().to_vec();
    for i in 1..4 {
        ids.extend_from_slice(
            pump.post(Some(first.thread()), None, &p("wait", &i.to_string()))
                .await
                .unwrap()
                .ids(),
        );
    }
    let pending: Vec<_> = pump
        .store()
        .pending()
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        pending, ids,
        "the one in flight and the three queued, in order"
    );
    gate.open(4);
    pump.settle(first.thread()).await;
    assert!(pump.store().pending().await.unwrap().is_empty());
    let by_id = pump.store().record(ids[2]).await.unwrap().unwrap();
    assert_eq!(
        (by_id.kind, by_id.to.as_deref()),
        (RecordKind::Message, Some("gate"))
    );
    assert_eq!(
        pump.store()
            .threads(Some(ThreadState::Idle))
            .await
            .unwrap()
            .len(),
        2,
        "system + this thread"
    );
}

#[test]
fn moving_bytes_between_fields_breaks_the_chain() {
    use agentpump::{MessageId, QName, ThreadId};
    use std::sync::Arc;
    let mut r = Record {
        seq: 1,
        time_us: 1,
        kind: RecordKind::Message,
        thread: ThreadId::new(),
        id: MessageId::new(),
        from: Arc::from("a"),
        to: None,
        in_reply_to: None,
        root: QName::new("urn:x", "go"),
        payload: Arc::from("<go xmlns=\"urn:x\">\n</go>"),
        digest: [0; 32],
    };
    r.digest = r.chained_digest(&[0; 32]);
    assert_eq!(verify_chain([&r]), Ok(1));
    let mut forged = r.clone();
    forged.root = QName::new("urn:x", "go\n<go xmlns=\"urn:x\">");
    forged.payload = Arc::from("</go>");
    assert!(verify_chain([&forged]).is_err());
}

/// A store whose commits never become durable.
#[derive(Debug, Default)]
struct NotDurable(agentpump::history::MemoryHistory);

#[async_trait::async_trait]
impl agentpump::history::HistoryStore for NotDurable {
    fn append(
        &self,
        batch: agentpump::history::Batch,
    ) -> Result<agentpump::history::Ticket, agentpump::history::HistoryError> {
        self.0.append(batch)?;
        Ok(agentpump::history::Ticket::pending(async {
            Err(agentpump::history::HistoryError::unavailable("disk full"))
        }))
    }
    async fn thread(
        &self,
        t: agentpump::ThreadId,
        since: u64,
    ) -> Result<Vec<Record>, agentpump::history::HistoryError> {
        self.0.thread(t, since).await
    }
    async fn record(
        &self,
        id: agentpump::MessageId,
    ) -> Result<Option<Record>, agentpump::history::HistoryError> {
        self.0.record(id).await
    }
    async fn pending(&self) -> Result<Vec<Record>, agentpump::history::HistoryError> {
        self.0.pending().await
    }
    async fn reports(
        &self,
        t: agentpump::ThreadId,
    ) -> Result<Vec<agentpump::governor::HaltingReport>, agentpump::history::HistoryError> {
        self.0.reports(t).await
    }
    async fn threads(
        &self,
        s: Option<ThreadState>,
    ) -> Result<Vec<agentpump::ThreadInfo>, agentpump::history::HistoryError> {
        self.0.threads(s).await
    }
    async fn verify(&self) -> Result<u64, agentpump::history::HistoryError> {
        self.0.verify().await
    }
}

#[tokio::test]
async fn a_message_is_acknowledged_only_once_durable() {
    let pump = PumpBuilder::new()
        .history(std::sync::Arc::new(NotDurable::default()))
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let err = pump.post(None, None, &p("say", "")).await.unwrap_err();
    assert_eq!(err.code(), "history-unavailable");
    assert_eq!(err.recorded_in(), None);
    assert!(err.to_string().contains("disk full"), "{err}");
}

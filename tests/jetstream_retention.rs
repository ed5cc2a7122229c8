//! Retention on a JetStream history (issue 35: "`agentpump verify`, exports, the viewer and
//! retention work against it"), against a real `nats-server`: a prune is a mark in the stream,
//! the messages it leaves unneeded are deleted, and a store opened on what is left agrees with
//! the one that pruned. Needs `nats-server` on the PATH (`.ci/run` installs it).

#![cfg(feature = "nats")]

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentpump::governor::Budget;
use agentpump::history::{HistoryStore, JetStreamHistory, JetStreamOptions, Record};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, PumpHandle, QName, Registration, ThreadId, ThreadInfo, ThreadState};
use support::Scratch;

fn say(text: &str) -> String {
    format!(r#"<say xmlns="urn:example:say:v1">{text}</say>"#)
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap()
}

async fn open(url: &str, stream: &str) -> Result<Arc<JetStreamHistory>, String> {
    let mut options = JetStreamOptions::new(url, stream);
    options.patience = Duration::from_secs(20);
    JetStreamHistory::open(options)
        .await
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

fn pump_on(store: &Arc<JetStreamHistory>) -> PumpHandle {
    let store: Arc<dyn HistoryStore> = store.clone();
    PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(QName::new("urn:example:say:v1", "say")))
        .history(store)
        .build()
        .unwrap()
}

/// `n` threads started with one message each and settled; their ids.
async fn converse(pump: &PumpHandle, n: usize, tag: &str) -> Vec<ThreadId> {
    let mut threads = Vec::new();
    for i in 0..n {
        let receipt = pump
            .post(None, Some("echo"), &say(&format!("{tag}-{i}")))
            .await
            .unwrap();
        threads.push(receipt.thread());
    }
    for &t in &threads {
        tokio::time::timeout(Duration::from_secs(30), pump.settle(t))
            .await
            .expect("a thread settles");
    }
    threads
}

/// Everything a reader sees of `threads`: records, snapshots (with counters), reports, marks.
async fn seen(
    store: &dyn HistoryStore,
    threads: &[ThreadId],
) -> Vec<(Vec<Record>, Option<ThreadInfo>, usize, usize)> {
    let infos = store.threads(None).await.unwrap();
    let mut out = Vec::new();
    for &t in threads {
        out.push((
            store.thread(t, 0).await.unwrap(),
            infos.iter().find(|i| i.id == t).cloned(),
            store.reports(t).await.unwrap().len(),
            store.marks(t).await.unwrap().len(),
        ));
    }
    out
}

/// The stream's message count, once it stops falling (the deletions run after the prune).
async fn messages_settled(url: &str, stream: &str) -> (u64, u64) {
    let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
    let mut stream = js.get_stream(stream).await.unwrap();
    let mut last = None;
    for _ in 0..100 {
        let state = stream.info().await.unwrap().state.clone();
        let now = (state.messages, state.last_sequence);
        if last == Some(now) {
            return now;
        }
        last = Some(now);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    last.unwrap()
}

/// Issue 35: "retention work[s] against it": a prune before a cut removes the records of the
/// finished threads (halted) and leaves the open ones whole; each pruned thread gets an anchor
/// its remaining records chain from, so `verify` still passes, and a halted thread resumed after
/// the prune goes on from its anchor. The stream messages left unneeded are deleted, and a store
/// opened on what is left of the stream (a restart) has the same records, anchors, snapshots,
/// counters, reports and marks; the same prune again removes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_on_the_stream_deletes_what_it_leaves_unneeded_and_a_restart_agrees() {
    let scratch = Scratch::new("js-retention");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "retention").await.unwrap();
    let pump = pump_on(&store);
    let threads = converse(&pump, 8, "old").await;
    let (halted, open_ones) = threads.split_at(5);
    for &t in halted {
        pump.stop(t).await.unwrap();
    }
    let cut = now_us();
    let before = seen(&*store, &threads).await;
    let (messages, _) = messages_settled(&url, "retention").await;

    let pruned = store.prune(cut, None).await.unwrap();
    let removed: u64 = before[..5].iter().map(|(r, ..)| r.len() as u64).sum();
    assert_eq!(pruned.records, removed, "{pruned:?}");
    let anchored: Vec<ThreadId> = pruned.anchors.iter().map(|a| a.thread).collect();
    assert_eq!(
        anchored
            .iter()
            .copied()
            .collect::<std::collections::HashSet<_>>(),
        halted.iter().copied().collect(),
        "one anchor per halted thread, none for the open ones"
    );
    assert_eq!(store.anchors().await.unwrap(), pruned.anchors);
    for &t in halted {
        assert!(store.thread(t, 0).await.unwrap().is_empty());
    }
    for (i, &t) in open_ones.iter().enumerate() {
        assert_eq!(
            store.thread(t, 0).await.unwrap(),
            before[5 + i].0,
            "kept whole"
        );
    }
    let after = seen(&*store, &threads).await;
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        assert_eq!(
            b.1, a.1,
            "thread {i}'s snapshot and counters outlive its records"
        );
        assert_eq!(b.2, a.2, "thread {i}'s reports outlive its records");
    }
    store.verify().await.unwrap();

    // A pruned, halted thread resumed goes on from its anchor.
    let resumed = halted[0];
    pump.resume(resumed, &Budget::default()).await.unwrap();
    pump.post(Some(resumed), Some("echo"), &say("again"))
        .await
        .unwrap();
    pump.settle(resumed).await;
    let now = store.thread(resumed, 0).await.unwrap();
    assert!(
        now.iter().any(|r| r.payload.contains("again")) && now.len() >= 2,
        "the resume, the message and its echo: {now:#?}"
    );
    assert_eq!(
        store.verify_thread(resumed).await.unwrap(),
        now.len() as u64
    );

    // The messages that held only what went are deleted from the stream.
    let (left, last) = messages_settled(&url, "retention").await;
    assert!(
        left < messages,
        "{left} messages left of {messages} before the prune (last sequence {last})"
    );
    pump.shutdown(Duration::from_secs(5)).await;
    let checked = store.verify().await.unwrap();
    let kept = seen(&*store, &threads).await;
    let anchors = store.anchors().await.unwrap();
    drop(pump);
    drop(store);

    // A restart from the stream alone agrees.
    let again = open(&url, "retention").await.unwrap();
    assert_eq!(seen(&*again, &threads).await, kept);
    assert_eq!(again.anchors().await.unwrap(), anchors);
    assert_eq!(again.verify().await.unwrap(), checked);
    let nothing = again.prune(cut, None).await.unwrap();
    assert_eq!((nothing.records, nothing.anchors.len()), (0, 0));
    let pump = pump_on(&again);
    let info = pump
        .thread(halted[1])
        .expect("a pruned thread is still known");
    assert_eq!(info.state, ThreadState::Halted);
    pump.post(Some(open_ones[0]), Some("echo"), &say("later"))
        .await
        .unwrap();
    pump.settle(open_ones[0]).await;
    assert_eq!(again.thread(open_ones[0], 0).await.unwrap().len(), 4);
    again.verify().await.unwrap();
    pump.shutdown(Duration::from_secs(5)).await;
}

/// A prune mark whose anchor does not match what it removes (an altered stream) stops the open,
/// naming the message, as an altered append does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_prune_mark_is_refused_at_open_naming_the_message() {
    let scratch = Scratch::new("js-retention-altered");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "pruned").await.unwrap();
    let pump = pump_on(&store);
    let threads = converse(&pump, 2, "one").await;
    for &t in &threads {
        pump.stop(t).await.unwrap();
    }
    let pruned = store.prune(now_us(), None).await.unwrap();
    assert_eq!(pruned.anchors.len(), 2);
    pump.shutdown(Duration::from_secs(5)).await;
    drop(pump);
    drop(store);

    let js = async_nats::jetstream::new(async_nats::connect(&url).await.unwrap());
    let mut stream = js.get_stream("pruned").await.unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    // The mark: the last message with a prune in it (the pump's shutdown came after).
    let mut at = last;
    let text = loop {
        if let Ok(message) = stream.get_raw_message(at).await {
            let text = String::from_utf8_lossy(&message.payload).into_owned();
            if text.contains("\"prune\"") {
                break text;
            }
        }
        at -= 1;
    };
    // The same mark, its prune time moved by a microsecond: the anchor's digest no longer
    // matches. The original goes, the altered one takes its place at the end.
    let when = pruned.anchors[0].pruned_us;
    let forged = text.replace(
        &format!("\"pruned_us\":{when}"),
        &format!("\"pruned_us\":{}", when + 1),
    );
    assert_ne!(forged, text);
    stream.delete_message(at).await.unwrap();
    js.publish("agentpump.history.pruned", forged.into_bytes().into())
        .await
        .unwrap()
        .await
        .unwrap();
    let refused = open(&url, "pruned").await.unwrap_err();
    assert!(
        refused.contains(&format!(
            "message {} of the history stream `pruned`",
            last + 1
        )) && refused.contains("anchor 1 (thread ")
            && refused.contains("the stream was altered"),
        "{refused}"
    );
}

/// A message of records deleted from the stream by hand (no prune covers it) is not a gap
/// the open passes over: one holding a thread's last records (which no later record of that
/// thread chains from) stops it, saying how many records are missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_deleted_without_a_prune_is_refused_at_open() {
    let scratch = Scratch::new("js-retention-deleted");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "deleted").await.unwrap();
    let pump = pump_on(&store);
    // One thread after the other, so the first's echo is in a message of its own.
    converse(&pump, 1, "first").await;
    converse(&pump, 1, "second").await;
    pump.shutdown(Duration::from_secs(5)).await;
    drop(pump);
    drop(store);
    let js = async_nats::jetstream::new(async_nats::connect(&url).await.unwrap());
    let mut stream = js.get_stream("deleted").await.unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    let mut echo = None;
    for seq in 1..=last {
        let text = String::from_utf8_lossy(&stream.get_raw_message(seq).await.unwrap().payload)
            .into_owned();
        if text.contains(r#""from":"echo""#) && text.contains("first-0") {
            assert!(!text.contains("second-0"), "{text}");
            echo = Some(seq);
        }
    }
    assert!(stream.delete_message(echo.unwrap()).await.unwrap());
    let refused = open(&url, "deleted").await.unwrap_err();
    assert!(
        refused.contains(" record(s) that no prune removed: a message was deleted from it"),
        "{refused}"
    );
}

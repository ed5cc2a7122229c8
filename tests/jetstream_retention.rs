//! Retention on a JetStream history (issue 35: "`agentpump verify`, exports, the viewer and
//! retention work against it"), against a real `nats-server`: a prune is a mark in the stream,
//! the messages it leaves unneeded are deleted, and a store opened on what is left agrees with
//! the one that pruned. Needs `nats-server` on the PATH (`.ci/run` installs it).

#![cfg(feature = "nats")]

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentpump::governor::Budget;
use agentpump::history::{
    Batch, HistoryStore, JetStreamHistory, JetStreamOptions, NewRecord, Record, RecordKind,
};
use agentpump::{
    Envelope, Limits, Payload, PumpBuilder, PumpHandle, Registration, Spawn, ThreadId, ThreadInfo,
    ThreadState,
};
use support::{Scratch, Script, p, q, say_v1 as say};

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
    support::echo_pump(store.clone())
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

/// The stream's message count once it is `n` (the deletions run after the prune), or after
/// 20 s.
async fn messages_left(url: &str, stream: &str, n: u64) -> u64 {
    let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
    let mut stream = js.get_stream(stream).await.unwrap();
    let mut left = u64::MAX;
    for _ in 0..200 {
        left = stream.info().await.unwrap().state.messages;
        if left == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    left
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
    let threads = support::converse(&pump, 8, "old").await;
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
    let threads = support::converse(&pump, 2, "one").await;
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
/// the open passes over: it stops, saying what no prune removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_deleted_without_a_prune_is_refused_at_open() {
    let scratch = Scratch::new("js-retention-deleted");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "deleted").await.unwrap();
    let pump = pump_on(&store);
    // One thread after the other, so the first's echo is in a message of its own.
    support::converse(&pump, 1, "first").await;
    support::converse(&pump, 1, "second").await;
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
        refused.contains(&format!(
            "messages [{}] of the history stream `deleted` are missing, and no prune mark lists them",
            echo.unwrap()
        )),
        "{refused}"
    );
    // The stream's last message too: the server keeps its last sequence, so that gap shows.
    assert!(stream.delete_message(last).await.unwrap());
    let refused = open(&url, "deleted").await.unwrap_err();
    assert!(
        refused.contains(&format!(
            "messages [{}, {last}] of the history stream `deleted` are missing",
            echo.unwrap()
        )),
        "{refused}"
    );
}

/// `boss`: on `<go>` spawns a `worker` child held to 3 turns; ends its thread when the child's
/// result comes back.
fn boss() -> Registration {
    Registration::new(
        "boss",
        Script::new(|msg, cx| {
            if msg.qname().local() == "go" {
                let budget = Budget {
                    turns: Some(3),
                    threads: Some(0),
                    ..Budget::default()
                };
                cx.spawn(Spawn::new(p("job", "")).to("worker").budget(budget));
            } else if msg.thread_result().is_some() {
                cx.done(p("back", ""));
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["worker"])
}

/// `worker`: ends its thread on `<job>`.
fn worker() -> Registration {
    Registration::new(
        "worker",
        Script::new(|msg, cx| {
            if msg.qname().local() == "job" {
                cx.done(p("did", ""));
            }
            Ok(())
        }),
    )
    .accepts(q("job"))
}

fn tree_pump(store: &Arc<JetStreamHistory>) -> PumpHandle {
    let store: Arc<dyn HistoryStore> = store.clone();
    PumpBuilder::new()
        .register(boss())
        .register(worker())
        .history(store)
        .build()
        .unwrap()
}

/// A pruned tree is carried whole past its deleted messages, parents before children: a pump
/// restarted from the stream alone (the prune its last act) restores the parent and its child
/// (the child's snapshot alone would name a parent it has not restored yet), each as it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pruned_tree_comes_back_whole_from_the_stream_alone() {
    let scratch = Scratch::new("js-retention-tree");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "tree").await.unwrap();
    let pump = tree_pump(&store);
    let root = pump
        .post(None, Some("boss"), &p("go", ""))
        .await
        .unwrap()
        .thread();
    let done = async {
        while pump.thread(root).map(|t| t.state) != Some(ThreadState::Done) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), done)
        .await
        .expect("the parent ends once its child's result is back");
    let child = pump.thread(root).unwrap().children[0];
    let (before, _) = messages_settled(&url, "tree").await;
    let pruned = store.prune(now_us(), None).await.unwrap();
    let anchored: Vec<ThreadId> = pruned.anchors.iter().map(|a| a.thread).collect();
    assert!(
        anchored.contains(&root) && anchored.contains(&child),
        "{anchored:?}"
    );
    let (messages, _) = messages_settled(&url, "tree").await;
    // No shutdown record after the mark: the records numbered last are all deleted, and the
    // mark alone says where numbering goes on.
    drop(pump);
    drop(store);

    let again = open(&url, "tree").await.unwrap();
    let pump = tree_pump(&again);
    let parent = pump.thread(root).expect("the parent is restored");
    let restored = pump.thread(child).expect("the child is restored");
    assert_eq!(parent.state, ThreadState::Done);
    assert_eq!(
        (restored.parent, restored.state),
        (Some(root), ThreadState::Done)
    );
    assert_eq!(again.anchors().await.unwrap(), pruned.anchors);
    again.verify().await.unwrap();
    assert!(messages < before, "{messages} of {before} messages left");
    pump.shutdown(Duration::from_secs(5)).await;
}

/// A client's message into `thread`, as one record of a batch appended by hand.
fn message(thread: ThreadId, text: &str) -> NewRecord {
    let payload = Payload::parse(&say(text), &Limits::default()).unwrap();
    NewRecord {
        envelope: Envelope::new("client".into(), thread, payload),
        kind: RecordKind::Message,
        pending: false,
    }
}

/// A root thread's snapshot in `state`.
fn snapshot(thread: ThreadId, state: &str) -> ThreadInfo {
    serde_json::from_value(serde_json::json!({
        "id": thread, "parent": null, "spawner": null, "depth": 0,
        "path": thread.to_string()[..8], "state": state, "children": [],
        "counters": {"deliveries": 0, "notices": 0, "failures": 0, "tokens_in": 0,
            "tokens_out": 0, "tool_calls": 0, "cost": "0", "estimated_usage": 0},
        "dialect": "agentpump"
    }))
    .unwrap()
}

/// A message kept because it also holds an open thread's record, after the message holding
/// its pruned thread's first record was deleted: its pruned record no longer chains from
/// anything the replay has. It is taken as recorded and removed by the prune mark after it,
/// and the open thread's record is kept whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_message_s_pruned_record_whose_predecessor_was_deleted_replays() {
    let scratch = Scratch::new("js-retention-partial");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "partial").await.unwrap();
    let (done, open_one) = (ThreadId::new(), ThreadId::new());
    let first = Batch {
        records: vec![message(done, "first")],
        threads: vec![snapshot(done, "halted")],
        ..Batch::default()
    };
    store.append(first).unwrap().wait().await.unwrap();
    let shared = Batch {
        records: vec![message(done, "second"), message(open_one, "kept")],
        threads: vec![snapshot(open_one, "idle")],
        ..Batch::default()
    };
    store.append(shared).unwrap().wait().await.unwrap();
    let kept = store.thread(open_one, 0).await.unwrap();
    let pruned = store.prune(now_us(), None).await.unwrap();
    assert_eq!(
        (
            pruned.records,
            pruned.anchors.len(),
            pruned.anchors[0].thread
        ),
        (2, 1, done)
    );
    let left = messages_left(&url, "partial", 2).await;
    assert_eq!(
        left, 2,
        "the first message went; the shared one and the mark stay"
    );
    drop(store);

    let again = open(&url, "partial").await.unwrap();
    assert!(again.thread(done, 0).await.unwrap().is_empty());
    assert_eq!(again.thread(open_one, 0).await.unwrap(), kept);
    assert_eq!(again.anchors().await.unwrap(), pruned.anchors);
    assert_eq!(again.verify().await.unwrap(), 1);
    let infos = again.threads(None).await.unwrap();
    assert_eq!(
        infos.iter().find(|t| t.id == done).map(|t| t.state),
        Some(ThreadState::Halted),
        "the pruned thread's snapshot, carried by the mark"
    );
}

/// A record altered in place (its message deleted and a copy with other text put at the end,
/// its number and digest kept) is taken as recorded only until the replay ends: it does not
/// chain from what is kept, so the open stops, naming its message, record and thread (before
/// the original's place, a gap no mark lists).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_record_no_prune_removes_is_refused_at_open() {
    let scratch = Scratch::new("js-retention-rewritten");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "rewritten").await.unwrap();
    let thread = ThreadId::new();
    let batch = Batch {
        records: vec![message(thread, "as written")],
        threads: vec![snapshot(thread, "idle")],
        ..Batch::default()
    };
    store.append(batch).unwrap().wait().await.unwrap();
    let record = store.thread(thread, 0).await.unwrap()[0].clone();
    drop(store);
    let js = async_nats::jetstream::new(async_nats::connect(&url).await.unwrap());
    let mut stream = js.get_stream("rewritten").await.unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    let text = String::from_utf8_lossy(&stream.get_raw_message(last).await.unwrap().payload)
        .replace("as written", "as forged");
    assert!(stream.delete_message(last).await.unwrap());
    js.publish("agentpump.history.rewritten", text.into_bytes().into())
        .await
        .unwrap()
        .await
        .unwrap();
    let refused = open(&url, "rewritten").await.unwrap_err();
    assert!(
        refused.contains(&format!(
            "message {} of the history stream `rewritten`: record {} of thread {thread} does not chain from what is kept or anchored",
            last + 1,
            record.seq
        )),
        "{refused}"
    );
}

/// A cut inside a finished thread (records before it and after it, in different messages):
/// the prefix goes, the message holding it is deleted, and the kept record — which chained
/// from a deleted one — is proved from the thread's anchor at the next open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_inside_a_thread_keeps_its_later_records_provable_after_a_restart() {
    let scratch = Scratch::new("js-retention-straddle");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "straddle").await.unwrap();
    let thread = ThreadId::new();
    let older = Batch {
        records: vec![message(thread, "older"), message(thread, "old")],
        threads: vec![snapshot(thread, "idle")],
        ..Batch::default()
    };
    store.append(older).unwrap().wait().await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let cut = now_us();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let newer = Batch {
        records: vec![message(thread, "newer")],
        threads: vec![snapshot(thread, "halted")],
        ..Batch::default()
    };
    store.append(newer).unwrap().wait().await.unwrap();
    let pruned = store.prune(cut, None).await.unwrap();
    assert_eq!((pruned.records, pruned.anchors[0].last_seq), (2, 2));
    let kept = store.thread(thread, 0).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        messages_left(&url, "straddle", 2).await,
        2,
        "the older message went"
    );
    drop(store);

    let again = open(&url, "straddle").await.unwrap();
    assert_eq!(again.thread(thread, 0).await.unwrap(), kept);
    assert_eq!(again.verify_thread(thread).await.unwrap(), 1);
    assert_eq!(again.anchors().await.unwrap(), pruned.anchors);
}

/// A message holding no records — here a thread's snapshot alone — deleted by hand is a gap
/// no prune mark lists: the open stops, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_without_records_deleted_by_hand_is_refused_at_open() {
    let scratch = Scratch::new("js-retention-snapshot");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "snapshot").await.unwrap();
    let thread = ThreadId::new();
    let first = Batch {
        records: vec![message(thread, "hello")],
        threads: vec![snapshot(thread, "idle")],
        ..Batch::default()
    };
    store.append(first).unwrap().wait().await.unwrap();
    let halted = Batch {
        threads: vec![snapshot(thread, "halted")],
        ..Batch::default()
    };
    store.append(halted).unwrap().wait().await.unwrap();
    let later = Batch {
        records: vec![message(ThreadId::new(), "later")],
        ..Batch::default()
    };
    store.append(later).unwrap().wait().await.unwrap();
    drop(store);
    let js = async_nats::jetstream::new(async_nats::connect(&url).await.unwrap());
    let stream = js.get_stream("snapshot").await.unwrap();
    assert!(stream.delete_message(2).await.unwrap());
    let refused = open(&url, "snapshot").await.unwrap_err();
    assert!(
        refused.contains(
            "messages [2] of the history stream `snapshot` are missing, and no prune mark lists them"
        ),
        "{refused}"
    );
}

/// A pruned message in parts is deleted whole; if only some of its parts go (a deletion that
/// failed, a writer stopped midway), the next open drops the rest as a fragment its mark lists
/// and deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pruned_message_in_parts_left_in_part_is_finished_at_the_next_open() {
    let scratch = Scratch::new("js-retention-parts");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "parts").await.unwrap();
    let (big, other) = (ThreadId::new(), ThreadId::new());
    let text = "a".repeat(700_000);
    let batch = Batch {
        records: vec![
            message(big, &format!("0{text}")),
            message(big, &format!("1{text}")),
        ],
        threads: vec![snapshot(big, "halted")],
        ..Batch::default()
    };
    store.append(batch).unwrap().wait().await.unwrap();
    let small = Batch {
        records: vec![message(other, "small")],
        threads: vec![snapshot(other, "idle")],
        ..Batch::default()
    };
    store.append(small).unwrap().wait().await.unwrap();
    let js = async_nats::jetstream::new(async_nats::connect(&url).await.unwrap());
    let mut stream = js.get_stream("parts").await.unwrap();
    let parts = stream.info().await.unwrap().state.messages - 1;
    assert!(parts >= 2, "the big append went in parts");
    // A stream that refuses deletions: the prune's deletions fail, the message stays whole.
    let mut config = stream.info().await.unwrap().config.clone();
    config.deny_delete = true;
    js.update_stream(config).await.unwrap();
    let pruned = store.prune(now_us(), None).await.unwrap();
    assert_eq!(pruned.anchors.len(), 1);
    drop(store);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let last = stream.info().await.unwrap().state.last_sequence;
    assert_eq!(last, parts + 2, "nothing deleted");
    // The same messages, sequence for sequence, in a stream that allows deletions; there the
    // big message loses only its last part.
    let copy = js
        .get_or_create_stream(async_nats::jetstream::stream::Config {
            name: "copy".to_owned(),
            subjects: vec!["agentpump.history.copy".to_owned()],
            ..Default::default()
        })
        .await
        .unwrap();
    for seq in 1..=last {
        let raw = stream.get_raw_message(seq).await.unwrap();
        let headers = raw.headers.clone();
        js.publish_with_headers("agentpump.history.copy", headers, raw.payload.clone())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    assert!(copy.delete_message(parts).await.unwrap());
    let again = open(&url, "copy").await.unwrap();
    assert!(again.thread(big, 0).await.unwrap().is_empty());
    assert_eq!(again.thread(other, 0).await.unwrap().len(), 1);
    again.verify().await.unwrap();
    assert_eq!(
        messages_left(&url, "copy", 2).await,
        2,
        "the open deleted the rest: the small message and the mark stay"
    );
    drop(again);
    let third = open(&url, "copy").await.unwrap();
    assert_eq!(third.anchors().await.unwrap(), pruned.anchors);
}

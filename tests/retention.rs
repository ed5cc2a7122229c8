//! Retention: `HistoryStore::prune` removes finished threads' old records, leaves an anchor, and
//! `verify` still proves what remains — and still catches a tampered record or anchor.

mod support;

use std::sync::Arc;
use std::time::Duration;

use agentpump::history::{HistoryError, HistoryStore, SqliteHistory};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, Registration, ThreadId};
use support::{Scratch, q};

fn echo_pump(store: Arc<SqliteHistory>) -> agentpump::PumpHandle {
    PumpBuilder::new()
        .history(store)
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap()
}

fn schema_version(db: &std::path::Path) -> String {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

fn sql(db: &std::path::Path, statement: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(statement).unwrap();
}

/// A history file from [`support::finished_and_open`].
struct Fixture {
    dir: Scratch,
    halted: ThreadId,
    open: ThreadId,
    cut: i64,
}

async fn fixture() -> Fixture {
    let dir = Scratch::new("retention");
    let (halted, open, cut) = support::finished_and_open(&dir.db()).await;
    Fixture {
        dir,
        halted,
        open,
        cut,
    }
}

#[tokio::test]
async fn prune_removes_old_records_of_finished_threads_and_verify_proves_the_rest() {
    let f = fixture().await;
    let store = SqliteHistory::open(f.dir.db()).unwrap();
    let before = store.thread(f.halted, 0).await.unwrap();
    let open_before = store.thread(f.open, 0).await.unwrap();
    let old: Vec<_> = before.iter().filter(|r| r.time_us < f.cut).collect();
    assert!(old.len() >= 2 && old.len() < before.len(), "{before:#?}");

    let checked = store.verify().await.unwrap();
    assert_eq!(
        schema_version(&f.dir.db()),
        "4",
        "a file this build's writer opened has the search index and the tallies (version 4)"
    );
    let pruned = store.prune(f.cut, None).await.unwrap();
    assert_eq!(
        schema_version(&f.dir.db()),
        "4",
        "a prune never lowers the version: an older build refuses the file either way"
    );
    assert_eq!(pruned.records, old.len() as u64);
    assert_eq!(pruned.anchors.len(), 1, "one anchor per pruned thread");
    let anchor = &pruned.anchors[0];
    assert_eq!(
        (anchor.thread, anchor.first_seq, anchor.last_seq),
        (f.halted, old[0].seq, old[old.len() - 1].seq)
    );
    assert_eq!(anchor.last_digest, old[old.len() - 1].digest);
    assert_eq!(anchor.before_us, f.cut);

    let after = store.thread(f.halted, 0).await.unwrap();
    assert_eq!(after, before[old.len()..], "only the old prefix went");
    assert_eq!(
        store.thread(f.open, 0).await.unwrap(),
        open_before,
        "an open thread keeps every record, however old"
    );
    assert_eq!(store.verify().await.unwrap(), checked - pruned.records);
    store.verify_thread(f.halted).await.unwrap();
    assert_eq!(store.anchors().await.unwrap(), pruned.anchors);

    let again = store.prune(f.cut, None).await.unwrap();
    assert_eq!(
        (again.records, again.anchors.len()),
        (0, 0),
        "a second prune is a no-op"
    );
    store.close().unwrap();
}

#[tokio::test]
async fn a_tampered_record_after_pruning_is_detected() {
    let f = fixture().await;
    {
        let store = SqliteHistory::open(f.dir.db()).unwrap();
        store.prune(f.cut, None).await.unwrap();
        store.close().unwrap();
    }
    let verify = |db| async move { SqliteHistory::open_read_only(db).unwrap().verify().await };
    verify(f.dir.db()).await.unwrap();

    // A remaining record of the pruned thread, edited.
    sql(
        &f.dir.db(),
        &format!(
            "UPDATE records SET payload = replace(payload, 'halt', 'HALT') WHERE seq = (SELECT min(seq) FROM records WHERE thread = '{}')",
            f.halted
        ),
    );
    match verify(f.dir.db()).await {
        Err(HistoryError::Chain(b)) => assert_eq!(b.thread, f.halted),
        other => panic!("expected a chain break, got {other:?}"),
    }
}

#[tokio::test]
async fn a_forged_anchor_is_detected() {
    let f = fixture().await;
    {
        let store = SqliteHistory::open(f.dir.db()).unwrap();
        store.prune(f.cut, None).await.unwrap();
        store.close().unwrap();
    }
    // Claiming fewer records were removed breaks the anchor chain.
    sql(&f.dir.db(), "UPDATE anchors SET records = records - 1");
    let store = SqliteHistory::open_read_only(f.dir.db()).unwrap();
    match store.verify().await {
        Err(HistoryError::Anchor(b)) => assert_eq!((b.n, b.thread), (1, f.halted)),
        other => panic!("expected an anchor break, got {other:?}"),
    }
    assert!(
        matches!(
            store.verify_thread(f.halted).await,
            Err(HistoryError::Anchor(_))
        ),
        "one thread's check (the viewer's) sees it too"
    );
    drop(store);
    // Deleting the anchor makes the rest of the thread chain from zero: a chain break.
    sql(&f.dir.db(), "DELETE FROM anchors");
    let store = SqliteHistory::open_read_only(f.dir.db()).unwrap();
    assert!(matches!(store.verify().await, Err(HistoryError::Chain(b)) if b.thread == f.halted));
}

#[tokio::test]
async fn a_fully_pruned_thread_continues_its_chain_from_the_anchor_after_a_restart() {
    let f = fixture().await;
    {
        let store = SqliteHistory::open(f.dir.db()).unwrap();
        let all = store.prune(i64::MAX, None).await.unwrap();
        assert_eq!(all.anchors.len(), 1, "the open thread is never pruned");
        assert!(store.thread(f.halted, 0).await.unwrap().is_empty());
        store.close().unwrap();
    }
    let store = Arc::new(SqliteHistory::open(f.dir.db()).unwrap());
    let pump = echo_pump(Arc::clone(&store));
    // Resuming the halted thread appends to it: its new records chain from the anchor, and
    // their seqs continue past the pruned ones.
    pump.resume(f.halted, &Default::default()).await.unwrap();
    let anchor = store.anchors().await.unwrap().remove(0);
    let resumed = store.thread(f.halted, 0).await.unwrap();
    assert!(resumed[0].seq > anchor.last_seq, "{resumed:#?}");
    store.verify().await.unwrap();
    pump.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_broken_chain_is_never_pruned_away() {
    let f = fixture().await;
    sql(
        &f.dir.db(),
        &format!(
            "UPDATE records SET payload = replace(payload, 'old', 'new') WHERE thread = '{}'",
            f.halted
        ),
    );
    let store = SqliteHistory::open(f.dir.db()).unwrap();
    assert!(matches!(
        store.prune(f.cut, None).await,
        Err(HistoryError::Chain(b)) if b.thread == f.halted
    ));
    assert!(store.anchors().await.unwrap().is_empty(), "nothing removed");
    assert!(
        store.verify().await.is_err(),
        "the break is still there to see"
    );
}

#[tokio::test]
async fn a_finished_child_of_a_running_tree_is_never_pruned() {
    let dir = Scratch::new("retention-tree");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let spawner = Registration::new(
        "spawner",
        support::Script::new(|msg, cx| {
            if msg.qname().local() == "go" {
                cx.spawn(agentpump::Spawn::new(support::p("say", "child")).sub_id("c"));
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["echo"]);
    let pump = PumpBuilder::new()
        .history(Arc::clone(&store) as Arc<dyn HistoryStore>)
        .register(spawner)
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let root = support::start(&pump, &support::p("go", "")).await;
    let tree = pump.tree(root);
    let child = tree
        .iter()
        .find(|t| t.parent == Some(root))
        .expect("a child")
        .clone();
    assert!(child.state.is_closed(), "the child is done: {child:?}");

    let none = store.prune(i64::MAX, None).await.unwrap();
    assert_eq!(
        none.records, 0,
        "the root still runs: nothing of its tree goes"
    );
    assert!(!store.thread(child.id, 0).await.unwrap().is_empty());

    pump.stop(root).await.unwrap();
    pump.settle(root).await;
    let both = store.prune(i64::MAX, None).await.unwrap();
    let mut pruned: Vec<ThreadId> = both.anchors.iter().map(|a| a.thread).collect();
    pruned.sort();
    let mut expected = vec![root, child.id];
    expected.sort();
    assert_eq!(
        pruned, expected,
        "once the root stopped, the whole tree goes"
    );
    store.verify().await.unwrap();
    pump.shutdown(Duration::from_secs(1)).await;
}

/// An archive that takes `room` records, then fails; or fails when finished.
#[derive(Debug)]
struct Flaky {
    room: usize,
    fail_finish: bool,
    kept: Arc<std::sync::Mutex<Vec<agentpump::history::Record>>>,
}

impl agentpump::history::Archive for Flaky {
    fn write(&mut self, record: &agentpump::history::Record) -> std::io::Result<()> {
        if self.room == 0 {
            return Err(std::io::Error::other("disk full"));
        }
        self.room -= 1;
        self.kept.lock().unwrap().push(record.clone());
        Ok(())
    }

    fn finish(self: Box<Self>) -> std::io::Result<()> {
        if self.fail_finish {
            Err(std::io::Error::other("fsync failed"))
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn nothing_is_removed_that_the_archive_does_not_hold() {
    let f = fixture().await;
    let store = SqliteHistory::open(f.dir.db()).unwrap();
    let before = store.thread(f.halted, 0).await.unwrap();
    for (room, fail_finish) in [(1, false), (usize::MAX, true)] {
        let kept = Arc::default();
        let archive = Flaky {
            room,
            fail_finish,
            kept: Arc::clone(&kept),
        };
        let err = store
            .prune(f.cut, Some(Box::new(archive)))
            .await
            .unwrap_err();
        assert!(matches!(err, HistoryError::Unavailable { .. }), "{err}");
        assert!(err.to_string().contains("archive"), "{err}");
        assert_eq!(
            store.thread(f.halted, 0).await.unwrap(),
            before,
            "rolled back"
        );
        assert!(store.anchors().await.unwrap().is_empty());
    }
    // The store stays writable: the same prune with a working archive goes through.
    let kept = Arc::default();
    let archive = Flaky {
        room: usize::MAX,
        fail_finish: false,
        kept: Arc::clone(&kept),
    };
    let pruned = store.prune(f.cut, Some(Box::new(archive))).await.unwrap();
    assert_eq!(kept.lock().unwrap().len() as u64, pruned.records);
    assert_eq!(kept.lock().unwrap()[..], before[..pruned.records as usize]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_prune_goes_in_steps_and_loses_no_thread() {
    let dir = Scratch::new("retention-steps");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = PumpBuilder::new()
        .history(Arc::clone(&store) as Arc<dyn HistoryStore>)
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let n = agentpump::history::PRUNE_STEP + 44;
    let mut threads = Vec::new();
    for i in 0..n {
        let thread = support::start(&pump, &support::p("say", &i.to_string())).await;
        pump.stop(thread).await.unwrap();
        threads.push(thread);
    }
    let open = support::start(&pump, &support::p("say", "open")).await;
    for t in &threads {
        pump.settle(*t).await;
    }
    let pruned = store.prune(i64::MAX, None).await.unwrap();
    let mut got: Vec<ThreadId> = pruned.anchors.iter().map(|a| a.thread).collect();
    got.sort();
    threads.sort();
    assert_eq!(
        got, threads,
        "every stopped thread, each once, over two steps"
    );
    let numbers: Vec<u64> = pruned.anchors.iter().map(|a| a.n).collect();
    assert_eq!(
        numbers,
        (1..=n as u64).collect::<Vec<_>>(),
        "one anchor chain across the steps"
    );
    assert!(
        pruned
            .anchors
            .iter()
            .all(|a| a.pruned_us == pruned.anchors[0].pruned_us)
    );
    assert_eq!(store.thread(open, 0).await.unwrap().len(), 2);
    assert_eq!(store.anchors().await.unwrap(), pruned.anchors);
    store.verify().await.unwrap();
    pump.shutdown(Duration::from_secs(1)).await;
}

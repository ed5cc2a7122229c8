//! Children on other pumps (issue 35): two pumps, one per partition, each with its own history,
//! a courier between them that hands each parcel to the pump of its thread's partition (the
//! host's courier posts it to the organism's front instead; `tests/partitions.rs` runs that over
//! a real NATS cluster). A parent on one pump spawns a child the other runs; the grant is
//! withdrawn from the parent and settled exactly when the child's result comes back.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentpump::governor::Budget;
use agentpump::history::SqliteHistory;
use agentpump::pump::spread::{Courier, Parcel, Undelivered};
use agentpump::thread::Partition;
use agentpump::{PumpBuilder, PumpConfig, PumpHandle, Registration, Spawn, ThreadId, ThreadState};
use futures_util::future::BoxFuture;
use support::{Script, looper, p, q};

/// Hands each parcel to the pump of its thread's partition, in the process; holds every parcel
/// back (`Later`) while `held` is set, and counts what it carried by kind.
#[derive(Debug, Default)]
struct Direct {
    pumps: Mutex<Vec<PumpHandle>>,
    held: AtomicBool,
    /// Kinds of parcels held back (`Later`) whatever `held` says.
    held_kinds: Mutex<Vec<&'static str>>,
    carried: Mutex<Vec<String>>,
    tries: AtomicUsize,
}

impl Courier for Direct {
    fn carry<'a>(&'a self, parcel: &'a Parcel) -> BoxFuture<'a, Result<(), Undelivered>> {
        Box::pin(async move {
            self.tries.fetch_add(1, Ordering::SeqCst);
            let kind = match parcel {
                Parcel::Adopt(_) => "adopt",
                Parcel::Result(_) => "result",
                Parcel::Stop(_) => "stop",
            };
            if self.held.load(Ordering::SeqCst) || self.held_kinds.lock().unwrap().contains(&kind) {
                return Err(Undelivered::Later("held by the test".into()));
            }
            let pump = {
                let pumps = self.pumps.lock().unwrap();
                if pumps.is_empty() {
                    return Err(Undelivered::Later("no pumps".into()));
                }
                pumps[Partition::of(parcel.thread(), pumps.len() as u32) as usize].clone()
            };
            let taken = pump.take_parcel(parcel.clone()).await;
            if taken.is_ok() {
                self.carried.lock().unwrap().push(kind.to_owned());
            }
            taken
        })
    }
}

/// `boss`: on `<go>N</go>` spawns a `looper` child carving N turns and no threads (bounded in
/// every dimension the default budget limits); on `<open>` spawns one carving turns only; on a
/// `thread-result` tells the client how the child ended.
fn boss() -> Registration {
    Registration::new(
        "boss",
        Script::new(|msg, cx| {
            match msg.qname().local() {
                "go" => {
                    let turns: u64 = support::number(msg);
                    let budget = Budget {
                        turns: Some(turns),
                        threads: Some(0),
                        ..Budget::default()
                    };
                    cx.spawn(
                        Spawn::new(p("tick", "0"))
                            .to("looper")
                            .sub_id("loop")
                            .budget(budget),
                    );
                }
                "split" => {
                    let budget = Budget {
                        turns: Some(6),
                        threads: Some(1),
                        ..Budget::default()
                    };
                    cx.spawn(Spawn::new(p("part", "")).to("splitter").budget(budget));
                }
                "open" => {
                    let budget = Budget {
                        turns: Some(5),
                        ..Budget::default()
                    };
                    cx.spawn(Spawn::new(p("tick", "0")).to("looper").budget(budget));
                }
                _ => {
                    if let Some(result) = msg.thread_result() {
                        cx.send("client", p("back", result.status().as_str()));
                    }
                }
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .accepts(q("open"))
    .accepts(q("split"))
}

/// `splitter`: on `<part>` spawns a `looper` grandchild carving 2 turns and ends its own
/// thread at once (`thread-done`), its grandchild still running.
fn splitter() -> Registration {
    Registration::new(
        "splitter",
        Script::new(|msg, cx| {
            if msg.qname().local() == "part" {
                let budget = Budget {
                    turns: Some(2),
                    threads: Some(0),
                    ..Budget::default()
                };
                cx.spawn(Spawn::new(p("tick", "0")).to("looper").budget(budget));
                cx.done(p("parted", ""));
            }
            Ok(())
        }),
    )
    .accepts(q("part"))
    .peers(["looper"])
}

fn pump(
    index: u32,
    courier: &Arc<Direct>,
    store: Option<&std::path::Path>,
    with_looper: bool,
) -> PumpHandle {
    pump_evicting(index, courier, store, with_looper, None)
}

fn pump_evicting(
    index: u32,
    courier: &Arc<Direct>,
    store: Option<&std::path::Path>,
    with_looper: bool,
    evict_idle_after: Option<Duration>,
) -> PumpHandle {
    let config = PumpConfig {
        partition: Partition::new(index, 2),
        evict_idle_after,
        ..PumpConfig::default()
    };
    let mut builder = PumpBuilder::new()
        .config(config)
        .courier(Arc::clone(courier) as Arc<dyn Courier>);
    builder = if with_looper {
        builder
            .register(boss().peers(["looper", "splitter"]))
            .register(looper())
            .register(splitter())
    } else {
        builder.register(boss())
    };
    if let Some(path) = store {
        builder = builder.history(Arc::new(SqliteHistory::open(path).unwrap()));
    }
    builder.build().unwrap()
}

/// Two pumps, partitions 0 and 1 of 2, sharing `courier`.
fn two(courier: &Arc<Direct>) -> (PumpHandle, PumpHandle) {
    let pumps = vec![pump(0, courier, None, true), pump(1, courier, None, true)];
    *courier.pumps.lock().unwrap() = pumps.clone();
    (pumps[0].clone(), pumps[1].clone())
}

/// Waits (up to 20 s) until `pump`'s thread `thread` has a record whose root is `local`.
async fn until_recorded(
    pump: &PumpHandle,
    thread: ThreadId,
    local: &str,
) -> Vec<agentpump::history::Record> {
    for _ in 0..400 {
        let history = pump.history(thread).await.unwrap();
        if history.iter().any(|r| r.root.local() == local) {
            return history;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("thread {thread} never recorded a {local}")
}

/// Waits (up to 20 s) until `done` holds.
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..400 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(done(), "never came true");
}

/// Waits (up to 20 s) until `pump`'s thread `thread` has recorded one `action` decision.
async fn until_decided(pump: &PumpHandle, thread: ThreadId, action: &str) {
    for _ in 0..400 {
        if decisions(&pump.history(thread).await.unwrap(), action).len() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("thread {thread} never recorded one {action} decision");
}

/// The decisions of a history whose `action` is `action`.
fn decisions<'r>(history: &'r [agentpump::history::Record], action: &str) -> Vec<&'r str> {
    let needle = format!("action=\"{action}\"");
    history
        .iter()
        .filter(|r| r.root.local() == "decision" && r.payload.contains(&needle))
        .map(|r| &*r.payload)
        .collect()
}

/// The child a parent spawned, as its `thread-spawned` notice names it.
fn spawned_child(history: &[agentpump::history::Record]) -> ThreadId {
    let notice = history
        .iter()
        .find(|r| r.root.local() == "thread-spawned")
        .expect("a thread-spawned notice");
    let at = notice.payload.find("assigned-id=\"").unwrap() + "assigned-id=\"".len();
    notice.payload[at..at + 36].parse().unwrap()
}

fn spent(pump: &PumpHandle, thread: ThreadId, budget: &str) -> (String, String) {
    let lines = pump.budget(thread).expect("a known thread");
    let line = &lines[budget];
    (line.spent.clone(), line.reserved.clone())
}

/// Two pumps sharing `courier` (set as its pumps), the one of partition `durable` on the
/// SQLite file `db`, the other in memory.
fn pair_on_disk(courier: &Arc<Direct>, db: &std::path::Path, durable: u32) -> [PumpHandle; 2] {
    let store = |i: u32| (i == durable).then_some(db);
    let pumps = [
        pump(0, courier, store(0), true),
        pump(1, courier, store(1), true),
    ];
    *courier.pumps.lock().unwrap() = pumps.to_vec();
    pumps
}

/// Posts `<go>turns</go>` to `boss` on `pump`: the new root, and the child it spawned.
async fn spawn_one(pump: &PumpHandle, turns: &str) -> (ThreadId, ThreadId) {
    let root = pump
        .post(None, Some("boss"), &p("go", turns))
        .await
        .unwrap()
        .thread();
    let parent = until_recorded(pump, root, "thread-spawned").await;
    (root, spawned_child(&parent))
}

/// Shuts `pumps` down, as a restart would, and takes them from `courier`.
async fn shut_down(courier: &Direct, pumps: [PumpHandle; 2]) {
    for pump in &pumps {
        pump.shutdown(Duration::from_secs(1)).await;
    }
    courier.pumps.lock().unwrap().clear();
}

#[tokio::test]
async fn a_child_on_another_pump_is_held_to_its_grant_and_its_spend_comes_back_exactly() {
    // Issue 35: "a parent on one pump spawning children owned by another, with a carved budget
    // enforced".
    let courier = Arc::new(Direct::default());
    let (a, b) = two(&courier);
    let root = a
        .post(None, Some("boss"), &p("go", "5"))
        .await
        .unwrap()
        .thread();
    assert_eq!(Partition::of(root, 2), 0);
    let parent = until_recorded(&a, root, "thread-result").await;
    let child = spawned_child(&parent);
    // The child is in the other partition, run by the other pump; the parent's pump has no
    // thread of it.
    assert_eq!(Partition::of(child, 2), 1);
    assert!(a.thread(child).is_none());
    let info = b.thread(child).expect("the other pump runs the child");
    assert_eq!((info.state, info.depth), (ThreadState::Halted, 1));
    assert!(info.path.ends_with(".loop"), "{}", info.path);
    // Held to its grant: five turns, then TIMEOUT max-turns on its own pump.
    let report = &b.reports(child).await.unwrap()[0];
    assert_eq!(report.stop_reason, "max-turns");
    let turns = &report.budget["max-turns"];
    assert_eq!(
        (turns.limit.as_deref(), turns.spent.as_str()),
        (Some("5"), "5")
    );
    // The child's stream alone says what it was given: its first message, as a child spawned
    // on its parent's pump starts, then the parcel with the grant.
    let child_history = b.history(child).await.unwrap();
    assert_eq!(&*child_history[0].payload, p("tick", "0"));
    assert_eq!(&*child_history[0].from, "boss");
    let received = decisions(&child_history, "received");
    assert_eq!(received.len(), 1);
    assert!(
        received[0].contains("&quot;turns&quot;:5"),
        "{}",
        received[0]
    );
    // The parent recorded the carve, the parcel it sent and what the child spent, and its
    // spawner got the result.
    assert_eq!(decisions(&parent, "carve").len(), 1);
    assert_eq!(decisions(&parent, "sent").len(), 1);
    let returned = decisions(&parent, "returned");
    assert_eq!(returned.len(), 1);
    assert!(returned[0].contains("turns=\"5\""), "{}", returned[0]);
    let result = parent
        .iter()
        .find(|r| r.root.local() == "thread-result")
        .unwrap();
    assert!(result.payload.contains("status=\"halted\"") && result.payload.contains("max-turns"));
    assert_eq!(result.to.as_deref(), Some("boss"));
    // Exact: the parent's account holds nothing for the child any more, and counts its five
    // turns and the one thread as spent, on top of the parent's own deliveries.
    let own = a.thread(root).unwrap().counters.deliveries;
    until(|| spent(&a, root, "max-turns").1 == "0").await;
    assert_eq!(
        spent(&a, root, "max-turns"),
        ((own + 5).to_string(), "0".to_owned())
    );
    assert_eq!(
        spent(&a, root, "max-threads"),
        ("1".to_owned(), "0".to_owned())
    );
    // The child's pump recorded that its result was delivered.
    until_decided(&b, child, "delivered").await;
    assert_eq!(*courier.carried.lock().unwrap(), ["adopt", "result"]);
    a.verify().await.unwrap();
    b.verify().await.unwrap();
}

/// `settle` on a parent waits for its child on another pump to come back, not only for the
/// parent's own queue: the parent is idle while the child runs.
#[tokio::test]
async fn settle_waits_for_a_child_on_another_pump() {
    let courier = Arc::new(Direct::default());
    let (a, b) = two(&courier);
    let root = a
        .post(None, Some("boss"), &p("go", "20"))
        .await
        .unwrap()
        .thread();
    tokio::time::timeout(Duration::from_secs(30), a.settle(root))
        .await
        .expect("the child comes back");
    let history = a.history(root).await.unwrap();
    assert!(
        history.iter().any(|r| r.root.local() == "thread-result"),
        "settled only once the child's result is in: {history:#?}"
    );
    assert_eq!(decisions(&history, "returned").len(), 1);
    let child = spawned_child(&history);
    assert_eq!(b.thread(child).unwrap().state, ThreadState::Halted);
    shut_down(&courier, [a, b]).await;
}

#[tokio::test]
async fn a_child_left_open_in_a_limited_dimension_stays_with_its_parent() {
    let courier = Arc::new(Direct::default());
    let (a, _b) = two(&courier);
    // `<open>` carves turns but not threads, which the default budget limits: the child could
    // not be held to a grant, so it draws on its parent here, as without partitions.
    let root = a
        .post(None, Some("boss"), &p("open", ""))
        .await
        .unwrap()
        .thread();
    let parent = until_recorded(&a, root, "thread-result").await;
    let child = spawned_child(&parent);
    assert_eq!(Partition::of(child, 2), 0);
    assert_eq!(a.thread(child).unwrap().parent, Some(root));
    assert!(decisions(&parent, "sent").is_empty());
    assert!(courier.carried.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_halted_parent_stops_its_child_on_the_other_pump_and_still_settles_its_grant() {
    let courier = Arc::new(Direct::default());
    let (a, b) = two(&courier);
    let root = a
        .post(None, Some("boss"), &p("go", "100000"))
        .await
        .unwrap()
        .thread();
    let parent = until_recorded(&a, root, "thread-spawned").await;
    let child = spawned_child(&parent);
    until(|| b.thread(child).is_some()).await;
    // The default root budget has 10 000 turns: the child got what the parent had less the
    // spawner's floor (2 turns per open child) and the delivery that spawned it.
    let granted = b.budget(child).unwrap()["max-turns"].limit.clone().unwrap();
    assert_eq!(granted, (10_000 - 2 - 1).to_string());
    a.stop(root).await.unwrap();
    let parent = until_recorded(&a, root, "thread-result").await;
    let child_report = &b.reports(child).await.unwrap()[0];
    assert_eq!(child_report.stop_reason, "parent-halted");
    let result = parent
        .iter()
        .find(|r| r.root.local() == "thread-result")
        .unwrap();
    assert!(
        result.payload.contains("parent-halted"),
        "{}",
        result.payload
    );
    let child_turns: u64 = child_report.budget["max-turns"].spent.parse().unwrap();
    assert!(child_turns > 0);
    // The parent is closed, its account settled: what the child spent, nothing held.
    let own = a.thread(root).unwrap().counters.deliveries;
    assert_eq!(
        spent(&a, root, "max-turns"),
        ((own + child_turns).to_string(), "0".to_owned())
    );
    assert_eq!(a.thread(root).unwrap().state, ThreadState::Halted);
}

#[tokio::test]
async fn a_child_the_other_pump_cannot_run_returns_at_once_with_its_grant() {
    let courier = Arc::new(Direct::default());
    // The pump of partition 1 has no `looper`: it refuses the child for good.
    let pumps = vec![
        pump(0, &courier, None, true),
        pump(1, &courier, None, false),
    ];
    *courier.pumps.lock().unwrap() = pumps.clone();
    let a = &pumps[0];
    let root = a
        .post(None, Some("boss"), &p("go", "5"))
        .await
        .unwrap()
        .thread();
    let parent = until_recorded(a, root, "thread-result").await;
    let result = parent
        .iter()
        .find(|r| r.root.local() == "thread-result")
        .unwrap();
    assert!(
        result.payload.contains("status=\"halted\""),
        "{}",
        result.payload
    );
    assert!(
        result
            .payload
            .contains("no listener `looper` is registered here"),
        "{}",
        result.payload
    );
    let own = a.thread(root).unwrap().counters.deliveries;
    until(|| spent(a, root, "max-turns").0 == own.to_string()).await;
    assert_eq!(spent(a, root, "max-turns").1, "0");
    assert_eq!(spent(a, root, "max-threads").0, "1");
}

#[tokio::test]
async fn a_restarted_parent_pump_sends_the_child_again_and_holds_its_grant_until_it_returns() {
    let dir = support::Scratch::new("spread-restart");
    let db = dir.0.join("p0.db");
    let courier = Arc::new(Direct::default());
    courier.held.store(true, Ordering::SeqCst);
    let [first, b] = pair_on_disk(&courier, &db, 0);
    let (root, child) = spawn_one(&first, "5").await;
    until(|| courier.tries.load(Ordering::SeqCst) > 0).await;
    let own = first.thread(root).unwrap().counters.deliveries;
    assert_eq!(
        spent(&first, root, "max-turns"),
        ((own + 5).to_string(), "0".to_owned())
    );
    shut_down(&courier, [first, b]).await;
    // The parcel never left: the restarted pump finds it in the parent's records, holds the
    // grant again and sends it.
    let courier2 = Arc::new(Direct::default());
    let [again, b2] = pair_on_disk(&courier2, &db, 0);
    let info = again.thread(root).unwrap();
    assert_eq!(info.children, [child]);
    let parent = until_recorded(&again, root, "thread-result").await;
    assert_eq!(decisions(&parent, "returned").len(), 1);
    assert!(b2.thread(child).is_some());
    let own = again.thread(root).unwrap().counters.deliveries;
    until(|| spent(&again, root, "max-turns").0 == (own + 5).to_string()).await;
    assert_eq!(spent(&again, root, "max-turns").1, "0");
    again.verify().await.unwrap();
}

#[tokio::test]
async fn a_restarted_child_pump_sends_the_result_again_and_keeps_the_child_to_its_grant() {
    let dir = support::Scratch::new("spread-child-restart");
    let db = dir.0.join("p1.db");
    let courier = Arc::new(Direct::default());
    courier.held_kinds.lock().unwrap().push("result");
    let a = pump(0, &courier, None, true);
    let first = pump(1, &courier, Some(&db), true);
    *courier.pumps.lock().unwrap() = vec![a.clone(), first.clone()];
    let (root, child) = spawn_one(&a, "5").await;
    until(|| {
        first
            .thread(child)
            .is_some_and(|t| t.state == ThreadState::Halted)
    })
    .await;
    first.shutdown(Duration::from_secs(1)).await;
    courier.pumps.lock().unwrap().clear();
    drop(first);
    // The result is in the child's records, not delivered: the restarted pump sends it.
    let courier2 = Arc::new(Direct::default());
    let again = pump(1, &courier2, Some(&db), true);
    *courier2.pumps.lock().unwrap() = vec![a.clone(), again.clone()];
    let restored = again.budget(child).unwrap();
    assert_eq!(restored["max-turns"].limit.as_deref(), Some("5"));
    assert_eq!(restored["max-turns"].spent, "5");
    let parent = until_recorded(&a, root, "thread-result").await;
    assert_eq!(decisions(&parent, "returned").len(), 1);
    let own = a.thread(root).unwrap().counters.deliveries;
    until(|| spent(&a, root, "max-turns") == ((own + 5).to_string(), "0".to_owned())).await;
    until_decided(&again, child, "delivered").await;
    again.verify().await.unwrap();
}

/// `POST /threads/ID/parcel`, the door between the pumps: a body that is not a parcel for the
/// thread the URL names is `400 bad-parcel`; one the pump will never take `422
/// parcel-refused`; one to send again `503 parcel-later`; a parcel taken twice opens one child.
#[cfg(feature = "host")]
#[tokio::test]
async fn the_parcel_route_takes_a_parcel_once_and_says_why_it_does_not() {
    use agentpump::pump::spread::{Adoption, ChildResult, StopChild};
    let courier = Arc::new(Direct::default());
    let (a, _b) = two(&courier);
    let base = support::serve(&a, "tok", 1 << 20).await;
    let http = support::http_client();
    let here = Partition::new(0, 2).unwrap();
    let there = Partition::new(1, 2).unwrap();
    let adoption = |child: ThreadId| Adoption {
        child,
        parent: there.new_thread(),
        path: "1a2b3c4d.far".into(),
        spawner: "boss".into(),
        depth: 1,
        max_depth: Some(8),
        granted: Budget {
            turns: Some(3),
            threads: Some(0),
            ..Budget::default()
        },
        to: vec!["looper".into()],
        payload: p("tick", "0"),
        halted: false,
    };
    let send = |thread: ThreadId, body: String| {
        http.post(format!("{base}/threads/{thread}/parcel"))
            .bearer_auth("tok")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let json = |parcel: &Parcel| serde_json::to_string(parcel).unwrap();
    let mine = here.new_thread();
    let (status, problem) = support::problem(send(mine, "nope".into()).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), problem["code"].as_str()),
        (400, Some("bad-parcel"))
    );
    let other = Parcel::Stop(StopChild {
        child: here.new_thread(),
        parent: there.new_thread(),
    });
    let (status, problem) = support::problem(send(mine, json(&other)).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), problem["code"].as_str()),
        (400, Some("bad-parcel")),
        "{problem}"
    );
    // A child of the other partition is not this pump's to open.
    let theirs = there.new_thread();
    let misplaced = Parcel::Adopt(adoption(theirs));
    let (status, problem) = support::problem(send(theirs, json(&misplaced)).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), problem["code"].as_str()),
        (422, Some("parcel-refused")),
        "{problem}"
    );
    // A stop for a child not opened yet: later (its adopt may still be on the way).
    let (status, problem) = support::problem(
        send(
            mine,
            json(&Parcel::Stop(StopChild {
                child: mine,
                parent: there.new_thread(),
            })),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        (status.as_u16(), problem["code"].as_str()),
        (503, Some("parcel-later")),
        "{problem}"
    );
    // A result for a parent this pump does not have: never.
    let orphan = Parcel::Result(ChildResult {
        child: there.new_thread(),
        parent: mine,
        spawner: "boss".into(),
        status: "done".into(),
        halt: None,
        payload: None,
        spent: Budget::default(),
    });
    let (status, problem) = support::problem(send(mine, json(&orphan)).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), problem["code"].as_str()),
        (422, Some("parcel-refused")),
        "{problem}"
    );
    // Taken twice: one child, held to its grant.
    let adopt = Parcel::Adopt(adoption(mine));
    for _ in 0..2 {
        let answer = send(mine, json(&adopt)).await.unwrap();
        assert_eq!(answer.status().as_u16(), 204);
    }
    until(|| {
        a.thread(mine)
            .is_some_and(|t| t.state == ThreadState::Halted)
    })
    .await;
    let history = a.history(mine).await.unwrap();
    assert_eq!(
        history
            .iter()
            .filter(|r| r.root.local() == "tick" && r.from.as_ref() == "boss")
            .count(),
        1
    );
    assert_eq!(decisions(&history, "received").len(), 1);
    assert_eq!(a.reports(mine).await.unwrap()[0].stop_reason, "max-turns");
    // Its parent is on no pump: the result it sends back is refused for good, and that is in
    // the child's history.
    let mut refused = None;
    for _ in 0..400 {
        let history = a.history(mine).await.unwrap();
        refused = history
            .into_iter()
            .find(|r| r.root.local() == "system-error" && r.payload.contains("for good"));
        if refused.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = refused.expect("the refused result is recorded");
    assert!(
        refused
            .payload
            .contains("refused the result of this thread for good")
            && refused.payload.contains("no thread"),
        "{}",
        refused.payload
    );
}

#[tokio::test]
async fn a_child_that_ends_with_children_of_its_own_still_running_keeps_its_whole_grant_spent() {
    let courier = Arc::new(Direct::default());
    let (a, b) = two(&courier);
    let root = a
        .post(None, Some("boss"), &p("split", ""))
        .await
        .unwrap()
        .thread();
    let parent = until_recorded(&a, root, "thread-result").await;
    let child = spawned_child(&parent);
    assert_eq!(b.thread(child).unwrap().state, ThreadState::Done);
    // What its grandchild will spend is not known when it ends: its whole grant (6 turns)
    // counts as spent in the parent, never more than the parent gave.
    let returned = decisions(&parent, "returned");
    assert!(returned[0].contains("turns=\"6\""), "{}", returned[0]);
    let own = a.thread(root).unwrap().counters.deliveries;
    until(|| spent(&a, root, "max-turns") == ((own + 6).to_string(), "0".to_owned())).await;
    // Its grandchild (fully carved too, so spread in turn: back to the first pump) ran on,
    // within the 2 turns carved from that grant.
    let grandchild = b.thread(child).unwrap().children[0];
    let runs_it = if Partition::of(grandchild, 2) == 0 {
        &a
    } else {
        &b
    };
    until(|| {
        runs_it
            .thread(grandchild)
            .is_some_and(|t| t.state == ThreadState::Halted)
    })
    .await;
    let report = &runs_it.reports(grandchild).await.unwrap()[0];
    assert_eq!(report.budget["max-turns"].spent, "2");
}

#[tokio::test]
async fn an_adopted_child_is_not_resumed_on_its_own_pump() {
    let courier = Arc::new(Direct::default());
    let (a, b) = two(&courier);
    let root = a
        .post(None, Some("boss"), &p("go", "3"))
        .await
        .unwrap()
        .thread();
    let parent = until_recorded(&a, root, "thread-result").await;
    let child = spawned_child(&parent);
    let refused = b
        .resume(
            child,
            &Budget {
                turns: Some(10),
                ..Budget::default()
            },
        )
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("on another pump"), "{refused}");
    assert_eq!(b.thread(child).unwrap().state, ThreadState::Halted);
}

#[tokio::test]
async fn a_parent_halted_before_its_child_left_sends_it_and_then_stops_it_after_a_restart() {
    let dir = support::Scratch::new("spread-halted-restart");
    let db = dir.0.join("p0.db");
    let courier = Arc::new(Direct::default());
    courier.held.store(true, Ordering::SeqCst);
    let [first, b] = pair_on_disk(&courier, &db, 0);
    let (root, child) = spawn_one(&first, "1000").await;
    first.stop(root).await.unwrap();
    // A stop that finds the parent running halts it at the end of that delivery.
    until(|| {
        first
            .thread(root)
            .is_some_and(|t| t.state == ThreadState::Halted)
    })
    .await;
    shut_down(&courier, [first, b]).await;
    // Neither the adopt nor the stop ever left: after the restart the child is opened, then
    // halted for its parent, and its result settles the grant.
    let courier2 = Arc::new(Direct::default());
    let [again, b2] = pair_on_disk(&courier2, &db, 0);
    let parent = until_recorded(&again, root, "thread-result").await;
    assert_eq!(decisions(&parent, "returned").len(), 1);
    assert_eq!(
        b2.reports(child).await.unwrap()[0].stop_reason,
        "parent-halted"
    );
    let own = again.thread(root).unwrap().counters.deliveries;
    let child_turns: u64 = b2.reports(child).await.unwrap()[0].budget["max-turns"]
        .spent
        .parse()
        .unwrap();
    until(|| spent(&again, root, "max-turns") == ((own + child_turns).to_string(), "0".to_owned()))
        .await;
}

#[tokio::test]
async fn a_tree_whose_child_ran_on_another_pump_leaves_memory_once_it_is_back() {
    let dir = support::Scratch::new("spread-evict");
    let courier = Arc::new(Direct::default());
    let ms = Some(Duration::from_millis(50));
    let a = pump_evicting(0, &courier, Some(&dir.0.join("p0.db")), true, ms);
    let b = pump(1, &courier, None, true);
    *courier.pumps.lock().unwrap() = vec![a.clone(), b.clone()];
    let root = a
        .post(None, Some("boss"), &p("go", "3"))
        .await
        .unwrap()
        .thread();
    until_recorded(&a, root, "thread-result").await;
    until(|| a.residency().evicted >= 1).await;
    // Reloaded, it still knows its child and what the child spent.
    assert!(a.thread(root).is_none(), "evicted");
    assert!(a.load(root).await.unwrap());
    let info = a.thread(root).unwrap();
    assert_eq!(info.children.len(), 1);
    let own = a.thread(root).unwrap().counters.deliveries;
    assert_eq!(
        spent(&a, root, "max-turns"),
        ((own + 3).to_string(), "0".to_owned())
    );
}

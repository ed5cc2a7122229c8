//! Threads: self-iteration, branching with spawn-thread, concurrent conversations, context views,
//! and how threads end.

mod support;

use std::time::Duration;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::history::RecordKind;
use agentpump::listeners::Echo;
use agentpump::system::Spawn;
use agentpump::{Delivery, Limits, PumpBuilder, PumpConfig, Registration, ThreadState};
use support::{Script, egress, notices, p, q, start};

/// The number in `<count>N</count>` or any other single-number payload.
fn number(msg: &Delivery) -> u64 {
    let text = msg.payload().as_str();
    text[text.find('>').unwrap() + 1..text.rfind("</").unwrap()]
        .parse()
        .unwrap()
}

/// Counts to `limit` by messaging itself, then replies `<counted>`.
fn counter(limit: u64) -> Registration {
    Registration::new(
        "counter",
        Script::new(move |msg, cx| {
            let n = number(msg);
            if n < limit {
                cx.emit(p("count", &(n + 1).to_string()));
            } else {
                cx.send("client", p("counted", &n.to_string()));
            }
            Ok(())
        }),
    )
    .accepts(q("count"))
    .may_loop(true)
}

#[tokio::test]
async fn ten_thousand_self_iterations_complete_in_order_on_one_thread() {
    const N: u64 = 10_000;
    let unlimited = GovernorPolicy {
        budget: Budget::unlimited(),
        ..GovernorPolicy::default()
    };
    let config = PumpConfig {
        governor: unlimited,
        ..PumpConfig::default()
    };
    let pump = PumpBuilder::new()
        .config(config)
        .register(counter(N))
        .build()
        .unwrap();
    let thread = start(&pump, &p("count", "1")).await;
    let history = pump.history(thread).await.unwrap();
    let counts: Vec<u64> = history
        .iter()
        .filter(|r| r.root == q("count"))
        .map(|r| {
            r.payload[r.payload.find('>').unwrap() + 1..r.payload.rfind("</").unwrap()]
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(counts, (1..=N).collect::<Vec<_>>());
    assert_eq!(egress(&pump, thread).await, [p("counted", &N.to_string())]);
    // Every iteration is the same size on the wire and in the thread's state: nothing grows.
    let info = pump.thread(thread).unwrap();
    assert_eq!(
        (info.depth, info.children.len(), info.path.len()),
        (0, 0, 8)
    );
    assert_eq!(info.counters.deliveries, N);
    let first = &history[0];
    let last = history.iter().rfind(|r| r.root == q("count")).unwrap();
    assert_eq!(
        last.payload.len() - first.payload.len(),
        N.to_string().len() - 1
    );
    assert_eq!(pump.verify().await.unwrap(), history.len() as u64 + 1);
}

/// Parent: on `<fan>N</fan>` spawns N children; on each `thread-result` checks history and,
/// once all N are back, tells the client.
fn parent() -> Registration {
    Registration::new(
        "parent",
        Script::new(|msg, cx| {
            if msg.qname().local() == "fan" {
                for i in 0..number(msg) {
                    cx.spawn(Spawn::new(p("job", &i.to_string())).sub_id(format!("job-{i}")));
                }
            }
            Ok(())
        }),
    )
    .accepts(q("fan"))
    .peers(["worker"])
}

/// Worker: asks the squarer in its own thread, and finishes the thread with the answer.
fn worker() -> Registration {
    Registration::new(
        "worker",
        Script::new(|msg, cx| {
            match msg.qname().local() {
                "job" => cx.send("squarer", p("square", &number(msg).to_string())),
                "squared" => cx.done(msg.payload().as_str()),
                _ => {}
            }
            Ok(())
        }),
    )
    .accepts(q("job"))
    .peers(["squarer"])
}

fn squarer() -> Registration {
    Registration::new(
        "squarer",
        Script::new(|msg, cx| {
            let n = number(msg);
            cx.reply(p("squared", &(n * n).to_string()));
            Ok(())
        }),
    )
    .accepts(q("square"))
}

#[tokio::test]
async fn more_outputs_than_the_limit_are_refused_to_the_listener() {
    let pump = PumpBuilder::new()
        .register(parent())
        .register(worker())
        .register(squarer())
        .build()
        .unwrap();
    let root = start(&pump, &p("fan", "70")).await;
    assert_eq!(pump.tree(root).len(), 1 + Limits::DEFAULT_MAX_OUTPUTS);
    // One notice for all of them (issue 13: never one per output), counting them.
    let refused: Vec<_> = pump
        .history(root)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.payload.contains("limit-exceeded"))
        .collect();
    assert_eq!(refused.len(), 1);
    let count = format!(
        "{} outputs of this delivery were refused this way",
        70 - Limits::DEFAULT_MAX_OUTPUTS
    );
    assert!(
        refused[0].payload.contains(&count),
        "{}",
        refused[0].payload
    );
}

#[tokio::test]
async fn a_parent_spawns_100_children_and_gets_exactly_100_results() {
    let limits = Limits {
        max_outputs: 100,
        ..Limits::default()
    };
    let pump = PumpBuilder::new()
        .config(PumpConfig {
            limits,
            ..PumpConfig::default()
        })
        .register(parent())
        .register(worker())
        .register(squarer())
        .build()
        .unwrap();
    let root = start(&pump, &p("fan", "100")).await;

    let history = pump.history(root).await.unwrap();
    let of = |local: &str| history.iter().filter(|r| r.root.local() == local).count();
    assert_eq!(
        (
            of("spawn-thread"),
            of("thread-spawned"),
            of("thread-result")
        ),
        (100, 100, 100)
    );
    let mut squares: Vec<u64> = history
        .iter()
        .filter(|r| r.root.local() == "thread-result")
        .map(|r| {
            assert_eq!(r.to.as_deref(), Some("parent"));
            assert!(r.payload.contains(r#"status="done""#));
            let inner = &r.payload[r.payload.find("<squared").unwrap()..];
            inner[inner.find('>').unwrap() + 1..inner.find("</").unwrap()]
                .parse()
                .unwrap()
        })
        .collect();
    squares.sort_unstable();
    assert_eq!(squares, (0..100u64).map(|i| i * i).collect::<Vec<_>>());

    // The tree is queryable, and each child's conversation stayed in the child.
    let tree = pump.tree(root);
    assert_eq!(tree.len(), 101);
    assert_eq!(tree[0].children.len(), 100);
    for child in &tree[1..] {
        assert_eq!(
            (child.parent, child.depth, child.state),
            (Some(root), 1, ThreadState::Done)
        );
        assert!(child.path.starts_with(&*tree[0].path) && child.path.contains(".job-"));
        let records = pump.history(child.id).await.unwrap();
        assert!(records.iter().all(|r| r.thread == child.id));
        let roots: Vec<&str> = records.iter().map(|r| r.root.local()).collect();
        assert_eq!(roots, ["job", "square", "squared", "thread-done"]);
    }
    let stored = pump.store().subtree(root).await.unwrap();
    assert_eq!(stored.len(), 101);
    pump.verify().await.unwrap();
}

#[tokio::test]
async fn a_child_that_runs_out_of_work_reports_its_last_payload() {
    let spawner = Registration::new(
        "spawner",
        Script::new(|msg, cx| {
            if msg.qname().local() == "go" {
                cx.spawn(
                    Spawn::new(p("say", "from the child"))
                        .to("echo")
                        .sub_id("e c/h<o"),
                );
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["echo"]);
    let pump = PumpBuilder::new()
        .register(spawner)
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let root = start(&pump, &p("go", "")).await;
    let tree = pump.tree(root);
    let child = &tree[1];
    assert!(
        child.path.ends_with(".echo"),
        "sub-id is sanitised: {}",
        child.path
    );
    assert_eq!(child.state, ThreadState::Done);
    let result = pump
        .history(root)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.root.local() == "thread-result")
        .unwrap();
    assert!(result.payload.contains(r#"status="idle""#));
    assert!(result.payload.contains(&p("say", "from the child")));
    // A finished thread accepts nothing more.
    let err = pump
        .post(Some(child.id), None, &p("say", "late"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "thread-closed");
}

#[tokio::test]
async fn two_conversations_over_the_same_pair_never_mix() {
    // The asker forwards each question to the answerer and sends the answer out to the client.
    let asker = Registration::new(
        "asker",
        Script::new(|msg, cx| {
            match msg.qname().local() {
                "ask" => cx.send("answerer", p("q", &number(msg).to_string())),
                "a" => cx.send("client", msg.payload().as_str()),
                _ => {}
            }
            Ok(())
        }),
    )
    .accepts(q("ask"))
    .peers(["answerer"]);
    let answerer = Registration::new(
        "answerer",
        Script::new(|msg, cx| {
            cx.reply(p("a", &(number(msg) * 10).to_string()));
            Ok(())
        }),
    )
    .accepts(q("q"));
    let pump = PumpBuilder::new()
        .register(asker)
        .register(answerer)
        .build()
        .unwrap();
    let a = pump
        .post(None, None, &p("ask", "1"))
        .await
        .unwrap()
        .thread();
    let b = pump
        .post(None, None, &p("ask", "1001"))
        .await
        .unwrap()
        .thread();
    let (pa, pb) = (pump.clone(), pump.clone());
    let send_a = tokio::spawn(async move {
        for i in 2..=200 {
            pa.post(Some(a), None, &p("ask", &i.to_string()))
                .await
                .unwrap();
        }
    });
    let send_b = tokio::spawn(async move {
        for i in 1002..=1200 {
            pb.post(Some(b), None, &p("ask", &i.to_string()))
                .await
                .unwrap();
        }
    });
    send_a.await.unwrap();
    send_b.await.unwrap();
    pump.settle(a).await;
    pump.settle(b).await;
    let expect = |range: std::ops::RangeInclusive<u64>| {
        range
            .map(|i| p("a", &(i * 10).to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(egress(&pump, a).await, expect(1..=200));
    assert_eq!(egress(&pump, b).await, expect(1001..=1200));
}

#[tokio::test]
async fn clear_context_narrows_the_listeners_view_of_history() {
    let viewer = Registration::new("viewer", HistoryCounter).accepts(q("look"));
    let pump = PumpBuilder::new().register(viewer).build().unwrap();
    let thread = start(&pump, &p("look", "")).await;
    for _ in 0..3 {
        pump.post(Some(thread), None, &p("look", "")).await.unwrap();
        pump.settle(thread).await;
    }
    pump.post(Some(thread), None, &p("look", "clear"))
        .await
        .unwrap();
    pump.settle(thread).await;
    pump.post(Some(thread), None, &p("look", "")).await.unwrap();
    pump.settle(thread).await;
    let seen = egress(&pump, thread).await;
    // Each look sees the looks and answers before it, and itself: 1, 3, 5, 7, then 9.
    assert_eq!(&seen[..5], ["1", "3", "5", "7", "9"].map(|n| p("seen", n)));
    let notices = notices(&pump, thread).await;
    assert_eq!(
        notices,
        [("viewer".into(), "context-cleared".into(), String::new())]
    );
    let history = pump.history(thread).await.unwrap();
    let cleared = history
        .iter()
        .find(|r| r.root.local() == "context-cleared")
        .unwrap();
    assert!(cleared.payload.contains(r#"kept-messages="2""#));
    // After the clear: 2 kept + clear-context request + context-cleared notice + the look = 5.
    assert_eq!(seen[5], p("seen", "5"));
}

/// Answers every look with how many records it can see; `clear` keeps the last 2.
struct HistoryCounter;

#[async_trait::async_trait]
impl agentpump::Listener for HistoryCounter {
    async fn handle(
        &self,
        msg: &Delivery,
        cx: &mut agentpump::Context,
    ) -> Result<(), agentpump::ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let seen = cx
            .history()
            .await
            .map_err(agentpump::ListenerError::failed)?
            .len();
        cx.reply(p("seen", &seen.to_string()));
        if msg.payload().as_str().contains("clear") {
            cx.clear_context(2);
        }
        Ok(())
    }
}

#[tokio::test]
async fn thread_done_closes_a_root_thread_and_later_outputs_are_recorded_as_refused() {
    let finisher = Registration::new(
        "finisher",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                cx.done(p("final", "42"));
                cx.emit(p("after", "too late"));
            }
            Ok(())
        }),
    )
    .accepts(q("finish"))
    .accepts(q("after"));
    let pump = PumpBuilder::new().register(finisher).build().unwrap();
    let thread = pump
        .post(None, None, &p("finish", ""))
        .await
        .unwrap()
        .thread();
    tokio::time::timeout(Duration::from_secs(5), pump.settle(thread))
        .await
        .unwrap();
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Done);
    let got = notices(&pump, thread).await;
    assert_eq!(
        got,
        [(
            "finisher".into(),
            "system-error".into(),
            "thread-closed".into()
        )]
    );
    let history = pump.history(thread).await.unwrap();
    assert!(
        history
            .iter()
            .any(|r| r.root.local() == "thread-done" && r.payload.contains("42"))
    );
    assert!(
        history
            .iter()
            .all(|r| r.root.local() != "after" || r.kind != RecordKind::Message)
    );
    assert_eq!(
        pump.post(Some(thread), None, &p("finish", ""))
            .await
            .unwrap_err()
            .code(),
        "thread-closed"
    );
}

#[tokio::test]
async fn a_spawner_reads_system_messages_typed_and_the_tree_reads_in_one_call() {
    // Reports what it reads, typed, to the client.
    let reader = Registration::new(
        "parent",
        Script::new(|msg, cx| {
            if let Some(r) = msg.thread_result() {
                let answer = r.payload().map_or("", |p| p.as_str());
                let line = format!("result {:?} of {}: {answer}", r.status(), r.thread());
                cx.send("client", p("saw", &line.replace('<', "&lt;")));
            } else if let Some(s) = msg.thread_spawned() {
                cx.send("client", p("saw", &format!("spawned {}", s.path())));
            } else if let Some(e) = msg.system_error() {
                let line = format!("error {} retry={}", e.code(), e.retry_allowed());
                cx.send("client", p("saw", &line));
            } else if msg.qname().local() == "fan" {
                cx.spawn(Spawn::new(p("job", "3")).sub_id("only"));
                cx.send("nobody", p("job", "0"));
            }
            Ok(())
        }),
    )
    .accepts(q("fan"))
    .peers(["worker"]);
    let pump = PumpBuilder::new()
        .register(reader)
        .register(worker())
        .register(squarer())
        .build()
        .unwrap();
    let root = start(&pump, &p("fan", "1")).await;
    let child = pump.tree(root)[1].id;
    let saw = egress(&pump, root).await.join("\n");
    let path = format!("{}.only", &root.to_string()[..8]);
    assert!(saw.contains(&format!("spawned {path}")), "{saw}");
    assert!(saw.contains("error no-route retry=false"), "{saw}");
    assert!(
        saw.contains(&format!("result Done of {child}: &lt;squared"))
            && saw.contains(">9&lt;/squared>"),
        "{saw}"
    );
    // The whole tree in one read, in the order it was accepted.
    let all = pump.tree_history(root).await.unwrap();
    let own = pump.history(root).await.unwrap().len() + pump.history(child).await.unwrap().len();
    assert_eq!(all.len(), own);
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(all.iter().any(|r| r.thread == child) && all.iter().any(|r| r.thread == root));
}

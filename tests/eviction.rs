//! Eviction (issue 19): a tree of threads quiet past `evict_idle_after` leaves memory, and
//! whatever names one of its threads later — a post, a resume, a read, a child's result — finds
//! it as it was: the same hash chain, counters and budgets. SQLite history, as `agentpump run`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::history::{HistoryStore, SqliteHistory};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, PumpConfig, PumpHandle, Registration, ThreadId, Usage};
use support::{Gate, Scratch, Script, looper, p, q};

const IDLE: Duration = Duration::from_millis(40);

fn pump(dir: &Scratch, turns: u64, listeners: Vec<Registration>) -> PumpHandle {
    let budget = Budget {
        turns: Some(turns),
        ..GovernorPolicy::default_budget()
    };
    pump_with(dir, budget, listeners)
}

/// A pump on SQLite history in `dir` with `budget` for root threads, evicting after [`IDLE`].
fn pump_with(dir: &Scratch, budget: Budget, listeners: Vec<Registration>) -> PumpHandle {
    let store: Arc<dyn HistoryStore> = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let config = PumpConfig {
        evict_idle_after: Some(IDLE),
        governor: GovernorPolicy {
            budget,
            ..GovernorPolicy::default()
        },
        ..PumpConfig::default()
    };
    listeners
        .into_iter()
        .fold(
            PumpBuilder::new().config(config).history(store),
            PumpBuilder::register,
        )
        .build()
        .unwrap()
}

/// `thread`'s live snapshot, reloaded if the sweeper took it since the test last touched it
/// (the idle time is short, and a loaded machine can pause a test longer).
async fn live(pump: &PumpHandle, thread: ThreadId) -> agentpump::ThreadInfo {
    for _ in 0..100 {
        assert!(pump.load(thread).await.unwrap(), "a known thread");
        if let Some(info) = pump.thread(thread) {
            return info;
        }
    }
    panic!("thread {thread} never stayed in memory long enough to read");
}

/// The live snapshots of `root`'s tree, as [`live`] does for one thread.
async fn live_tree(pump: &PumpHandle, root: ThreadId) -> Vec<agentpump::ThreadInfo> {
    loop {
        live(pump, root).await;
        let tree = pump.tree(root);
        if !tree.is_empty() {
            return tree;
        }
    }
}

/// Waits until `thread` has left memory (fails after 5 s).
async fn evicted(pump: &PumpHandle, thread: ThreadId) {
    for _ in 0..500 {
        if pump.thread(thread).is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("thread {thread} was never evicted: {:?}", pump.residency());
}

/// Echoes `<say>`, reporting a cost of 0.25 and 10 tokens each time.
fn paid_echo() -> Registration {
    Registration::new(
        "echo",
        Script::new(|msg, cx| {
            cx.usage(Usage {
                tokens_in: 10,
                cost: "0.25".parse().unwrap(),
                ..Usage::default()
            });
            cx.reply(msg.payload().as_str().to_owned());
            Ok(())
        }),
    )
    .accepts(q("say"))
}

#[tokio::test]
async fn a_post_into_an_evicted_thread_continues_its_chain_and_counters() {
    let dir = Scratch::new("evict-post");
    let pump = pump(&dir, 100, vec![paid_echo()]);
    let thread = support::start(&pump, &p("say", "one")).await;
    let before = live(&pump, thread).await.counters;
    assert_eq!(before.deliveries, 1);
    evicted(&pump, thread).await;
    assert!(pump.residency().evicted >= 1);

    pump.post(Some(thread), None, &p("say", "two"))
        .await
        .expect("an evicted thread takes posts");
    pump.settle(thread).await;
    let after = live(&pump, thread).await.counters;
    assert_eq!(
        (after.deliveries, after.tokens_in, after.cost.to_string()),
        (2, 20, "0.50".to_owned()),
        "counters continue from where they were"
    );
    assert_eq!(
        support::egress(&pump, thread).await,
        [p("say", "one"), p("say", "two")]
    );
    assert!(pump.residency().reloaded >= 1);
    // One chain: the records after the reload chain from the ones before.
    pump.verify().await.unwrap();
    pump.store().verify_thread(thread).await.unwrap();
}

#[tokio::test]
async fn a_halted_evicted_thread_resumes_with_its_budget() {
    let dir = Scratch::new("evict-resume");
    let pump = pump(&dir, 10, vec![looper()]);
    let thread = support::start(&pump, &p("tick", "0")).await;
    let halted = pump.reports(thread).await.unwrap().pop().unwrap();
    assert_eq!(halted.stop_reason.as_str(), "max-turns");
    evicted(&pump, thread).await;

    let five = Budget {
        turns: Some(5),
        ..Budget::default()
    };
    pump.resume(thread, &five)
        .await
        .expect("an evicted halted thread resumes");
    pump.settle(thread).await;
    let report = pump.reports(thread).await.unwrap().pop().unwrap();
    let line = &report.budget["max-turns"];
    assert_eq!(
        (line.spent.as_str(), line.limit.as_deref()),
        ("15", Some("15")),
        "five more turns, not ten more from a fresh budget"
    );
    assert_eq!(live(&pump, thread).await.counters.deliveries, 15);
    pump.verify().await.unwrap();
}

#[tokio::test]
async fn an_evicted_thread_is_read_through_the_http_api() {
    let dir = Scratch::new("evict-http");
    let pump = pump(
        &dir,
        100,
        vec![Registration::new("echo", Echo).accepts(q("say"))],
    );
    let thread = support::start(&pump, &p("say", "kept")).await;
    evicted(&pump, thread).await;
    let base = support::serve(&pump, "t0ken", 1 << 20).await;
    let http = support::http_client();
    let get = |path: String| {
        http.get(format!("{base}{path}"))
            .bearer_auth("t0ken")
            .send()
    };

    let listed: Vec<serde_json::Value> = get("/threads?state=idle".to_owned())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        listed.iter().any(|t| t["id"] == thread.to_string()),
        "listed while evicted: {listed:#?}"
    );
    assert!(pump.thread(thread).is_none(), "a listing reloads nothing");
    let info: serde_json::Value = get(format!("/threads/{thread}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["id"], thread.to_string());
    assert_eq!(info["counters"]["deliveries"], 1);
    let history: Vec<agentpump::history::Record> = get(format!("/threads/{thread}/history"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(history.len(), 2, "the message and its answer");
    let health: serde_json::Value = get("/health".to_owned())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        health["threads"]["reloaded"].as_u64().unwrap() >= 1,
        "{health}"
    );
}

#[tokio::test]
async fn a_childs_result_reaches_its_evicted_parent() {
    let dir = Scratch::new("evict-child");
    let spawner = Registration::new(
        "spawner",
        Script::new(|msg, cx| {
            if msg.qname().local() == "go" {
                let budget = Budget {
                    turns: Some(3),
                    ..Budget::default()
                };
                cx.spawn(agentpump::Spawn::new(p("tick", "0")).budget(budget));
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["looper"]);
    let pump = pump(&dir, 100, vec![spawner, looper()]);
    let root = support::start(&pump, &p("go", "")).await;
    let child = live_tree(&pump, root).await[1].id;
    pump.settle(root).await;
    let results = |records: Vec<agentpump::history::Record>| {
        records
            .iter()
            .filter(|r| r.root.local() == "thread-result" && r.to.as_deref() == Some("spawner"))
            .count()
    };
    assert_eq!(
        results(pump.history(root).await.unwrap()),
        1,
        "the child halted"
    );
    let spawner_turns = live(&pump, root).await.counters;
    evicted(&pump, root).await;
    assert!(pump.thread(child).is_none(), "the tree goes as one");

    // Resuming the child brings the tree back; its next halt is reported to the parent.
    let two = Budget {
        turns: Some(2),
        ..Budget::default()
    };
    pump.resume(child, &two).await.unwrap();
    pump.settle(root).await;
    assert_eq!(results(pump.history(root).await.unwrap()), 2);
    let now = live(&pump, root).await.counters;
    assert!(
        now.deliveries + now.notices > spawner_turns.deliveries + spawner_turns.notices,
        "the parent's spawner took the result: {now:?} after {spawner_turns:?}"
    );
    // Nothing waits in the parent; the halted child keeps its next tick for a resume.
    let pending = pump.store().pending().await.unwrap();
    assert!(pending.iter().all(|r| r.thread == child), "{pending:#?}");
    pump.verify().await.unwrap();
}

#[tokio::test]
async fn resident_threads_stay_flat_as_idle_threads_leave() {
    let dir = Scratch::new("evict-flat");
    let gate = Gate::new();
    let pump = pump(
        &dir,
        100,
        vec![
            Registration::new("echo", Echo).accepts(q("say")),
            Registration::new("held", gate.clone()).accepts(q("hold")),
        ],
    );
    let busy = pump
        .post(None, None, &p("hold", ""))
        .await
        .unwrap()
        .thread();
    gate.entered().await;
    let mut idle = Vec::new();
    for i in 0..20 {
        idle.push(support::start(&pump, &p("say", &i.to_string())).await);
    }
    for thread in &idle {
        evicted(&pump, *thread).await;
    }
    let r = pump.residency();
    assert_eq!(
        r.resident, 2,
        "the system thread and the busy one stay: {r:?}"
    );
    assert!(
        pump.thread(busy).is_some(),
        "a thread with a delivery running stays"
    );
    gate.open(1);
    pump.settle(busy).await;
    // Every evicted thread is still known.
    for thread in &idle {
        assert!(pump.load(*thread).await.unwrap());
    }
}

#[tokio::test]
async fn a_reloaded_thread_has_exactly_the_budget_it_had() {
    let dir = Scratch::new("evict-budget");
    let pump = pump(&dir, 40, vec![paid_echo()]);
    let thread = support::start(&pump, &p("say", "a")).await;
    for s in ["b", "c"] {
        pump.post(Some(thread), None, &p("say", s)).await.unwrap();
        pump.settle(thread).await;
    }
    live(&pump, thread).await;
    let before = pump.budget(thread).unwrap();
    assert_eq!(before["max-turns"].remaining.as_deref(), Some("37"));
    evicted(&pump, thread).await;
    assert!(pump.budget(thread).is_none(), "not in memory");
    live(&pump, thread).await;
    let mut after = pump.budget(thread).unwrap();
    // The wall clock moves while the thread is away: its allowance stays, its time goes on.
    let (mut before, clock) = (before, "max-wall-clock");
    if let (Some(was), Some(is)) = (before.remove(clock), after.remove(clock)) {
        assert_eq!(was.limit, is.limit, "the wall clock's allowance");
        let spent = |l: &agentpump::governor::report::BudgetLine| l.spent.parse::<u64>().unwrap();
        assert!(spent(&is) >= spent(&was), "{was:?} then {is:?}");
    }
    assert_eq!(after, before);
    assert_eq!(live(&pump, thread).await.counters.failures, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_racing_the_sweeper_land_in_one_thread() {
    let dir = Scratch::new("evict-race");
    let pump = pump(&dir, 1_000, vec![paid_echo()]);
    let thread = support::start(&pump, &p("say", "0")).await;
    let mut sent = 1;
    for round in 0..12u64 {
        // Around the idle time: some posts find the thread resident, some evicted, some land
        // while the sweeper is at it.
        tokio::time::sleep(IDLE + Duration::from_millis(round * 7 % 30)).await;
        let posts = (0..4).map(|i| {
            let pump = pump.clone();
            async move {
                pump.post(Some(thread), None, &p("say", &format!("{round}.{i}")))
                    .await
                    .unwrap()
            }
        });
        futures_join(posts).await;
        sent += 4;
    }
    pump.load(thread).await.unwrap();
    pump.settle(thread).await;
    assert_eq!(live(&pump, thread).await.counters.deliveries, sent);
    assert_eq!(support::egress(&pump, thread).await.len() as u64, sent);
    assert!(pump.residency().reloaded >= 1, "{:?}", pump.residency());
    pump.verify().await.unwrap();
}

/// Runs every future to completion, concurrently, on the test's runtime.
async fn futures_join<F: std::future::Future + Send + 'static>(futures: impl Iterator<Item = F>)
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    for h in handles {
        h.await.unwrap();
    }
}

#[tokio::test]
async fn a_reloaded_thread_keeps_its_wall_clock_deadline() {
    let dir = Scratch::new("evict-deadline");
    let budget = Budget {
        wall_clock: Some(Duration::from_millis(1_000)),
        ..GovernorPolicy::default_budget()
    };
    let pump = pump_with(&dir, budget, vec![paid_echo()]);
    let thread = support::start(&pump, &p("say", "one")).await;
    let created_by = tokio::time::Instant::now();
    // Reloaded 200 ms in, and again past its deadline: the deadline is the one set at its
    // start each time, not 1 s from a reload.
    for (at, say) in [(200, "two"), (1_050, "three")] {
        evicted(&pump, thread).await;
        tokio::time::sleep_until(created_by + Duration::from_millis(at)).await;
        pump.post(Some(thread), None, &p("say", say)).await.unwrap();
        pump.settle(thread).await;
    }
    let report = pump.reports(thread).await.unwrap().pop();
    let report = report.expect("halted: its deadline passed while it was evicted");
    assert_eq!(report.stop_reason.as_str(), "max-wall-clock");
    assert_eq!(
        support::egress(&pump, thread).await,
        [p("say", "one"), p("say", "two")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_racing_the_sweeper_keep_trees_whole() {
    let dir = Scratch::new("evict-trees");
    let spawner = Registration::new(
        "spawner",
        Script::new(|msg, cx| {
            if msg.qname().local() == "go" {
                for i in 0..2 {
                    let budget = Budget {
                        turns: Some(2),
                        ..Budget::default()
                    };
                    let spawn = agentpump::Spawn::new(p("tick", "0"))
                        .sub_id(format!("c{i}"))
                        .budget(budget);
                    cx.spawn(spawn);
                }
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["looper"]);
    let pump = pump(&dir, 1_000, vec![spawner, looper()]);
    let mut trees = Vec::new();
    for _ in 0..4 {
        let root = support::start(&pump, &p("go", "")).await;
        pump.settle(root).await;
        let children: Vec<ThreadId> = live_tree(&pump, root).await[1..]
            .iter()
            .map(|t| t.id)
            .collect();
        trees.push((root, children));
    }
    let one = Budget {
        turns: Some(1),
        ..Budget::default()
    };
    let rounds = 6u64;
    for round in 0..rounds {
        tokio::time::sleep(IDLE + Duration::from_millis(round * 11 % 30)).await;
        let mut tasks = Vec::new();
        for (_, children) in &trees {
            for child in children {
                let (pump, child, one) = (pump.clone(), *child, one.clone());
                tasks.push(tokio::spawn(async move {
                    // A child still taking the turn the last round gave it (a loaded machine)
                    // is not halted yet: ask again once it has. The race under test is with
                    // the sweeper, which may have evicted the child's tree meanwhile.
                    let mut tries = 0;
                    loop {
                        match pump.resume(child, &one).await {
                            Ok(()) => break,
                            Err(agentpump::pump::ControlError::WrongState {
                                state: agentpump::ThreadState::Active,
                                ..
                            }) if tries < 500 => {
                                tries += 1;
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            Err(e) => panic!("resume {child}: {e}"),
                        }
                    }
                }));
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
    for (root, children) in &trees {
        pump.load(*root).await.unwrap();
        pump.settle(*root).await;
        let results = pump
            .history(*root)
            .await
            .unwrap()
            .iter()
            .filter(|r| r.root.local() == "thread-result")
            .count() as u64;
        assert_eq!(
            results,
            2 * (1 + rounds),
            "every halt of each child reached its parent"
        );
        for child in children {
            let report = pump.reports(*child).await.unwrap().pop().unwrap();
            let line = &report.budget["max-turns"];
            let limit = (2 + rounds).to_string();
            assert_eq!(
                (line.spent.as_str(), line.limit.as_deref()),
                (limit.as_str(), Some(limit.as_str())),
                "each resume added one turn to the same account"
            );
            assert_eq!(live(&pump, *child).await.counters.deliveries, 2 + rounds);
        }
    }
    assert!(pump.residency().reloaded >= 1, "{:?}", pump.residency());
    pump.verify().await.unwrap();
}

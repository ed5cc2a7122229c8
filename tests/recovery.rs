//! Restart: a pump built on a store that an earlier pump left behind (here the same in-memory
//! store; the SQLite store does the same across processes) restores threads, governor ledgers and
//! queues, and delivers every accepted message that was not delivered — in order, once.

mod support;

use std::sync::Arc;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::history::{HistoryStore, MemoryHistory};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, PumpConfig, Registration, Role, ThreadState};
use support::{Gate, Script, egress, looper, p, q};

#[tokio::test]
async fn a_restarted_pump_delivers_what_was_accepted_but_not_delivered() {
    let store: Arc<dyn HistoryStore> = Arc::new(MemoryHistory::new());
    let gate = Gate::new();
    let first = PumpBuilder::new()
        .history(Arc::clone(&store))
        .register(Registration::new("worker", gate.clone()).accepts(q("job")))
        .build()
        .unwrap();
    let thread = first
        .post(None, None, &p("job", "0"))
        .await
        .unwrap()
        .thread();
    gate.entered().await; // job 0 is in flight when the first pump "dies"
    for i in 1..4 {
        first
            .post(Some(thread), None, &p("job", &i.to_string()))
            .await
            .unwrap();
    }
    assert_eq!(store.pending().await.unwrap().len(), 4);

    let second = PumpBuilder::new()
        .history(Arc::clone(&store))
        .register(Registration::new("worker", Echo).accepts(q("job")))
        .build()
        .unwrap();
    let report = second.recovered();
    assert_eq!(
        (report.threads, report.requeued),
        (2, 4),
        "the first pump's system thread and the work thread"
    );
    second.settle(thread).await;
    let expected: Vec<String> = (0..4).map(|i| p("job", &i.to_string())).collect();
    assert_eq!(
        egress(&second, thread).await,
        expected,
        "in order, each once"
    );
    assert!(store.pending().await.unwrap().is_empty());
    second.verify().await.unwrap();
    // One system thread across restarts: the first pump's, continued.
    assert_eq!(second.system_thread(), first.system_thread());
    assert_eq!(
        second
            .threads()
            .iter()
            .filter(|t| &*t.path == "system")
            .count(),
        1
    );
    let third = PumpBuilder::new()
        .history(Arc::clone(&store))
        .build()
        .unwrap();
    assert_eq!(third.system_thread(), first.system_thread());
    let boots = third
        .history(third.system_thread())
        .await
        .unwrap()
        .iter()
        .filter(|r| r.root.local() == "boot")
        .count();
    assert_eq!(boots, 3);
    third.verify().await.unwrap();
    // The first pump's system thread is closed like the new one.
    let old_system = first.system_thread();
    assert_eq!(
        second
            .post(Some(old_system), None, &p("job", "x"))
            .await
            .unwrap_err()
            .code(),
        "thread-closed"
    );
}

#[tokio::test]
async fn spent_budget_and_halts_survive_a_restart() {
    let looper = || {
        Registration::new(
            "looper",
            Script::new(|msg, cx| {
                if !msg.is_system() {
                    let text = msg.payload().as_str();
                    let n: u64 = text[text.find('>').unwrap() + 1..text.rfind("</").unwrap()]
                        .parse()
                        .unwrap();
                    cx.emit(p("tick", &(n + 1).to_string()));
                }
                Ok(())
            }),
        )
        .accepts(q("tick"))
        .role(Role::Agent)
    };
    let config = || PumpConfig {
        governor: GovernorPolicy {
            budget: Budget {
                turns: Some(5),
                ..Budget::default()
            },
            ..GovernorPolicy::default()
        },
        ..PumpConfig::default()
    };
    let store: Arc<dyn HistoryStore> = Arc::new(MemoryHistory::new());
    let first = PumpBuilder::new()
        .history(Arc::clone(&store))
        .config(config())
        .register(looper())
        .build()
        .unwrap();
    let thread = first
        .post(None, None, &p("tick", "0"))
        .await
        .unwrap()
        .thread();
    first.settle(thread).await;
    assert_eq!(first.thread(thread).unwrap().state, ThreadState::Halted);

    let second = PumpBuilder::new()
        .history(Arc::clone(&store))
        .config(config())
        .register(looper())
        .build()
        .unwrap();
    let info = second.thread(thread).unwrap();
    assert_eq!(
        (info.state, info.counters.deliveries),
        (ThreadState::Halted, 5)
    );
    second
        .resume(
            thread,
            &Budget {
                turns: Some(3),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    second.settle(thread).await;
    let info = second.thread(thread).unwrap();
    assert_eq!(
        (info.state, info.counters.deliveries),
        (ThreadState::Halted, 8),
        "5 before the restart + 3"
    );
    let reports = second.reports(thread).await.unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[1].budget["max-turns"].spent, "8");
}

/// Counts up by messaging itself forever.
/// Issue 13, case 4: "SQLite store; halt; resume +10; shut down; reopen; resume +5: halts at
/// once with `max-turns` 20/15." A recovered thread has exactly the budget it had: resumes and
/// carve-outs are replayed with the goals, in record order.
#[tokio::test]
async fn budget_added_by_resume_survives_a_restart() {
    let dir = support::Scratch::new("recovery-resume");
    let config = || PumpConfig {
        governor: GovernorPolicy {
            budget: Budget {
                turns: Some(10),
                ..GovernorPolicy::default_budget()
            },
            ..GovernorPolicy::default()
        },
        ..PumpConfig::default()
    };
    let open = || {
        let store = agentpump::history::SqliteHistory::open(dir.db()).unwrap();
        PumpBuilder::new()
            .config(config())
            .history(Arc::new(store))
            .register(looper())
            .build()
            .unwrap()
    };
    let turns = |n| Budget {
        turns: Some(n),
        ..Budget::default()
    };
    let first = open();
    let thread = support::start(&first, &p("tick", "0")).await;
    first.resume(thread, &turns(10)).await.unwrap();
    first.settle(thread).await;
    let before = first.reports(thread).await.unwrap().pop().unwrap();
    assert_eq!(before.budget["max-turns"].limit.as_deref(), Some("20"));
    first.shutdown(std::time::Duration::from_secs(1)).await;
    drop(first);

    let second = open();
    assert_eq!(second.thread(thread).unwrap().state, ThreadState::Halted);
    second.resume(thread, &turns(5)).await.unwrap();
    second.settle(thread).await;
    let after = second.reports(thread).await.unwrap().pop().unwrap();
    let line = &after.budget["max-turns"];
    assert_eq!(
        (line.spent.as_str(), line.limit.as_deref()),
        ("25", Some("25")),
        "five more turns ran after the restart"
    );
    assert_eq!(second.thread(thread).unwrap().counters.deliveries, 25);
}

/// A carved child keeps exactly its grant across a restart: resumed after it, it gets what it
/// was granted plus what the resume adds (before, it came back uncarved and unlimited).
#[tokio::test]
async fn a_carve_out_survives_a_restart() {
    let dir = support::Scratch::new("recovery-carve");
    let open = || {
        let store = agentpump::history::SqliteHistory::open(dir.db()).unwrap();
        let spawner = Registration::new(
            "spawner",
            Script::new(|msg, cx| {
                if msg.qname().local() == "go" {
                    let budget = Budget {
                        turns: Some(30),
                        ..Budget::default()
                    };
                    cx.spawn(agentpump::Spawn::new(p("tick", "0")).budget(budget));
                }
                Ok(())
            }),
        )
        .accepts(q("go"))
        .peers(["looper"]);
        PumpBuilder::new()
            .config(PumpConfig {
                governor: GovernorPolicy {
                    budget: Budget {
                        turns: Some(100),
                        ..GovernorPolicy::default_budget()
                    },
                    ..GovernorPolicy::default()
                },
                ..PumpConfig::default()
            })
            .history(Arc::new(store))
            .register(spawner)
            .register(looper())
            .build()
            .unwrap()
    };
    let first = open();
    let root = support::start(&first, &p("go", "")).await;
    let child = first.tree(root)[1].id;
    first.settle(child).await;
    let halted = first.reports(child).await.unwrap().pop().unwrap();
    assert_eq!(
        (
            halted.stop_reason.as_str(),
            halted.budget["max-turns"].limit.as_deref()
        ),
        ("max-turns", Some("30"))
    );
    first.shutdown(std::time::Duration::from_secs(1)).await;
    drop(first);

    let second = open();
    second
        .resume(
            child,
            &Budget {
                turns: Some(5),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    second.settle(child).await;
    let report = second.reports(child).await.unwrap().pop().unwrap();
    let line = &report.budget["max-turns"];
    assert_eq!(
        (
            report.stop_reason.as_str(),
            line.spent.as_str(),
            line.limit.as_deref()
        ),
        ("max-turns", "35", Some("35"))
    );
}

#[tokio::test]
async fn a_recovered_thread_keeps_its_failure_count() {
    let dir = support::Scratch::new("recovery-failures");
    let sqlite: Arc<dyn HistoryStore> =
        Arc::new(agentpump::history::SqliteHistory::open(dir.db()).unwrap());
    let memory: Arc<dyn HistoryStore> = Arc::new(MemoryHistory::new());
    for (name, store) in [("memory", memory), ("sqlite", sqlite)] {
        let failing = || {
            Registration::new(
                "flaky",
                Script::new(|_, _| Err(agentpump::ListenerError::Failed("no luck".into()))),
            )
            .accepts(q("job"))
        };
        let first = PumpBuilder::new()
            .history(Arc::clone(&store))
            .register(failing())
            .register(Registration::new("echo", Echo).accepts(q("say")))
            .build()
            .unwrap();
        let thread = support::start(&first, &p("job", "1")).await;
        for body in ["2", "3"] {
            first
                .post(Some(thread), None, &p("job", body))
                .await
                .unwrap();
        }
        first
            .post(Some(thread), None, &p("say", "fine"))
            .await
            .unwrap();
        first.settle(thread).await;
        let before = first.thread(thread).unwrap().counters;
        assert_eq!((before.failures, before.deliveries), (3, 4), "{name}");
        first.shutdown(std::time::Duration::from_secs(1)).await;

        let second = PumpBuilder::new()
            .history(Arc::clone(&store))
            .register(failing())
            .register(Registration::new("echo", Echo).accepts(q("say")))
            .build()
            .unwrap();
        let after = second.thread(thread).unwrap().counters;
        assert_eq!(after, before, "{name}");
        second.shutdown(std::time::Duration::from_secs(1)).await;
    }
}

/// A restart on the SQLite file reads each thread's tally and the pending messages, never every
/// record: the counters, the pending work and the hash chains come back as they were — from a
/// file this build wrote, and from an older one (no tallies) that the open migrates.
#[tokio::test]
async fn a_reopened_sqlite_file_restores_counters_pending_work_and_chains() {
    use agentpump::history::SqliteHistory;
    let dir = support::Scratch::new("recovery-reopened");
    for older in [false, true] {
        let _ = std::fs::remove_file(dir.db());
        let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
        let gate = Gate::new();
        let first = PumpBuilder::new()
            .history(Arc::clone(&store) as Arc<dyn HistoryStore>)
            .register(metered())
            .register(Registration::new("worker", gate.clone()).accepts(q("job")))
            .build()
            .unwrap();
        let thread = support::start(&first, &p("say", "1")).await;
        first.settle(thread).await;
        let before = first.thread(thread).unwrap().counters;
        assert_eq!((before.deliveries, before.tokens_in), (1, 7));
        assert_eq!(before.cost, rust_decimal::Decimal::new(25, 3));
        first
            .post(Some(thread), None, &p("job", "0"))
            .await
            .unwrap();
        gate.entered().await; // in flight when the process "dies"
        first
            .post(Some(thread), None, &p("job", "1"))
            .await
            .unwrap();
        store.close().unwrap();
        if older {
            let conn = rusqlite::Connection::open(dir.db()).unwrap();
            conn.execute_batch(
                "DROP TABLE tallies; UPDATE meta SET value = '3' WHERE key = 'schema_version';",
            )
            .unwrap();
        }

        let store: Arc<dyn HistoryStore> = Arc::new(SqliteHistory::open(dir.db()).unwrap());
        let second = PumpBuilder::new()
            .history(Arc::clone(&store))
            .register(metered())
            .register(Registration::new("worker", Echo).accepts(q("job")))
            .build()
            .unwrap();
        assert_eq!(second.recovered().requeued, 2, "older file: {older}");
        assert_eq!(
            second.thread(thread).unwrap().counters,
            before,
            "older file: {older}"
        );
        second.settle(thread).await;
        let after = second.thread(thread).unwrap().counters;
        assert_eq!(
            after.deliveries,
            before.deliveries + 2,
            "older file: {older}"
        );
        assert_eq!(
            store
                .threads(None)
                .await
                .unwrap()
                .iter()
                .find(|t| t.id == thread)
                .unwrap()
                .counters,
            after
        );
        // The chains continue from the digests read at the first append after the open.
        assert!(store.verify().await.unwrap() > 0);
        second.shutdown(std::time::Duration::from_secs(1)).await;
        drop(first); // its worker still waits at the gate: the process that "died"
    }
}

/// Answers `say` with nothing and reports 7 tokens in and a cost of 0.025.
fn metered() -> Registration {
    Registration::new(
        "metered",
        Script::new(|_, cx| {
            cx.usage(agentpump::governor::Usage {
                tokens_in: 7,
                cost: rust_decimal::Decimal::new(25, 3),
                ..Default::default()
            });
            Ok(())
        }),
    )
    .accepts(q("say"))
}

/// Opens `dir`'s SQLite file with the default policy and `budget` as the root budget, and
/// these listeners: each call is one run of the process.
fn reopen(
    dir: &support::Scratch,
    budget: Budget,
    registrations: Vec<Registration>,
) -> agentpump::PumpHandle {
    let store = agentpump::history::SqliteHistory::open(dir.db()).unwrap();
    let config = PumpConfig {
        governor: GovernorPolicy {
            budget,
            ..GovernorPolicy::default()
        },
        ..PumpConfig::default()
    };
    registrations
        .into_iter()
        .fold(
            PumpBuilder::new().config(config).history(Arc::new(store)),
            PumpBuilder::register,
        )
        .build()
        .unwrap()
}

/// Posts `payload` into `thread` and waits until it is quiet.
async fn post(pump: &agentpump::PumpHandle, thread: agentpump::ThreadId, payload: &str) {
    pump.post(Some(thread), None, payload).await.unwrap();
    pump.settle(thread).await;
}

/// The last halt of `thread`: its class and reason.
async fn halted(pump: &agentpump::PumpHandle, thread: agentpump::ThreadId) -> (String, String) {
    let report = pump.reports(thread).await.unwrap().pop();
    let report = report.expect("the thread halted");
    (report.class, report.stop_reason)
}

/// Answers every `look` with how many records it can see (`<seen>n</seen>`); `clear` keeps the
/// last 2.
fn viewer() -> Registration {
    struct Viewer;
    #[async_trait::async_trait]
    impl agentpump::Listener for Viewer {
        async fn handle(
            &self,
            msg: &agentpump::Delivery,
            cx: &mut agentpump::Context,
        ) -> Result<(), agentpump::ListenerError> {
            if msg.is_system() {
                return Ok(());
            }
            let history = cx.history().await;
            let seen = history.map_err(agentpump::ListenerError::failed)?.len();
            cx.reply(p("seen", &seen.to_string()));
            if msg.payload().as_str().contains("clear") {
                cx.clear_context(2);
            }
            Ok(())
        }
    }
    Registration::new("viewer", Viewer).accepts(q("look"))
}

/// Seed 003: "No Hidden State: Thread history is the sole memory."
/// A listener that cleared its context sees after a restart what it saw before it.
#[tokio::test]
async fn a_cleared_context_stays_cleared_after_a_restart() {
    let dir = support::Scratch::new("recovery-cleared");
    let first = reopen(&dir, Budget::default(), vec![viewer()]);
    let thread = support::start(&first, &p("look", "")).await;
    for _ in 0..3 {
        post(&first, thread, &p("look", "")).await;
    }
    post(&first, thread, &p("look", "clear")).await;
    post(&first, thread, &p("look", "")).await;
    first.shutdown(std::time::Duration::from_secs(1)).await;
    drop(first);

    let second = reopen(&dir, Budget::default(), vec![viewer()]);
    post(&second, thread, &p("look", "")).await;
    let seen = egress(&second, thread).await;
    // Before: 1, 3, 5, 7, then the clear keeps 2: 2 + request + notice + look = 5. After the
    // restart the view still starts there: those 5, the answer, and the new look.
    assert_eq!(
        &seen[4..],
        ["9", "5", "7"].map(|n| p("seen", n)),
        "the whole thread came back into view"
    );
}

/// Seed 003: "No Hidden State: Thread history is the sole memory."
/// A thread's wall clock runs from when it started, not from the restart — a carve-out's too.
#[tokio::test]
async fn wall_clocks_run_from_the_threads_start_across_a_restart() {
    let wall_clock = Budget {
        wall_clock: Some(std::time::Duration::from_millis(800)),
        ..Budget::default()
    };
    let dir = support::Scratch::new("recovery-wall-clock");
    let echo = || Registration::new("echo", Echo).accepts(q("say"));
    let first = reopen(&dir, wall_clock.clone(), vec![echo()]);
    let timed = support::start(&first, &p("say", "1")).await;
    first.shutdown(std::time::Duration::from_secs(1)).await;
    drop(first);
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    let second = reopen(&dir, wall_clock.clone(), vec![echo()]);
    post(&second, timed, &p("say", "2")).await;
    assert_eq!(
        halted(&second, timed).await,
        ("TIMEOUT".into(), "max-wall-clock".into()),
        "the root thread's clock restarted"
    );

    // A child carved 800 ms whose work is in flight when the first pump dies.
    let store: Arc<dyn HistoryStore> = Arc::new(MemoryHistory::new());
    let spawner = Registration::new(
        "spawner",
        Script::new(move |msg, cx| {
            if msg.qname().local() == "go" {
                let spawn = agentpump::Spawn::new(p("job", "")).budget(wall_clock.clone());
                cx.spawn(spawn);
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["worker"]);
    let gate = Gate::new();
    let first = PumpBuilder::new()
        .history(Arc::clone(&store))
        .register(spawner.clone())
        .register(Registration::new("worker", gate.clone()).accepts(q("job")))
        .build()
        .unwrap();
    let parent = support::start(&first, &p("go", "")).await;
    gate.entered().await;
    let child = first.tree(parent)[1].id;
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    let second = PumpBuilder::new()
        .history(Arc::clone(&store))
        .register(spawner)
        .register(Registration::new("worker", Echo).accepts(q("job")))
        .build()
        .unwrap();
    second.settle(child).await;
    assert_eq!(
        halted(&second, child).await,
        ("TIMEOUT".into(), "max-wall-clock".into()),
        "the child's carved clock was lost"
    );
}

/// Ask-Loop: "The host SHOULD track a digest of the control payload and halt the loop if no
/// progress is being made between turns." A repetition under way before a restart is caught
/// after it as it would have been without it: the same delivery, and the same control payload.
#[tokio::test]
async fn no_progress_windows_survive_a_restart() {
    let dir = support::Scratch::new("recovery-no-progress");
    // On each `nudge` from outside: the same `<say>` to echo's sink, and the same `continue`.
    let repeater = || {
        Registration::new(
            "repeater",
            Script::new(|msg, cx| {
                if msg.qname().local() == "nudge" {
                    cx.send("sink", p("note", "same"));
                    if msg.payload().as_str().contains("loop") {
                        cx.emit(r#"<loop xmlns="urn:agentpump:governor:v1" control="continue"/>"#);
                    }
                }
                Ok(())
            }),
        )
        .accepts(q("nudge"))
        .peers(["sink"])
    };
    let sink = || Registration::new("sink", Script::new(|_, _| Ok(()))).accepts(q("note"));
    for (case, nudge, reason) in [
        ("deliveries", p("nudge", ""), "repeated-message"),
        ("control", p("nudge", "loop"), "same-control-signal"),
    ] {
        let first = reopen(&dir, Budget::default(), vec![repeater(), sink()]);
        let thread = support::start(&first, &nudge).await;
        post(&first, thread, &nudge).await;
        assert!(first.reports(thread).await.unwrap().is_empty(), "{case}");
        first.shutdown(std::time::Duration::from_secs(1)).await;
        drop(first);

        let second = reopen(&dir, Budget::default(), vec![repeater(), sink()]);
        post(&second, thread, &nudge).await;
        let (class, why) = halted(&second, thread).await;
        assert_eq!(
            (class.as_str(), why.as_str()),
            ("no-progress", reason),
            "{case}"
        );
        second.shutdown(std::time::Duration::from_secs(1)).await;
    }
}

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

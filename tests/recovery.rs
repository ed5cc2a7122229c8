//! Restart: a pump built on a store that an earlier pump left behind (here the same in-memory
//! store; the SQLite store does the same across processes) restores threads, governor ledgers and
//! queues, and delivers every accepted message that was not delivered — in order, once.

mod support;

use std::sync::Arc;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::history::{HistoryStore, MemoryHistory};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, PumpConfig, Registration, Role, ThreadState};
use support::{Gate, Script, egress, p, q};

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

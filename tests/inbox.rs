//! A person in the loop (issue 31): questions through the `ask` tool and approvals of held
//! tool calls are records in the thread, the thread waits, and an answer is applied once.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentpump::history::{HistoryStore, SqliteHistory};
use agentpump::listeners::{CommandConfig, CommandTool};
use agentpump::pump::InboxError;
use agentpump::pump::inbox::Decision;
use agentpump::pump::inbox::INBOX_NS;
use agentpump::tool::{Answer, Call, ErrorType, ToolResult};
use agentpump::value::Value;
use agentpump::{
    Approval, InboxFilter, InboxPolicy, Payload, PumpBuilder, PumpConfig, PumpHandle, Reply,
    ThreadId, ThreadState, ask_tool,
};
use support::{Scratch, egress};

fn policy(approvals: &[(&str, Approval)]) -> InboxPolicy {
    let approvals: BTreeMap<String, Approval> = approvals
        .iter()
        .map(|(n, a)| ((*n).to_owned(), a.clone()))
        .collect();
    InboxPolicy {
        approvals,
        ..InboxPolicy::default()
    }
}

fn builder(inbox: InboxPolicy) -> PumpBuilder {
    let command = CommandTool::new(CommandConfig {
        allow: vec!["echo".to_owned()],
        ..CommandConfig::default()
    });
    PumpBuilder::new()
        .config(PumpConfig {
            inbox,
            ..PumpConfig::default()
        })
        .register(command.registration())
        .register(ask_tool())
}

fn echo(words: &[&str]) -> String {
    let args = words.iter().map(|w| Value::Str((*w).to_owned())).collect();
    Call::new("command")
        .id("c1")
        .arg("program", "echo")
        .arg("args", Value::List(args))
        .to_xml()
}

fn reply(decision: Decision, by: &str) -> Reply {
    Reply {
        decision,
        by: by.to_owned(),
    }
}

/// The tool answers the client got in `thread`.
async fn answers(pump: &PumpHandle, thread: ThreadId) -> Vec<Answer> {
    let limits = agentpump::Limits::default();
    egress(pump, thread)
        .await
        .iter()
        .map(|xml| {
            Answer::parse(&Payload::parse(xml, &limits).unwrap())
                .unwrap()
                .unwrap()
        })
        .collect()
}

fn result(answer: &Answer) -> &ToolResult {
    match answer {
        Answer::Result(r) => r,
        Answer::Error(e) => panic!("expected a result, got {e:?}"),
    }
}

/// Posts `call` into a new thread, waits until it settles, and returns the thread and its one
/// open request.
async fn held(pump: &PumpHandle, call: &str) -> (ThreadId, agentpump::OpenRequest) {
    let thread = pump.post(None, None, call).await.unwrap().thread();
    pump.settle(thread).await;
    let filter = InboxFilter {
        thread: Some(thread),
        ..InboxFilter::default()
    };
    let mut open = pump.inbox(&filter).await.unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    (thread, open.remove(0))
}

/// "The pump holds such a call, asks, and then forwards it (approve)" — and the thread waits
/// meanwhile, taking no turns.
#[tokio::test]
async fn an_approved_command_runs_once_after_the_thread_waited() {
    let pump = builder(policy(&[("command", Approval::Every)]))
        .build()
        .unwrap();
    let (thread, request) = held(&pump, &echo(&["hi"])).await;
    assert_eq!(request.request.tool, "command");
    assert_eq!(request.request.listener, "client");
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Waiting);
    assert!(
        answers(&pump, thread).await.is_empty(),
        "the tool ran before approval"
    );
    let turns = pump.thread(thread).unwrap().counters.deliveries;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(pump.thread(thread).unwrap().counters.deliveries, turns);

    let answer = pump
        .answer(request.id, reply(Decision::Approve, "alice"))
        .await
        .unwrap();
    assert_eq!(answer.by, "alice");
    pump.settle(thread).await;
    let got = answers(&pump, thread).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(result(&got[0]).fields["stdout"], Value::Str("hi\n".into()));
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
    // One call is one call: held, then forwarded, it costs one tool call (issue 47).
    assert_eq!(pump.thread(thread).unwrap().counters.tool_calls, 1);
    assert!(
        pump.inbox(&InboxFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
    let history = pump.history(thread).await.unwrap();
    let roots: Vec<_> = history
        .iter()
        .filter(|r| r.root.namespace() == INBOX_NS)
        .collect();
    assert_eq!(roots.len(), 2, "one request and one answer record");
}

/// "forwards edited arguments (edit — recorded as such)"
#[tokio::test]
async fn an_edited_command_runs_with_the_edited_arguments() {
    let pump = builder(policy(&[("command", Approval::Every)]))
        .build()
        .unwrap();
    let (thread, request) = held(&pump, &echo(&["rm", "-rf"])).await;
    let arguments = serde_json::json!({"program": "echo", "args": ["safe"]});
    let edit = Decision::Edit { arguments };
    pump.answer(request.id, reply(edit, "bob")).await.unwrap();
    pump.settle(thread).await;
    let got = answers(&pump, thread).await;
    assert_eq!(
        result(&got[0]).fields["stdout"],
        Value::Str("safe\n".into())
    );
    let history = pump.history(thread).await.unwrap();
    assert!(
        history.iter().any(|r| r.root.namespace() == INBOX_NS
            && r.payload.contains("&quot;decision&quot;:&quot;edit&quot;")),
        "the edit is recorded as an edit"
    );
}

/// "or answers the caller with `<error type=\"denied\">` and the reason (deny)"
#[tokio::test]
async fn a_denied_command_answers_the_caller_denied_with_the_reason() {
    let patterns = Approval::Matching(vec!["echo danger*".to_owned()]);
    let pump = builder(policy(&[("command", patterns)])).build().unwrap();
    // A call the patterns do not match runs at once.
    let free = pump
        .post(None, None, &echo(&["fine"]))
        .await
        .unwrap()
        .thread();
    pump.settle(free).await;
    assert_eq!(answers(&pump, free).await.len(), 1);

    let (thread, request) = held(&pump, &echo(&["danger", "zone"])).await;
    let deny = Decision::Deny {
        reason: "not on a friday".to_owned(),
    };
    pump.answer(request.id, reply(deny, "carol")).await.unwrap();
    pump.settle(thread).await;
    match &answers(&pump, thread).await[..] {
        [Answer::Error(e)] => {
            assert_eq!(e.kind, ErrorType::Denied);
            assert!(
                e.message.contains("not on a friday") && e.message.contains("carol"),
                "{e:?}"
            );
            assert_eq!(e.call.as_deref(), Some("c1"));
        }
        other => panic!("expected one denied error, got {other:?}"),
    }
}

/// "a second answer to the same request is refused (409, naming who answered and when)";
/// "concurrent answers to one request (one wins, the rest 409)"
#[tokio::test]
async fn of_concurrent_answers_one_wins_and_the_rest_name_the_winner() {
    let pump = builder(policy(&[("command", Approval::Every)]))
        .build()
        .unwrap();
    let (thread, request) = held(&pump, &echo(&["once"])).await;
    let tries = (0..8).map(|i| {
        let pump = pump.clone();
        tokio::spawn(async move {
            pump.answer(request.id, reply(Decision::Approve, &format!("p{i}")))
                .await
        })
    });
    let outcomes = futures_util::future::join_all(tries).await;
    let winners: Vec<_> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().unwrap().as_ref().ok())
        .collect();
    assert_eq!(winners.len(), 1);
    for outcome in &outcomes {
        if let Err(InboxError::AlreadyAnswered { by, at_ms, .. }) = outcome.as_ref().unwrap() {
            assert_eq!(by, &winners[0].by);
            assert_eq!(*at_ms, winners[0].at_ms);
        }
    }
    pump.settle(thread).await;
    assert_eq!(
        answers(&pump, thread).await.len(),
        1,
        "the call was made once"
    );
}

/// "a timeout applies the default and records that it did"; "an answer to an expired request
/// is refused"
#[tokio::test]
async fn a_question_that_times_out_gets_its_default_recorded() {
    let pump = builder(InboxPolicy::default()).build().unwrap();
    let ask = Call::new("ask")
        .id("q")
        .arg("question", "deploy now?")
        .arg("choices", Value::List(vec!["yes".into(), "no".into()]))
        .arg("default", "no")
        .arg("timeout_seconds", Value::Num("0.2".parse().unwrap()));
    let (thread, request) = held(&pump, &ask.to_xml()).await;
    assert_eq!(request.request.choices, ["yes", "no"]);
    tokio::time::sleep(Duration::from_millis(600)).await;
    pump.settle(thread).await;
    let got = answers(&pump, thread).await;
    assert_eq!(result(&got[0]).fields["answer"], Value::Str("no".into()));
    assert_eq!(result(&got[0]).fields["by"], Value::Str("timeout".into()));
    let late = pump
        .answer(
            request.id,
            reply(
                Decision::Answer {
                    value: "yes".into(),
                },
                "dave",
            ),
        )
        .await;
    assert!(
        matches!(late, Err(InboxError::AlreadyAnswered { ref by, .. }) if by == "timeout"),
        "{late:?}"
    );
}

/// An answer outside the question's choices is refused, and the question stays open.
#[tokio::test]
async fn an_answer_outside_the_choices_is_refused_and_the_question_stays_open() {
    let pump = builder(InboxPolicy::default()).build().unwrap();
    let ask = Call::new("ask")
        .arg("question", "which?")
        .arg("choices", Value::List(vec!["a".into(), "b".into()]));
    let (thread, request) = held(&pump, &ask.to_xml()).await;
    let wrong = pump
        .answer(
            request.id,
            reply(Decision::Answer { value: "c".into() }, "e"),
        )
        .await;
    assert!(
        matches!(wrong, Err(InboxError::Invalid { .. })),
        "{wrong:?}"
    );
    let approve = pump.answer(request.id, reply(Decision::Approve, "e")).await;
    assert!(
        matches!(approve, Err(InboxError::Invalid { .. })),
        "{approve:?}"
    );
    pump.answer(
        request.id,
        reply(Decision::Answer { value: "b".into() }, "e"),
    )
    .await
    .unwrap();
    pump.settle(thread).await;
    assert_eq!(
        result(&answers(&pump, thread).await[0]).fields["answer"],
        Value::Str("b".into())
    );
}

/// "Questions count in a budget of their own (`questions`), so an agent cannot flood a person"
#[tokio::test]
async fn past_the_questions_budget_nobody_is_asked() {
    let inbox = InboxPolicy {
        questions: Some(1),
        ..InboxPolicy::default()
    };
    let pump = builder(inbox).build().unwrap();
    let ask = Call::new("ask").arg("question", "one?").to_xml();
    let (thread, _) = held(&pump, &ask).await;
    pump.post(Some(thread), None, &ask).await.unwrap();
    pump.settle(thread).await;
    assert_eq!(pump.inbox(&InboxFilter::default()).await.unwrap().len(), 1);
    match &answers(&pump, thread).await[..] {
        [Answer::Error(e)] => {
            assert_eq!(e.kind, ErrorType::NotAllowed);
            assert!(e.message.contains("questions budget"), "{e:?}");
        }
        other => panic!("expected one refusal, got {other:?}"),
    }
}

/// "after kill -9 between the request and the answer, the restarted host still lists the
/// request and applies the answer when it comes" (here: the pump dropped without shutdown).
#[tokio::test]
async fn a_restarted_pump_lists_the_request_and_applies_the_answer_once() {
    let dir = Scratch::new("inbox-restart");
    let thread = {
        let store: Arc<dyn HistoryStore> = Arc::new(SqliteHistory::open(dir.db()).unwrap());
        let pump = builder(policy(&[("command", Approval::Every)]))
            .history(store)
            .build()
            .unwrap();
        held(&pump, &echo(&["after", "restart"])).await.0
    };
    let store: Arc<dyn HistoryStore> = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = builder(policy(&[("command", Approval::Every)]))
        .history(store)
        .build()
        .unwrap();
    let open = pump.inbox(&InboxFilter::default()).await.unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].thread, thread);
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Waiting);
    pump.answer(open[0].id, reply(Decision::Approve, "frank"))
        .await
        .unwrap();
    pump.settle(thread).await;
    let got = answers(&pump, thread).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        result(&got[0]).fields["stdout"],
        Value::Str("after restart\n".into())
    );
}

/// "Any listener, LLM agent or process can ask a person … Processes ask through a tool call":
/// `USE ask` waits, and the answer is what the process captures.
#[tokio::test]
async fn a_process_asks_with_use_ask_and_captures_the_answer() {
    use support::process::{CallLog, Setup, doc, fields, go};
    let body = "  USE `ask` where: choices=[\"yes\", \"no\"], question=\"Ship it?\"\n  CAPTURE ANSWER from `ask` map: \"answer\"→ANSWER\n  RETURN: ANSWER\n";
    let log = CallLog::default();
    let pump = Setup::new(&doc("", body), &log)
        .builder()
        .register(ask_tool())
        .build()
        .unwrap();
    let (thread, request) = held(&pump, &go("")).await;
    assert_eq!(request.request.listener, "main");
    assert_eq!(request.request.question, "Ship it?");
    assert_eq!(request.request.choices, ["yes", "no"]);
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Waiting);
    let value = Decision::Answer {
        value: "yes".into(),
    };
    pump.answer(request.id, reply(value, "erin")).await.unwrap();
    pump.settle(thread).await;
    let records = pump.history(thread).await.unwrap();
    assert_eq!(
        fields(&records).get("ANSWER"),
        Some(&Value::Str("yes".into()))
    );
}

/// A store whose commits of a `<request>` become visible (and durable) only after a pause: the
/// moment between a request being held and its commit, widened. The first `.1` of those
/// commits fail after the pause (a disk that filled meanwhile).
#[derive(Debug)]
struct SlowRequests(
    Arc<agentpump::history::MemoryHistory>,
    std::sync::atomic::AtomicUsize,
);

impl SlowRequests {
    fn new(failing: usize) -> Arc<Self> {
        let memory = Arc::new(agentpump::history::MemoryHistory::new());
        Arc::new(Self(memory, failing.into()))
    }

    /// Whether this commit is one of those that fail.
    fn fails(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.1
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

#[async_trait::async_trait]
impl HistoryStore for SlowRequests {
    fn append(
        &self,
        batch: agentpump::history::Batch,
    ) -> Result<agentpump::history::Ticket, agentpump::history::HistoryError> {
        let request = batch
            .records
            .iter()
            .any(|r| r.envelope.payload().qname().is(INBOX_NS, "request"));
        if !request {
            return self.0.append(batch);
        }
        let inner = Arc::clone(&self.0);
        let fails = self.fails();
        Ok(agentpump::history::Ticket::pending(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if fails {
                return Err(agentpump::history::HistoryError::Unavailable {
                    what: "test store: the request's commit failed".to_owned(),
                    source: None,
                });
            }
            inner.append(batch)?.wait().await
        }))
    }
    async fn thread(
        &self,
        thread: ThreadId,
        since: u64,
    ) -> Result<Vec<agentpump::history::Record>, agentpump::history::HistoryError> {
        self.0.thread(thread, since).await
    }
    async fn record(
        &self,
        id: agentpump::MessageId,
    ) -> Result<Option<agentpump::history::Record>, agentpump::history::HistoryError> {
        self.0.record(id).await
    }
    async fn pending(
        &self,
    ) -> Result<Vec<agentpump::history::Record>, agentpump::history::HistoryError> {
        self.0.pending().await
    }
    async fn reports(
        &self,
        thread: ThreadId,
    ) -> Result<Vec<agentpump::governor::HaltingReport>, agentpump::history::HistoryError> {
        self.0.reports(thread).await
    }
    async fn threads(
        &self,
        state: Option<ThreadState>,
    ) -> Result<Vec<agentpump::ThreadInfo>, agentpump::history::HistoryError> {
        self.0.threads(state).await
    }
    async fn verify(&self) -> Result<u64, agentpump::history::HistoryError> {
        self.0.verify().await
    }
}

/// "An answer is applied once" — and a request the inbox lists can be answered at once: an
/// answer that comes before the request's commit is durable waits for it instead of being
/// refused as unknown (seen as a 404 right after `GET /inbox` listed the request).
#[tokio::test]
async fn a_request_answered_the_moment_it_is_listed_is_applied() {
    let store = SlowRequests::new(0);
    let pump = builder(policy(&[("command", Approval::Every)]))
        .history(store)
        .build()
        .unwrap();
    let thread = pump
        .post(None, None, &echo(&["now"]))
        .await
        .unwrap()
        .thread();
    let mut open = Vec::new();
    while open.is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
        open = pump.inbox(&InboxFilter::default()).await.unwrap();
    }
    let answer = pump
        .answer(open[0].id, reply(Decision::Approve, "quick"))
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    pump.settle(thread).await;
    let answers = answers(&pump, thread).await;
    assert_eq!(answers.len(), 1);
    assert_eq!(
        result(&answers[0]).fields["stdout"],
        Value::Str("now\n".into())
    );
}

/// "A request is listed only after its record commits" (the seed of issue 31's last items): a
/// request whose commit fails is never listed nor counted; the thread does not wait on it, the
/// delivery is made again once the store takes writes, and that request is the one listed.
#[tokio::test]
async fn a_request_whose_commit_fails_is_not_listed_and_is_asked_once_again() {
    let store = SlowRequests::new(1);
    let limited = InboxPolicy {
        questions: Some(1),
        ..policy(&[("command", Approval::Every)])
    };
    let pump = builder(limited).history(store).build().unwrap();
    let thread = pump
        .post(None, None, &echo(&["again"]))
        .await
        .unwrap()
        .thread();
    let mut listed = Vec::new();
    for _ in 0..100 {
        let open = pump.inbox(&InboxFilter::default()).await.unwrap();
        for request in open {
            if !listed
                .iter()
                .any(|r: &agentpump::OpenRequest| r.id == request.id)
            {
                let stored = pump.history(thread).await.unwrap();
                let committed = stored.iter().any(|r| r.id == request.id);
                assert!(committed, "request {} listed before its commit", request.id);
                listed.push(request);
            }
        }
        if !listed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Waiting);
    let answer = pump.answer(listed[0].id, reply(Decision::Approve, "ann"));
    let answer = tokio::time::timeout(Duration::from_secs(2), answer).await;
    assert!(matches!(answer, Ok(Ok(_))), "{answer:?}");
    pump.settle(thread).await;
    assert_ne!(pump.thread(thread).unwrap().state, ThreadState::Waiting);
    let answers = answers(&pump, thread).await;
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        result(&answers[0]).fields["stdout"],
        Value::Str("again\n".into())
    );
}

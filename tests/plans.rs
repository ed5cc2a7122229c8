//! Visible plans (issue 36, seed 003's `<todo-until>`): recorded and read back by the agent that
//! wrote it, the seed's spelling in no namespace taken in, malformed plans refused naming the
//! fault, and explicit termination — a `done` or `thread-done` while the thread's latest plan
//! has open steps is refused with `system-error plan-open` naming them, and stands once the
//! steps are done or abandoned; the plan outlives a restart. An LLM agent sees its plan.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentpump::governor::{CertificateType, Control, Goal, Signal};
use agentpump::history::{RecordKind, SqliteHistory};
use agentpump::todo::{Mark, Plan, TODO_NS};
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, PumpHandle, Registration, Role,
    ThreadId, ThreadState,
};
use support::{Scratch, Script, body, egress, notices, p, q};

/// Seed 003's example plan: one step done, one open.
const SEED_PLAN: &str = r#"<todo-until condition="all sources checked">
  <step done="true">Search web</step>
  <step done="false">Analyze results</step>
</todo-until>"#;

fn plan(second: Mark) -> Plan {
    Plan::new("all sources checked")
        .step("Search web", Mark::Done)
        .step("Analyze results", second)
}

/// Plans that are not plans, and the reason the agent is told (`huh invalid-request`).
const MALFORMED: &[(&str, &str)] = &[
    (
        r#"<todo xmlns="urn:agentpump:todo:v1"/>"#,
        "<todo> is not a plan element",
    ),
    (
        r#"<todo-until><step done="false">x</step></todo-until>"#,
        "<todo-until> needs condition=",
    ),
    (
        r#"<todo-until condition="c"></todo-until>"#,
        "<todo-until> lists no <step>",
    ),
    (
        r#"<todo-until condition="c"><step>x</step></todo-until>"#,
        "step 1 of <todo-until> has no `done`",
    ),
    (
        r#"<todo-until condition="c"><step done="true">a</step><step done="maybe">b</step></todo-until>"#,
        r#"step 2 of <todo-until>: done="maybe" is not "false", "true" or "abandoned""#,
    ),
    (
        r#"<todo-until condition="c"><step done="false"> </step></todo-until>"#,
        "step 1 of <todo-until> is empty",
    ),
    (
        r#"<todo-until condition="c" owner="me"><step done="false">x</step></todo-until>"#,
        "unknown attribute `owner` on <todo-until>",
    ),
    (
        r#"<todo-until condition="c"><task done="false">x</task></todo-until>"#,
        "unknown element <task> in <todo-until>",
    ),
    (
        r#"<todo-until condition="c"><step done="false">a <b>b</b></step></todo-until>"#,
        "step 1 holds an element <b>",
    ),
];

/// An agent driven by `<work>` words: `goal` declares an EXACT goal with one criterion;
/// `open`, `closed`, `abandoned` write the plan with its second step so; `seed` writes the
/// seed's plan as model text; `bad N` writes `MALFORMED[N]`; `done` says done; `closed-done`
/// writes the closed plan and says done in one turn; `finish` sends `thread-done`; `read`
/// answers with the plan it reads back from the thread's history. Every `huh` and
/// `system-error` message it receives is kept in `told`.
struct Planner {
    told: Arc<Mutex<Vec<String>>>,
}

#[agentpump::async_trait]
impl Listener for Planner {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if let Some(huh) = msg.huh() {
            self.told.lock().unwrap().push(huh.message().to_owned());
        }
        if let Some(error) = msg.system_error() {
            self.told.lock().unwrap().push(error.message().to_owned());
        }
        if msg.is_system() {
            return Ok(());
        }
        let work = body(msg).to_owned();
        match work.as_str() {
            "goal" => cx.goal(&Goal {
                text: "all sources checked".into(),
                criteria: vec![("sources".into(), "every source read".into())],
                certificates: vec![CertificateType::Exact],
                ..Goal::default()
            }),
            "open" => cx.emit(plan(Mark::Open).to_xml()),
            "closed" => cx.emit(plan(Mark::Done).to_xml()),
            "abandoned" => cx.emit(plan(Mark::Abandoned).to_xml()),
            "seed" => cx.emit_text(format!("Here is my plan:\n{SEED_PLAN}\n")),
            "done" => cx.signal(Signal::new(Control::Done)),
            "closed-done" => {
                cx.emit(plan(Mark::Done).to_xml());
                cx.signal(Signal::new(Control::Done));
            }
            "finish" => cx.done(p("answer", "found")),
            "read" => {
                let history = cx.history().await.map_err(ListenerError::failed)?;
                let read = Plan::latest(&history).map_err(ListenerError::failed)?;
                let open: Vec<String> = read
                    .iter()
                    .flat_map(|plan| plan.open().map(|(n, s)| format!("{n}:{}", s.text)))
                    .collect();
                cx.reply(p("read", &open.join(",")));
            }
            bad => {
                let n: usize = bad.trim_start_matches("bad ").parse().unwrap();
                cx.emit_text(MALFORMED[n].0);
            }
        }
        Ok(())
    }
}

fn verifier() -> Registration {
    Registration::new(
        "verifier",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                cx.criterion("sources", true, "report-7");
            }
            Ok(())
        }),
    )
    .accepts(q("check"))
    .role(Role::Verifier)
}

fn builder(told: &Arc<Mutex<Vec<String>>>) -> PumpBuilder {
    let planner = Planner {
        told: Arc::clone(told),
    };
    PumpBuilder::new()
        .register(
            Registration::new("planner", planner)
                .accepts(q("work"))
                .role(Role::Agent),
        )
        .register(verifier())
}

fn pump() -> (PumpHandle, Arc<Mutex<Vec<String>>>) {
    let told = Arc::new(Mutex::new(Vec::new()));
    (builder(&told).build().unwrap(), told)
}

/// Posts each `(root, body)` into one thread, settling after each; returns the thread.
async fn drive(pump: &PumpHandle, thread: Option<ThreadId>, steps: &[(&str, &str)]) -> ThreadId {
    let mut thread = thread;
    for (root, text) in steps {
        let to = if *root == "work" {
            "planner"
        } else {
            "verifier"
        };
        let posted = pump.post(thread, Some(to), &p(root, text)).await.unwrap();
        thread = Some(posted.thread());
        tokio::time::timeout(Duration::from_secs(10), pump.settle(posted.thread()))
            .await
            .expect("the thread settles");
    }
    thread.unwrap()
}

/// The halt class of the thread's report, if it halted.
async fn halted(pump: &PumpHandle, thread: ThreadId) -> Option<String> {
    pump.reports(thread).await.unwrap().pop().map(|r| r.class)
}

/// The `system-error` codes the planner got.
async fn errors(pump: &PumpHandle, thread: ThreadId) -> Vec<String> {
    errors_to(pump, thread, "planner").await
}

/// The `system-error` codes `listener` got.
async fn errors_to(pump: &PumpHandle, thread: ThreadId, listener: &str) -> Vec<String> {
    notices(pump, thread)
        .await
        .into_iter()
        .filter(|(to, element, _)| to == listener && element == "system-error")
        .map(|(_, _, code)| code)
        .collect()
}

/// Seed 003: "Enables self-reading" — the plan is recorded like any payload (to the governor,
/// its bytes as written) and the agent that wrote it reads it back from the thread's history.
#[tokio::test]
async fn a_plan_is_recorded_and_read_back_by_the_agent_that_wrote_it() {
    let (pump, _) = pump();
    let thread = drive(&pump, None, &[("work", "open"), ("work", "read")]).await;
    let history = pump.history(thread).await.unwrap();
    let recorded: Vec<_> = history
        .iter()
        .filter(|r| r.root.is(TODO_NS, "todo-until"))
        .collect();
    assert_eq!(recorded.len(), 1);
    assert_eq!(&*recorded[0].from, "planner");
    assert_eq!(recorded[0].to.as_deref(), Some("governor"));
    assert_eq!(recorded[0].kind, RecordKind::Message);
    assert_eq!(&*recorded[0].payload, plan(Mark::Open).to_xml());
    assert_eq!(
        Plan::latest(&history).unwrap(),
        Some(plan(Mark::Open)),
        "read back through the public function"
    );
    assert_eq!(
        egress(&pump, thread).await,
        [p("read", "2:Analyze results")]
    );
}

/// Seed 003: "Enables self-reading, GUI rendering, explicit termination" — a `done` while the
/// thread's latest plan has open steps gets a `system-error` naming them, and the thread does
/// not halt EXACT on it (every criterion is met by the verifier); once the agent writes the
/// plan again with the step done, its `done` stands.
#[tokio::test]
async fn done_while_the_plan_has_open_steps_is_refused_naming_them() {
    let (pump, told) = pump();
    let ready = [("work", "goal"), ("check", ""), ("work", "open")];
    let thread = drive(&pump, None, &ready).await;
    drive(&pump, Some(thread), &[("work", "done")]).await;
    assert_eq!(
        halted(&pump, thread).await,
        None,
        "not halted on a refused done"
    );
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
    assert_eq!(errors(&pump, thread).await, ["plan-open"]);
    let message = told.lock().unwrap().pop().unwrap();
    assert!(
        message.contains(
            r#"the plan until "all sources checked" has 1 open step: 2 "Analyze results""#
        ),
        "{message}"
    );
    assert!(
        !message.contains("Search web"),
        "a done step is not named: {message}"
    );
    drive(&pump, Some(thread), &[("work", "closed"), ("work", "done")]).await;
    assert_eq!(halted(&pump, thread).await.as_deref(), Some("EXACT"));
}

/// Seed 003's "explicit termination": an abandoned step is closed (done="abandoned"), so the
/// `done` after it stands; a plan closed in the same turn as the `done` counts for it.
#[tokio::test]
async fn done_after_abandoning_or_closing_in_the_same_turn_stands() {
    let (pump, _) = pump();
    let ready = [("work", "goal"), ("check", ""), ("work", "open")];
    let abandoned = drive(&pump, None, &ready).await;
    drive(
        &pump,
        Some(abandoned),
        &[("work", "abandoned"), ("work", "done")],
    )
    .await;
    assert_eq!(halted(&pump, abandoned).await.as_deref(), Some("EXACT"));
    let same_turn = drive(&pump, None, &ready).await;
    drive(&pump, Some(same_turn), &[("work", "closed-done")]).await;
    assert_eq!(halted(&pump, same_turn).await.as_deref(), Some("EXACT"));
    assert_eq!(errors(&pump, abandoned).await, Vec::<String>::new());
    assert_eq!(errors(&pump, same_turn).await, Vec::<String>::new());
}

/// Seed 003's "explicit termination", for the other way a thread ends: `thread-done` while the
/// plan has open steps is refused the same way and the thread stays open; after the plan is
/// closed it ends the thread.
#[tokio::test]
async fn thread_done_while_the_plan_has_open_steps_is_refused() {
    let (pump, told) = pump();
    let thread = drive(&pump, None, &[("work", "open"), ("work", "finish")]).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
    assert_eq!(errors(&pump, thread).await, ["plan-open"]);
    let message = told.lock().unwrap().pop().unwrap();
    assert!(message.starts_with("`thread-done` refused"), "{message}");
    assert!(message.contains("2 \"Analyze results\""), "{message}");
    drive(
        &pump,
        Some(thread),
        &[("work", "closed"), ("work", "finish")],
    )
    .await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Done);
}

/// Seed 003: `<todo-until condition="all sources checked"> <step done="true">Search web</step>
/// <step done="false">Analyze results</step> </todo-until>` — written as the seed spells it (in
/// no namespace, in model text), it is taken into the plan namespace and holds `done` back.
#[tokio::test]
async fn the_seeds_spelling_in_no_namespace_is_a_plan() {
    let (pump, told) = pump();
    let thread = drive(&pump, None, &[("work", "seed"), ("work", "done")]).await;
    let history = pump.history(thread).await.unwrap();
    let recorded = history
        .iter()
        .find(|r| r.root.is(TODO_NS, "todo-until"))
        .expect("the seed's plan is recorded in the plan namespace");
    assert!(recorded.payload.contains("Analyze results"));
    let read = Plan::latest(&history).unwrap().unwrap();
    assert_eq!(read.condition(), "all sources checked");
    assert_eq!(read.steps().len(), 2);
    assert_eq!(errors(&pump, thread).await, ["plan-open"]);
    let message = told.lock().unwrap().pop().unwrap();
    assert!(message.contains("2 \"Analyze results\""), "{message}");
}

/// Seed 003's plan has a `condition` and `<step done=…>` items; anything else is refused with
/// `huh invalid-request` saying exactly what does not fit, and is not a plan.
#[tokio::test]
async fn a_malformed_plan_gets_huh_with_the_reason() {
    let (pump, told) = pump();
    for (n, (xml, reason)) in MALFORMED.iter().enumerate() {
        let thread = drive(&pump, None, &[("work", &format!("bad {n}"))]).await;
        let codes: Vec<_> = notices(&pump, thread).await;
        assert_eq!(
            codes,
            [("planner".into(), "huh".into(), "invalid-request".into())],
            "{xml}"
        );
        let message = told.lock().unwrap().pop().unwrap();
        assert!(message.contains(reason), "{xml}: {message}");
        let history = pump.history(thread).await.unwrap();
        assert_eq!(Plan::latest(&history).unwrap(), None, "{xml}");
    }
}

/// Seed 003's "explicit termination" holds across a restart: the thread's latest plan comes
/// back from history, and a `done` after the restart is still refused while a step is open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_holds_done_back_after_a_restart() {
    let scratch = Scratch::new("plans-restart");
    let told = Arc::new(Mutex::new(Vec::new()));
    let open = |told| {
        let store = Arc::new(SqliteHistory::open(scratch.db()).unwrap());
        builder(told).history(store).build().unwrap()
    };
    let first = open(&told);
    let thread = drive(&first, None, &[("work", "open")]).await;
    first.shutdown(Duration::from_secs(1)).await;
    drop(first);
    let second = open(&told);
    drive(&second, Some(thread), &[("work", "done")]).await;
    assert_eq!(errors(&second, thread).await, ["plan-open"]);
    assert_eq!(halted(&second, thread).await, None);
    drive(
        &second,
        Some(thread),
        &[("work", "closed"), ("work", "done")],
    )
    .await;
    assert!(halted(&second, thread).await.is_some());
    second.shutdown(Duration::from_secs(1)).await;
}

/// A plan is the agents' to write: a client posting one is refused like any payload of a
/// namespace only the pump handles.
#[tokio::test]
async fn a_client_cannot_post_a_plan() {
    let (pump, _) = pump();
    let err = pump
        .post(None, None, &plan(Mark::Open).to_xml())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("reserved-namespace"), "{err}");
}

/// A pump with one LLM agent, `researcher`, on a scripted model; the thread its `<ask>` starts,
/// settled.
#[cfg(feature = "host")]
async fn research(base: String) -> (PumpHandle, ThreadId) {
    use agentpump::listeners::llm::{LlmAgent, LlmConfig};
    let llm = LlmAgent::new(LlmConfig::new(base, "scripted-model"), "You research.");
    let pump = PumpBuilder::new()
        .register(
            Registration::from_shared("researcher", Arc::new(llm))
                .accepts(q("ask"))
                .role(Role::Agent),
        )
        .build()
        .unwrap();
    let thread = pump
        .post(None, Some("researcher"), &p("ask", "check the sources"))
        .await
        .unwrap()
        .thread();
    tokio::time::timeout(Duration::from_secs(20), pump.settle(thread))
        .await
        .expect("the thread settles");
    (pump, thread)
}

/// `<loop control="done"/>`.
const DONE: &str = r#"<loop xmlns="urn:agentpump:governor:v1" control="done"/>"#;

/// Seed 003: "Enables self-reading" — an LLM agent that wrote a plan (as the seed spells it)
/// and said `done` over an open step is told which step is open, sees its latest plan as a
/// checklist in its next prompt, closes the step, and its `done` then stands.
#[cfg(feature = "host")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_agent_sees_its_plan_and_closes_it_before_done() {
    use support::model::{answer, serve_model};
    let closed = SEED_PLAN.replace(r#"done="false""#, r#"done="true""#);
    let (model, base) = serve_model(
        vec![
            answer(&format!("My plan:\n{SEED_PLAN}\nAll done. {DONE}"), 50, 10),
            answer(&format!("Analyzed.\n{closed}\n{DONE}"), 60, 10),
        ],
        None,
    )
    .await;
    let (pump, thread) = research(base).await;
    assert_eq!(errors_to(&pump, thread, "researcher").await, ["plan-open"]);
    let class = halted(&pump, thread).await;
    assert_eq!(
        class.as_deref(),
        Some("done-uncertified"),
        "the second done stands"
    );
    let requests = model.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let second = &requests[1]["messages"];
    let system = second[0]["content"].as_str().unwrap();
    assert!(
        system.contains("<todo-until xmlns=\"urn:agentpump:todo:v1\""),
        "taught: {system}"
    );
    assert!(
        system
            .contains("until \"all sources checked\":\n- [x] Search web\n- [ ] Analyze results\n"),
        "its latest plan as a checklist: {system}"
    );
    let told = second.to_string();
    assert!(
        told.contains("plan-open") && told.contains("2 &quot;Analyze results&quot;"),
        "the refusal names the open step: {told}"
    );
}

/// Refusing `done` is no way around the budgets: an agent that says `done` over the same open
/// plan again and again is stopped by the no-progress guard (Ask-Loop v2: "identical control
/// payloads … k times"), never certified.
#[cfg(feature = "host")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn done_over_an_open_plan_again_and_again_halts_no_progress() {
    use support::model::{answer, serve_model};
    let stubborn = answer(&format!("{SEED_PLAN}\n{DONE}"), 50, 10);
    let (_model, base) = serve_model(vec![], Some(stubborn)).await;
    let (pump, thread) = research(base).await;
    assert_eq!(halted(&pump, thread).await.as_deref(), Some("no-progress"));
    let refused = errors_to(&pump, thread, "researcher").await;
    assert!(
        refused.len() >= 2 && refused.iter().all(|c| c == "plan-open"),
        "{refused:?}"
    );
}

//! EXACT on evidence from another listener (issue 36, seed 002): a `<criterion thread="C">`
//! is credited to the listener child thread C was spawned to, and only then.

mod support;

use std::time::Duration;

use agentpump::governor::{CertificateType, Control, Goal, GovernorPolicy, HaltingReport, Signal};
use agentpump::history::{AuditError, audit};
use agentpump::{PumpHandle, Registration, Role, Spawn, ThreadId};
use support::{Script, p, q};

const GOV: &str = "urn:agentpump:governor:v1";

/// An EXACT-only goal with one criterion, `c1`.
fn exact_goal() -> Goal {
    Goal {
        text: "ship it".into(),
        criteria: vec![("c1".into(), "checked by another listener".into())],
        certificates: vec![CertificateType::Exact],
        ..Goal::default()
    }
}

/// The lead. `<go>TARGET</go>`: declares the goal and spawns a child to TARGET; when the
/// child ends, reports c1 met naming the child's thread and says done. `<aim/>`: declares the
/// goal only. `<claim>THREAD</claim>`: reports c1 met naming THREAD and says done. In a child
/// spawned to it (`<check-lead/>`) it ends the child, as the checker does.
fn lead() -> Registration {
    Registration::new(
        "lead",
        Script::new(|msg, cx| {
            if let Some(result) = msg.thread_result() {
                cx.criterion_confirmed_in(result.thread(), "c1", true, "report.txt");
                cx.signal(Signal::new(Control::Done));
                return Ok(());
            }
            let body = support::body(msg);
            match msg.qname().local() {
                "go" => {
                    cx.goal(&exact_goal());
                    cx.spawn(Spawn::new(p(&format!("check-{body}"), "")).to(body));
                }
                "aim" => cx.goal(&exact_goal()),
                "claim" => {
                    cx.emit(format!(
                        r#"<criterion xmlns="{GOV}" id="c1" met="true" evidence="report.txt" thread="{body}"/>"#
                    ));
                    cx.signal(Signal::new(Control::Done));
                }
                "check-lead" => cx.done(p("checked", "")),
                _ => {}
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .accepts(q("aim"))
    .accepts(q("claim"))
    .accepts(q("check-lead"))
    .peers(["checker"])
    .role(Role::Agent)
}

/// Ends the child it serves with `<checked/>`.
fn checker() -> Registration {
    Registration::new(
        "checker",
        Script::new(|msg, cx| {
            if msg.qname().local() == "check-checker" {
                cx.done(p("checked", ""));
            }
            Ok(())
        }),
    )
    .accepts(q("check-checker"))
    .role(Role::Agent)
}

fn pump() -> PumpHandle {
    support::governed(GovernorPolicy::default_budget(), vec![lead(), checker()])
}

/// The thread's one halting report, once there is one.
async fn halted(pump: &PumpHandle, thread: ThreadId) -> HaltingReport {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(r) = pump.reports(thread).await.unwrap().pop() {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no halt in {thread}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn post(pump: &PumpHandle, thread: Option<ThreadId>, payload: &str) -> ThreadId {
    let thread = pump.post(thread, None, payload).await.unwrap().thread();
    pump.settle(thread).await;
    thread
}

/// Seed 002 §3.1 EXACT: "condition: goal_achieved == true AND all acceptance_criteria passed";
/// line 4: "subagent output is treated as Lane C until Skeptic-verified" — a criterion named
/// with the thread of a child spawned to another listener is that listener's, so the lead's
/// `done` earns EXACT; `verify --certificates` re-derives it, and refuses it once the record
/// says the child was the lead's own.
#[tokio::test]
async fn a_criterion_confirmed_in_a_child_of_another_listener_earns_exact() {
    let pump = pump();
    let thread = post(&pump, None, &p("go", "checker")).await;
    let r = halted(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.stop_reason.as_str()),
        ("EXACT", "all-criteria-met")
    );
    let checklist = &r
        .halting_certificate
        .as_ref()
        .unwrap()
        .acceptance_criteria_checklist;
    assert_eq!(checklist[0].reported_by.as_deref(), Some("checker"));
    let mut records = pump.history(thread).await.unwrap();
    assert_eq!(audit(&records, &r), Ok(()));
    let carve = records
        .iter_mut()
        .find(|r| r.payload.contains(r#"action="carve""#))
        .expect("the spawn is recorded as a carve decision");
    assert!(
        carve.payload.contains(r#" to="checker""#),
        "{}",
        carve.payload
    );
    carve.payload = carve
        .payload
        .replace(r#"to="checker""#, r#"to="lead""#)
        .into();
    assert_eq!(
        audit(&records, &r),
        Err(AuditError::Unearned {
            class: "EXACT".into(),
            reason: "all-criteria-met".into()
        })
    );
}

/// Seed 002 §7.1: the Skeptic "Verify Solver output" — a child spawned to the reporter itself
/// is the reporter's own word: `done` stays uncertified.
#[tokio::test]
async fn a_criterion_confirmed_in_a_child_of_the_reporter_is_self_certified() {
    let pump = pump();
    let thread = post(&pump, None, &p("go", "lead")).await;
    let r = halted(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.stop_reason.as_str()),
        ("done-uncertified", "criteria-self-certified")
    );
    let records = pump.history(thread).await.unwrap();
    assert_eq!(audit(&records, &r), Ok(()));
}

/// Seed 002 §15.1: "Is the halting certificate backed by artifact evidence, not prose?" — a
/// criterion naming a thread that is not a child of this one (another root thread, or no
/// thread at all) is refused with `huh invalid-request` naming the thread, and the `done`
/// beside it does not stand.
#[tokio::test]
async fn a_criterion_naming_a_thread_that_is_no_child_is_refused() {
    let pump = pump();
    let elsewhere = post(&pump, None, &p("go", "checker")).await;
    halted(&pump, elsewhere).await;
    for named in [elsewhere, ThreadId::new()] {
        let thread = post(&pump, None, &p("aim", "")).await;
        post(&pump, Some(thread), &p("claim", &named.to_string())).await;
        let history = pump.history(thread).await.unwrap();
        let huh = history
            .iter()
            .find(|r| r.root.local() == "huh")
            .unwrap_or_else(|| panic!("no huh in {history:#?}"));
        assert_eq!(support::notice(huh).1, "invalid-request");
        let expected = format!(
            "&lt;criterion id=&quot;c1&quot;&gt; names thread {named}, which is not a child of this thread"
        );
        assert!(huh.payload.contains(&expected), "{}", huh.payload);
        assert!(
            !history.iter().any(|r| r.root.local() == "criterion"),
            "the refused criterion is not recorded"
        );
        assert!(pump.reports(thread).await.unwrap().is_empty());
    }
}

/// A `thread` attribute that is no thread id is refused, naming it.
#[tokio::test]
async fn a_criterion_naming_no_thread_id_is_refused() {
    let pump = pump();
    let thread = post(&pump, None, &p("aim", "")).await;
    post(&pump, Some(thread), &p("claim", "not-a-uuid")).await;
    let history = pump.history(thread).await.unwrap();
    let huh = history.iter().find(|r| r.root.local() == "huh").unwrap();
    assert!(
        huh.payload
            .contains("thread=&quot;not-a-uuid&quot; is not a thread id (a UUID)"),
        "{}",
        huh.payload
    );
}

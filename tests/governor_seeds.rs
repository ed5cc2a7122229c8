//! The governor against phuc-loop's exact rules (seed 002), each test next to the line it checks:
//! DIVERGED on three rising residuals, EXACT on a residual of zero, EXIT_NEED_INFO for a goal
//! without certificates, and the report fields phuc-loop requires.

mod support;

use agentpump::governor::{Control, Goal, GovernorPolicy, HaltingReport, Signal};
use agentpump::history::{AuditError, Record, audit, replay};
use agentpump::{PumpHandle, Registration, Role, ThreadId, ThreadState};
use rust_decimal::Decimal;
use sha2::{Digest as _, Sha256};
use support::{Script, p, q, start};

fn pump(registration: Registration) -> PumpHandle {
    support::governed(GovernorPolicy::default_budget(), vec![registration])
}

/// On `<goal>CERTS</goal>` declares a goal with those certificates (none when empty, r-p 0.1);
/// on `<r>V</r>` reports residual V.
fn optimizer() -> Registration {
    Registration::new(
        "optimizer",
        Script::new(|msg, cx| {
            let body = support::body(msg);
            match msg.qname().local() {
                "goal" => cx.goal(&Goal {
                    text: "approach zero".into(),
                    certificates: body
                        .split_whitespace()
                        .map(|c| c.parse().unwrap())
                        .collect(),
                    r_p: Some(Decimal::new(1, 1)),
                    ..Goal::default()
                }),
                "r" => cx.residual(body.parse().unwrap()),
                _ => {}
            }
            Ok(())
        }),
    )
    .accepts(q("r"))
    .accepts(q("goal"))
    .role(Role::Agent)
}

/// Declares the goal, then reports each residual, settling after each.
async fn run(pump: &PumpHandle, certificates: &str, residuals: &[&str]) -> ThreadId {
    let thread = start(pump, &p("goal", certificates)).await;
    for r in residuals {
        if pump.thread(thread).unwrap().state.is_closed() {
            break;
        }
        pump.post(Some(thread), None, &p("r", r)).await.unwrap();
        pump.settle(thread).await;
    }
    thread
}

async fn report(pump: &PumpHandle, thread: ThreadId) -> HaltingReport {
    let mut reports = pump.reports(thread).await.unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    reports.pop().unwrap()
}

const ALL: &str = "EXACT CONVERGED DIVERGED";

/// phuc-loop §1: "IF len(residuals) >= 3 AND all_increasing(residuals[-3:]): … status =
/// EXIT_DIVERGED; BREAK" — three residuals, each larger than the one before, are enough.
#[tokio::test]
async fn three_rising_residuals_diverge() {
    let pump = pump(optimizer());
    let thread = run(&pump, ALL, &["5", "4", "6", "7", "8", "9"]).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.status.as_str()),
        ("DIVERGED", "EXIT_DIVERGED")
    );
    let history = r
        .halting_certificate
        .unwrap()
        .residual_history_decimal_strings;
    assert_eq!(
        history,
        ["5", "4", "6", "7"],
        "halted on the third of 4 < 6 < 7"
    );
    // §3.1 DIVERGED "required_output: residual_history, divergence_start_iteration,
    // last_known_good_iteration": 4 (iteration 2) was the last good one, 6 (3) the first rise.
    assert_eq!(
        (r.last_known_good_iteration, r.divergence_start_iteration),
        (Some(2), Some(3))
    );
    let best = r.best_result_so_far.unwrap();
    assert_eq!(
        (best.iteration, best.residual_decimal_string.as_str()),
        (2, "4")
    );
    // Two rises are not three residuals rising.
    let thread = run(&pump, ALL, &["5", "6", "5", "6"]).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
}

/// phuc-loop §12: "acceptance_criteria_empty_list: … a loop without criteria cannot terminate
/// with EXACT certificate" — a residual of exactly zero without criteria is CONVERGED (0 < r-p),
/// lane B, when CONVERGED applies, and ends nothing when only EXACT does.
#[tokio::test]
async fn a_residual_of_exactly_zero_without_criteria_is_not_exact() {
    let pump = pump(optimizer());
    let thread = run(&pump, ALL, &["0.5", "0"]).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.stop_reason.as_str()),
        ("CONVERGED", "residual-below-r-p")
    );
    let cert = r.halting_certificate.unwrap();
    assert_eq!((cert.kind.as_str(), cert.lane.as_str()), ("CONVERGED", "B"));
    assert_eq!(r.status, "EXIT_CONVERGED");
    assert_eq!(
        (r.divergence_start_iteration, r.last_known_good_iteration),
        (None, None)
    );
    // A goal that declares only EXACT is ended neither by a residual below r-p nor by zero.
    let thread = run(&pump, "EXACT", &["0.5", "0.01", "0"]).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
}

/// phuc-loop §3.2: "If `halting_certificates_applicable` is missing or empty: `EXIT_NEED_INFO`
/// immediately."
#[tokio::test]
async fn a_goal_without_certificates_halts_at_once_needing_info() {
    let pump = pump(optimizer());
    let thread = run(&pump, "", &["0.5"]).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.status.as_str(), r.stop_reason.as_str()),
        ("need-info", "EXIT_NEED_INFO", "no-certificates-declared")
    );
    assert!(r.halting_certificate.is_none());
    assert_eq!(
        r.iterations_completed, 1,
        "halted in the turn that declared the goal"
    );
}

/// Says what it is told: on `<say-NAME>[xml]</say-NAME>` it emits the XML (written with `[` `]`
/// for `<` `>`, since a client may not send the governor's elements), as an agent's text would
/// carry it.
fn speaker(name: &'static str) -> Registration {
    Registration::new(
        name,
        Script::new(|msg, cx| {
            if !msg.is_system() {
                cx.emit_text(support::body(msg).replace('[', "<").replace(']', ">"));
            }
            Ok(())
        }),
    )
    .accepts(q(&format!("say-{name}")))
    .role(Role::Agent)
}

const GOV: &str = "urn:agentpump:governor:v1";

/// `<goal r-p=… certificates=…>` with the text and criteria given (`(id, description)`).
fn goal(attributes: &str, text: &str, criteria: &[(&str, &str)]) -> String {
    let mut x = format!(r#"<goal xmlns="{GOV}" {attributes}>"#);
    if !text.is_empty() {
        x.push_str(&format!("<text>{text}</text>"));
    }
    for (id, description) in criteria {
        x.push_str(&format!(
            r#"<criterion id="{id}">{description}</criterion>"#
        ));
    }
    x + "</goal>"
}

fn residual(value: &str) -> String {
    format!(r#"<residual xmlns="{GOV}" value="{value}"/>"#)
}

fn criterion(id: &str, met: bool, evidence: Option<&str>) -> String {
    let evidence = evidence.map_or(String::new(), |e| format!(r#" evidence="{e}""#));
    format!(r#"<criterion xmlns="{GOV}" id="{id}" met="{met}"{evidence}/>"#)
}

fn done() -> String {
    format!(r#"<loop xmlns="{GOV}" control="done"/>"#)
}

/// A pump with two speakers, `agent` and `checker`.
fn speakers() -> PumpHandle {
    support::governed(
        GovernorPolicy::default_budget(),
        vec![speaker("agent"), speaker("checker")],
    )
}

/// Has `who` say `xml` in `thread` (a new one when `None`) and waits for the thread to settle.
async fn say(pump: &PumpHandle, thread: Option<ThreadId>, who: &str, xml: &str) -> ThreadId {
    let payload = p(
        &format!("say-{who}"),
        &xml.replace('<', "[").replace('>', "]"),
    );
    let thread = pump.post(thread, None, &payload).await.unwrap().thread();
    pump.settle(thread).await;
    thread
}

/// phuc-loop §2.5 SILENT_DIVERGENCE: "detection: all_increasing(residuals[-3:]) AND status !=
/// EXIT_DIVERGED." — recovery "EXIT_DIVERGED immediately", whatever the goal declares (§1 step
/// 7 exits unconditionally). The issue's run: a goal declaring only CONVERGED, residuals
/// rising 1 … 21, ended TIMEOUT max-turns.
#[tokio::test]
async fn residuals_rising_three_times_diverge_whether_or_not_diverged_is_declared() {
    let pump = speakers();
    let aim = goal(
        r#"certificates="CONVERGED" r-p="0.1""#,
        "approach zero",
        &[],
    );
    let thread = say(&pump, None, "agent", &aim).await;
    for v in 1..=21 {
        if pump.thread(thread).unwrap().state.is_closed() {
            break;
        }
        say(&pump, Some(thread), "agent", &residual(&v.to_string())).await;
    }
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.status.as_str(), r.stop_reason.as_str()),
        ("DIVERGED", "EXIT_DIVERGED", "residual-rising")
    );
    assert_eq!(
        r.halting_certificate
            .unwrap()
            .residual_history_decimal_strings,
        ["1", "2", "3"]
    );
    // §1: step 7 (divergence) comes before step 8 (the certificate): a `done` in the delivery
    // that reports the third rise does not end the thread otherwise.
    let thread = say(&pump, None, "agent", &aim).await;
    say(&pump, Some(thread), "agent", &residual("5")).await;
    say(&pump, Some(thread), "agent", &residual("6")).await;
    say(&pump, Some(thread), "agent", &(residual("7") + &done())).await;
    assert_eq!(report(&pump, thread).await.class, "DIVERGED");
}

/// phuc-loop §3.2 "Certificate Declaration (Required Before Loop Start)" and §4.1
/// "halting_certificates_applicable: … Carried from DREAM_GOAL block unchanged": a later goal
/// may tighten the declaration, never loosen it. The issue's run: r-p 0.001, then a second goal
/// with r-p 100, ended CONVERGED at residual 5.
#[tokio::test]
async fn a_later_goal_cannot_loosen_the_certificates_or_r_p() {
    let pump = speakers();
    let aim = goal(
        r#"certificates="CONVERGED" r-p="0.001""#,
        "approach zero",
        &[],
    );
    let thread = say(&pump, None, "agent", &aim).await;
    let looser = goal(r#"certificates="CONVERGED" r-p="100""#, "", &[]);
    say(&pump, Some(thread), "checker", &looser).await;
    let more = goal(r#"certificates="CONVERGED EXACT""#, "", &[]);
    say(&pump, Some(thread), "agent", &more).await;
    say(&pump, Some(thread), "agent", &residual("5")).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
    let refused: Vec<String> = pump
        .history(thread)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.root.local() == "huh")
        .map(|r| r.payload.to_string())
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].contains("r-p=&quot;100&quot; is above the declared r-p 0.001"),
        "{}",
        refused[0]
    );
    assert!(refused[1].contains("names EXACT"), "{}", refused[1]);
    // Tightening is taken: r-p 0.0001 is now in force.
    let tighter = goal(r#"r-p="0.0001""#, "", &[]);
    say(&pump, Some(thread), "agent", &tighter).await;
    say(&pump, Some(thread), "agent", &residual("0.0005")).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
    say(&pump, Some(thread), "agent", &residual("0.00005")).await;
    let r = report(&pump, thread).await;
    assert_eq!(r.class, "CONVERGED");
    assert_eq!(r.halting_certificate.unwrap().r_p_decimal_string, "0.0001");
}

/// phuc-loop §3.1 EXACT: "evidence_required: acceptance_criteria_checklist_all_true", and §12
/// "acceptance_criteria_null: … Evaluate before issuing any certificate" — a residual of zero
/// is not EXACT while a declared criterion is unmet (it ended EXACT lane A with `met: false`).
#[tokio::test]
async fn a_zero_residual_is_exact_only_with_every_criterion_met_by_another_listener() {
    let pump = speakers();
    let aim = goal(
        r#"certificates="EXACT""#,
        "ship it",
        &[("tests", "all tests pass")],
    );
    let thread = say(&pump, None, "agent", &aim).await;
    say(&pump, Some(thread), "agent", &residual("0")).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
    // Met by the claimant itself: still not EXACT.
    let own = criterion("tests", true, Some("ci-run-7"));
    say(&pump, Some(thread), "agent", &(own + &residual("0"))).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
    say(
        &pump,
        Some(thread),
        "checker",
        &criterion("tests", true, Some("ci-run-8")),
    )
    .await;
    say(&pump, Some(thread), "agent", &residual("0")).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.stop_reason.as_str()),
        ("EXACT", "residual-zero")
    );
    assert_eq!(r.status, "EXIT_CONVERGED");
    let cert = r.halting_certificate.unwrap();
    assert_eq!((cert.kind.as_str(), cert.lane.as_str()), ("EXACT", "A"));
    let checklist = cert.acceptance_criteria_checklist;
    assert!(checklist.iter().all(|c| c.met), "{checklist:?}");
}

/// phuc-loop §15.1: "Is the halting certificate backed by artifact evidence, not prose?" —
/// `met` without an evidence link certifies nothing (it was accepted with `evidence_link: null`).
#[tokio::test]
async fn a_criterion_met_without_evidence_does_not_certify_exact() {
    let pump = speakers();
    let aim = goal(
        r#"certificates="EXACT""#,
        "ship it",
        &[("tests", "all tests pass")],
    );
    for evidence in [None, Some("  ")] {
        let thread = say(&pump, None, "agent", &aim).await;
        say(
            &pump,
            Some(thread),
            "checker",
            &criterion("tests", true, evidence),
        )
        .await;
        say(&pump, Some(thread), "agent", &done()).await;
        let r = report(&pump, thread).await;
        assert_eq!(
            (r.class.as_str(), r.stop_reason.as_str()),
            ("done-uncertified", "criteria-without-evidence"),
            "{evidence:?}"
        );
    }
}

/// phuc-loop §2.4: "NULL_CHECK → EXIT_NEED_INFO: if null_detected", "null_detected:
/// GOAL_REQUEST is null OR ACCEPTANCE_CRITERIA is null" — `<goal certificates="CONVERGED"/>`
/// ran on.
#[tokio::test]
async fn an_empty_goal_halts_at_once_needing_info() {
    let pump = speakers();
    let thread = say(
        &pump,
        None,
        "agent",
        &goal(r#"certificates="CONVERGED""#, "", &[]),
    )
    .await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.status.as_str(), r.stop_reason.as_str()),
        ("need-info", "EXIT_NEED_INFO", "empty-goal")
    );
}

// ---------------------------------------------------------------------------------------------
// `verify --certificates`: the same rules, re-derived from a recorded history. A governor
// before these rules wrote histories that broke them; they are forged here from real runs.
// ---------------------------------------------------------------------------------------------

/// The records and the one report of a halted thread.
async fn recorded(pump: &PumpHandle, thread: ThreadId) -> (Vec<Record>, HaltingReport) {
    (
        pump.history(thread).await.unwrap(),
        report(pump, thread).await,
    )
}

/// Edits a recorded halt as an older governor could have written it: `records` edited, the
/// report edited, and the halt message's `report-digest` made the edited report's again (so
/// only the rules can tell).
fn forge(
    (mut records, mut report): (Vec<Record>, HaltingReport),
    edit_records: impl FnOnce(&mut Vec<Record>),
    edit_report: impl FnOnce(&mut HaltingReport),
) -> (Vec<Record>, HaltingReport) {
    let old = hex::encode(Sha256::digest(serde_json::to_string(&report).unwrap()));
    edit_records(&mut records);
    edit_report(&mut report);
    let new = hex::encode(Sha256::digest(serde_json::to_string(&report).unwrap()));
    let halt = records.iter_mut().find(|r| r.id == report.halt_id).unwrap();
    halt.payload = halt.payload.replace(&old, &new).into();
    (records, report)
}

/// Replaces `from` by `to` in the first pump or governor record whose payload contains `from`
/// (not in what the test told a speaker to say).
fn rewrite(records: &mut [Record], from: &str, to: &str) {
    let r = records
        .iter_mut()
        .find(|r| r.root.namespace() != support::NS && r.payload.contains(from))
        .unwrap_or_else(|| panic!("no record with {from}"));
    r.payload = r.payload.replace(from, to).into();
}

/// phuc-loop §11: "at_least_2_replays_of_final_iteration_produce_same_certificate" — two
/// replays reach rung 274177, one reaches 641; a halt without a certificate has no rung. The
/// report names the rung it aims at and the one the governor reached.
#[tokio::test]
async fn two_replays_of_a_certified_halt_reach_rung_274177() {
    let pump = speakers();
    let aim = goal(
        r#"certificates="CONVERGED" r-p="0.001""#,
        "approach zero",
        &[],
    );
    let thread = say(&pump, None, "agent", &aim).await;
    say(&pump, Some(thread), "agent", &residual("0.0005")).await;
    let (records, r) = recorded(&pump, thread).await;
    assert_eq!(
        (r.verification_rung_target, r.verification_rung_achieved),
        (Some(274_177), Some(641))
    );
    let twice = [records.clone(), records.clone()];
    assert_eq!(replay(&twice, &r), Ok(Some(274_177)));
    assert_eq!(replay(&twice[..1], &r), Ok(Some(641)));
    let thread = say(
        &pump,
        None,
        "agent",
        &format!(r#"<loop xmlns="{GOV}" control="abort"/>"#),
    )
    .await;
    let (records, r) = recorded(&pump, thread).await;
    assert_eq!(
        (r.verification_rung_target, r.verification_rung_achieved),
        (None, None)
    );
    assert_eq!(replay(&[records.clone(), records], &r), Ok(None));
}

/// §4.1 "Carried from DREAM_GOAL block unchanged": a history where a second goal raised r-p to
/// 100 and residual 5 was certified CONVERGED is refused.
#[tokio::test]
async fn verify_refuses_a_certificate_granted_under_a_loosened_goal() {
    let pump = speakers();
    let aim = goal(
        r#"certificates="CONVERGED" r-p="0.001""#,
        "approach zero",
        &[],
    );
    let thread = say(&pump, None, "agent", &aim).await;
    say(&pump, Some(thread), "agent", &residual("0.0005")).await;
    let honest = recorded(&pump, thread).await;
    assert_eq!(audit(&honest.0, &honest.1), Ok(()));
    let forged = forge(
        honest,
        |records| {
            rewrite(records, r#"r-p="0.001""#, r#"r-p="100""#);
            rewrite(records, r#"value="0.0005""#, r#"value="5""#);
            let mut first = records
                .iter()
                .find(|r| r.root.local() == "goal")
                .unwrap()
                .clone();
            first.payload = aim.clone().into();
            let at = records
                .iter()
                .position(|r| r.root.local() == "goal")
                .unwrap();
            records.insert(at, first);
        },
        |report| {
            let cert = report.halting_certificate.as_mut().unwrap();
            cert.r_p_decimal_string = "100".into();
            cert.final_residual_decimal_string = Some("5".into());
            cert.residual_history_decimal_strings = vec!["5".into()];
        },
    );
    assert_eq!(
        audit(&forged.0, &forged.1),
        Err(AuditError::RpDiffers {
            reported: "100".into(),
            declared: "0.001".into()
        })
    );
}

/// §3.1 EXACT "evidence_required: acceptance_criteria_checklist_all_true" and §15.1 "backed by
/// artifact evidence, not prose": EXACT over an unmet criterion, or one met without evidence,
/// is refused.
#[tokio::test]
async fn verify_refuses_exact_over_an_unmet_or_unevidenced_criterion() {
    let pump = speakers();
    let aim = goal(
        r#"certificates="EXACT""#,
        "ship it",
        &[("tests", "all pass")],
    );
    let thread = say(&pump, None, "agent", &aim).await;
    say(
        &pump,
        Some(thread),
        "checker",
        &criterion("tests", true, Some("ci-9")),
    )
    .await;
    say(&pump, Some(thread), "agent", &residual("0")).await;
    let honest = recorded(&pump, thread).await;
    assert_eq!(honest.1.class, "EXACT");
    assert_eq!(audit(&honest.0, &honest.1), Ok(()));
    let unearned = Err(AuditError::Unearned {
        class: "EXACT".into(),
        reason: "residual-zero".into(),
    });
    let unmet = forge(
        honest.clone(),
        |records| rewrite(records, r#"met="true""#, r#"met="false""#),
        |report| {
            report
                .halting_certificate
                .as_mut()
                .unwrap()
                .acceptance_criteria_checklist[0]
                .met = false
        },
    );
    assert_eq!(audit(&unmet.0, &unmet.1), unearned);
    let bare = forge(
        honest,
        |records| rewrite(records, r#" evidence="ci-9""#, ""),
        |report| {
            report
                .halting_certificate
                .as_mut()
                .unwrap()
                .acceptance_criteria_checklist[0]
                .evidence_link = None;
        },
    );
    assert_eq!(audit(&bare.0, &bare.1), unearned);
}

/// §2.5 SILENT_DIVERGENCE "all_increasing(residuals[-3:]) AND status != EXIT_DIVERGED": a
/// DIVERGED the goal did not declare is earned, and any other halt over three rising residuals
/// is refused.
#[tokio::test]
async fn verify_takes_undeclared_divergence_and_refuses_a_silent_one() {
    let pump = speakers();
    let aim = goal(
        r#"certificates="CONVERGED" r-p="0.1""#,
        "approach zero",
        &[],
    );
    let thread = say(&pump, None, "agent", &aim).await;
    for v in ["1", "2", "3"] {
        say(&pump, Some(thread), "agent", &residual(v)).await;
    }
    let honest = recorded(&pump, thread).await;
    assert_eq!(honest.1.class, "DIVERGED");
    assert_eq!(audit(&honest.0, &honest.1), Ok(()));
    let silent = forge(
        honest,
        |records| {
            rewrite(
                records,
                r#"reason="residual-rising" class="DIVERGED" certificate="DIVERGED""#,
                r#"reason="same-control-signal" class="no-progress" certificate="none""#,
            );
        },
        |report| {
            report.class = "no-progress".into();
            report.status = "EXIT_BLOCKED".into();
            report.stop_reason = "same-control-signal".into();
            report.halting_certificate = None;
        },
    );
    assert_eq!(
        audit(&silent.0, &silent.1),
        Err(AuditError::SilentDivergence(vec![
            "1".into(),
            "2".into(),
            "3".into()
        ]))
    );
}

// ---------------------------------------------------------------------------------------------
// Signals and memory (seeds 000 and 003)
// ---------------------------------------------------------------------------------------------

/// Seed 003: "Core confirms with assigned ID" — two children spawned with the same
/// `suggested-sub-id` got the same path (`05775ced.research` twice), so a path named two threads.
#[tokio::test]
async fn children_with_the_same_suggested_sub_id_get_different_paths() {
    let spawner = Registration::new(
        "spawner",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                for _ in 0..3 {
                    let child = p("say-checker", "");
                    cx.spawn(agentpump::system::Spawn::new(child).sub_id("research"));
                }
            }
            Ok(())
        }),
    )
    .accepts(q("fan"))
    .peers(["checker"])
    .role(Role::Agent);
    let pump = support::governed(
        GovernorPolicy::default_budget(),
        vec![spawner, speaker("checker")],
    );
    let root = start(&pump, &p("fan", "")).await;
    let root_path = pump.thread(root).unwrap().path.to_string();
    let mut paths: Vec<String> = pump
        .tree(root)
        .iter()
        .filter(|t| t.id != root)
        .map(|t| t.path.to_string())
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        ["research", "research-2", "research-3"].map(|s| format!("{root_path}.{s}"))
    );
}

/// On any payload of its own (its `<work>`, or its `continue` come back) it says `continue` —
/// with notes that change each turn when `vary`, the same notes otherwise — and `done` at its
/// fourth turn.
fn continuer(vary: bool) -> Registration {
    let turns = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    Registration::new(
        "continuer",
        Script::new(move |msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            let n = turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            let notes = if vary {
                format!("step {n}")
            } else {
                "again".into()
            };
            let control = if n < 4 {
                Control::Continue
            } else {
                Control::Done
            };
            cx.signal(Signal::new(control).notes(notes));
            Ok(())
        }),
    )
    .accepts(q("work"))
    .role(Role::Agent)
}

/// Seed 000: "The host parses these LOOP signals from the `emit` stream to decide the next
/// action" — a lone `continue` gives the agent its next turn (it left the thread idle), as
/// `done` ends it.
#[tokio::test]
async fn a_lone_continue_gives_the_agent_its_next_turn() {
    let pump = pump(continuer(true));
    let thread = start(&pump, &p("work", "")).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.stop_reason.as_str()),
        ("done-uncertified", "no-criteria-declared")
    );
    assert_eq!(r.iterations_completed, 4);
    assert_eq!(r.self_iterations["continuer"], 3);
}

/// Seed 000 §3.4: "The host SHOULD track a digest of the control payload and halt the loop if
/// no progress is being made between turns." — the same `continue` three times in a row.
#[tokio::test]
async fn the_same_continue_three_times_is_no_progress() {
    let pump = pump(continuer(false));
    let thread = start(&pump, &p("work", "")).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.stop_reason.as_str()),
        ("no-progress", "same-control-signal")
    );
    assert_eq!(r.iterations_completed, 3);
}

/// Seed 000 §3.1: "A loop MAY only run if the agent model has the `ToolLoopPermitted` flag
/// set." — a `continue` without loop permission is told so, not given a turn.
#[tokio::test]
async fn a_continue_without_loop_permission_is_refused() {
    let pump = pump(continuer(true).may_loop(false));
    let thread = start(&pump, &p("work", "")).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
    let told = support::notices(&pump, thread).await;
    assert!(
        told.iter().any(|(_, _, code)| code == "loop-not-permitted"),
        "{told:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Behaviours that worked untested (issue 37's list)
// ---------------------------------------------------------------------------------------------

/// Seed 000 §3.3: "the host MUST resolve them in the order: `abort` > `halt` > `done` >
/// `continue`" — an abort and a budget breached in the same delivery end as aborted.
#[tokio::test]
async fn abort_outranks_a_budget_breach_in_the_same_delivery() {
    let spender = Registration::new(
        "spender",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                cx.usage(agentpump::Usage {
                    tokens_in: 500,
                    ..agentpump::Usage::default()
                });
                cx.signal(Signal::new(Control::Abort).reason("gave-up"));
            }
            Ok(())
        }),
    )
    .accepts(q("work"))
    .role(Role::Agent);
    let budget = agentpump::governor::Budget {
        tokens: Some(100),
        ..GovernorPolicy::default_budget()
    };
    let pump = support::governed(budget, vec![spender]);
    let thread = start(&pump, &p("work", "")).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.stop_reason.as_str()),
        ("aborted", "gave-up")
    );
    assert_eq!(r.budget["max-tokens"].spent, "500");
}

/// phuc-loop §17: "never_relax_budget_hard_limits_without_explicit_override" — a later goal
/// asking for more turns does not get them.
#[tokio::test]
async fn a_later_goal_cannot_loosen_a_budget() {
    let pump = speakers();
    let tight = r#"certificates="CONVERGED"><text>t</text><budget turns="4"/></goal>"#;
    let loose = r#"certificates="CONVERGED"><budget turns="100"/></goal>"#;
    let open = format!(r#"<goal xmlns="{GOV}" "#);
    let thread = say(&pump, None, "agent", &format!("{open}{tight}")).await;
    say(&pump, Some(thread), "agent", &format!("{open}{loose}")).await;
    for v in ["9", "8", "7"] {
        say(&pump, Some(thread), "agent", &residual(v)).await;
    }
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.stop_reason.as_str()),
        ("TIMEOUT", "max-turns")
    );
    assert_eq!(r.budget["max-turns"].limit.as_deref(), Some("4"));
    // §3.1 TIMEOUT "required_output: best_result_so_far, final_residual".
    let best = r.best_result_so_far.unwrap();
    assert_eq!(
        (best.iteration, best.residual_decimal_string.as_str()),
        (2, "8")
    );
    let cert = r.halting_certificate.unwrap();
    assert_eq!(cert.final_residual_decimal_string.as_deref(), Some("8"));
}

//! Halting reports against `schemas/halting-report.schema.json`, checked with a real JSON Schema
//! validator (Python's `jsonschema`, draft 2020-12): a real pump is driven to every halt class,
//! each thread's report is fetched with `PumpHandle::reports`, serialized with serde_json and
//! validated; the report's class, reason and certificate are the expected ones (so every class is
//! really produced), and the `halt` message's `report-digest` is the sha256 of that JSON. The
//! schema is also shown to reject reports that break it, and the example report to be exactly a
//! `HaltingReport`.

mod support;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use agentpump::governor::{
    Budget, CertificateType, Control, Goal, GovernorPolicy, HaltingReport, IterationBudget, Lane,
    Signal,
};
use agentpump::history::RecordKind;
use agentpump::system::GOVERNOR_NS;
use agentpump::{Delivery, PumpBuilder, PumpConfig, PumpHandle, Registration, ThreadId, Usage};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use support::{Script, p, q};

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

// ---------------------------------------------------------------------------------------------
// The validator
// ---------------------------------------------------------------------------------------------

/// Reads `[{"name", "report"}, …]` (argv[2]) and prints `{name: [error, …]}` for the schema in
/// argv[1]; exit 3 when `jsonschema` is not installed.
const VALIDATE_PY: &str = r#"
import json, sys
try:
    import jsonschema
except ImportError:
    sys.exit(3)
schema = json.load(open(sys.argv[1], encoding="utf-8"))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
out = {}
for doc in json.load(open(sys.argv[2], encoding="utf-8")):
    errors = sorted(validator.iter_errors(doc["report"]), key=lambda e: e.json_path)
    out[doc["name"]] = ["%s: %s" % (e.json_path, e.message) for e in errors]
print(json.dumps(out))
"#;

/// Validates each `(name, report)` against the halting-report schema; returns the errors of each
/// (empty = valid), in the order given. Panics — never skips — when python3 or its `jsonschema`
/// package is missing, or when the schema itself is not a valid draft 2020-12 schema.
fn schema_errors(docs: &[(String, Value)]) -> Vec<(String, Vec<String>)> {
    let input: Vec<Value> = docs
        .iter()
        .map(|(name, report)| json!({ "name": name, "report": report }))
        .collect();
    let file = std::env::temp_dir().join(format!(
        "agentpump-reports-{}-{}.json",
        std::process::id(),
        docs.first().map_or("none", |(name, _)| name.as_str())
    ));
    std::fs::write(&file, serde_json::to_vec(&input).unwrap()).expect("write the reports");
    let install = "`python3 -m pip install jsonschema` (.ci/run installs it); the report tests \
                   need a real JSON Schema validator and do not skip";
    let run = Command::new("python3")
        .arg("-c")
        .arg(VALIDATE_PY)
        .arg(schemas_dir().join("halting-report.schema.json"))
        .arg(&file)
        .output();
    let _ = std::fs::remove_file(&file);
    let out = match run {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            panic!("python3 is not on PATH: install it, then {install}")
        }
        Err(e) => panic!("cannot run python3: {e}"),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {}
        Some(3) => panic!("Python's jsonschema package is not installed: {install}"),
        code => panic!("the validator failed (exit {code:?}):\n{stderr}"),
    }
    let verdicts: serde_json::Map<String, Value> =
        serde_json::from_slice(&out.stdout).expect("the validator prints JSON");
    docs.iter()
        .map(|(name, _)| {
            let errors = verdicts[name]
                .as_array()
                .expect("a list of errors")
                .iter()
                .map(|e| e.as_str().unwrap().to_owned())
                .collect();
            (name.clone(), errors)
        })
        .collect()
}

/// Asserts that every report validates, printing every error of every report if not.
fn assert_valid(docs: &[(String, Value)]) {
    let failures: Vec<String> = schema_errors(docs)
        .into_iter()
        .filter(|(_, errors)| !errors.is_empty())
        .map(|(name, errors)| format!("{name}:\n  {}", errors.join("\n  ")))
        .collect();
    assert!(
        failures.is_empty(),
        "halting reports that do not match schemas/halting-report.schema.json:\n{}\nreports:\n{}",
        failures.join("\n"),
        docs.iter()
            .map(|(name, r)| format!("{name}: {r}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Listeners that halt their thread, one per class
// ---------------------------------------------------------------------------------------------

/// The number inside a payload's root element (0 when there is none).
fn number(msg: &Delivery) -> u64 {
    let t = msg.payload().as_str();
    match (t.find('>'), t.rfind("</")) {
        (Some(a), Some(b)) if a < b => t[a + 1..b].parse().unwrap_or(0),
        _ => 0,
    }
}

/// A listener of one root that ignores pump notices and hands every other delivery to `f`.
fn listener(
    name: &'static str,
    root: &str,
    f: impl Fn(&Delivery, &mut agentpump::Context) + Send + Sync + 'static,
) -> Registration {
    Registration::new(
        name,
        Script::new(move |msg, cx| {
            if !msg.is_system() {
                f(msg, cx);
            }
            Ok(())
        }),
    )
    .accepts(q(root))
}

/// EXACT: `agent` declares a goal with one criterion and asks `verifier`, which reports the
/// criterion met (and a learning) and replies; then `agent` signals done.
fn exact() -> [Registration; 2] {
    let agent = listener("agent", "exact-task", |msg, cx| {
        match msg.qname().local() {
            "exact-task" => {
                cx.goal(&Goal {
                    text: "answer, checked by someone else".into(),
                    criteria: vec![("checked".into(), "the verifier agrees".into())],
                    certificates: vec![CertificateType::Exact],
                    ..Goal::default()
                });
                cx.send("verifier", p("check", "42"));
            }
            // The verifier's reply (delivered whatever its root).
            _ => cx.signal(Signal::new(Control::Done).notes("verified")),
        }
    })
    .peers(["verifier"]);
    let verifier = listener("verifier", "check", |msg, cx| {
        cx.criterion("checked", true, &format!("msg:{}", msg.id()));
        cx.learning(Lane::B, "42 is the answer");
        cx.reply(p("checked", "ok"));
    });
    [agent, verifier]
}

/// CONVERGED: a goal with `r-p="1e-4"`, then residuals 0.5 and 5e-5.
fn converged() -> Registration {
    listener("converger", "step", |msg, cx| {
        if number(msg) == 1 {
            cx.emit(format!(
                "<goal xmlns=\"{GOVERNOR_NS}\" r-p=\"1e-4\" certificates=\"CONVERGED\"><text>converge</text></goal>"
            ));
            cx.residual(Decimal::new(5, 1));
            cx.emit(p("step", "2"));
        } else {
            cx.emit(format!(
                "<residual xmlns=\"{GOVERNOR_NS}\" value=\"5e-5\"/>"
            ));
        }
    })
    .may_loop(true)
}

/// DIVERGED: residuals 1, 2, 3, … one per iteration (the default window is 3).
fn diverged() -> Registration {
    listener("diverger", "rise", |msg, cx| {
        let n = number(msg);
        cx.residual(Decimal::from(n));
        cx.emit(p("rise", &(n + 1).to_string()));
    })
    .may_loop(true)
}

/// TIMEOUT: counts up by messaging itself forever (every payload differs), under a small turn budget.
fn timeout() -> Registration {
    listener("spinner", "spin", |msg, cx| {
        cx.emit(p("spin", &(number(msg) + 1).to_string()));
    })
    .may_loop(true)
}

/// TIMEOUT per iteration: each self-iteration reports one tool call.
fn tool_caller() -> Registration {
    listener("caller", "call", |msg, cx| {
        cx.usage(Usage {
            tool_calls: 1,
            ..Usage::default()
        });
        cx.emit(p("call", &(number(msg) + 1).to_string()));
    })
    .may_loop(true)
}

/// BACKPRESSURE: does nothing; its thread goes idle and is stopped from outside.
fn backpressure() -> Registration {
    listener("sink", "rest", |_, _| {})
}

/// aborted: gives up at once.
fn aborted() -> Registration {
    listener("quitter", "quit", |_, cx| {
        cx.signal(Signal::new(Control::Abort).reason("gave-up"));
    })
}

/// no-progress: emits the identical payload to itself every time.
fn no_progress() -> Registration {
    listener("parrot", "same", |_, cx| cx.emit(p("same", "again"))).may_loop(true)
}

/// need-info: declares a goal with no text and no criteria.
fn need_info() -> Registration {
    listener("declarer", "declare", |_, cx| {
        cx.emit(r#"<goal xmlns="urn:agentpump:governor:v1" certificates="CONVERGED" residual-metric="benchmark_gap"/>"#);
    })
}

/// done-uncertified: says done with no goal declared.
fn done_uncertified() -> Registration {
    listener("finisher", "finish", |_, cx| {
        cx.signal(Signal::new(Control::Done));
    })
}

fn pump(budget: Budget, registrations: impl IntoIterator<Item = Registration>) -> PumpHandle {
    let config = PumpConfig {
        governor: GovernorPolicy {
            budget,
            ..GovernorPolicy::default()
        },
        ..PumpConfig::default()
    };
    registrations
        .into_iter()
        .fold(PumpBuilder::new().config(config), PumpBuilder::register)
        .build()
        .expect("build the pump")
}

/// One thread driven to a halt, and what its report must say.
struct Case {
    class: &'static str,
    reason: &'static str,
    pump: PumpHandle,
    thread: ThreadId,
}

/// Posts `payload` into a new thread of `pump` and waits until the thread settles.
async fn run(pump: &PumpHandle, payload: &str) -> ThreadId {
    let thread = pump.post(None, None, payload).await.expect("post").thread();
    pump.settle(thread).await;
    thread
}

/// Drives a pump to every halt class.
async fn every_class() -> Vec<Case> {
    let main = pump(
        GovernorPolicy::default_budget(),
        exact().into_iter().chain([
            converged(),
            diverged(),
            backpressure(),
            aborted(),
            no_progress(),
            done_uncertified(),
            need_info(),
        ]),
    );
    let small = pump(
        Budget {
            turns: Some(5),
            ..GovernorPolicy::default_budget()
        },
        [timeout()],
    );
    // Seed 002 §6.1: "max_tool_calls_per_iteration", "max_seconds_per_iteration".
    let per_iteration = PumpBuilder::new()
        .config(PumpConfig {
            governor: GovernorPolicy {
                iteration: IterationBudget {
                    tool_calls: Some(0),
                    wall_clock: Some(Duration::from_secs(3600)),
                },
                ..GovernorPolicy::default()
            },
            ..PumpConfig::default()
        })
        .register(tool_caller())
        .build()
        .expect("build the pump");
    let mut cases = Vec::new();
    let mut case = |class, reason, pump: &PumpHandle, thread| {
        let pump = pump.clone();
        cases.push(Case {
            class,
            reason,
            pump,
            thread,
        });
    };
    let t = run(&main, &p("exact-task", "")).await;
    case("EXACT", "all-criteria-met", &main, t);
    let t = run(&main, &p("step", "1")).await;
    case("CONVERGED", "residual-below-r-p", &main, t);
    let t = run(&main, &p("rise", "1")).await;
    case("DIVERGED", "residual-rising", &main, t);
    let t = run(&small, &p("spin", "1")).await;
    case("TIMEOUT", "max-turns", &small, t);
    let t = run(&per_iteration, &p("call", "1")).await;
    case("TIMEOUT", "max-tool-calls-per-iteration", &per_iteration, t);
    let t = run(&main, &p("rest", "")).await;
    main.stop(t).await.expect("stop an idle thread");
    case("BACKPRESSURE", "stop-request", &main, t);
    let t = run(&main, &p("quit", "")).await;
    case("aborted", "gave-up", &main, t);
    let t = run(&main, &p("same", "again")).await;
    case("no-progress", "repeated-message", &main, t);
    let t = run(&main, &p("finish", "")).await;
    case("done-uncertified", "no-criteria-declared", &main, t);
    // phuc-loop §16.5: "status: NEED_INFO … missing_fields: list[string], safe_partials"
    let t = run(&main, &p("declare", "")).await;
    case("need-info", "empty-goal", &main, t);
    cases
}

/// The seed's stop reason for each case's reason (docs/governor.md's table).
fn seed_name_of(reason: &str) -> Option<&'static str> {
    match reason {
        "residual-rising" => Some("SILENT_DIVERGENCE_DETECTED"),
        "max-turns" => Some("MAX_ITERS"),
        "max-tool-calls-per-iteration" => Some("MAX_TOOL_CALLS"),
        "stop-request" => Some("BACKPRESSURE_SIGNAL"),
        "repeated-message" => Some("INVARIANT_VIOLATION"),
        "no-criteria-declared" => Some("CONVERGENCE_CLAIM_WITHOUT_R_P_CERTIFICATE"),
        "empty-goal" => Some("NULL_INPUT"),
        _ => None,
    }
}

/// The certificate each class carries (src/governor/verdict.rs), `None` for the last three.
fn certificate_of(class: &str) -> Option<(&'static str, &'static str)> {
    match class {
        "EXACT" => Some(("EXACT", "A")),
        "CONVERGED" => Some(("CONVERGED", "B")),
        "DIVERGED" => Some(("DIVERGED", "A")),
        "TIMEOUT" => Some(("TIMEOUT", "C")),
        "BACKPRESSURE" => Some(("BACKPRESSURE", "A")),
        _ => None,
    }
}

#[tokio::test]
async fn every_halt_class_leaves_a_report_that_matches_the_schema() {
    let cases = tokio::time::timeout(Duration::from_secs(5), every_class())
        .await
        .expect("driving every halt class took more than 5 s");
    let mut docs = Vec::new();
    for case in &cases {
        let what = format!("{} ({})", case.class, case.reason);
        let reports = case.pump.reports(case.thread).await.expect("reports");
        assert_eq!(
            reports.len(),
            1,
            "{what}: one halt, one report: {reports:#?}"
        );
        let report = &reports[0];
        assert_eq!(
            (report.class.as_str(), report.stop_reason.as_str()),
            (case.class, case.reason),
            "{what}: the thread halted for another reason: {report:#?}"
        );
        assert_eq!(report.thread, case.thread, "{what}");
        let certificate = report
            .halting_certificate
            .as_ref()
            .map(|c| (c.kind.as_str(), c.lane.as_str()));
        assert_eq!(
            certificate,
            certificate_of(case.class),
            "{what}: certificate"
        );
        // The halt message in the thread names the report by its digest.
        let json = serde_json::to_string(report).expect("a report serializes");
        let digest = hex::encode(Sha256::digest(json.as_bytes()));
        let history = case.pump.history(case.thread).await.expect("history");
        let halt = history
            .iter()
            .find(|r| r.id == report.halt_id)
            .unwrap_or_else(|| panic!("{what}: no record has the report's halt_id"));
        assert_eq!(
            (halt.kind, halt.root.local()),
            (RecordKind::System, "halt"),
            "{what}"
        );
        for fragment in [
            format!("class=\"{}\"", case.class),
            format!("report-digest=\"{digest}\""),
        ] {
            assert!(
                halt.payload.contains(&fragment),
                "{what}: the halt message lacks {fragment}: {}",
                halt.payload
            );
        }
        // phuc-loop §16: "stop_reason: SILENT_DIVERGENCE_DETECTED", "MAX_ITERS or
        // MAX_TOOL_CALLS", "NULL_INPUT or HALTING_CRITERIA_MISSING", §1 "BACKPRESSURE_SIGNAL".
        assert_eq!(
            report.seed_stop_reason.as_deref(),
            seed_name_of(case.reason),
            "{what}: the seed's stop reason"
        );
        docs.push((case.class.to_owned(), serde_json::to_value(report).unwrap()));
    }
    assert_valid(&docs);

    // What the reports say beyond their class, as the scenarios made them.
    let report = |class: &str| &docs.iter().find(|(c, _)| c == class).unwrap().1;
    let certificate = |class: &str| report(class)["halting_certificate"].clone();
    assert_eq!(
        certificate("CONVERGED")["residual_history_decimal_strings"],
        json!(["0.5", "0.00005"])
    );
    assert_eq!(certificate("CONVERGED")["R_p_decimal_string"], "0.0001");
    // phuc-loop: "all_increasing(residuals[-3:])" — the third rising residual halts.
    assert_eq!(
        certificate("DIVERGED")["residual_history_decimal_strings"],
        json!(["1", "2", "3"])
    );
    assert_eq!(
        (
            &report("DIVERGED")["last_known_good_iteration"],
            &report("DIVERGED")["divergence_start_iteration"]
        ),
        (&json!(1), &json!(2))
    );
    let checklist = &certificate("EXACT")["acceptance_criteria_checklist"];
    assert_eq!(checklist[0]["id"], "checked");
    assert_eq!(checklist[0]["met"], true);
    assert_eq!(checklist[0]["reported_by"], "verifier");
    assert_eq!(report("EXACT")["learnings"][0]["lane"], "B");
    assert_eq!(report("TIMEOUT")["budget"]["max-turns"]["limit"], "5");
    // phuc-loop §16.5: "missing_fields: list[string]"; §3.2: "residual_metric".
    assert_eq!(
        (
            &report("need-info")["missing_fields"],
            &report("need-info")["safe_partials"],
            &report("need-info")["residual_metric"]
        ),
        (
            &json!(["goal", "acceptance_criteria"]),
            &json!("nothing"),
            &json!("benchmark_gap")
        )
    );
    // phuc-loop §16.4: "last_known_state: FSM state at block"; §16.2: "diagnosis_attempt".
    assert_eq!(report("no-progress")["last_known_state"], "SPAWN_SUBAGENT");
    assert_eq!(report("aborted")["last_known_state"], "CHECK_HALTING");
    assert!(
        report("DIVERGED")["diagnosis_attempt"]
            .as_str()
            .unwrap()
            .starts_with("residuals rose at every iteration from 1 to 3: 1 < 2 < 3")
    );
    assert_eq!(report("TIMEOUT")["budget"]["max-turns"]["remaining"], "0");
}

// ---------------------------------------------------------------------------------------------
// The schema says no
// ---------------------------------------------------------------------------------------------

fn example() -> Value {
    let path = schemas_dir().join("examples/halting-report.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read the example report"))
        .expect("the example report is JSON")
}

#[test]
fn the_example_report_is_a_halting_report_and_matches_the_schema() {
    let example = example();
    let report: HaltingReport =
        serde_json::from_value(example.clone()).expect("the example deserializes");
    assert_eq!(
        serde_json::to_value(&report).unwrap(),
        example,
        "the example is not exactly what serde writes for it"
    );
    assert_valid(&[("example".to_owned(), example)]);
    // examples/halt.xml carries this report's digest.
    let digest = hex::encode(Sha256::digest(serde_json::to_string(&report).unwrap()));
    let halt = std::fs::read_to_string(schemas_dir().join("examples/halt.xml")).unwrap();
    assert!(
        halt.contains(&format!("report-digest=\"{digest}\"")),
        "examples/halt.xml should carry report-digest=\"{digest}\""
    );
}

#[test]
fn reports_that_break_the_schema_are_rejected_for_the_right_reason() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit, &str); 10] = [
        (
            "exact-without-certificate",
            |r| r["halting_certificate"] = Value::Null,
            "None is not of type 'object'",
        ),
        (
            "aborted-with-certificate",
            |r| {
                r["class"] = json!("aborted");
                r["status"] = json!("EXIT_BLOCKED");
            },
            "is not of type 'null'",
        ),
        (
            "status-not-of-the-class",
            |r| r["status"] = json!("EXIT_DIVERGED"),
            "'EXIT_CONVERGED' was expected",
        ),
        (
            "lane-not-of-the-class",
            |r| r["halting_certificate"]["lane"] = json!("C"),
            "'A' was expected",
        ),
        (
            "unknown-class",
            |r| r["class"] = json!("finished"),
            "'finished' is not one of",
        ),
        (
            "decimal-as-a-number",
            |r| r["halting_certificate"]["R_p_decimal_string"] = json!(0.0001),
            "0.0001 is not of type 'string'",
        ),
        (
            "decimal-in-scientific-notation",
            |r| r["halting_certificate"]["R_p_decimal_string"] = json!("1e-4"),
            "'1e-4' does not match",
        ),
        (
            "unknown-field",
            |r| r["verdict"] = json!("ok"),
            "Additional properties are not allowed ('verdict' was unexpected)",
        ),
        (
            "missing-nullable-field",
            |r| {
                r.as_object_mut().unwrap().remove("goal");
            },
            "'goal' is a required property",
        ),
        (
            "budget-line-without-remaining",
            |r| {
                r["budget"]["max-turns"]
                    .as_object_mut()
                    .unwrap()
                    .remove("remaining");
            },
            "'remaining' is a required property",
        ),
    ];
    let docs: Vec<(String, Value)> = cases
        .iter()
        .map(|(name, edit, _)| {
            let mut report = example();
            edit(&mut report);
            ((*name).to_owned(), report)
        })
        .collect();
    for ((name, errors), (_, _, complaint)) in schema_errors(&docs).into_iter().zip(cases) {
        assert!(
            errors.iter().any(|e| e.contains(complaint)),
            "{name}: expected an error containing {complaint:?}, got {errors:?}"
        );
    }
}

//! Tools through a real pump (`docs/tools.md`): calls, results and errors with their ids
//! echoed, the signature's check, malformed calls refused, the tool-call budget, the calculator
//! and the command tool's policy (allow list, shells, time limit, output cap, environment,
//! working directory), the digest builtin.

mod support;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::history::RecordKind;
use std::time::Duration;

use agentpump::listeners::{Calculator, CommandConfig, CommandTool, DIGEST_NS, Digest};
use agentpump::tool::{self, Answer, Call, ErrorType, TOOL_NS, ToolResult};
use agentpump::value::Value;
use agentpump::{Payload, PumpBuilder, PumpHandle, Registration, Role, ThreadId};
use support::{Script, egress, governed, notices, p, q, start};

/// The calculator registered as the builtin table has it.
fn calculator() -> Registration {
    Registration::new("calculator", Calculator)
        .accepts(Calculator::root())
        .accepts(tool::call_root())
}

fn pump(registrations: Vec<Registration>) -> PumpHandle {
    registrations
        .into_iter()
        .fold(PumpBuilder::new(), PumpBuilder::register)
        .build()
        .unwrap()
}

/// The tool answers that went out to the client, read back.
async fn answers(pump: &PumpHandle, thread: ThreadId) -> Vec<Answer> {
    egress(pump, thread)
        .await
        .iter()
        .map(|xml| {
            let payload = Payload::parse(xml, &agentpump::Limits::default()).unwrap();
            Answer::parse(&payload).expect("a tool answer").unwrap()
        })
        .collect()
}

/// Posts `call` from outside (routed by its root) and returns the one answer.
async fn ask(pump: &PumpHandle, call: &Call) -> Answer {
    let thread = start(pump, &call.to_xml()).await;
    let mut all = answers(pump, thread).await;
    assert_eq!(all.len(), 1, "{all:?}");
    all.pop().unwrap()
}

fn error_of(answer: Answer) -> (ErrorType, String, Option<String>) {
    match answer {
        Answer::Error(e) => (e.kind, e.message, e.call),
        Answer::Result(r) => panic!("expected an error, got {r:?}"),
    }
}

/// On `<go>` emits `call` (routed by its root); forwards every tool answer to the client.
fn caller(call: String, peers: &[&str]) -> Registration {
    Registration::new(
        "caller",
        Script::new(move |msg, cx| {
            if msg.qname().namespace() == TOOL_NS {
                cx.send("client", msg.payload().as_str());
            } else if msg.qname().local() == "go" {
                cx.emit(call.as_str());
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(peers.iter().copied())
    .role(Role::Agent)
}

#[tokio::test]
async fn the_calculator_answers_a_call_with_its_id() {
    let pump = pump(vec![calculator()]);
    let call = Call::new("calculator")
        .id("newton.1")
        .arg("expression", "(1 + 2) / 4");
    let Answer::Result(result) = ask(&pump, &call).await else {
        panic!("expected a result");
    };
    assert_eq!(result.call.as_deref(), Some("newton.1"));
    assert_eq!(
        result.to_xml(),
        r#"<result xmlns="urn:agentpump:tool:v1" tool="calculator" call="newton.1"><field name="value" type="number">0.75</field></result>"#
    );
}

#[tokio::test]
async fn the_calculator_answers_a_bad_expression_with_invalid_argument() {
    let pump = pump(vec![calculator()]);
    let call = Call::new("calculator").id("c7").arg("expression", "1 / 0");
    assert_eq!(
        error_of(ask(&pump, &call).await),
        (
            ErrorType::InvalidArgument,
            "division by zero at position 5".to_owned(),
            Some("c7".to_owned())
        )
    );
}

#[tokio::test]
async fn the_calculators_own_protocol_still_works() {
    let pump = pump(vec![calculator()]);
    let thread = start(&pump, r#"<calc xmlns="urn:agentpump:calc:v1">1 / 0</calc>"#).await;
    assert_eq!(
        egress(&pump, thread).await,
        [
            r#"<calc-error xmlns="urn:agentpump:calc:v1">division by zero at position 5</calc-error>"#
        ]
    );
}

#[tokio::test]
async fn calls_that_do_not_fit_the_signature_are_invalid_arguments() {
    let pump = pump(vec![calculator()]);
    let cases = [
        (
            Call::new("calculator")
                .id("u")
                .arg("expression", "1")
                .arg("digits", "3"),
            "unknown argument `digits`; calculator takes expression",
        ),
        (
            Call::new("calculator").id("m"),
            "missing required argument `expression`",
        ),
        (
            Call::new("calculator").id("t").arg("expression", true),
            "argument `expression` must be a string, not boolean",
        ),
    ];
    for (call, expected) in cases {
        let (kind, message, id) = error_of(ask(&pump, &call).await);
        assert_eq!(kind, ErrorType::InvalidArgument, "{call:?}");
        assert_eq!(message, expected);
        assert_eq!(id, call.id);
    }
}

#[tokio::test]
async fn a_call_emitted_by_a_listener_reaches_the_tool_it_names() {
    let call = Call::new("calculator").id("x").arg("expression", "2 * 3");
    let pump = pump(vec![
        calculator(),
        caller(call.to_xml(), &["calculator"]),
        // Another tool accepting calls: routing by root must not reach it.
        Registration::new(
            "other",
            Script::new(|_, _| panic!("a call to the calculator reached `other`")),
        )
        .accepts(tool::call_root()),
    ]);
    let thread = start(&pump, &p("go", "")).await;
    let Answer::Result(result) = answers(&pump, thread).await.remove(0) else {
        panic!("expected a result");
    };
    assert_eq!(result.fields["value"].to_string(), "6");
    assert_eq!(result.call.as_deref(), Some("x"));
}

#[tokio::test]
async fn a_malformed_call_is_refused_by_the_pump_naming_the_fault() {
    let malformed = format!(r#"<call xmlns="{TOOL_NS}" tool="calculator" retries="3"/>"#);
    // From a listener: `huh invalid-payload` back to it.
    let pump = pump(vec![
        calculator(),
        caller(malformed.clone(), &["calculator"]),
    ]);
    let thread = start(&pump, &p("go", "")).await;
    assert_eq!(
        notices(&pump, thread).await,
        [(
            "caller".to_owned(),
            "huh".to_owned(),
            "invalid-payload".to_owned()
        )]
    );
    let history = pump.history(thread).await.unwrap();
    let huh = history
        .iter()
        .find(|r| r.kind == RecordKind::System)
        .unwrap();
    assert!(
        huh.payload.contains("unknown attribute retries="),
        "{}",
        huh.payload
    );
    // From outside: refused at the door, the same way.
    let err = pump.post(None, None, &malformed).await.unwrap_err();
    assert!(
        err.to_string().contains("unknown attribute retries="),
        "{err}"
    );
}

/// A call in the crate's written form is checked in one walk; with a fault in it, it is
/// refused as any other call is, naming the fault (`huh invalid-payload`), and with a
/// character XML forbids, as any other payload is (`huh malformed-xml`).
#[tokio::test]
async fn a_written_call_with_a_fault_is_refused_naming_it() {
    let not_a_number = format!(
        r#"<call xmlns="{TOOL_NS}" tool="calculator"><arg name="expression" type="number">x</arg></call>"#
    );
    let control = Call::new("calculator")
        .arg("expression", "1 + 1\u{1}")
        .to_xml();
    for (call, code, fault) in [
        (
            not_a_number,
            "invalid-payload",
            "&quot;x&quot; is not a number",
        ),
        (control, "malformed-xml", "U+0001"),
    ] {
        let pump = pump(vec![calculator(), caller(call, &["calculator"])]);
        let thread = start(&pump, &p("go", "")).await;
        assert_eq!(
            notices(&pump, thread).await,
            [("caller".to_owned(), "huh".to_owned(), code.to_owned())]
        );
        let history = pump.history(thread).await.unwrap();
        let huh = history
            .iter()
            .find(|r| r.kind == RecordKind::System)
            .unwrap();
        assert!(huh.payload.contains(fault), "{}", huh.payload);
        assert!(answers(&pump, thread).await.is_empty());
    }
}

#[tokio::test]
async fn a_call_past_the_tool_call_budget_halts_the_thread() {
    let call = Call::new("calculator").arg("expression", "1 + 1").to_xml();
    // Calls again on every answer.
    let again = call.clone();
    let looping = Registration::new(
        "caller",
        Script::new(move |msg, cx| {
            if !msg.is_system() {
                cx.emit(again.as_str());
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["calculator"])
    .role(Role::Agent);
    let budget = Budget {
        tool_calls: Some(2),
        ..GovernorPolicy::default_budget()
    };
    let pump = governed(budget, vec![calculator(), looping]);
    let thread = start(&pump, &p("go", "")).await;
    let reports = pump.reports(thread).await.unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(
        (reports[0].class.as_str(), reports[0].stop_reason.as_str()),
        ("TIMEOUT", "max-tool-calls")
    );
    assert_eq!(pump.thread(thread).unwrap().counters.tool_calls, 2);
}

// The command tool.

fn command(config: CommandConfig) -> PumpHandle {
    pump(vec![CommandTool::new(config).registration()])
}

fn run(program: &str, args: &[&str]) -> Call {
    let list = args
        .iter()
        .map(|a| Value::Str((*a).to_owned()))
        .collect::<Vec<_>>();
    Call::new("command")
        .id("r")
        .arg("program", program)
        .arg("args", Value::List(list))
}

fn allowing(programs: &[&str]) -> CommandConfig {
    CommandConfig {
        allow: programs.iter().map(|p| (*p).to_owned()).collect(),
        ..CommandConfig::default()
    }
}

fn result_of(answer: Answer) -> ToolResult {
    match answer {
        Answer::Result(r) => r,
        Answer::Error(e) => panic!("expected a result, got {e:?}"),
    }
}

#[tokio::test]
async fn the_command_tool_captures_exit_code_and_output() {
    let pump = command(allowing(&["echo", "false", "cat"]));
    let r = result_of(ask(&pump, &run("echo", &["hello", "world"])).await);
    assert_eq!(r.call.as_deref(), Some("r"));
    assert_eq!(r.fields["exit_code"].to_string(), "0");
    assert_eq!(r.fields["stdout"], Value::Str("hello world\n".into()));
    assert_eq!(r.fields["stderr"], Value::Str(String::new()));
    assert_eq!(r.fields["truncated"], Value::Bool(false));
    assert!(matches!(r.fields["duration_ms"], Value::Num(_)));
    let r = result_of(ask(&pump, &run("false", &[])).await);
    assert_eq!(r.fields["exit_code"].to_string(), "1");
    let r = result_of(ask(&pump, &run("cat", &[]).arg("stdin", "fed in")).await);
    assert_eq!(r.fields["stdout"], Value::Str("fed in".into()));
}

#[tokio::test]
async fn a_program_not_on_the_allow_list_is_not_allowed() {
    let pump = command(allowing(&["echo"]));
    for program in ["rm", "/bin/echo"] {
        let (kind, message, _) = error_of(ask(&pump, &run(program, &["x"])).await);
        assert_eq!(kind, ErrorType::NotAllowed, "{program}");
        assert!(
            message.contains("not on the command tool's allow list"),
            "{message}"
        );
    }
}

#[tokio::test]
async fn a_shell_runs_only_when_the_organism_allows_shells() {
    // Listed but shells not allowed: refused (an organism file with this is an error).
    let refused = command(allowing(&["sh"]));
    let (kind, message, _) = error_of(ask(&refused, &run("sh", &["-c", "echo hi"])).await);
    assert_eq!(kind, ErrorType::NotAllowed);
    assert!(message.contains("is a shell"), "{message}");
    let allowed = command(CommandConfig {
        allow_shell: true,
        ..allowing(&["sh"])
    });
    let r = result_of(ask(&allowed, &run("sh", &["-c", "echo hi"])).await);
    assert_eq!(r.fields["stdout"], Value::Str("hi\n".into()));
}

#[tokio::test]
async fn a_run_past_its_time_limit_is_killed() {
    let pump = command(CommandConfig {
        timeout: Duration::from_millis(200),
        ..allowing(&["sleep"])
    });
    let (kind, message, id) = error_of(ask(&pump, &run("sleep", &["5"])).await);
    assert_eq!(kind, ErrorType::Timeout);
    assert!(message.contains("was killed"), "{message}");
    assert_eq!(id.as_deref(), Some("r"));
}

/// A shell allowed in a scratch directory, with a time limit.
fn shell_in(dir: &std::path::Path, timeout: Duration) -> PumpHandle {
    command(CommandConfig {
        allow_shell: true,
        cwd: dir.to_path_buf(),
        timeout,
        ..allowing(&["sh"])
    })
}

/// Issue 28: "a worker or verification that times out keeps running: only the outer `sh -c` is
/// killed, its children are reparented and keep editing files" — the whole process group is.
#[tokio::test]
async fn a_run_past_its_time_limit_is_killed_with_its_children() {
    let dir = support::Scratch::new("command-group-timeout");
    let pump = shell_in(&dir.0, Duration::from_millis(300));
    let script = "(sleep 1; echo late > late.txt) & sleep 10";
    let (kind, message, _) = error_of(ask(&pump, &run("sh", &["-c", script])).await);
    assert_eq!(kind, ErrorType::Timeout);
    assert!(
        message.contains("with every process it started"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !dir.0.join("late.txt").exists(),
        "a child outlived the call"
    );
}

/// "nothing a call started outlives it": a background job left behind by a program that exits
/// is killed when it exits, and does not hold the call open until the time limit.
#[tokio::test]
async fn a_background_job_left_behind_ends_with_the_call() {
    let dir = support::Scratch::new("command-group-exit");
    let pump = shell_in(&dir.0, Duration::from_secs(20));
    let started = std::time::Instant::now();
    let script = "(sleep 1; echo late > late.txt) >/dev/null 2>&1 & sleep 10 & echo hi";
    let r = result_of(ask(&pump, &run("sh", &["-c", script])).await);
    assert_eq!(r.fields["stdout"], Value::Str("hi\n".into()));
    assert_eq!(r.fields["exit_code"].to_string(), "0");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the call waited for its background job: {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !dir.0.join("late.txt").exists(),
        "a background job outlived the call"
    );
}

#[tokio::test]
async fn output_past_the_cap_is_truncated() {
    let pump = command(CommandConfig {
        max_output: 4,
        ..allowing(&["echo"])
    });
    let r = result_of(ask(&pump, &run("echo", &["abcdefgh"])).await);
    assert_eq!(r.fields["stdout"], Value::Str("abcd".into()));
    assert_eq!(r.fields["truncated"], Value::Bool(true));
}

#[tokio::test]
async fn only_listed_environment_variables_are_visible() {
    // HOME is set for the test process; only PATH is passed through.
    let pump = command(CommandConfig {
        env: vec!["PATH".into()],
        allow_shell: true,
        ..allowing(&["env", "sh"])
    });
    let r = result_of(ask(&pump, &run("env", &[])).await);
    let Value::Str(out) = &r.fields["stdout"] else {
        panic!("stdout is a string")
    };
    assert!(out.lines().any(|l| l.starts_with("PATH=")), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("HOME=")), "{out}");
    let r = result_of(ask(&pump, &run("sh", &["-c", "echo \"[$HOME]\""])).await);
    assert_eq!(r.fields["stdout"], Value::Str("[]\n".into()));
}

#[tokio::test]
async fn the_run_happens_in_the_configured_directory() {
    let dir = std::env::temp_dir().join(format!("agentpump-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("marker.txt"), "").unwrap();
    let pump = command(CommandConfig {
        cwd: dir.clone(),
        ..allowing(&["ls"])
    });
    let r = result_of(ask(&pump, &run("ls", &[])).await);
    assert_eq!(r.fields["stdout"], Value::Str("marker.txt\n".into()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_answers_with_the_payload_hashed_as_many_rounds_as_asked() {
    use sha2::Digest as _;
    let pump = pump(vec![Registration::new("digest", Digest).accepts(q("work"))]);
    let expected = |payload: &str, rounds: u64| {
        let mut hash = sha2::Sha256::digest(payload.as_bytes());
        for _ in 1..rounds {
            hash = sha2::Sha256::digest(hash);
        }
        format!(
            r#"<digest xmlns="{DIGEST_NS}" rounds="{rounds}">{}</digest>"#,
            hex::encode(hash)
        )
    };
    let cases = [
        (r#"<work xmlns="urn:test:v1" rounds="1000"/>"#, 1000),
        (r#"<work xmlns="urn:test:v1"/>"#, 1),
        (r#"<work xmlns="urn:test:v1" rounds="0"/>"#, 1),
    ];
    for (payload, rounds) in cases {
        let thread = start(&pump, payload).await;
        assert_eq!(
            egress(&pump, thread).await,
            [expected(payload, rounds)],
            "{payload}"
        );
    }
}

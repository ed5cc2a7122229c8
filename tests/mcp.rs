//! MCP both ways (issue 30), against real implementations: the MCP project's reference server
//! (`@modelcontextprotocol/server-everything`, npm) and a server and client written with the
//! official Python SDK (`mcp` on PyPI; tests/fixtures/mcp/). `.ci/run` installs them, pinned,
//! and sets `AGENTPUMP_TESTS_NEED_MCP=1`: there a missing one fails the test; elsewhere the
//! test says it skips.

mod support;

#[path = "support/otlp.rs"]
#[allow(dead_code)] // its metrics readers are tests/telemetry.rs's
mod otlp;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentpump::host::organism::Organism;
use agentpump::tool::ErrorType;
use agentpump::value::Value;
use agentpump::{PumpHandle, ThreadId};
use support::Scratch;
use support::mcp::{everything, installed};
use support::process::{failure, fields, go, run};

/// An organism in `dir` (`organism.toml`, its history in `history.db`) with `files` beside it.
struct Host {
    pump: PumpHandle,
    /// The MCP tools registered, as LLM agents see them.
    tools: Vec<String>,
    store: Arc<agentpump::history::SqliteHistory>,
}

impl Host {
    async fn start(dir: &Scratch, organism: &str, files: &[(&str, &str)]) -> Self {
        for (name, text) in files {
            dir.write(name, text);
        }
        let path = dir.write("organism.toml", organism);
        let organism = Organism::load(&path).unwrap();
        let store = Arc::new(organism.open_store(&dir.0).unwrap());
        let mcp = organism.start_mcp("organism.toml").await.unwrap();
        let tools = mcp.docs().iter().map(|d| d.name.clone()).collect();
        let pump = organism
            .builder_with_mcp("organism.toml", mcp)
            .unwrap()
            .history(Arc::clone(&store) as Arc<dyn agentpump::history::HistoryStore>)
            .build()
            .unwrap();
        Self { pump, tools, store }
    }

    /// Shuts the pump down, closes the store and runs `agentpump verify` on the history.
    async fn verify(self, dir: &Scratch) {
        self.pump.shutdown(Duration::from_secs(5)).await;
        self.store.close().unwrap();
        let (ok, out, err) = support::agentpump_in(&dir.0, &["verify", "--db", "history.db"]);
        assert!(ok, "agentpump verify: {out}{err}");
    }
}

/// `[[mcp]]` for the reference server, with `extra` lines.
fn everything_table(command: &str, extra: &str) -> String {
    format!(
        "[store]\npath = \"history.db\"\n\n[[mcp]]\nname = \"ev\"\ncommand = [{command}]\n{extra}\n"
    )
}

fn process(body: &str) -> String {
    support::process::doc("", body)
}

fn listener(name: &str) -> String {
    format!("[[listener]]\nname = \"{name}\"\nkind = \"process\"\nfile = \"{name}.aps\"\n")
}

/// The records to and from MCP tools (`ev.…`, `py.…`): `call TOOL` and `result TOOL` or
/// `error TOOL`.
fn crossing(records: &[agentpump::history::Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| {
            let to = r.to.as_deref().unwrap_or_default();
            let tool = [to, &*r.from].into_iter().find(|n| n.contains('.'))?;
            Some(format!("{} {tool}", r.root.local()))
        })
        .collect()
}

async fn settle(pump: &PumpHandle, thread: ThreadId) {
    tokio::time::timeout(Duration::from_secs(30), pump.settle(thread))
        .await
        .expect("the thread settles");
}

/// Issue 30: "list its tools, call `add` and `echo` … from a process" (the reference server
/// calls its `add` tool `get-sum` since 2026).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_uses_the_reference_servers_tools_and_the_history_verifies() {
    let Some(server) = everything() else { return };
    let dir = Scratch::new("mcp-everything-process");
    let body = "  USE `ev.get-sum` where: a=2, b=40\n  CAPTURE SUM from `ev.get-sum` map: \"text\"→SUM\n  USE `ev.echo` where: message=\"hi\"\n  CAPTURE ECHO from `ev.echo` map: \"text\"→ECHO\n  RETURN: SUM, ECHO\n";
    let organism =
        everything_table(&format!("{:?}", server.display().to_string()), "") + &listener("main");
    let host = Host::start(&dir, &organism, &[("main.aps", &process(body))]).await;
    for tool in ["ev.echo", "ev.get-sum", "ev.get-structured-content"] {
        assert!(
            host.tools.iter().any(|t| t == tool),
            "{tool} in {:?}",
            host.tools
        );
    }
    let (thread, records) = run(&host.pump, &go("")).await;
    let got = fields(&records);
    assert_eq!(got["SUM"], Value::Str("The sum of 2 and 40 is 42.".into()));
    assert_eq!(got["ECHO"], Value::Str("Echo: hi".into()));
    // Each call and each answer is a record of the thread.
    assert_eq!(
        crossing(&records),
        [
            "call ev.get-sum",
            "result ev.get-sum",
            "call ev.echo",
            "result ev.echo"
        ],
        "{thread}"
    );
    host.verify(&dir).await;
}

/// A call of `tool` with `args` (`name=json` each), as XML.
fn call(tool: &str, id: &str, args: &[(&str, &str)]) -> String {
    let call = args.iter().fold(
        agentpump::tool::Call::new(tool).id(id),
        |c, &(name, json)| c.arg(name, Value::from_json(json).unwrap()),
    );
    call.to_xml()
}

/// Posts `payload` from outside into a new thread and settles it: the thread and its records.
async fn ask(pump: &PumpHandle, payload: &str) -> (ThreadId, Vec<agentpump::history::Record>) {
    let thread = pump.post(None, None, payload).await.unwrap().thread();
    settle(pump, thread).await;
    (thread, pump.history(thread).await.unwrap())
}

/// Issue 30: "an error result" — `isError` and JSON-RPC errors map to `<error type=…>` with
/// the server's message; an argument that does not fit the signature never reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_results_come_back_as_tool_errors_with_the_servers_message() {
    let Some(server) = everything() else { return };
    let dir = Scratch::new("mcp-everything-errors");
    let organism = everything_table(&format!("{:?}", server.display().to_string()), "");
    let host = Host::start(&dir, &organism, &[]).await;
    // The reference server refuses a city its enum does not list (the signature carries the
    // enum for the model and leaves the check to the server).
    let (_, records) = ask(
        &host.pump,
        &call(
            "ev.get-structured-content",
            "c1",
            &[("location", "\"Paris\"")],
        ),
    )
    .await;
    let e = failure(&records);
    assert_eq!(e.call.as_deref(), Some("c1"));
    assert!(
        matches!(e.kind, ErrorType::InvalidArgument | ErrorType::Failed),
        "{e:?}"
    );
    assert!(
        e.message.contains("location"),
        "the server's message: {e:?}"
    );
    // Refused by the signature: the server never sees it.
    let (_, records) = ask(&host.pump, &call("ev.get-sum", "c2", &[("a", "\"two\"")])).await;
    let e = failure(&records);
    assert_eq!(e.kind, ErrorType::InvalidArgument);
    assert_eq!(e.message, "argument `a` must be a number, not string");
    // Structured content comes back as the `structured` field.
    let (_, records) = ask(
        &host.pump,
        &call(
            "ev.get-structured-content",
            "c3",
            &[("location", "\"Chicago\"")],
        ),
    )
    .await;
    let answer = support::process::returned(&records);
    let agentpump::tool::Answer::Result(r) = answer else {
        panic!("a result: {answer:?}")
    };
    let Value::Object(structured) = &r.fields["structured"] else {
        panic!("structured content: {:?}", r.fields)
    };
    assert!(structured.contains_key("temperature"), "{structured:?}");
    host.verify(&dir).await;
}

/// Issue 30: "a long-running tool past its timeout" gives `system-error` `handler-timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_past_its_timeout_is_a_handler_timeout() {
    let Some(server) = everything() else { return };
    let dir = Scratch::new("mcp-everything-timeout");
    let organism = everything_table(
        &format!("{:?}", server.display().to_string()),
        "timeout_ms = 800",
    );
    let host = Host::start(&dir, &organism, &[]).await;
    let slow = call(
        "ev.trigger-long-running-operation",
        "slow",
        &[("duration", "5"), ("steps", "1")],
    );
    let (thread, _) = ask(&host.pump, &slow).await;
    let notices = support::notices(&host.pump, thread).await;
    assert_eq!(
        notices,
        [(
            "client".into(),
            "system-error".into(),
            "handler-timeout".into()
        )]
    );
    // The server is still there for the next call.
    let (_, records) = ask(&host.pump, &call("ev.echo", "e", &[("message", "\"on\"")])).await;
    assert_eq!(fields(&records)["text"], Value::Str("Echo: on".into()));
    host.verify(&dir).await;
}

/// Issue 30: "kill -9 of the server mid-call (system-error, restart, next call works)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_is_upstream_failed_then_restarted() {
    let Some(server) = everything() else { return };
    let dir = Scratch::new("mcp-everything-kill");
    let pid_file = dir.0.join("server.pid");
    // The shell writes its pid, then becomes the server: the pid is the server's.
    let command = format!(
        "\"sh\", \"-c\", {:?}",
        format!(
            "echo $$ > '{}'; exec '{}'",
            pid_file.display(),
            server.display()
        )
    );
    let host = Host::start(&dir, &everything_table(&command, "timeout_ms = 20000"), &[]).await;
    let first_pid = std::fs::read_to_string(&pid_file).unwrap();
    let slow = call(
        "ev.trigger-long-running-operation",
        "slow",
        &[("duration", "10"), ("steps", "10")],
    );
    let thread = host.pump.post(None, None, &slow).await.unwrap().thread();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = nix::unistd::Pid::from_raw(first_pid.trim().parse().unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    settle(&host.pump, thread).await;
    let notices = support::notices(&host.pump, thread).await;
    assert_eq!(
        notices,
        [(
            "client".into(),
            "system-error".into(),
            "upstream-failed".into()
        )]
    );
    // The next call waits for the restart and works.
    let (_, records) = ask(
        &host.pump,
        &call("ev.get-sum", "s", &[("a", "1"), ("b", "2")]),
    )
    .await;
    assert_eq!(
        fields(&records)["text"],
        Value::Str("The sum of 1 and 2 is 3.".into())
    );
    let second_pid = std::fs::read_to_string(&pid_file).unwrap();
    assert_ne!(first_pid, second_pid, "a new server process");
    host.verify(&dir).await;
}

/// Issue 30: "call `add` and `echo` from an LLM agent (scripted model on loopback)"; "LLM
/// agents see MCP tools in their prompt like any tool (description, arguments)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_agent_calls_the_reference_servers_tools() {
    use support::model::{answer, serve_model};
    let Some(server) = everything() else { return };
    let dir = Scratch::new("mcp-everything-llm");
    let gov = "urn:agentpump:governor:v1";
    let (model, base) = serve_model(
        vec![
            answer(&call("ev.get-sum", "s", &[("a", "6"), ("b", "7")]), 10, 10),
            answer(&call("ev.echo", "e", &[("message", "\"13\"")]), 10, 10),
            answer(
                &format!(
                    r#"<send to="client">{}</send> <loop xmlns="{gov}" control="done"/>"#,
                    support::p("answer", "13")
                ),
                10,
                10,
            ),
        ],
        None,
    )
    .await;
    let organism = everything_table(&format!("{:?}", server.display().to_string()), "")
        + &format!(
            "[[listener]]\nname = \"assistant\"\nkind = \"llm\"\nbase_url = \"{base}\"\nmodel = \"m\"\n\
             prompt = \"You add.\"\naccepts = [\"{{urn:test:v1}}ask\"]\npeers = [\"ev.get-sum\", \"ev.echo\"]\n"
        );
    let host = Host::start(&dir, &organism, &[]).await;
    let thread = host
        .pump
        .post(None, Some("assistant"), &support::p("ask", "6 + 7?"))
        .await
        .unwrap()
        .thread();
    settle(&host.pump, thread).await;
    let records = host.pump.history(thread).await.unwrap();
    assert_eq!(
        crossing(&records),
        [
            "call ev.get-sum",
            "result ev.get-sum",
            "call ev.echo",
            "result ev.echo"
        ]
    );
    assert_eq!(
        support::egress(&host.pump, thread).await,
        [support::p("answer", "13")]
    );
    let requests = model.requests.lock().unwrap().clone();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("ev.get-sum") && system.contains("Returns the sum of two numbers"),
        "the tool's name and description: {system}"
    );
    assert!(
        system.contains(r#"<arg name="a" type="number">"#),
        "{system}"
    );
    let second = serde_json::to_string(&requests[1]["messages"]).unwrap();
    assert!(second.contains("The sum of 6 and 7 is 13."), "{second}");
    host.verify(&dir).await;
}

/// The Python SDK's interpreter (`.ci/run`'s virtual environment with `mcp` 2.x).
fn python() -> Option<PathBuf> {
    installed("AGENTPUMP_MCP_PYTHON", "python-mcp-2.3.0/bin/python")
}

/// tests/fixtures/mcp/`name`.
fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp")
        .join(name)
        .display()
        .to_string()
}

/// The `structured` field of a result.
fn structured(records: &[agentpump::history::Record]) -> std::collections::BTreeMap<String, Value> {
    match fields(records).remove("structured") {
        Some(Value::Object(map)) => map,
        other => panic!("structured content: {other:?}"),
    }
}

/// Issue 30: "a server written with the official Python SDK … over stdio …, returning
/// structured content"; "`list_changed` notifications update the registrations".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_sdk_server_over_stdio_gives_structured_content_and_changes_its_tools() {
    let Some(python) = python() else { return };
    let dir = Scratch::new("mcp-python-stdio");
    let organism = format!(
        "[store]\npath = \"history.db\"\n\n[[mcp]]\nname = \"py\"\ncommand = [{:?}, {:?}, \"stdio\"]\n",
        python.display().to_string(),
        fixture("server.py")
    );
    let host = Host::start(&dir, &organism, &[]).await;
    let (_, records) = ask(
        &host.pump,
        &call("py.weather", "w", &[("city", "\"Oslo\"")]),
    )
    .await;
    let weather = structured(&records);
    assert_eq!(weather["city"], Value::Str("Oslo".into()));
    assert_eq!(weather["temperature"], Value::from_json("21.5").unwrap());
    // `factor: float | None` is an `anyOf` of plain types: a number or null, or left out.
    for (args, expected) in [
        (vec![("value", "4")], "8"),
        (vec![("value", "4"), ("factor", "null")], "8"),
        (vec![("value", "4"), ("factor", "0.5")], "2"),
    ] {
        let (_, records) = ask(&host.pump, &call("py.scale", "s", &args)).await;
        let got = &structured(&records)["result"];
        assert_eq!(got, &Value::from_json(expected).unwrap(), "{args:?}");
    }
    let (_, records) = ask(&host.pump, &call("py.boom", "b", &[])).await;
    let e = failure(&records);
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorType::Failed, "Error executing tool boom")
    );
    // `retire` removes `weather` and notifies the client: calls of it are then `unavailable`.
    // Between the server dropping the tool and the host reading its `list_changed`, a call may
    // still reach the server and get the server's own error; the host's answer follows.
    ask(&host.pump, &call("py.retire", "r", &[])).await;
    let mut last = None;
    for _ in 0..50 {
        let (_, records) = ask(
            &host.pump,
            &call("py.weather", "w", &[("city", "\"Oslo\"")]),
        )
        .await;
        if let agentpump::tool::Answer::Error(e) = support::process::returned(&records) {
            let settled = e.kind == ErrorType::Unavailable;
            last = Some(e);
            if settled {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let e = last.expect("weather is retired");
    assert_eq!(e.kind, ErrorType::Unavailable);
    assert_eq!(e.message, "MCP server `py` no longer lists tool `weather`");
    host.verify(&dir).await;
}

/// Issue 30: "a server written with the official Python SDK … once over Streamable HTTP,
/// returning structured content".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_sdk_server_over_streamable_http_gives_structured_content() {
    let Some(python) = python() else { return };
    let dir = Scratch::new("mcp-python-http");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = tokio::process::Command::new(&python)
        .args([fixture("server.py"), "http".into(), port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let organism = format!(
        "[store]\npath = \"history.db\"\n\n[[mcp]]\nname = \"py\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntools = [\"weather\", \"boom\"]\n"
    );
    let host = Host::start(&dir, &organism, &[]).await;
    assert_eq!(host.tools, ["py.weather", "py.boom"]);
    let (_, records) = ask(
        &host.pump,
        &call("py.weather", "w", &[("city", "\"Lima\"")]),
    )
    .await;
    assert_eq!(
        structured(&records)["conditions"],
        Value::Str("sunny".into())
    );
    let (_, records) = ask(&host.pump, &call("py.boom", "b", &[])).await;
    assert_eq!(failure(&records).kind, ErrorType::Failed);
    host.verify(&dir).await;
}

/// Runs tests/fixtures/mcp/client.py with `args`: its steps, by name.
async fn drive(
    python: &Path,
    args: &[&str],
) -> (
    bool,
    std::collections::BTreeMap<String, serde_json::Value>,
    String,
) {
    let out = tokio::process::Command::new(python)
        .arg(fixture("client.py"))
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("the client finishes")
        .unwrap();
    let steps = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| (v["step"].as_str().unwrap().to_owned(), v["result"].clone()))
        .collect();
    (
        out.status.success(),
        steps,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the client must have seen from an organism with one `echo` listener.
fn assert_drove(steps: &std::collections::BTreeMap<String, serde_json::Value>, listeners: &[&str]) {
    assert_eq!(
        steps["tools"],
        serde_json::json!(["history", "post", "report", "resume", "stop", "threads"])
    );
    let post = &steps["post"];
    assert_eq!(post["settled"], true, "{post}");
    assert!(
        post["answers"][0]
            .as_str()
            .unwrap()
            .contains(r#"<say xmlns="urn:test:v1">hello</say>"#),
        "{post}"
    );
    assert_eq!(
        steps["history"],
        serde_json::json!({"pages": [1, 1], "total": 2})
    );
    assert!(
        steps["report-before"]["error"]
            .as_str()
            .unwrap()
            .contains("has not halted")
    );
    assert_eq!(steps["stop"]["stopped"], true);
    assert_eq!(steps["report"], "stop-request");
    assert_eq!(steps["resume"]["resumed"], true);
    assert_eq!(steps["listeners"], serde_json::json!(listeners));
}

const ECHO_ORGANISM: &str = "[store]\npath = \"history.db\"\n\n[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{urn:test:v1}say\"]\n";

/// Issue 30: "agentpump's own MCP server driven by the Python SDK's client: post, wait for the
/// answer, read the history, stop, resume" — over stdio (`agentpump mcp --organism`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_drives_agentpump_mcp_over_stdio() {
    let Some(python) = python() else { return };
    let dir = Scratch::new("mcp-serve-stdio");
    let organism = dir.write("organism.toml", ECHO_ORGANISM);
    let (ok, steps, err) = drive(
        &python,
        &[
            "stdio",
            env!("CARGO_BIN_EXE_agentpump"),
            &organism.display().to_string(),
        ],
    )
    .await;
    assert!(ok, "{err}");
    // The organism's own listener, and the `ask` tool every organism has (docs/inbox.md).
    assert_drove(&steps, &["echo", "ask"]);
    let (ok, out, err) = support::agentpump_in(&dir.0, &["verify", "--db", "history.db"]);
    assert!(ok, "agentpump verify: {out}{err}");
}

/// Issue 30: "a `/mcp` Streamable HTTP endpoint on `agentpump run` (behind the same token)";
/// "a wrong token refused".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_drives_slash_mcp_behind_the_token() {
    let Some(python) = python() else { return };
    let pump = agentpump::PumpBuilder::new()
        .register(
            agentpump::Registration::new("echo", agentpump::listeners::Echo)
                .accepts(support::q("say")),
        )
        .build()
        .unwrap();
    let base = support::serve(&pump, "s3cret", 1 << 20).await;
    let url = format!("{base}/mcp");
    let (ok, steps, err) = drive(&python, &["http", &url, "s3cret"]).await;
    assert!(
        ok,
        "{steps:?} {}",
        err.lines()
            .filter(|l| l.contains("Error"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let mut steps = steps;
    // This pump was built without the organism's listener list.
    steps.insert("listeners".into(), serde_json::json!(["echo"]));
    assert_drove(&steps, &["echo"]);
    let (ok, steps, _) = drive(&python, &["http", &url, "wrong"]).await;
    assert!(
        !ok && steps.is_empty(),
        "a wrong token is refused: {steps:?}"
    );
    // The refusal is the API's own, before MCP reads anything.
    support::mcp::refuses_a_wrong_token(&url).await;
    assert!(pump.verify().await.is_ok());
}

/// `[[mcp]] units`: agentpump's own small MCP server (`agentpump mcp-units`, one tool
/// `convert`), over stdio: needs nothing installed.
fn units_table() -> String {
    format!(
        "[[mcp]]\nname = \"units\"\ncommand = [{:?}, \"mcp-units\"]\n",
        env!("CARGO_BIN_EXE_agentpump")
    )
}

/// A process file whose process `id` USEs `tool` once.
fn using(id: &str, tool: &str) -> String {
    format!(
        "<processes>\n<process id=\"{id}\" args=\"km: Number\">\n  USE `{tool}` where: from=\"km\", to=\"mi\", value=km (timeout_ms=10000)\n  CAPTURE MILES from `{tool}` map: \"structured.value\"→MILES\n  RETURN: miles=MILES\n</process>\n</processes>\n"
    )
}

/// Issue 30: "processes `USE` them" — `agentpump process check --organism` knows the tools of
/// the organism's MCP servers: a USE of one passes, a USE of a tool the server does not offer
/// is AG-017 at its line.
#[test]
fn process_check_knows_the_tools_of_the_organisms_mcp_servers() {
    let dir = Scratch::new("mcp-process-check");
    dir.write("organism.toml", &units_table());
    dir.write("good.aps", &using("good", "units.convert"));
    dir.write("bad.aps", &using("bad", "units.nope"));
    let check = |file: &str| {
        support::agentpump_in(
            &dir.0,
            &["process", "check", "--organism", "organism.toml", file],
        )
    };
    let (ok, out, err) = check("good.aps");
    assert!(ok, "{out}{err}");
    let (ok, out, _) = check("bad.aps");
    assert!(!ok);
    assert!(
        out.contains("error[AG-017 ToolPolicy]: tool `units.nope` is not registered")
            && out.contains("bad.aps:3:7"),
        "{out}"
    );
}

/// Issue 30: "processes `USE` them" — `agentpump process run --organism` and `agentpump tasks
/// check` build their pumps with the tools of the organism's MCP servers.
#[test]
fn process_run_and_tasks_check_use_the_tools_of_the_organisms_mcp_servers() {
    let dir = Scratch::new("mcp-process-run");
    dir.write("organism.toml", &units_table());
    dir.write("distance.aps", &using("distance", "units.convert"));
    let (ok, out, err) = support::agentpump_in(
        &dir.0,
        &[
            "process",
            "run",
            "distance.aps",
            "--organism",
            "organism.toml",
            "--input",
            "km=5",
        ],
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains(r#"RETURN {"miles":3.106856}"#), "{out}");
    // A task project whose worker is a process USEing the MCP tool: its pump builds.
    let tasks = Scratch::new("mcp-tasks-check");
    let worker = "[[listener]]\nname = \"worker\"\nkind = \"process\"\nfile = \"worker.aps\"\n";
    tasks.write("organism.toml", &(units_table() + worker));
    tasks.write("worker.aps", &using("worker", "units.convert"));
    std::fs::create_dir_all(tasks.0.join("docs/tasks")).unwrap();
    let (ok, out, err) = support::agentpump_in(&tasks.0, &["tasks", "init"]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = support::agentpump_in(&tasks.0, &["tasks", "check"]);
    assert!(ok, "{out}{err}");
    tasks.write("worker.aps", &using("worker", "units.nope"));
    let (ok, _, err) = support::agentpump_in(&tasks.0, &["tasks", "check"]);
    assert!(!ok);
    assert!(
        err.contains("listener `worker` names unknown peer `units.nope`"),
        "{err}"
    );
}

/// Issue 30: "LLM agents see MCP tools in their prompt like any tool" — on a worker too: `agentpump
/// worker` starts the organism's MCP servers (for its agents' prompts) before it reaches NATS.
#[test]
fn a_worker_starts_the_organisms_mcp_servers() {
    let dir = Scratch::new("mcp-worker");
    dir.write(
        "organism.toml",
        "[cluster]\nurl = \"nats://127.0.0.1:1\"\n\n[[mcp]]\nname = \"units\"\ncommand = [\"/nonexistent/units-server\"]\n\n[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\nremote = true\n",
    );
    let (ok, _, err) = support::agentpump_in(&dir.0, &["worker", "--organism", "organism.toml"]);
    assert!(!ok);
    assert!(
        err.contains("MCP server `units`: cannot start `/nonexistent/units-server`: /nonexistent/units-server does not exist"),
        "{err}"
    );
}

/// Issue 30: "a server that crashes or hangs gives `system-error` (`upstream-failed`,
/// `handler-timeout`) and is restarted with backoff" — a hung server (alive, answering
/// nothing) is started again after three calls in a row time out; the next call works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_is_restarted_after_three_timeouts_in_a_row() {
    let Some(python) = python() else { return };
    let dir = Scratch::new("mcp-python-hung");
    let pid_file = dir.0.join("server.pid");
    let command = format!(
        "\"sh\", \"-c\", {:?}",
        format!(
            "echo $$ > '{}'; exec '{}' '{}' stdio",
            pid_file.display(),
            python.display(),
            fixture("server.py")
        )
    );
    let organism = format!(
        "[store]\npath = \"history.db\"\n\n[[mcp]]\nname = \"py\"\ncommand = [{command}]\ntimeout_ms = 4000\n"
    );
    let host = Host::start(&dir, &organism, &[]).await;
    let first_pid = std::fs::read_to_string(&pid_file).unwrap();
    let weather = call("py.weather", "w", &[("city", "\"Oslo\"")]);
    let timed_out = || {
        vec![(
            "client".to_owned(),
            "system-error".to_owned(),
            "handler-timeout".to_owned(),
        )]
    };
    // `freeze` blocks the server: it and the two calls after it time out. 4 s leaves a new
    // Python server (started within the fourth call's time) room on a loaded machine.
    for payload in [
        call("py.freeze", "f", &[]),
        weather.clone(),
        weather.clone(),
    ] {
        let (thread, _) = ask(&host.pump, &payload).await;
        assert_eq!(support::notices(&host.pump, thread).await, timed_out());
    }
    // The third timeout started it again: the next call waits for the new server and works.
    let (_, records) = ask(&host.pump, &weather).await;
    assert_eq!(structured(&records)["city"], Value::Str("Oslo".into()));
    let second_pid = std::fs::read_to_string(&pid_file).unwrap();
    assert_ne!(first_pid, second_pid, "a new server process");
    host.verify(&dir).await;
}

/// Issue 30: "a `/mcp` Streamable HTTP endpoint on `agentpump run`" — reached by the name a
/// client uses: `[server] allowed_hosts` (and the bind address) are answered besides the
/// loopback names; any other `Host` is refused naming it and the key (DNS-rebinding
/// protection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_mcp_answers_the_allowed_hosts_and_refuses_others_naming_the_key() {
    let pump = agentpump::PumpBuilder::new().build().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let extras = agentpump::host::server::Extras {
        allowed_hosts: vec!["agents.example.com".into()],
        ..Default::default()
    };
    let served = pump.clone();
    tokio::spawn(async move {
        agentpump::host::server::serve_with(
            listener,
            served,
            "s3cret",
            1 << 20,
            extras,
            std::future::pending(),
        )
        .await
    });
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}},
    });
    let post = |host: &str| {
        support::http_client()
            .post(&url)
            .bearer_auth("s3cret")
            .header(reqwest::header::HOST, host)
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .json(&initialize)
            .send()
    };
    for host in ["agents.example.com", "agents.example.com:8443", "localhost"] {
        let answered = post(host).await.unwrap();
        assert_eq!(answered.status(), reqwest::StatusCode::OK, "{host}");
    }
    let (status, problem) = support::problem(post("evil.example:7878").await.unwrap()).await;
    assert_eq!(status, reqwest::StatusCode::FORBIDDEN);
    assert_eq!(problem["code"], "host-not-allowed");
    assert_eq!(
        problem["detail"],
        "host `evil.example:7878` is not allowed on /mcp (DNS-rebinding protection); allowed: localhost, 127.0.0.1, [::1], agents.example.com; add it to [server] allowed_hosts"
    );

    // Issue 49: "`Origin: http://evil.example.com` with a valid token gets 200" — a page of
    // another site is refused (MCP 2025-11-25: servers MUST validate Origin); an allowed one
    // and a client that sends none are served.
    let from = |origin: &str| {
        support::http_client()
            .post(&url)
            .bearer_auth("s3cret")
            .header(reqwest::header::ORIGIN, origin)
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .json(&initialize)
            .send()
    };
    for origin in ["http://localhost:3000", "https://agents.example.com"] {
        assert_eq!(from(origin).await.unwrap().status(), 200, "{origin}");
    }
    for origin in ["http://evil.example.com", "null"] {
        let (status, problem) = support::problem(from(origin).await.unwrap()).await;
        assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "{origin}");
        assert_eq!(problem["code"], "origin-not-allowed");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .starts_with(&format!("origin `{origin}` is not allowed on /mcp")),
            "{problem}"
        );
    }

    // Issue 49: "a 401 carries no `WWW-Authenticate`, and
    // `/.well-known/oauth-protected-resource` answers 401 instead of metadata or 404".
    let bare = support::http_client()
        .post(&url)
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 401);
    assert_eq!(
        bare.headers()["www-authenticate"],
        r#"Bearer realm="agentpump""#
    );
    let wrong = support::http_client()
        .post(&url)
        .bearer_auth("wrong")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(
        wrong.headers()["www-authenticate"],
        r#"Bearer realm="agentpump", error="invalid_token""#
    );
    let base = url.trim_end_matches("/mcp");
    let discovery = support::http_client()
        .get(format!("{base}/.well-known/oauth-protected-resource"))
        .send()
        .await
        .unwrap();
    let (status, problem) = support::problem(discovery).await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND, "{problem}");
    assert_eq!(problem["code"], "unknown-url");
}

/// Issue 49: "a `tools/call` of an unknown tool answers a result with `isError` — the spec's
/// answer is a JSON-RPC error (`-32602`)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_is_a_json_rpc_invalid_params_error() {
    let pump = agentpump::PumpBuilder::new().build().unwrap();
    let client = own_client(&pump).await;
    let params = rmcp::model::CallToolRequestParams::new("nope".to_owned());
    let Err(rmcp::ServiceError::McpError(error)) = client.call_tool(params).await else {
        panic!("an unknown tool is a JSON-RPC error, not a result");
    };
    assert_eq!(error.code.0, -32602);
    assert!(
        error.message.contains("no tool `nope`"),
        "{}",
        error.message
    );
}

/// Calls `tool` of agentpump's own MCP server over `pump` (in memory) with `args`: the text of
/// its answer and whether it is an error.
async fn own_tool(pump: &PumpHandle, tool: &str, args: serde_json::Value) -> (bool, String) {
    let client = own_client(pump).await;
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().unwrap().clone());
    let answer = client.call_tool(params).await.unwrap();
    let text = serde_json::to_value(&answer.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (answer.is_error == Some(true), text)
}

/// An rmcp client of agentpump's own MCP server over `pump`, in memory.
async fn own_client(pump: &PumpHandle) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt as _;
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let server = agentpump::host::mcp::server::McpServer::new(pump.clone(), Vec::new());
    tokio::spawn(async move {
        let running = server.serve(tokio::io::split(server_end)).await.unwrap();
        let _ = running.waiting().await;
    });
    ().serve(tokio::io::split(client_end)).await.unwrap()
}

/// docs/reliability.md, "MCP (issue 30)": "`history` with `limit` 0 or over 500, `wait_ms`
/// over 600 000, a `thread` that is no id" — a tool error naming the argument and the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentpump_mcp_tools_refuse_arguments_past_their_limits_naming_them() {
    let pump = agentpump::PumpBuilder::new()
        .register(
            agentpump::Registration::new("echo", agentpump::listeners::Echo)
                .accepts(support::q("say")),
        )
        .build()
        .unwrap();
    let say = r#"<say xmlns="urn:test:v1">hi</say>"#;
    let thread = pump
        .post(None, None, say)
        .await
        .unwrap()
        .thread()
        .to_string();
    let cases = [
        (
            "history",
            serde_json::json!({"thread": thread, "limit": 0}),
            "`limit` must be 1 to 500; got 0",
        ),
        (
            "history",
            serde_json::json!({"thread": thread, "limit": 501}),
            "`limit` must be 1 to 500; got 501",
        ),
        (
            "history",
            serde_json::json!({"thread": thread, "offset": -1}),
            "`offset` must be a whole number of 0 or more, not -1",
        ),
        (
            "post",
            serde_json::json!({"payload": say, "wait_ms": 600_001}),
            "`wait_ms` 600001 is over the limit of 600000",
        ),
        (
            "report",
            serde_json::json!({"thread": "nope"}),
            "`thread` `nope` is not a thread id",
        ),
        ("stop", serde_json::json!({}), "`thread` is required"),
    ];
    for (tool, args, expected) in cases {
        let (error, text) = own_tool(&pump, tool, args.clone()).await;
        assert!(error, "{tool} {args}: {text}");
        assert_eq!(text, expected, "{tool} {args}");
    }
    let (error, text) = own_tool(
        &pump,
        "history",
        serde_json::json!({"thread": thread, "limit": 500}),
    )
    .await;
    assert!(!error && text.contains("\"total\":2"), "{text}");
}

/// docs/reliability.md, "MCP (issue 30)": "an answer over `[limits] max_bytes`" is a `failed`
/// error naming its size and the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_max_bytes_is_a_failed_error_naming_its_size() {
    let dir = Scratch::new("mcp-max-bytes");
    let organism = format!(
        "[store]\npath = \"history.db\"\n\n[limits]\nmax_bytes = 1200\n\n{}",
        units_table()
    );
    let host = Host::start(&dir, &organism, &[]).await;
    let convert = call(
        "units.convert",
        "c",
        &[("value", "42.195"), ("from", "\"km\""), ("to", "\"mi\"")],
    );
    let (_, records) = ask(&host.pump, &convert).await;
    let e = failure(&records);
    assert_eq!(e.kind, ErrorType::Failed);
    assert!(
        e.message.starts_with("the answer of ")
            && e.message.ends_with(
                " bytes is over the 176 bytes a message may carry ([limits] max_bytes less 1024 for the envelope)"
            ),
        "{}",
        e.message
    );
    host.verify(&dir).await;
}

/// Issue 32: "W3C `traceparent` on outgoing LLM HTTP calls and MCP calls": with telemetry on,
/// an MCP call carries its delivery span's context in `params._meta.traceparent` (SEP-414, the
/// one channel a stdio server has); the Python SDK server reads it back. The trace is the root
/// thread's, the parent span the `execute_tool` span the receiver got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_carries_its_delivery_spans_traceparent_in_meta() {
    let Some(python) = python() else { return };
    let receiver = otlp::Otlp::start().await;
    let dir = Scratch::new("mcp-python-traced");
    let organism = format!(
        "[store]\npath = \"history.db\"\n\n[telemetry]\nendpoint = {:?}\n\n[[mcp]]\nname = \"py\"\ncommand = [{:?}, {:?}, \"stdio\"]\n",
        receiver.endpoint,
        python.display().to_string(),
        fixture("server.py")
    );
    let host = Host::start(&dir, &organism, &[]).await;
    let (thread, records) = ask(&host.pump, &call("py.traced", "t", &[])).await;
    let answer = records
        .iter()
        .rev()
        .find(|r| r.payload.contains("<result"))
        .unwrap_or_else(|| panic!("no result: {records:#?}"));
    let trace = thread.to_string().replace('-', "");
    let start = answer
        .payload
        .find("00-")
        .unwrap_or_else(|| panic!("no traceparent in {}", answer.payload));
    let traceparent = &answer.payload[start..start + 55];
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts[1], trace, "the root thread's trace: {traceparent}");
    host.verify(&dir).await;
    let spans = receiver.spans();
    let span = spans
        .iter()
        .find(|s| s.name == "execute_tool py.traced")
        .unwrap_or_else(|| panic!("the tool call's span: {spans:#?}"));
    assert_eq!(
        parts[2],
        hex::encode(&span.span_id),
        "its parent is the call's span"
    );
}

/// Issue 49: "the client offers protocol version 2026-07-28 first; the suite's `initialize`
/// scenario expects a version it knows" — agentpump's client offers the newest version that
/// has the `initialize` handshake it performs, as the Python SDK's server reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_offers_the_newest_version_with_an_initialize_handshake() {
    let Some(python) = python() else { return };
    let dir = Scratch::new("mcp-python-offered");
    let organism = format!(
        "[store]\npath = \"history.db\"\n\n[[mcp]]\nname = \"py\"\ncommand = [{:?}, {:?}, \"stdio\"]\n",
        python.display().to_string(),
        fixture("server.py")
    );
    let host = Host::start(&dir, &organism, &[]).await;
    let (_, records) = ask(&host.pump, &call("py.offered", "o", &[])).await;
    let answer = records
        .iter()
        .rev()
        .find(|r| r.payload.contains("<result"))
        .unwrap_or_else(|| panic!("no result: {records:#?}"));
    assert!(answer.payload.contains("2025-11-25"), "{}", answer.payload);
    host.verify(&dir).await;
}

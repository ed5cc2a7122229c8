//! Journeys: the product run the way a user runs it (issue 47). Each test is a user: the
//! `agentpump` binary on their PATH, a HOME of their own and nothing else in the environment,
//! a copy of the repository's files in a temporary folder, and the commands the README and the
//! organism files' headers give, in a terminal's order, with real clients (the official Python
//! MCP SDK, curl-like HTTP). Nothing here reaches into the crate.
//!
//! The binary is `AGENTPUMP_JOURNEY_BIN` when set (`cargo build --release` and point it at
//! `target/release/agentpump` to walk them on the release build), else the one cargo built for
//! these tests. Every organism under `listeners/` must have its journey here: a new one fails
//! [`every_shipped_organism_has_a_journey`] until it gets one.

mod support;

#[path = "viewer/browser.rs"]
#[allow(dead_code)]
mod browser;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::Scratch;
use support::model::{answer, serve_model};

/// The organisms shipped under `listeners/`, each walked by a test below.
const SHIPPED: [&str; 4] = ["assistant", "demo", "tasks-demo", "tasks-llm-worker"];

/// A user on a fresh machine: their files, their HOME, the binary on their PATH.
struct User {
    scratch: Scratch,
}

impl User {
    /// A user with a copy of the repository's files (`listeners/`, `schemas/`, the README) in
    /// `repo/`, a `home/`, and `bin/agentpump`.
    fn new(name: &str) -> Self {
        let scratch = Scratch::new(&format!("journey-{name}"));
        let source = Path::new(env!("CARGO_MANIFEST_DIR"));
        let repo = scratch.0.join("repo");
        for part in ["listeners", "schemas", "README.md"] {
            copy(&source.join(part), &repo.join(part));
        }
        std::fs::create_dir_all(scratch.0.join("home")).unwrap();
        let bin = scratch.0.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let built = std::env::var_os("AGENTPUMP_JOURNEY_BIN").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_agentpump")),
            PathBuf::from,
        );
        std::os::unix::fs::symlink(&built, bin.join("agentpump")).unwrap();
        Self { scratch }
    }

    fn repo(&self) -> PathBuf {
        self.scratch.0.join("repo")
    }

    fn home(&self) -> PathBuf {
        self.scratch.0.join("home")
    }

    /// The user's PATH: their `bin/` before the system's (where `sh`, `kill` and `env` are).
    fn path(&self) -> String {
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            self.scratch.0.join("bin").display()
        )
    }

    /// `program` as the user's shell would start it in `dir`: PATH and HOME, nothing else.
    fn command(&self, program: &str, dir: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", self.path())
            .env("HOME", self.home())
            .current_dir(dir);
        command
    }

    /// Runs `agentpump ARGS` in `dir` to its end.
    fn agentpump(&self, dir: &Path, args: &[&str]) -> Output {
        self.command("agentpump", dir).args(args).output().unwrap()
    }

    /// Runs `agentpump ARGS` in `dir` and expects it to succeed: its standard output.
    fn ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.agentpump(dir, args);
        assert!(
            out.status.success(),
            "agentpump {args:?} failed: {}",
            said(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Starts `agentpump ARGS` in `dir` as a host and waits for the line giving its URL.
    fn host(&self, dir: &Path, args: &[&str]) -> Host {
        let log = self
            .scratch
            .0
            .join(format!("host-{}.log", std::process::id()));
        let mut child = self
            .command("agentpump", dir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.wait();
                panic!(
                    "agentpump {args:?} ended before listening: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            };
            // `run`: "listening on http://…"; `view`: "viewing FILE read-only at http://…/?token=…".
            let at = line
                .strip_prefix("agentpump: listening on ")
                .or_else(|| line.split_once(" read-only at ").map(|(_, url)| url));
            if let Some(rest) = at {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
            assert!(Instant::now() < deadline, "no listening line");
        };
        // The rest of its output is read on, so the host never blocks on a full pipe.
        let rest = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
        Host {
            child,
            url,
            log,
            rest: Some(rest),
        }
    }
}

/// A running `agentpump run`.
struct Host {
    child: Child,
    url: String,
    log: PathBuf,
    rest: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl Host {
    /// Stops the host as Ctrl-C does and returns what it printed after listening; it must exit 0.
    fn stop(mut self) -> String {
        let pid = self.child.id().to_string();
        let sent = Command::new("/bin/kill")
            .args(["-INT", &pid])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = self.child.wait().unwrap();
        let printed = self.rest.take().unwrap().join().unwrap().join("\n");
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(
            status.success(),
            "the host exited {status}: {printed}\n{log}"
        );
        printed
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Copies a file or a folder tree.
fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap();
    }
}

/// What a finished command printed, for a failure's message.
fn said(out: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An organism file's text, whose header comment gives each of `commands` (the journey runs
/// what the header tells a user to run).
fn header(organism: &Path, commands: &[&str]) -> String {
    let text = std::fs::read_to_string(organism).unwrap();
    for command in commands {
        assert!(
            text.contains(command),
            "{} gives `{command}`",
            organism.display()
        );
    }
    text
}

/// The Python MCP SDK's client (tests/fixtures/mcp/journey.py), or `None` where it is not
/// installed and the run does not require it (`.ci/run` does).
fn mcp_python() -> Option<PathBuf> {
    let python = std::env::var_os("AGENTPUMP_MCP_PYTHON").map(PathBuf::from);
    match python {
        Some(p) if p.exists() => Some(p),
        _ => {
            assert!(
                std::env::var_os("AGENTPUMP_TESTS_NEED_MCP").is_none(),
                "AGENTPUMP_MCP_PYTHON must name the MCP SDK's python"
            );
            eprintln!("skipped: AGENTPUMP_MCP_PYTHON is not set");
            None
        }
    }
}

/// Runs the journey MCP client with `args` as the user: JSON lines, one per step.
fn mcp_client(user: &User, python: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/journey.py");
    let out = user
        .command(python.to_str().unwrap(), &user.repo())
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the MCP client failed: {}",
        said(&out)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_shipped_organism_has_a_journey() {
    let listeners = Path::new(env!("CARGO_MANIFEST_DIR")).join("listeners");
    let mut found: Vec<String> = std::fs::read_dir(listeners)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("organism.toml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(
        found, SHIPPED,
        "each organism under listeners/ needs its journey in this file"
    );
}

/// Issue 47: `agentpump run listeners/demo/organism.toml` stopped at once with ``MCP server
/// `units`: cannot start `agentpump`: No such file or directory``, `agentpump` on PATH. Run as
/// the organism's header says, from a copy, it starts and answers a request that goes through
/// that MCP server; then the CLI, run from another folder, finds the host's token.
#[test]
fn the_demo_organism_runs_and_answers_through_its_mcp_server() {
    let user = User::new("demo-run");
    let repo = user.repo();
    header(
        &repo.join("listeners/demo/organism.toml"),
        &[
            "`agentpump run` finds",
            "agentpump run listeners/demo/organism.toml",
        ],
    );
    let host = user.host(
        &repo,
        &["run", "listeners/demo/organism.toml", "--port", "0"],
    );
    std::fs::write(
        repo.join("race.xml"),
        r#"<race xmlns="urn:agentpump:demo:v1" km="42.195"/>"#,
    )
    .unwrap();
    // From HOME, not the organism's folder: no --token-file.
    let home = user.home();
    let race = repo.join("race.xml");
    let sent = user.ok(
        &home,
        &["send", race.to_str().unwrap(), "--wait", "--url", &host.url],
    );
    assert!(sent.contains("26.218757"), "the miles come back: {sent}");
    let receipt: serde_json::Value = serde_json::from_str(sent.lines().next().unwrap()).unwrap();
    let thread = receipt["thread"].as_str().unwrap();
    let threads = user.ok(&home, &["threads", "--url", &host.url]);
    assert!(threads.contains(thread), "{threads}");
    let history = user.ok(&home, &["history", &thread[..8], "--url", &host.url]);
    assert!(history.contains("units.convert"), "{history}");
    host.stop();
}

/// Issue 47: the demo organism under `agentpump mcp`, started by a real MCP client the way
/// Claude Desktop starts it (the SDK's default environment, `agentpump` found on PATH): a post
/// through the organism's own MCP server reaches the `units` server and comes back.
#[test]
fn the_demo_organism_serves_a_real_mcp_client_on_stdio() {
    let Some(python) = mcp_python() else { return };
    let user = User::new("demo-mcp");
    header(
        &user.repo().join("listeners/demo/organism.toml"),
        &["agentpump mcp --organism listeners/demo/organism.toml"],
    );
    let steps = mcp_client(
        &user,
        &python,
        &[
            "stdio",
            "listeners/demo/organism.toml",
            r#"<race xmlns="urn:agentpump:demo:v1" km="42.195"/>"#,
        ],
    );
    let post = &steps.iter().find(|s| s["step"] == "post").unwrap()["result"];
    assert_eq!(post["state"], "idle", "{post}");
    let history = &steps.iter().find(|s| s["step"] == "history").unwrap()["result"];
    assert!(history.to_string().contains("26.218757"), "{history}");
}

/// The assistant organism as its header says: point `base_url` at an OpenAI-compatible
/// server (here a scripted one on loopback), `agentpump run`, send a question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_assistant_organism_asks_the_calculator_and_answers() {
    let (_model, base) = serve_model(
        vec![
            answer(
                r#"<call xmlns="urn:agentpump:tool:v1" tool="calculator" id="c1"><arg name="expression">6 * 7</arg></call>"#,
                20,
                10,
            ),
            answer(
                r#"<send to="client"><answer xmlns="urn:agentpump:assistant:v1">42</answer></send><loop xmlns="urn:agentpump:governor:v1" control="done"/>"#,
                30,
                10,
            ),
        ],
        None,
    )
    .await;
    let user = User::new("assistant");
    let organism = user.repo().join("listeners/assistant/organism.toml");
    let text = header(
        &organism,
        &["agentpump run listeners/assistant/organism.toml"],
    );
    std::fs::write(&organism, text.replace("http://127.0.0.1:11434/v1", &base)).unwrap();
    let repo = user.repo();
    tokio::task::spawn_blocking(move || {
        let host = user.host(
            &repo,
            &["run", "listeners/assistant/organism.toml", "--port", "0"],
        );
        std::fs::write(
            repo.join("question.xml"),
            r#"<question xmlns="urn:agentpump:assistant:v1">What is 6 * 7?</question>"#,
        )
        .unwrap();
        let sent = user.ok(
            &user.home(),
            &[
                "send",
                "--to",
                "assistant",
                repo.join("question.xml").to_str().unwrap(),
                "--wait",
                "--url",
                &host.url,
            ],
        );
        assert!(sent.contains("<answer"), "{sent}");
        assert!(sent.contains(">42<"), "{sent}");
        host.stop();
    })
    .await
    .unwrap();
}

/// The tasks demo as its header says, on a copy of its folder: `tasks init`, then `tasks run`,
/// which exits 1 with T-005 blocked (the README's words); `tasks status` reads the ledger.
#[test]
fn the_tasks_demo_runs_on_a_copy() {
    let user = User::new("tasks-demo");
    header(
        &user.repo().join("listeners/tasks-demo/organism.toml"),
        &[
            "cp -r listeners/tasks-demo /tmp/tasks-demo",
            "agentpump tasks init --root /tmp/tasks-demo",
            "agentpump tasks run  --root /tmp/tasks-demo",
        ],
    );
    let copy_of = user.scratch.0.join("tasks-demo");
    copy(&user.repo().join("listeners/tasks-demo"), &copy_of);
    let root = copy_of.to_str().unwrap();
    user.ok(&user.home(), &["tasks", "init", "--root", root]);
    let out = user.agentpump(&user.home(), &["tasks", "run", "--root", root]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let status = user.ok(&user.home(), &["tasks", "status", "--root", root]);
    let line = |id: &str| {
        status
            .lines()
            .find(|l| l.contains(id))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(line("T-005").contains("blocked"), "{status}");
    assert!(line("T-001").contains("completed"), "{status}");
}

/// The LLM worker's task project as its header says, on a copy of its folder, against an
/// OpenAI-compatible server (a scripted one on loopback, following the protocol the prompt
/// teaches): `tasks init`, `tasks check`, `tasks run` complete both tasks, their files written
/// through the `command` tool and checked by their verification commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_worker_task_project_runs_its_tasks() {
    let call = |id: &str, script: &str| {
        format!(
            r#"<call xmlns="urn:agentpump:tool:v1" tool="command" id="{id}"><arg name="program">sh</arg><arg name="args" type="json">["-c", "{script}"]</arg></call>"#
        )
    };
    let delta = |task: &str, file: &str| {
        format!(
            r#"<delta xmlns="urn:agentpump:tasks:v1" task="{task}">{{"files_added": ["{file}"], "summary": "wrote {file}"}}</delta>"#
        )
    };
    let (_model, base) = serve_model(
        vec![
            answer(
                &call("w1", "mkdir -p out; echo 'hello, tasks' > out/hello.txt"),
                10,
                10,
            ),
            answer(&delta("T-001", "out/hello.txt"), 10, 10),
            answer(
                &call(
                    "w2",
                    "cat out/hello.txt > out/reply.txt; echo 'hello, worker' >> out/reply.txt",
                ),
                10,
                10,
            ),
            answer(&delta("T-002", "out/reply.txt"), 10, 10),
        ],
        None,
    )
    .await;
    let user = User::new("tasks-llm");
    let text = header(
        &user.repo().join("listeners/tasks-llm-worker/organism.toml"),
        &[
            "agentpump tasks init  --root .",
            "agentpump tasks check --root .",
            "agentpump tasks run   --root .",
        ],
    );
    let project = user.scratch.0.join("tasks-llm-worker");
    copy(&user.repo().join("listeners/tasks-llm-worker"), &project);
    std::fs::write(
        project.join("organism.toml"),
        text.replace("http://127.0.0.1:11434/v1", &base),
    )
    .unwrap();
    tokio::task::spawn_blocking(move || {
        user.ok(&project, &["tasks", "init", "--root", "."]);
        user.ok(&project, &["tasks", "check", "--root", "."]);
        user.ok(&project, &["tasks", "run", "--root", "."]);
        assert_eq!(
            std::fs::read_to_string(project.join("out/reply.txt")).unwrap(),
            "hello, tasks\nhello, worker\n"
        );
        let status = user.ok(&project, &["tasks", "status", "--root", "."]);
        assert_eq!(status.matches("completed").count(), 2, "{status}");
    })
    .await
    .unwrap();
}

/// The README's journey, in its order: `agentpump demo` in an empty folder (what it lists, what
/// it leaves), `agentpump view` over its file, `agentpump run` of the demo organism, a command
/// call that waits for a person, `agentpump inbox` and `agentpump answer` from another folder,
/// the thread going on, and an MCP client posting and reading over HTTP with the token the host
/// recorded for the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_journey_from_demo_to_an_approval_and_an_mcp_client() {
    let user = User::new("readme");
    let work = user.home().join("work");
    std::fs::create_dir_all(&work).unwrap();

    // `agentpump demo`: eight root threads listed, only the database (and the loop's
    // workspace) left beside it.
    let shown = user.ok(&work, &["demo"]);
    let ran: Vec<&str> = shown
        .lines()
        .skip_while(|l| !l.starts_with("What ran"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(ran.len(), 8, "{shown}");
    let mut left: Vec<String> = std::fs::read_dir(&work)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["agentpump-demo-loop", "agentpump-demo.db"]);

    // `agentpump view --db agentpump-demo.db`: the URL it prints opens the history.
    let view = user.host(
        &work,
        &["view", "--db", "agentpump-demo.db", "--addr", "127.0.0.1:0"],
    );
    let (base, token) = view.url.split_once("/?token=").unwrap();
    let client = support::http_client();
    let threads = client
        .get(format!("{base}/view/threads"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(threads.status(), 200);
    assert!(threads.text().await.unwrap().contains("halted"));
    view.stop();

    // `agentpump run`, then a call that waits for a person, answered from another folder.
    let repo = user.repo();
    let host = user.host(
        &repo,
        &["run", "listeners/demo/organism.toml", "--port", "0"],
    );
    let call = r#"<call xmlns="urn:agentpump:tool:v1" tool="command" id="d1"><arg name="program">echo</arg><arg name="args" type="json">["deploying", "v1.2"]</arg></call>"#;
    std::fs::write(work.join("deploy.xml"), call).unwrap();
    let receipt = user.ok(&work, &["send", "deploy.xml", "--url", &host.url]);
    let receipt: serde_json::Value = serde_json::from_str(receipt.lines().next().unwrap()).unwrap();
    let thread = receipt["thread"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    let request = loop {
        let listed = user.ok(&work, &["inbox", "--url", &host.url, "--format", "json"]);
        let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
        if let Some(first) = listed.as_array().and_then(|a| a.first()) {
            break first["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "no request in the inbox");
        std::thread::sleep(Duration::from_millis(100));
    };
    user.ok(
        &work,
        &[
            "answer",
            &request,
            "--approve",
            "--by",
            "alice",
            "--url",
            &host.url,
        ],
    );
    let second = user.agentpump(
        &work,
        &["answer", &request, "--approve", "--url", &host.url],
    );
    assert!(!second.status.success(), "a second answer is refused");
    let settled = user.ok(&work, &["history", &thread, "--url", &host.url]);
    assert!(
        settled.contains("deploying v1.2"),
        "the command ran: {settled}"
    );

    // An MCP client over HTTP with the token the host recorded for the user.
    if let Some(python) = mcp_python() {
        let port = host.url.rsplit(':').next().unwrap();
        let recorded = user.home().join(format!(
            ".local/state/agentpump/hosts/127.0.0.1_{port}.token"
        ));
        let token = std::fs::read_to_string(recorded).unwrap();
        let mcp = format!("{}/mcp", host.url);
        let steps = mcp_client(
            &user,
            &python,
            &[
                "http",
                &mcp,
                token.trim(),
                r#"<sqrt xmlns="urn:agentpump:demo:v1" target="2"/>"#,
            ],
        );
        let history = &steps.iter().find(|s| s["step"] == "history").unwrap()["result"];
        assert!(history.to_string().contains("1.41421356"), "{history}");
    }
    host.stop();
}

/// The README's viewer journey in Chromium, against `agentpump run` as a user starts it: sign
/// in with the token the host recorded, start a thread from the example the page offers for a
/// process listener (the user changes its value), see its answer, and find the thread again by
/// a text inside a payload — the answer's miles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_starts_a_thread_from_its_example_and_finds_it_by_its_text() {
    let user = User::new("viewer");
    let repo = user.repo();
    let host = tokio::task::block_in_place(|| {
        user.host(
            &repo,
            &["run", "listeners/demo/organism.toml", "--port", "0"],
        )
    });
    let port = host.url.rsplit(':').next().unwrap().to_owned();
    let recorded = user.home().join(format!(
        ".local/state/agentpump/hosts/127.0.0.1_{port}.token"
    ));
    let token = std::fs::read_to_string(recorded).unwrap();
    let b = browser::Browser::start(&user.scratch, false).await;
    b.goto(&format!("{}/?token={}#/", host.url, token.trim()))
        .await;
    b.until(
        "the start form",
        "!document.getElementById('start').hidden && !!document.getElementById('start-to')",
    )
    .await;
    b.click("#start > summary").await;
    b.eval("const s = document.getElementById('start-to'); s.value = 'distance'; s.dispatchEvent(new Event('change'))")
        .await;
    let example = b
        .eval("return document.getElementById('start-payload').value")
        .await;
    let example = example.as_str().unwrap().to_owned();
    assert!(
        example.contains("<race"),
        "the process's trigger: {example}"
    );
    // The user keeps the example and changes the distance in it.
    let edited = regex::Regex::new(r#"km="[^"]*""#)
        .unwrap()
        .replace(&example, r#"km="42.195""#)
        .into_owned();
    assert_ne!(edited, example, "the example names km");
    b.type_into("#start-payload", &edited).await;
    b.click("#start-submit").await;
    b.until(
        "the started thread, with the converted distance",
        "/^#\\/thread\\//.test(location.hash) && [...document.querySelectorAll('li.rec')].some(r => r.textContent.includes('26.218757'))",
    )
    .await;
    let started = b.eval("return location.hash.split('/')[2]").await;
    let started = started.as_str().unwrap().to_owned();
    b.axe("the started thread").await;

    // Back to the list: a search for a text inside a payload finds it.
    b.goto(&format!("{}/#/", host.url)).await;
    b.until("the list", "!!document.getElementById('f-q')")
        .await;
    b.type_into("#f-q", "26.218757").await;
    b.click("#filters button[type=submit]").await;
    // Only the thread whose payload has that text (a fresh host has one other root thread,
    // the pump's own `system` one).
    let found = format!(
        "(rows => rows.length === 1 && rows[0].textContent.includes('{}'))([...document.querySelectorAll('#threads tbody tr')])",
        &started[..8]
    );
    b.until("only the thread found by its payload's text", &found)
        .await;
    b.axe("the list searched by a payload's text").await;
    b.close_clean().await;
    tokio::task::block_in_place(|| host.stop());
}

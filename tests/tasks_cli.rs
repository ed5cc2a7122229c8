//! `agentpump tasks …` as a user runs it: the real binary on a real workspace with the shell
//! worker and the `command` tool — the demo, a missing ledger, two orchestrators, and kill -9
//! of the orchestrator at several points followed by restarts. Each assertion quotes the seed
//! line it checks.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use agentpump::tasks::{Line, Status};
use support::Scratch;

fn agentpump() -> Command {
    Command::new(env!("CARGO_BIN_EXE_agentpump"))
}

/// Runs `agentpump tasks ARGS --root ROOT`; a run that does not end within two minutes (an
/// orchestrator rerunning work forever) is killed and fails the test.
fn tasks(root: &Path, args: &[&str]) -> Output {
    let mut child = agentpump()
        .arg("tasks")
        .args(args)
        .arg("--root")
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            r.read_to_end(&mut b).unwrap();
            b
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    for _ in 0..1200 {
        if let Some(status) = child.try_wait().unwrap() {
            let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
            return Output {
                status,
                stdout,
                stderr,
            };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    panic!(
        "`agentpump tasks {}` did not end within two minutes",
        args.join(" ")
    );
}

fn spawn_run(root: &Path) -> Child {
    agentpump()
        .args(["tasks", "run", "--root"])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ledger(root: &Path) -> PathBuf {
    root.join("docs/current/task-status.jsonl")
}

/// The ledger's whole lines (a torn tail is not a line yet).
fn lines(root: &Path) -> Vec<Line> {
    let raw = std::fs::read_to_string(ledger(root)).unwrap_or_default();
    raw.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Copies `listeners/tasks-demo` into a scratch folder.
fn demo(name: &str) -> Scratch {
    let dir = Scratch::new(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("listeners/tasks-demo");
    let status = Command::new("cp")
        .arg("-r")
        .arg(format!("{}/.", src.display()))
        .arg(&dir.0)
        .status()
        .unwrap();
    assert!(status.success());
    dir
}

#[test]
fn the_demo_runs_retries_and_blocks() {
    let dir = demo("tasks-demo");
    let root = &dir.0;
    assert!(tasks(root, &["init"]).status.success());
    let check = tasks(root, &["check"]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    let out = tasks(root, &["run"]);
    let stdout = text(&out.stdout);
    // "the run ends with a summary table and a non-zero exit when anything is not completed"
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(text(&out.stderr).contains("not every task is completed"));
    let rows: BTreeMap<&str, (&str, &str)> = stdout
        .lines()
        .filter(|l| l.starts_with("T-"))
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap(), (w.next().unwrap(), w.next().unwrap()))
        })
        .collect();
    assert_eq!(rows["T-001"], ("completed", "1"));
    assert_eq!(
        rows["T-003"],
        ("completed", "2"),
        "fails once, passes on the retry"
    );
    assert_eq!(rows["T-004"], ("completed", "1"));
    assert_eq!(rows["T-005"], ("blocked", "2"));
    assert_eq!(
        rows["T-006"],
        ("pending", "0"),
        "requires a blocked task: not started"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("out/d.txt")).unwrap(),
        "base\nleft\nright\n"
    );
    // Seed: "Use the task-indexer skill … to extract only the most recent line for a specific ID."
    let status = tasks(root, &["status", "T-003", "T-005", "--format", "json"]);
    let latest: Vec<Line> = text(&status.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        latest
            .iter()
            .map(|l| (l.id.as_str(), l.status))
            .collect::<Vec<_>>(),
        [("T-003", Status::Completed), ("T-005", Status::Blocked)]
    );
    // Every task thread is in the history; the completed ones certified EXACT.
    let threads = text(
        &agentpump()
            .args(["threads", "--db"])
            .arg(root.join("tasks-demo.db"))
            .output()
            .unwrap()
            .stdout,
    );
    let exact = threads.lines().filter(|l| l.contains(" EXACT ")).count();
    assert_eq!(exact, 4, "{threads}");
}

#[test]
fn a_missing_ledger_fails_fast() {
    let dir = demo("tasks-noledger");
    let out = tasks(&dir.0, &["run"]);
    // Seed: "The Orchestrator must fail-fast if this file is missing."
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("task-status.jsonl does not exist"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.0.join("out").exists(), "no work was done");
    assert!(!dir.0.join("tasks-demo.db").exists(), "no pump was started");
}

/// A workspace whose worker is slow enough to be caught mid-run, logging every run of a task.
fn slow(name: &str, sleep: &str) -> Scratch {
    let dir = demo(name);
    let work = format!(
        "set -e\nmkdir -p out\necho \"$1 $2\" >> runs.log\nsleep {sleep}\n{}",
        std::fs::read_to_string(dir.0.join("work.sh")).unwrap()
    );
    dir.write("work.sh", &work);
    // Only the diamond: every task can complete.
    for id in ["T-005", "T-006"] {
        std::fs::remove_file(dir.0.join(format!("docs/tasks/{id}.json"))).unwrap();
    }
    assert!(tasks(&dir.0, &["init"]).status.success());
    dir
}

fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
    for _ in 0..6000 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("gave up waiting for {what}");
}

#[test]
fn a_second_orchestrator_is_refused() {
    let dir = slow("tasks-two", "2");
    let mut first = spawn_run(&dir.0);
    wait_for(
        || lines(&dir.0).iter().any(|l| l.status == Status::InProgress),
        "the first to start",
    );
    let second = tasks(&dir.0, &["run"]);
    first.kill().unwrap();
    first.wait().unwrap();
    // Seed: "The Orchestrator is the SOLE authority permitted to append to this file."
    assert_eq!(second.status.code(), Some(1));
    assert!(
        text(&second.stderr).contains("is locked by another orchestrator"),
        "{}",
        text(&second.stderr)
    );
}

/// Where to kill the orchestrator.
#[derive(Debug, Clone, Copy)]
enum Point {
    /// After this many new ledger lines.
    Lines(usize),
    /// Once the work script has started once more.
    Work,
}

fn runs(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("runs.log"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn kill_9_at_several_points_then_restart_reruns_nothing_completed() {
    let dir = slow("tasks-kill", "0.3");
    let root = &dir.0;
    // Kill points, each relative to the ledger as the restarted orchestrator finds it: after
    // 1, 2, 1, 3 new lines (between an append and the next step), and twice while the worker
    // runs (a new run of the work script, no new line yet).
    let mut snapshots = Vec::new();
    for point in [
        Point::Lines(1),
        Point::Lines(2),
        Point::Work,
        Point::Lines(1),
        Point::Lines(3),
        Point::Work,
    ] {
        let (before, ran) = (lines(root).len(), runs(root).len());
        let mut child = spawn_run(root);
        wait_for(
            || {
                child.try_wait().unwrap().is_some()
                    || match point {
                        Point::Lines(n) => lines(root).len() >= before + n,
                        Point::Work => runs(root).len() > ran,
                    }
            },
            "the kill point",
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        snapshots.push((lines(root), runs(root)));
    }
    let last = tasks(root, &["run"]);
    assert!(
        last.status.success(),
        "{}{}",
        text(&last.stdout),
        text(&last.stderr)
    );
    let lines = lines(root);
    let runs = runs(root);
    // After kill -9 the ledger still parses line by line (lines() above would have panicked),
    // and `jq` reads every line.
    let jq = Command::new("jq")
        .args(["-c", "."])
        .arg(ledger(root))
        .output()
        .unwrap();
    assert!(jq.status.success());
    assert_eq!(text(&jq.stdout).lines().count(), lines.len());
    // No duplicate line: each (task, status, summary) once.
    let mut seen = BTreeSet::new();
    for l in &lines {
        assert!(
            seen.insert((l.id.clone(), l.status, l.summary.clone())),
            "duplicate {l:?}"
        );
    }
    // Seed: "Completed: Verification command passed and "Context Delta" received." — once each.
    for id in ["T-001", "T-002", "T-003", "T-004"] {
        let completed = lines
            .iter()
            .filter(|l| l.id == id && l.status == Status::Completed)
            .count();
        assert_eq!(completed, 1, "{id}");
        assert_eq!(
            lines.iter().rfind(|l| l.id == id).unwrap().status,
            Status::Completed
        );
    }
    // Completed tasks are never run again: a task completed at a kill has no run after it.
    for (at_kill, runs_then) in &snapshots {
        for done in at_kill.iter().filter(|l| l.status == Status::Completed) {
            let count = |r: &[String]| {
                r.iter()
                    .filter(|r| r.starts_with(&format!("{} ", done.id)))
                    .count()
            };
            assert_eq!(
                count(&runs),
                count(runs_then),
                "{} ran again after it was completed",
                done.id
            );
        }
    }
    assert!(
        snapshots
            .iter()
            .any(|(l, _)| l.iter().any(|l| l.status == Status::Completed)),
        "some kill came after a completion"
    );
}

#[test]
fn get_tasks_answers_the_latest_line_per_task() {
    let dir = demo("tasks-http");
    let root = &dir.0;
    assert!(tasks(root, &["init"]).status.success());
    assert_eq!(tasks(root, &["run"]).status.code(), Some(1));
    let mut child = agentpump()
        .arg("run")
        .arg(root.join("organism.toml"))
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let ready = out.next().unwrap().unwrap();
    let base = support::listening_on(&ready);
    let token = support::token_in(root);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, body) = runtime.block_on(async {
        let r = support::http_client()
            .get(format!("{base}/tasks"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    });
    // Task events: a new task is worked while a client follows /tasks/events.
    let events = runtime.block_on(async {
        let mut r = support::http_client()
            .get(format!("{base}/tasks/events"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        let mut t7 = std::fs::read_to_string(root.join("docs/tasks/T-001.json")).unwrap();
        t7 = t7.replace("T-001", "T-007");
        std::fs::write(root.join("docs/tasks/T-007.json"), t7).unwrap();
        let work = std::fs::read_to_string(root.join("work.sh")).unwrap();
        let redo = "if [ \"$1\" = T-007 ]; then echo '~ out/a.txt'; echo redo; exit 0; fi\n";
        std::fs::write(root.join("work.sh"), format!("{redo}{work}")).unwrap();
        // The host holds the organism's history file; a `tasks run` beside it writes its own
        // (one writing store per file), and the ledger it appends to is the host's to read.
        let organism = std::fs::read_to_string(root.join("organism.toml"))
            .unwrap()
            .replace("path = \"tasks-demo.db\"", "path = \"tasks-run.db\"");
        std::fs::write(root.join("tasks-run.toml"), organism).unwrap();
        let run = tokio::task::spawn_blocking({
            let root = root.clone();
            move || {
                let organism = root.join("tasks-run.toml");
                let out = tasks(&root, &["run", "--organism", organism.to_str().unwrap()]);
                // The demo keeps one task blocked by design (exit 1); the file was its own.
                assert!(
                    !text(&out.stderr).contains("already open"),
                    "{}",
                    text(&out.stderr)
                );
            }
        });
        let mut seen = String::new();
        // Keep-alives keep the stream open: a run that never completes must still end the test.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while !seen.contains(r#""id":"T-007","status":"completed""#) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no completed T-007 on the stream within 2 minutes: {seen}"
            );
            let chunk = tokio::time::timeout(Duration::from_secs(60), r.chunk())
                .await
                .expect("an event within a minute")
                .unwrap()
                .expect("the stream goes on");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        run.await.unwrap();
        seen
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let task_events: Vec<Line> = events
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    // "task events on the event stream": each new ledger line, in order, from the ledger's end.
    assert_eq!(
        task_events
            .iter()
            .map(|l| (l.id.as_str(), l.status))
            .collect::<Vec<_>>(),
        [
            ("T-007", Status::Pending),
            ("T-007", Status::InProgress),
            ("T-007", Status::Completed)
        ]
    );
    assert_eq!(status, 200, "{body}");
    let lines: Vec<Line> = serde_json::from_str(&body).unwrap();
    let got: Vec<(&str, Status)> = lines.iter().map(|l| (l.id.as_str(), l.status)).collect();
    // Seed: "extract only the most recent line for a specific ID" — one per task, the latest.
    assert_eq!(
        got,
        [
            ("T-001", Status::Completed),
            ("T-002", Status::Completed),
            ("T-003", Status::Completed),
            ("T-004", Status::Completed),
            ("T-005", Status::Blocked),
            ("T-006", Status::Pending),
        ]
    );
}

/// Appends `text` to the organism file of the demo copy at `root`.
fn append_organism(root: &Path, text: &str) {
    let path = root.join("organism.toml");
    let organism = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{organism}\n{text}")).unwrap();
}

/// Issue 28: "`[tools.command]` in the organism makes `tasks run` fail with "listener name
/// 'command' is registered twice" while `tasks check` says ok — so verification commands run
/// with PATH only (no HOME; the seed's own `npm test` usually needs it)".
#[test]
fn the_organisms_command_tool_is_the_one_tasks_use() {
    let dir = demo("tasks-own-command");
    let root = &dir.0;
    append_organism(
        root,
        "[tools.command]\nenabled = true\nallow = [\"sh\"]\nallow_shell = true\nenv = [\"PATH\", \"HOME\"]\n",
    );
    let t1 = root.join("docs/tasks/T-001.json");
    let task = std::fs::read_to_string(&t1).unwrap().replace(
        "grep -qx base out/a.txt",
        "grep -qx base out/a.txt && test -n \\\"$HOME\\\"",
    );
    std::fs::write(&t1, task).unwrap();
    assert!(tasks(root, &["init"]).status.success());
    let check = tasks(root, &["check"]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    let out = tasks(root, &["run"]);
    assert!(
        !text(&out.stderr).contains("registered twice"),
        "{}",
        text(&out.stderr)
    );
    let lines = lines(root);
    for id in ["T-001", "T-002", "T-003", "T-004"] {
        assert_eq!(
            lines.iter().rfind(|l| l.id == id).map(|l| l.status),
            Some(Status::Completed),
            "{id}: {lines:?}"
        );
    }
}

/// "make `tasks check` catch any conflict it cannot resolve": a `[tools.command]` that cannot
/// run shell lines, a listener named like the orchestrator's own — each named, with the task
/// files' problems, in one list.
#[test]
fn check_names_every_conflict_of_the_organism() {
    for (section, expected) in [
        (
            "[tools.command]\nenabled = true\nallow = [\"ls\"]\n",
            "[tools.command] cannot run the task orchestrator's commands",
        ),
        (
            "[[listener]]\nname = \"tasks\"\nkind = \"builtin\"\nbuiltin = \"echo\"\n",
            "the organism declares a listener `tasks`",
        ),
    ] {
        let dir = demo("tasks-conflict");
        let root = &dir.0;
        append_organism(root, section);
        assert!(tasks(root, &["init"]).status.success());
        let check = tasks(root, &["check"]);
        assert_eq!(check.status.code(), Some(1), "{section}");
        assert!(
            text(&check.stderr).contains(expected),
            "{section}: {}",
            text(&check.stderr)
        );
        let run = tasks(root, &["run"]);
        assert_eq!(run.status.code(), Some(1));
        assert!(
            text(&run.stderr).contains(expected),
            "{}",
            text(&run.stderr)
        );
        assert!(!root.join("out").exists(), "no work was done");
    }
}

/// Issue 28: "an LLM worker's prompt does not show its peers `command`, `task-indexer` and
/// `tasks`, so it cannot learn `<delta>`/`<failed>` or the tool calls" — the example worker
/// organism (listeners/tasks-llm-worker) against the loopback model: the prompt shows each peer
/// with an example, and a model that follows it completes the task.
#[test]
fn the_llm_worker_is_taught_its_protocol_and_completes_a_task() {
    use support::model::{Endpoint, Model, answer};
    let dir = Scratch::new("tasks-llm-worker");
    let root = &dir.0;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("listeners/tasks-llm-worker");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(format!("{}/.", src.display()))
        .arg(root)
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::remove_file(root.join("docs/tasks/T-002.json")).unwrap();
    let write = r#"<call xmlns="urn:agentpump:tool:v1" tool="command" id="w"><arg name="program">sh</arg><arg name="args" type="json">["-c", "mkdir -p out; echo 'hello, tasks' > out/hello.txt"]</arg></call>"#;
    let delta = r#"<delta xmlns="urn:agentpump:tasks:v1" task="T-001">{"files_added": ["out/hello.txt"], "summary": "wrote the greeting"}</delta>"#;
    let model = std::sync::Arc::new(Model::default());
    model
        .replies
        .lock()
        .unwrap()
        .extend([answer(write, 10, 10), answer(delta, 10, 10)]);
    let endpoint = Endpoint::start(&model, "127.0.0.1:0".parse().unwrap());
    let organism = std::fs::read_to_string(root.join("organism.toml"))
        .unwrap()
        .replace("http://127.0.0.1:11434/v1", &endpoint.base());
    std::fs::write(root.join("organism.toml"), organism).unwrap();
    assert!(tasks(root, &["init"]).status.success());
    let check = tasks(root, &["check"]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    let out = tasks(root, &["run"]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(root.join("out/hello.txt")).unwrap(),
        "hello, tasks\n"
    );
    let requests = model.requests.lock().unwrap();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    for taught in [
        "- tasks: the coordinator of this task thread",
        r#"<delta xmlns="urn:agentpump:tasks:v1" task="T-003">"#,
        r#"<failed xmlns="urn:agentpump:tasks:v1" task="T-003">"#,
        "- task-indexer: the latest status-ledger line",
        r#"tool="task-indexer""#,
        "- command: runs a program (allowed: sh)",
        r#"tool="command""#,
    ] {
        assert!(
            system.contains(taught),
            "{taught:?} not in the prompt:\n{system}"
        );
    }
}

/// Issue 28: "`tasks status T-999` prints "(no line)" and exits 0" — a precise error instead.
#[test]
fn status_of_a_task_without_a_line_is_an_error() {
    let dir = demo("tasks-status-unknown");
    let root = &dir.0;
    assert!(tasks(root, &["init"]).status.success());
    let out = tasks(root, &["status", "T-001", "T-999"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no line for T-001, T-999 in the ledger"),
        "{}",
        text(&out.stderr)
    );
    let out = tasks(root, &["status", "t-1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("`t-1` is not a task id"),
        "{}",
        text(&out.stderr)
    );
    // Without ids it lists every task, saying which have no line yet.
    let all = tasks(root, &["status"]);
    assert!(all.status.success());
    assert!(text(&all.stdout).contains("not in the ledger yet"));
}

/// A project of `n` task files without a worker, and a ledger where each has `status`.
fn project(name: &str, n: usize, status: &str) -> Scratch {
    let dir = Scratch::new(name);
    std::fs::create_dir_all(dir.0.join("docs/tasks")).unwrap();
    std::fs::create_dir_all(dir.0.join("docs/current")).unwrap();
    let mut ledger = String::new();
    for i in 1..=n {
        let id = format!("T-{i:03}");
        let task = serde_json::json!({"id": id, "title": "t", "description": "d", "requires": [],
            "context": {"files": [], "docs": [], "skills": []},
            "acceptance_criteria": ["it holds"], "verification_command": "true"});
        dir.write(&format!("docs/tasks/{id}.json"), &task.to_string());
        for s in ["pending", "in-progress", status] {
            ledger.push_str(&format!(
                "{{\"id\":\"{id}\",\"status\":\"{s}\",\"updated_at\":\"2026-02-07T15:00:00Z\",\"summary\":\"s\"}}\n"
            ));
        }
    }
    dir.write("docs/current/task-status.jsonl", &ledger);
    dir
}

/// Seed: "When docs/tasks/ contains more than 10 completed tasks, the Maintenance Prompt should
/// be triggered" — `tasks maintain` is that prompt.
#[test]
fn tasks_maintain_archives_completed_tasks() {
    let dir = project("maintain-cli", 11, "completed");
    let out = tasks(&dir.0, &["maintain"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("archived into"),
        "{}",
        text(&out.stdout)
    );
    assert!(!dir.0.join("docs/tasks/T-001.json").exists());
    let again = tasks(&dir.0, &["maintain"]);
    assert!(text(&again.stdout).starts_with("nothing to archive"));
}

/// Seed: "The Orchestrator is the SOLE authority permitted to append to this file." and
/// "Orchestrator must decide to retry" — `tasks retry` writes the line a user may not.
#[test]
fn tasks_retry_writes_a_pending_line_for_a_blocked_task_only() {
    let dir = project("retry-cli", 1, "blocked");
    let out = tasks(&dir.0, &["retry", "T-001"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let last = lines(&dir.0).pop().unwrap();
    assert_eq!(last.status, Status::Pending);
    assert!(last.summary.starts_with("retry requested by the user"));
    let again = tasks(&dir.0, &["retry", "T-001"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("cannot retry T-001: its latest ledger line is pending"),
        "{}",
        text(&again.stderr)
    );
}

/// A project with files a, b, c, d, an LLM planner answering `replies` in turn, and its ledger.
fn planned_project(
    name: &str,
    replies: &[String],
) -> (
    Scratch,
    std::sync::Arc<support::model::Model>,
    support::model::Endpoint,
) {
    use support::model::{Endpoint, Model, answer};
    let dir = Scratch::new(name);
    for f in ["a", "b", "c", "d"] {
        dir.write(f, "x\n");
    }
    let model = std::sync::Arc::new(Model::default());
    model
        .replies
        .lock()
        .unwrap()
        .extend(replies.iter().map(|r| answer(r, 10, 10)));
    let endpoint = Endpoint::start(&model, "127.0.0.1:0".parse().unwrap());
    dir.write("planner.md", "Split the goal into seed 004 task files.\n");
    dir.write(
        "organism.toml",
        &format!(
            "[organism]\nname = \"plan\"\n[tasks]\nwork_command = \"true\"\n\
             [[listener]]\nname = \"planner\"\nkind = \"llm\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
             definition = \"planner.md\"\naccepts = [\"{{urn:agentpump:tasks:v1}}plan\"]\n\
             peers = [\"tasks-plan\"]\n",
            endpoint.base()
        ),
    );
    assert!(tasks(&dir.0, &["init"]).status.success());
    (dir, model, endpoint)
}

fn planned_task(id: &str, files: &[&str], requires: &[&str]) -> serde_json::Value {
    serde_json::json!({"id": id, "title": "edit", "description": "edit the files",
        "requires": requires, "context": {"files": files, "docs": [], "skills": []},
        "acceptance_criteria": ["the files say y"], "verification_command": "true"})
}

fn tasks_xml(tasks: &serde_json::Value) -> String {
    format!("<tasks xmlns=\"urn:agentpump:tasks:v1\">{tasks}</tasks>")
}

/// Seed: "The Planner must generate individual JSON files for every atomic unit of work." and
/// "If a task requires modifying more than 3 existing files, the Planner must refactor it into
/// smaller sub-tasks." — `tasks plan` asks an LLM planner, checks its proposal, gives it the
/// check's "split it" once, and writes the split tasks only.
#[test]
fn tasks_plan_checks_the_planners_tasks_and_has_it_split_them() {
    let whole = tasks_xml(&serde_json::json!([planned_task(
        "T-001",
        &["a", "b", "c", "d"],
        &[]
    )]));
    let split = tasks_xml(&serde_json::json!([
        planned_task("T-001", &["a", "b"], &[]),
        planned_task("T-002", &["c", "d"], &["T-001"])
    ]));
    let (dir, model, _endpoint) = planned_project("tasks-plan", &[whole, split]);
    let root = &dir.0;
    let out = tasks(root, &["plan", "edit a, b, c and d"]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).starts_with("planned 2 task(s)"),
        "{}",
        text(&out.stdout)
    );
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("- tasks-plan: takes in your answer"),
        "{system}"
    );
    let second = requests[1].to_string();
    assert!(
        second.contains(
            "T-001: not atomic: modifies 4 existing files (a, b, c, d; at most 3): split it"
        ),
        "{second}"
    );
    drop(requests);
    let check = tasks(root, &["check"]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    assert!(root.join("docs/tasks/T-002.json").is_file());
}

/// Seed: "The Planner must generate individual JSON files" — named by the task's id, so an id
/// that is not one (a path) or a proposal refused twice writes nothing, and says why.
#[test]
fn tasks_plan_writes_nothing_the_check_refuses() {
    let escape = tasks_xml(&serde_json::json!([
        planned_task("../../escaped", &["a"], &[]),
        planned_task("T-001", &["a"], &[]),
        planned_task("T-001", &["b"], &[])
    ]));
    let (dir, _model, _endpoint) = planned_project("tasks-plan-bad", &[escape.clone(), escape]);
    let out = tasks(&dir.0, &["plan", "anything"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("`../../escaped`: not a task id"), "{err}");
    assert!(err.contains("T-001: proposed twice"), "{err}");
    assert!(!dir.0.join("escaped.json").exists() && !dir.0.join("docs/escaped.json").exists());
    assert_eq!(
        std::fs::read_dir(dir.0.join("docs/tasks")).unwrap().count(),
        0
    );
}

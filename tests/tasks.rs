//! Tasks (seed 004, issue 16): the task files' checks, the ledger (sole writer, torn lines,
//! reads from the end, archiving), the JSON Schemas, and the orchestrator on a real pump with a
//! Rust worker and a test-only `command` tool that answers the tool protocol's XML by running
//! the program with `std::process::Command`. Each assertion quotes the seed line it checks.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use agentpump::tasks::wire::{Assignment, TASKS_NS, TOOL_NS, children, decode, payload};
use agentpump::tasks::{
    Delta, Exhausted, Layout, Ledger, Line, Status, Task, TaskContext, TasksConfig, TasksError,
    archive, check, latest, orchestrator, recover,
};
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, PumpHandle, QName, Registration, Role,
    async_trait,
};
use support::Scratch;

// ---------------------------------------------------------------------------------------------
// Workspaces
// ---------------------------------------------------------------------------------------------

fn task(id: &str, requires: &[&str], verification: &str) -> Task {
    Task {
        id: id.into(),
        title: format!("task {id}"),
        description: format!("does {id}"),
        requires: requires.iter().map(|s| (*s).to_owned()).collect(),
        context: TaskContext {
            files: vec![format!("out/{id}")],
            ..TaskContext::default()
        },
        acceptance_criteria: vec![format!("out/{id} exists")],
        verification_command: verification.into(),
    }
}

/// A project root with these task files and (when `ledger`) an empty ledger.
fn workspace(name: &str, tasks: &[Task], ledger: bool) -> (Scratch, Layout) {
    let dir = Scratch::new(name);
    let layout = Layout::new(&dir.0);
    std::fs::create_dir_all(layout.tasks_dir()).unwrap();
    for t in tasks {
        write_task(&layout, t);
    }
    if ledger {
        Ledger::init(layout.ledger()).unwrap();
    }
    (dir, layout)
}

fn write_task(layout: &Layout, t: &Task) {
    let path = layout.tasks_dir().join(format!("{}.json", t.id));
    std::fs::write(path, serde_json::to_string_pretty(t).unwrap()).unwrap();
}

fn lines(layout: &Layout) -> Vec<Line> {
    std::fs::read_to_string(layout.ledger())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn statuses(lines: &[Line], id: &str) -> Vec<Status> {
    lines
        .iter()
        .filter(|l| l.id == id)
        .map(|l| l.status)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Schemas: Python's jsonschema (draft 2020-12) and jq
// ---------------------------------------------------------------------------------------------

const VALIDATE_PY: &str = r#"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1], encoding="utf-8"))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
bad = []
for i, line in enumerate(open(sys.argv[2], encoding="utf-8")):
    if line.strip():
        for e in v.iter_errors(json.loads(line)):
            bad.append("%d %s: %s" % (i + 1, e.json_path, e.message))
print(json.dumps(bad))
"#;

/// The schema errors of each JSON line of `docs`, against `schemas/<schema>`. Panics when
/// python3 or jsonschema is missing: never skipped.
fn schema_errors(schema: &str, docs: &[String]) -> Vec<String> {
    let dir = Scratch::new("schema");
    let input = dir.write("docs.jsonl", &(docs.join("\n") + "\n"));
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(schema);
    let out = Command::new("python3")
        .args(["-c", VALIDATE_PY])
        .arg(&schema)
        .arg(&input)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every line of `path` parsed by `jq -c .` (one output line per input line).
fn jq_lines(path: &Path) -> usize {
    let out = Command::new("jq")
        .args(["-c", "."])
        .arg(path)
        .output()
        .expect("jq runs");
    assert!(
        out.status.success(),
        "jq: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().lines().count()
}

fn examples(schema: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(schema);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn schema_examples_are_valid_and_exactly_the_types() {
    let tasks = examples("task.schema.json");
    assert_eq!(
        schema_errors("task.schema.json", &tasks),
        Vec::<String>::new()
    );
    for t in &tasks {
        serde_json::from_str::<Task>(t).unwrap();
    }
    let lines = examples("task-status.schema.json");
    assert_eq!(
        schema_errors("task-status.schema.json", &lines),
        Vec::<String>::new()
    );
    for l in &lines {
        serde_json::from_str::<Line>(l).unwrap();
    }
    // Seed: {"id": "T-001", "status": "completed", … "delta": {"files_added": ["app/src/lib/pb.js"]}}
    assert!(lines.iter().any(|l| l.contains("\"files_added\"")));
}

#[test]
fn schemas_refuse_what_the_seed_does_not_allow() {
    let bad = [
        r#"{"id":"T-001","status":"done","updated_at":"2026-02-07T15:00:00Z","summary":"x"}"#,
        r#"{"id":"T-001","status":"pending","updated_at":"2026-02-07 15:00:00","summary":"x"}"#,
        r#"{"id":"T-001","status":"pending","updated_at":"2026-02-07T15:00:00+01:00","summary":"x"}"#,
        r#"{"id":"T-1","status":"pending","updated_at":"2026-02-07T15:00:00Z","summary":"x"}"#,
        r#"{"id":"T-001","status":"completed","updated_at":"2026-02-07T15:00:00Z","summary":"no delta"}"#,
        r#"{"id":"T-001","status":"pending","updated_at":"2026-02-07T15:00:00Z","summary":"x","extra":1}"#,
    ];
    let docs: Vec<String> = bad.iter().map(|s| (*s).to_owned()).collect();
    let errors = schema_errors("task-status.schema.json", &docs);
    let failing: BTreeSet<&str> = errors
        .iter()
        .map(|e| e.split(' ').next().unwrap())
        .collect();
    // Statuses pending, in-progress, completed, failed, blocked; updated_at RFC 3339 UTC.
    assert_eq!(
        failing,
        ["1", "2", "3", "4", "5", "6"].into_iter().collect()
    );
}

// ---------------------------------------------------------------------------------------------
// tasks check
// ---------------------------------------------------------------------------------------------

fn check_problems(name: &str, tasks: &[Task], setup: impl FnOnce(&Layout)) -> Vec<String> {
    let (_dir, layout) = workspace(name, tasks, true);
    setup(&layout);
    match check(&layout) {
        Err(TasksError::Check(problems)) => problems,
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn check_refuses_cycles_naming_them() {
    let problems = check_problems(
        "cycle",
        &[
            task("T-001", &["T-003"], "true"),
            task("T-002", &["T-001"], "true"),
            task("T-003", &["T-002"], "true"),
            task("T-004", &[], "true"),
        ],
        |_| {},
    );
    assert_eq!(
        problems,
        ["dependency cycle: T-001 → T-003 → T-002 → T-001"]
    );
}

#[test]
fn check_refuses_bad_files_each_named() {
    let mut big = task("T-005", &[], "true");
    big.context.files = ["a", "b", "c", "d", "new.txt"].map(String::from).to_vec();
    let mut misnamed = task("T-006", &[], "true");
    misnamed.id = "T-007".into();
    let cases: Vec<(Task, &str)> = vec![
        // Seed: "requires": ["T-001", "T-002"] — every requires names a task.
        (
            task("T-001", &["T-099"], "true"),
            "T-001: requires T-099, which is not a task",
        ),
        // Seed: docs/tasks/T-XXX.json — ids of that form.
        (
            task("T-02", &[], "true"),
            "id `T-02` is not of the form T-XXX",
        ),
        // Seed: "If a task requires modifying more than 3 existing files, the Planner must
        // refactor it into smaller sub-tasks."
        (
            big,
            "T-005: not atomic: modifies 4 existing files (a, b, c, d; at most 3): split it",
        ),
        (
            misnamed,
            "holds task T-007; the file must be named T-007.json",
        ),
    ];
    for (t, expected) in cases {
        let file = t.id.clone();
        let problems = check_problems("bad", &[], |layout| {
            for f in ["a", "b", "c", "d"] {
                std::fs::write(layout.root().join(f), "x").unwrap();
            }
            let path = layout.tasks_dir().join(format!(
                "{}.json",
                if file == "T-007" { "T-006" } else { &file }
            ));
            std::fs::write(path, serde_json::to_string(&t).unwrap()).unwrap();
        });
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{expected:?} not in {problems:?}"
        );
    }
}

#[test]
fn check_refuses_duplicate_ids() {
    let problems = check_problems("dup", &[task("T-001", &[], "true")], |layout| {
        let t = task("T-001", &[], "true");
        std::fs::write(
            layout.tasks_dir().join("copy.json"),
            serde_json::to_string(&t).unwrap(),
        )
        .unwrap();
    });
    assert!(
        problems.iter().any(|p| p.contains("duplicate id T-001")),
        "{problems:?}"
    );
}

#[test]
fn a_missing_ledger_fails_fast() {
    let (_dir, layout) = workspace("noledger", &[task("T-001", &[], "true")], false);
    // Seed: "The Orchestrator must fail-fast if this file is missing."
    assert!(matches!(check(&layout), Err(TasksError::NoLedger(_))));
    assert!(matches!(
        Ledger::open(layout.ledger()),
        Err(TasksError::NoLedger(_))
    ));
    assert!(!layout.ledger().exists(), "nothing created it");
}

// ---------------------------------------------------------------------------------------------
// The ledger
// ---------------------------------------------------------------------------------------------

#[test]
fn a_second_writer_is_refused() {
    let (_dir, layout) = workspace("lock", &[], true);
    let first = Ledger::open(layout.ledger()).unwrap();
    // Seed: "The Orchestrator is the SOLE authority permitted to append to this file."
    let second = Ledger::open(layout.ledger());
    assert!(matches!(second, Err(TasksError::Locked(_))), "{second:?}");
    drop(first);
    Ledger::open(layout.ledger()).expect("free again once the first is gone");
}

#[test]
fn a_torn_last_line_is_cut_off_and_noted() {
    let (_dir, layout) = workspace("torn", &[], true);
    let whole =
        r#"{"id":"T-001","status":"pending","updated_at":"2026-02-07T15:00:00Z","summary":"a"}"#;
    let torn = r#"{"id":"T-001","status":"in-prog"#;
    std::fs::write(layout.ledger(), format!("{whole}\n{torn}")).unwrap();
    let mut ledger = Ledger::open(layout.ledger()).unwrap();
    let repair = ledger.repair().cloned().expect("a repair");
    assert_eq!(repair.torn, torn);
    assert_eq!(repair.offset, whole.len() as u64 + 1);
    // Issue 28: a torn line is "reported at the wrong line" — here, the file's line 2.
    assert_eq!(repair.line, 2);
    let note = std::fs::read_to_string(&repair.note).unwrap();
    assert!(
        note.contains("in-prog"),
        "the note keeps the torn bytes: {note}"
    );
    assert_eq!(ledger.lines().len(), 1);
    ledger
        .append(Line::now("T-001", Status::InProgress, "b"))
        .unwrap();
    drop(ledger);
    // Seed: "Format: JSON Lines (one JSON object per line, no trailing commas)."
    assert_eq!(jq_lines(layout.ledger()), 2);
    assert_eq!(
        statuses(&lines(&layout), "T-001"),
        [Status::Pending, Status::InProgress]
    );
}

#[test]
fn status_reads_from_the_end_whatever_the_length() {
    let dir = Scratch::new("million");
    let write = |name: &str, n: usize| -> PathBuf {
        let path = dir.0.join(name);
        let mut text = String::with_capacity(n * 90);
        for i in 0..n {
            let id = format!("T-{:03}", i % 500);
            let line = Line::now(&id, Status::Pending, format!("line {i}"));
            text.push_str(&serde_json::to_string(&line).unwrap());
            text.push('\n');
        }
        let last = Line::now("T-777", Status::Completed, "the latest");
        text.push_str(
            &serde_json::to_string(&Line {
                delta: Some(Delta::default()),
                ..last
            })
            .unwrap(),
        );
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        path
    };
    let small = write("small.jsonl", 1_000);
    let big = write("big.jsonl", 1_000_000);
    assert!(std::fs::metadata(&big).unwrap().len() > 50_000_000);
    let ids = ["T-777".to_owned(), "T-499".to_owned()];
    let a = latest(&small, &ids).unwrap();
    let b = latest(&big, &ids).unwrap();
    // Seed: "Use the task-indexer skill (via tail or grep) to extract only the most recent line
    // for a specific ID." — the same bytes are read from a 1 000-line and a 1 000 000-line ledger.
    assert_eq!(a.bytes_read, b.bytes_read);
    assert!(b.bytes_read <= 64 * 1024, "{}", b.bytes_read);
    assert_eq!(b.lines["T-777"].summary, "the latest");
    assert_eq!(b.lines["T-499"].summary, "line 999999");
    assert_eq!(a.lines["T-499"].summary, "line 999");
}

#[test]
fn status_finds_lines_across_chunks() {
    let dir = Scratch::new("chunks");
    let path = dir.0.join("l.jsonl");
    let mut text = String::new();
    for i in 0..5_000 {
        let line = Line::now(
            &format!("T-{:03}", i % 7),
            Status::Failed,
            "x".repeat(i % 300),
        );
        text.push_str(&serde_json::to_string(&line).unwrap());
        text.push('\n');
    }
    std::fs::write(&path, &text).unwrap();
    let expected: BTreeMap<String, Line> = text
        .lines()
        .map(|l| serde_json::from_str::<Line>(l).unwrap())
        .map(|l| (l.id.clone(), l))
        .collect();
    assert_eq!(latest(&path, &[]).unwrap().lines, expected);
}

#[test]
fn more_than_ten_completed_tasks_are_archived() {
    let tasks: Vec<Task> = (1..=12)
        .map(|i| task(&format!("T-{i:03}"), &[], "true"))
        .collect();
    let (_dir, layout) = workspace("archive", &tasks, true);
    let mut ledger = Ledger::open(layout.ledger()).unwrap();
    let complete = |ledger: &mut Ledger, id: &str| {
        let line = Line::now(id, Status::Completed, "done");
        ledger
            .append(Line {
                delta: Some(Delta {
                    summary: Some("d".into()),
                    ..Delta::default()
                }),
                ..line
            })
            .unwrap();
    };
    for t in &tasks[..10] {
        complete(&mut ledger, &t.id);
    }
    assert_eq!(
        archive(&layout, 10).unwrap(),
        Vec::<String>::new(),
        "10 is not more than 10"
    );
    complete(&mut ledger, "T-011");
    let moved = archive(&layout, 10).unwrap();
    // Seed: "When docs/tasks/ contains more than 10 completed tasks, … move those JSON files
    // into docs/tasks/ARCHIVE.jsonl".
    assert_eq!(moved.len(), 11);
    assert!(!layout.tasks_dir().join("T-001.json").exists());
    assert!(
        layout.tasks_dir().join("T-012.json").exists(),
        "not completed: stays"
    );
    assert_eq!(jq_lines(&layout.archive()), 11);
    let archived: Vec<String> = std::fs::read_to_string(layout.archive())
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(
        schema_errors("task.schema.json", &archived),
        Vec::<String>::new()
    );
    // The ledger keeps their history; a task may still require an archived one.
    assert_eq!(ledger.lines().len(), 11);
    drop(ledger);
    write_task(&layout, &task("T-013", &["T-001"], "true"));
    let checked = check(&layout).unwrap();
    assert!(checked.archived.contains("T-001"));
}

/// Issue 28: "`tasks check` stops at the first malformed file instead of listing every problem".
#[test]
fn check_lists_every_problem_of_every_file() {
    let problems = check_problems("every", &[task("T-001", &["T-404"], "true")], |layout| {
        std::fs::write(layout.tasks_dir().join("T-002.json"), "{ not json").unwrap();
        std::fs::write(layout.tasks_dir().join("T-003.json"), r#"{"id": "T-003"}"#).unwrap();
        let mut t = task("T-04", &[], "true");
        t.id = "T-04".into();
        std::fs::write(
            layout.tasks_dir().join("T-04.json"),
            serde_json::to_string(&t).unwrap(),
        )
        .unwrap();
        std::fs::write(layout.archive(), "{\"id\": 1}\n").unwrap();
    });
    for expected in [
        "T-002.json: key must be a string",
        "T-003.json: missing field `title`",
        "id `T-04` is not of the form T-XXX",
        "T-001: requires T-404, which is not a task",
        "ARCHIVE.jsonl:1: not an archived task",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{expected:?} not in {problems:?}"
        );
    }
}

/// Completed tasks, the archive holding `archived` of them (the way `archive` writes it), and
/// their files still in place: the state a kill -9 between the append and the removal leaves.
fn archive_cut_short(name: &str, archived: &[&str]) -> (Scratch, Layout) {
    let tasks: Vec<Task> = (1..=3)
        .map(|i| task(&format!("T-{i:03}"), &[], "true"))
        .collect();
    let (dir, layout) = workspace(name, &tasks, true);
    let mut text = String::new();
    for t in tasks.iter().filter(|t| archived.contains(&t.id.as_str())) {
        text.push_str(&serde_json::to_string(t).unwrap());
        text.push('\n');
    }
    std::fs::write(layout.archive(), text).unwrap();
    (dir, layout)
}

/// Issue 28: "a crash between appending to ARCHIVE.jsonl and deleting the task file leaves
/// every later `run` refusing "already archived"" — the interrupted move is finished.
#[test]
fn a_move_to_the_archive_cut_short_by_a_crash_is_finished() {
    let (_dir, layout) = archive_cut_short("archive-cut", &["T-001", "T-002"]);
    let checked = check(&layout).expect("an interrupted move is not a problem");
    let ids: Vec<&str> = checked.tasks.iter().map(|(_, t)| t.id.as_str()).collect();
    assert_eq!(ids, ["T-003"]);
    let ledger = Ledger::open(layout.ledger()).unwrap();
    let recovery = recover(&layout, &ledger).unwrap();
    assert_eq!(recovery.archived, ["T-001", "T-002"]);
    assert!(!layout.tasks_dir().join("T-001.json").exists());
    assert!(layout.tasks_dir().join("T-003.json").exists());
    assert_eq!(jq_lines(&layout.archive()), 2, "nothing appended twice");
    // A task file that differs from its archived namesake is the user's: reported, kept.
    drop(ledger);
    let mut other = task("T-001", &[], "false");
    other.title = "another task".into();
    write_task(&layout, &other);
    let problems = match check(&layout) {
        Err(TasksError::Check(p)) => p,
        other => panic!("{other:?}"),
    };
    assert!(
        problems[0].contains("T-001 is already archived, with other content"),
        "{problems:?}"
    );
}

/// "a torn last line of ARCHIVE.jsonl is never repaired (and reported at the wrong line)".
#[test]
fn a_torn_last_archive_line_is_cut_off_and_reported_at_its_line() {
    let (_dir, layout) = archive_cut_short("archive-torn", &["T-001", "T-002"]);
    let whole = std::fs::read_to_string(layout.archive()).unwrap();
    std::fs::write(layout.archive(), format!("{whole}{{\"id\":\"T-003\",\"ti")).unwrap();
    check(&layout).expect("a torn last line is not a task yet");
    let ledger = Ledger::open(layout.ledger()).unwrap();
    let repair = recover(&layout, &ledger).unwrap().repair.expect("a repair");
    assert_eq!((repair.line, repair.offset), (3, whole.len() as u64));
    assert_eq!(repair.torn, r#"{"id":"T-003","ti"#);
    assert_eq!(std::fs::read_to_string(layout.archive()).unwrap(), whole);
    let note = std::fs::read_to_string(&repair.note).unwrap();
    assert!(note.contains(r#""line":3"#), "{note}");
    assert!(
        repair
            .to_string()
            .contains("cut off the torn line 3 (from byte"),
        "{repair}"
    );
}

/// Issue 28: "a worker can append forged lines behind the orchestrator's back unnoticed" —
/// seed: "The Orchestrator is the SOLE authority permitted to append to this file."
#[test]
fn a_line_written_behind_the_ledgers_back_stops_the_writer() {
    let (_dir, layout) = workspace("forged", &[], true);
    let mut ledger = Ledger::open(layout.ledger()).unwrap();
    ledger
        .append(Line::now("T-001", Status::Pending, "a"))
        .unwrap();
    let before = std::fs::read_to_string(layout.ledger()).unwrap();
    let forged = serde_json::to_string(&Line::now("T-001", Status::Completed, "forged")).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(layout.ledger())
        .unwrap();
    std::io::Write::write_all(&mut file, format!("{forged}\n").as_bytes()).unwrap();
    let err = ledger
        .append(Line::now("T-001", Status::InProgress, "b"))
        .unwrap_err();
    let (expected, found) = (before.len(), before.len() + forged.len() + 1);
    assert_eq!(
        err.to_string(),
        format!(
            "ledger {} was written behind the orchestrator's back: it was {expected} bytes after \
             the orchestrator's last line and is {found} bytes now; only the orchestrator may \
             write it (seed 004). Look at the bytes from offset {expected} on, restore the file \
             to its first {expected} bytes, and run again",
            layout.ledger().display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(layout.ledger()).unwrap(),
        format!("{before}{forged}\n"),
        "nothing appended after the forged line"
    );
}

// ---------------------------------------------------------------------------------------------
// The orchestrator on a pump
// ---------------------------------------------------------------------------------------------

/// The test-only `command` tool: reads the call's `program` and `args` and answers with the
/// tool protocol's `<result>` (exit_code, stdout, stderr), by `std::process::Command`.
struct TestCommand;

#[async_trait]
impl Listener for TestCommand {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let args = children(msg.payload().as_str(), "arg").map_err(ListenerError::failed)?;
        let list: Vec<String> = serde_json::from_str(&args["args"]).unwrap();
        let out = Command::new(&args["program"]).args(&list).output().unwrap();
        let esc =
            |b: &[u8]| quick_xml::escape::escape(String::from_utf8_lossy(b).as_ref()).into_owned();
        cx.reply(format!(
            r#"<result xmlns="{TOOL_NS}" tool="command" call="x"><field name="exit_code" type="number">{}</field><field name="stdout">{}</field><field name="stderr">{}</field></result>"#,
            out.status.code().unwrap(),
            esc(&out.stdout),
            esc(&out.stderr)
        ));
        Ok(())
    }
}

/// Briefings the worker received: (task, attempt, feedback).
type Seen = Arc<Mutex<Vec<(String, u32, Option<String>)>>>;

/// A Rust worker: writes `out/ID` holding the attempt number and hands back the delta.
struct FileWorker {
    root: PathBuf,
    seen: Seen,
}

#[async_trait]
impl Listener for FileWorker {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let a: Assignment = decode(msg.payload().as_str()).map_err(ListenerError::failed)?;
        self.seen
            .lock()
            .unwrap()
            .push((a.task.id.clone(), a.attempt, a.feedback.clone()));
        std::fs::create_dir_all(self.root.join("out")).unwrap();
        std::fs::write(
            self.root.join("out").join(&a.task.id),
            a.attempt.to_string(),
        )
        .unwrap();
        let delta = Delta {
            files_added: vec![format!("out/{}", a.task.id)],
            summary: Some(format!("wrote out/{}", a.task.id)),
            ..Delta::default()
        };
        cx.reply(payload("delta", &a.task.id, &delta));
        Ok(())
    }
}

fn pump(layout: &Layout, config: &TasksConfig, seen: &Seen) -> PumpHandle {
    let worker = FileWorker {
        root: layout.root().to_owned(),
        seen: seen.clone(),
    };
    pump_with(layout, config, worker)
}

/// A pump with this worker, the test `command` tool and the orchestrator's listeners.
fn pump_with(layout: &Layout, config: &TasksConfig, worker: impl Listener) -> PumpHandle {
    let mut builder = PumpBuilder::new()
        .register(
            Registration::new("worker", worker)
                .accepts(QName::new(TASKS_NS, "work"))
                .role(Role::Agent),
        )
        .register(
            Registration::new("command", TestCommand)
                .accepts(QName::new(TOOL_NS, "call"))
                .role(Role::Tool),
        );
    for r in orchestrator::registrations(layout, config, &["worker", "command"]).unwrap() {
        builder = builder.register(r);
    }
    builder.build().unwrap()
}

async fn run(
    layout: &Layout,
    config: &TasksConfig,
    parallel: usize,
    seen: &Seen,
) -> orchestrator::Report {
    let (report, pump) = run_on(layout, config, parallel, seen).await;
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    report
}

/// Runs the orchestrator and hands back the pump, still running.
async fn run_on(
    layout: &Layout,
    config: &TasksConfig,
    parallel: usize,
    seen: &Seen,
) -> (orchestrator::Report, PumpHandle) {
    let pump = pump(layout, config, seen);
    let ledger = Ledger::open(layout.ledger()).unwrap();
    let checked = check(layout).unwrap();
    let report = orchestrator::run(&pump, ledger, checked, layout, config, parallel)
        .await
        .unwrap();
    (report, pump)
}

fn diamond() -> Vec<Task> {
    vec![
        task("T-001", &[], "test -f out/T-001"),
        task("T-002", &["T-001"], "test -f out/T-002"),
        // Fails on the first attempt (the worker writes the attempt number), passes on the second.
        task("T-003", &["T-001"], "grep -qx 2 out/T-003"),
        task("T-004", &["T-002", "T-003"], "test -f out/T-004"),
    ]
}

fn position(lines: &[Line], id: &str, status: Status) -> usize {
    lines
        .iter()
        .position(|l| l.id == id && l.status == status)
        .unwrap_or_else(|| panic!("no {status:?} line for {id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diamond_completes_in_a_valid_order_in_parallel_with_a_retry() {
    let (_dir, layout) = workspace("diamond", &diamond(), true);
    let seen = Seen::default();
    let config = TasksConfig {
        retries: 1,
        ..TasksConfig::default()
    };
    let report = run(&layout, &config, 2, &seen).await;
    assert!(report.all_completed(), "{}", report.table());
    let lines = lines(&layout);
    // Seed: "Pending: Task exists in docs/tasks/ and has been added to the ledger."
    for id in ["T-001", "T-002", "T-003", "T-004"] {
        assert_eq!(statuses(&lines, id).first(), Some(&Status::Pending));
    }
    // Seed: "requires": [...] — a task starts only after what it requires is completed.
    assert!(
        position(&lines, "T-002", Status::InProgress)
            > position(&lines, "T-001", Status::Completed)
    );
    assert!(
        position(&lines, "T-004", Status::InProgress)
            > position(&lines, "T-002", Status::Completed)
    );
    let t3_done = lines
        .iter()
        .rposition(|l| l.id == "T-003" && l.status == Status::Completed)
        .unwrap();
    assert!(position(&lines, "T-004", Status::InProgress) > t3_done);
    // Parallelism: both branches were in progress before either finished.
    let first_branch_end =
        position(&lines, "T-002", Status::Completed).min(position(&lines, "T-003", Status::Failed));
    assert!(position(&lines, "T-003", Status::InProgress) < first_branch_end);
    assert!(position(&lines, "T-002", Status::InProgress) < first_branch_end);
    // Seed: "Failed/Blocked: Issue identified. Orchestrator must decide to retry" — and the
    // failure is fed back to the worker.
    assert_eq!(
        statuses(&lines, "T-003"),
        [
            Status::Pending,
            Status::InProgress,
            Status::Failed,
            Status::InProgress,
            Status::Completed
        ]
    );
    let retry = seen
        .lock()
        .unwrap()
        .iter()
        .find(|(id, a, _)| id == "T-003" && *a == 2)
        .cloned()
        .unwrap();
    assert!(
        retry.2.as_deref().unwrap().contains("exited 1"),
        "{retry:?}"
    );
    // Seed: "Completed: Verification command passed and "Context Delta" received."
    for l in lines.iter().filter(|l| l.status == Status::Completed) {
        assert!(
            l.delta.as_ref().is_some_and(|d| !d.files_added.is_empty()),
            "{l:?}"
        );
    }
    // Every line the code wrote is valid against the schema and parses with jq.
    let raw: Vec<String> = std::fs::read_to_string(layout.ledger())
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(
        schema_errors("task-status.schema.json", &raw),
        Vec::<String>::new()
    );
    assert_eq!(jq_lines(layout.ledger()), raw.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_verification_never_completes_and_blocks_its_dependents() {
    let tasks = [
        task("T-001", &[], "echo nope; exit 1"),
        task("T-002", &["T-001"], "true"),
    ];
    let (_dir, layout) = workspace("never", &tasks, true);
    let seen = Seen::default();
    let config = TasksConfig {
        retries: 2,
        ..TasksConfig::default()
    };
    let report = run(&layout, &config, 2, &seen).await;
    assert!(!report.all_completed());
    let lines = lines(&layout);
    // Seed: "Completed: Verification command passed" — exit 1 is never completed.
    assert_eq!(
        statuses(&lines, "T-001"),
        [
            Status::Pending,
            Status::InProgress,
            Status::Failed,
            Status::InProgress,
            Status::Failed,
            Status::InProgress,
            Status::Failed,
            Status::Blocked
        ]
    );
    let failed = lines.iter().find(|l| l.status == Status::Failed).unwrap();
    assert!(
        failed.summary.contains("exited 1: nope"),
        "{}",
        failed.summary
    );
    // Tasks that require a blocked task are not started.
    assert_eq!(statuses(&lines, "T-002"), [Status::Pending]);
    assert!(seen.lock().unwrap().iter().all(|(id, _, _)| id == "T-001"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_task_is_written_and_run_when_the_organism_asks() {
    let mut tasks = [
        task("T-001", &[], "test -f out/T-001-FIX-1"),
        task("T-002", &["T-001"], "test -f out/T-002"),
    ];
    // The fix task inherits T-001's files: the worker writes out/T-001-FIX-1 for it.
    tasks[0].context.files.push("out/T-001-FIX-1".into());
    let (_dir, layout) = workspace("fix", &tasks, true);
    let seen = Seen::default();
    let config = TasksConfig {
        retries: 0,
        on_exhausted: Exhausted::FixTask,
        ..TasksConfig::default()
    };
    let report = run(&layout, &config, 1, &seen).await;
    let lines = lines(&layout);
    // Seed: "Orchestrator must decide to retry or create a new "Fix" task."
    assert_eq!(
        statuses(&lines, "T-001"),
        [
            Status::Pending,
            Status::InProgress,
            Status::Failed,
            Status::Blocked
        ]
    );
    assert_eq!(
        statuses(&lines, "T-001-FIX-1"),
        [Status::Pending, Status::InProgress, Status::Completed]
    );
    // The fix task stands in for the blocked task: what required T-001 runs after the fix.
    assert!(
        position(&lines, "T-002", Status::InProgress)
            > position(&lines, "T-001-FIX-1", Status::Completed)
    );
    assert_eq!(statuses(&lines, "T-002").last(), Some(&Status::Completed));
    let fix = std::fs::read_to_string(layout.tasks_dir().join("T-001-FIX-1.json")).unwrap();
    let fix_line =
        serde_json::to_string(&serde_json::from_str::<serde_json::Value>(&fix).unwrap()).unwrap();
    assert_eq!(
        schema_errors("task.schema.json", &[fix_line]),
        Vec::<String>::new()
    );
    assert!(fix.contains("Every attempt at T-001 failed"), "{fix}");
    assert_eq!(report.rows.len(), 3);
    assert!(!report.all_completed(), "T-001 itself stays blocked");
    assert!(check(&layout).is_ok(), "the fix task passes check");
}

/// Issue 28: "with `on_exhausted = "fix-task"`, a fix task that fails creates a fix of itself
/// without end (`T-001-FIX-1-FIX-1-…`, 40 levels, until the file name is too long)" — "bounds
/// fix tasks (at most one generation, configurable, then `blocked`)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_task_that_fails_is_blocked_not_fixed_again() {
    for generations in [1, 2] {
        let (_dir, layout) = workspace("fixfix", &[task("T-001", &[], "exit 1")], true);
        let seen = Seen::default();
        let config = TasksConfig {
            retries: 0,
            on_exhausted: Exhausted::FixTask,
            fix_generations: generations,
            ..TasksConfig::default()
        };
        let report = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            run(&layout, &config, 1, &seen),
        )
        .await
        .expect("the run ends");
        let lines = lines(&layout);
        let mut chain = vec!["T-001".to_owned()];
        for _ in 0..generations {
            chain.push(format!("{}-FIX-1", chain.last().unwrap()));
        }
        let ids: Vec<String> = report.rows.iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids, chain, "{}", report.table());
        for id in &chain {
            assert_eq!(
                statuses(&lines, id),
                [
                    Status::Pending,
                    Status::InProgress,
                    Status::Failed,
                    Status::Blocked
                ],
                "{id}"
            );
        }
        let last = lines.last().unwrap();
        assert_eq!(&last.id, chain.last().unwrap());
        assert!(
            last.summary.contains(&format!(
                "no fix task written: {} is of fix generation {generations} and [tasks] fix_generations = {generations}",
                last.id
            )),
            "{}",
            last.summary
        );
        let beyond = format!("{}-FIX-1.json", chain.last().unwrap());
        assert!(!layout.tasks_dir().join(beyond).exists());
    }
}

/// "at most one generation, configurable" — within a limit that keeps file names short.
#[test]
fn fix_generations_has_a_limit() {
    let config = TasksConfig {
        fix_generations: agentpump::tasks::MAX_FIX_GENERATIONS + 1,
        ..TasksConfig::default()
    };
    let err = config.check().unwrap_err().to_string();
    assert_eq!(
        err,
        "[tasks] fix_generations = 9 is more than 8: each generation adds `-FIX-n` to the task's file name"
    );
}

/// Crash points of the fix task: written (or half written) before its `pending` line and the
/// `blocked` line of the task it fixes. The next run uses the fix task there is, never a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_task_written_before_a_crash_is_the_one_used() {
    let tasks = [task("T-001", &[], "test -f out/T-001-FIX-1")];
    let (_dir, layout) = workspace("fix-crash", &tasks, true);
    {
        let mut ledger = Ledger::open(layout.ledger()).unwrap();
        for (status, summary) in [
            (Status::Pending, "Task initialized by Orchestrator"),
            (Status::InProgress, "attempt 1: assigned to worker"),
            (Status::Failed, "attempt 1: verification exited 1"),
        ] {
            ledger.append(Line::now("T-001", status, summary)).unwrap();
        }
    }
    let mut fix = task("T-001-FIX-1", &[], "test -f out/T-001-FIX-1");
    fix.title = "Fix: task T-001".into();
    write_task(&layout, &fix);
    let tmp = layout.tasks_dir().join("T-001-FIX-2.json.tmp");
    std::fs::write(&tmp, "{\"id\": \"T-0").unwrap();
    let config = TasksConfig {
        retries: 0,
        on_exhausted: Exhausted::FixTask,
        ..TasksConfig::default()
    };
    let seen = Seen::default();
    let pump = pump(&layout, &config, &seen);
    let ledger = Ledger::open(layout.ledger()).unwrap();
    let recovery = recover(&layout, &ledger).unwrap();
    assert_eq!(recovery.removed, [tmp]);
    let report = orchestrator::run(&pump, ledger, check(&layout).unwrap(), &layout, &config, 1)
        .await
        .unwrap();
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    let lines = lines(&layout);
    let blocked = lines.iter().find(|l| l.status == Status::Blocked).unwrap();
    assert!(
        blocked.summary.ends_with("fix task T-001-FIX-1 created"),
        "{blocked:?}"
    );
    assert_eq!(
        statuses(&lines, "T-001-FIX-1").last(),
        Some(&Status::Completed)
    );
    assert!(!layout.tasks_dir().join("T-001-FIX-2.json").exists());
    assert_eq!(report.rows.len(), 2, "{}", report.table());
}

/// A worker that appends a forged `completed` line to the ledger, then hands back its delta.
struct Forger {
    ledger: PathBuf,
}

#[async_trait]
impl Listener for Forger {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let a: Assignment = decode(msg.payload().as_str()).map_err(ListenerError::failed)?;
        let forged = Line::now(&a.task.id, Status::Completed, "forged");
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.ledger)
            .unwrap();
        let text = serde_json::to_string(&forged).unwrap() + "\n";
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        let delta = Delta {
            summary: Some("forged".into()),
            ..Delta::default()
        };
        cx.reply(payload("delta", &a.task.id, &delta));
        Ok(())
    }
}

/// Issue 28: "check the file's length before each append" — a worker that forges a ledger line
/// mid-run stops the orchestrator with the error naming the file and the offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stops_when_a_worker_forges_a_ledger_line() {
    let (_dir, layout) = workspace("forging-worker", &[task("T-001", &[], "true")], true);
    let config = TasksConfig::default();
    let mut builder = PumpBuilder::new()
        .register(
            Registration::new(
                "worker",
                Forger {
                    ledger: layout.ledger().to_owned(),
                },
            )
            .accepts(QName::new(TASKS_NS, "work"))
            .role(Role::Agent),
        )
        .register(
            Registration::new("command", TestCommand)
                .accepts(QName::new(TOOL_NS, "call"))
                .role(Role::Tool),
        );
    for r in orchestrator::registrations(&layout, &config, &["worker", "command"]).unwrap() {
        builder = builder.register(r);
    }
    let pump = builder.build().unwrap();
    let ledger = Ledger::open(layout.ledger()).unwrap();
    let result =
        orchestrator::run(&pump, ledger, check(&layout).unwrap(), &layout, &config, 1).await;
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    let err = result.unwrap_err();
    assert!(matches!(err, TasksError::Tampered { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("written behind the orchestrator's back")
    );
    let last = lines(&layout).pop().unwrap();
    assert_eq!(
        last.summary, "forged",
        "nothing written after the forged line"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_reruns_nothing_completed() {
    let (_dir, layout) = workspace("rerun", &diamond(), true);
    let seen = Seen::default();
    let config = TasksConfig {
        retries: 1,
        ..TasksConfig::default()
    };
    run(&layout, &config, 2, &seen).await;
    let before = lines(&layout);
    let briefed = seen.lock().unwrap().len();
    let report = run(&layout, &config, 2, &seen).await;
    assert_eq!(report.started, 0);
    assert_eq!(
        seen.lock().unwrap().len(),
        briefed,
        "no worker was briefed again"
    );
    assert_eq!(lines(&layout), before, "no line added");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_thread_is_certified_and_the_indexer_answers_from_the_ledger() {
    let (_dir, layout) = workspace("indexer", &diamond(), true);
    let seen = Seen::default();
    let config = TasksConfig {
        retries: 1,
        ..TasksConfig::default()
    };
    let (_, pump) = run_on(&layout, &config, 2, &seen).await;
    // "the exit code as the criterion's evidence, so the thread's certificate is EXACT"
    let mut classes = Vec::new();
    for info in pump.threads() {
        for r in pump.reports(info.id).await.unwrap() {
            classes.push((r.goal.clone().unwrap_or_default(), r.class.clone()));
        }
    }
    classes.sort();
    let expected = [
        ("T-001: task T-001", "EXACT"),
        ("T-002: task T-002", "EXACT"),
        ("T-003: task T-003", "EXACT"),
        ("T-003: task T-003", "aborted"), // the first attempt, verification exited 1
        ("T-004: task T-004", "EXACT"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(g, c)| ((*g).to_owned(), (*c).to_owned()))
        .collect();
    assert_eq!(classes, expected);
    // Seed: "Use the task-indexer skill (via tail or grep) to extract only the most recent line
    // for a specific ID." — here as a tool speaking the tool protocol.
    let call = format!(
        r#"<call xmlns="{TOOL_NS}" tool="task-indexer" id="q1"><arg name="ids" type="json">["T-003","T-404"]</arg></call>"#
    );
    let thread = pump
        .post(None, Some("task-indexer"), &call)
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    let records = pump.history(thread).await.unwrap();
    let answer = records
        .iter()
        .find(|r| r.root.is(TOOL_NS, "result"))
        .expect("a result");
    let fields = children(&answer.payload, "field").unwrap();
    let found: Vec<Line> = serde_json::from_str(&fields["lines"]).unwrap();
    assert_eq!(found.len(), 1, "T-404 has no line");
    assert_eq!(
        (found[0].id.as_str(), found[0].status),
        ("T-003", Status::Completed)
    );
    pump.shutdown(std::time::Duration::from_secs(5)).await;
}

/// Issue 28: "a worker or verification that times out keeps running: only the outer `sh -c` is
/// killed, its children are reparented and keep editing files after `run` exits, and the retry
/// starts beside them — two workers "actively editing" one task, which seed 004 forbids."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_attempt_is_gone_before_the_retry_and_after_the_run() {
    let (_dir, layout) = workspace("group", &[task("T-001", &[], "true")], true);
    // Each attempt logs its start, leaves a child that logs later, and outlives its time.
    let work = r#"echo "start $2" >> runs.log; (sleep 1.5; echo "late $2" >> runs.log) & sleep 30"#;
    let config = TasksConfig {
        retries: 1,
        wall_clock_ms: 1000,
        work_command: Some(work.into()),
        ..TasksConfig::default()
    };
    let mut builder = PumpBuilder::new();
    for r in orchestrator::registrations(&layout, &config, &[]).unwrap() {
        builder = builder.register(r);
    }
    let pump = builder.build().unwrap();
    let ledger = Ledger::open(layout.ledger()).unwrap();
    let report = orchestrator::run(&pump, ledger, check(&layout).unwrap(), &layout, &config, 1)
        .await
        .unwrap();
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(!report.all_completed());
    let log = std::fs::read_to_string(layout.root().join("runs.log")).unwrap();
    // Seed: "In-Progress: Sub-agent has been briefed and is actively editing code." — one at a
    // time, and nothing of an attempt edits after it ended.
    assert_eq!(log, "start 1\nstart 2\n");
    assert_eq!(
        statuses(&lines(&layout), "T-001"),
        [
            Status::Pending,
            Status::InProgress,
            Status::Failed,
            Status::InProgress,
            Status::Failed,
            Status::Blocked
        ]
    );
}

/// Issue 28: "verification commands run with PATH only (no HOME; the seed's own `npm test`
/// usually needs it)" — the orchestrator's own command tool passes `TASKS_ENV`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_orchestrators_command_tool_passes_home() {
    let (_dir, layout) = workspace("home", &[task("T-001", &[], "test -n \"$HOME\"")], true);
    let config = TasksConfig {
        retries: 0,
        work_command: Some("echo '+ out/T-001'".into()),
        ..TasksConfig::default()
    };
    let mut builder = PumpBuilder::new();
    for r in orchestrator::registrations(&layout, &config, &[]).unwrap() {
        builder = builder.register(r);
    }
    let pump = builder.build().unwrap();
    let ledger = Ledger::open(layout.ledger()).unwrap();
    let report = orchestrator::run(&pump, ledger, check(&layout).unwrap(), &layout, &config, 1)
        .await
        .unwrap();
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    assert!(report.all_completed(), "{}", report.table());
}

/// "the work payload has no XSD": every `urn:agentpump:tasks:v1` payload a run records (a
/// retry, a failure and completions included) validates against schemas/tasks.xsd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_payload_a_run_records_validates_against_tasks_xsd() {
    let (dir, layout) = workspace("tasks-xsd", &diamond(), true);
    let seen = Seen::default();
    let config = TasksConfig {
        retries: 1,
        ..TasksConfig::default()
    };
    let (_, pump) = run_on(&layout, &config, 2, &seen).await;
    let mut files = Vec::new();
    let mut roots = BTreeSet::new();
    for info in pump.threads() {
        for r in pump.history(info.id).await.unwrap() {
            if r.root.namespace() == TASKS_NS {
                roots.insert(r.root.local().to_owned());
                files.push(dir.write(&format!("payload-{}.xml", files.len()), &r.payload));
            }
        }
    }
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    let expected = ["delta", "outcome", "task", "verdict", "verify", "work"];
    assert_eq!(
        roots,
        expected.map(String::from).into(),
        "every payload kind seen"
    );
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/tasks.xsd");
    let out = Command::new("xmllint")
        .args(["--noout", "--nonet", "--schema"])
        .arg(schema)
        .args(&files)
        .output()
        .expect("xmllint runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A worker that never hands anything back: it keeps thinking (messages itself).
struct Ruminator;

#[async_trait]
impl Listener for Ruminator {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if !msg.is_system() {
            // A new thought each time (the governor stops exact repeats as no-progress).
            let n: u64 = support::body(msg).parse().unwrap_or(0) + 1;
            cx.send(
                cx.me().to_owned(),
                format!("<think xmlns=\"urn:test:v1\">{n}</think>"),
            );
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_never_answers_is_halted_by_the_task_budget() {
    let (_dir, layout) = workspace("budget", &[task("T-001", &[], "true")], true);
    let config = TasksConfig {
        retries: 0,
        turns: 12,
        ..TasksConfig::default()
    };
    let mut builder = PumpBuilder::new()
        .register(
            Registration::new("worker", Ruminator)
                .accepts(QName::new(TASKS_NS, "work"))
                .accepts(QName::new("urn:test:v1", "think"))
                .role(Role::Agent),
        )
        .register(
            Registration::new("command", TestCommand)
                .accepts(QName::new(TOOL_NS, "call"))
                .role(Role::Tool),
        );
    for r in orchestrator::registrations(&layout, &config, &["worker", "command"]).unwrap() {
        builder = builder.register(r);
    }
    let pump = builder.build().unwrap();
    let ledger = Ledger::open(layout.ledger()).unwrap();
    let report = orchestrator::run(&pump, ledger, check(&layout).unwrap(), &layout, &config, 1)
        .await
        .unwrap();
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    assert!(!report.all_completed());
    let lines = lines(&layout);
    let failed = lines.iter().find(|l| l.status == Status::Failed).unwrap();
    // "Otherwise `failed` with a summary (… the halting reason and report id)" — the per-task
    // turns budget stopped the thread.
    assert!(
        failed
            .summary
            .contains("halted TIMEOUT (max-turns), report "),
        "{}",
        failed.summary
    );
    assert_eq!(statuses(&lines, "T-001").last(), Some(&Status::Blocked));
}

// ---------------------------------------------------------------------------------------------
// Issue 38: seed 004 exact — a project that resumes, roles that are enforced
// ---------------------------------------------------------------------------------------------

/// Appends lines of `id` with these statuses, as an earlier run would have.
fn ledger_says(layout: &Layout, id: &str, statuses: &[Status]) {
    let mut ledger = Ledger::open(layout.ledger()).unwrap();
    for status in statuses {
        let mut line = Line::now(id, *status, "an earlier run");
        if *status == Status::Completed {
            line.delta = Some(Delta {
                summary: Some("done".into()),
                ..Delta::default()
            });
        }
        ledger.append(line).unwrap();
    }
}

fn touch(layout: &Layout, files: &[&str]) {
    for f in files {
        let path = layout.root().join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }
}

/// Seed: "If a task requires modifying more than 3 existing files, the Planner must refactor it
/// into smaller sub-tasks." — judged when a task is planned or started; the four files T-001
/// created do not make it (or the project) invalid afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_created_its_own_files_does_not_block_the_project() {
    let mut first = task("T-001", &[], "test -f a");
    first.context.files = ["a", "b", "c", "d"].map(String::from).to_vec();
    let second = task("T-002", &["T-001"], "test -f out/T-002");
    let (_dir, layout) = workspace("own-files", &[first, second], true);
    check(&layout).expect("none of T-001's files exists yet: atomic");
    ledger_says(
        &layout,
        "T-001",
        &[Status::Pending, Status::InProgress, Status::Completed],
    );
    touch(&layout, &["a", "b", "c", "d"]);
    check(&layout).expect("T-001 ran: it is not judged again on the files it created");
    let seen = Seen::default();
    let report = run(&layout, &TasksConfig::default(), 1, &seen).await;
    assert!(report.all_completed(), "{}", report.table());
}

/// Seed: "more than 3 existing files" — files, each once: `x` and `./x` are one file, a
/// directory is not a file, a path not there yet is not existing.
#[test]
fn the_atomic_rule_counts_distinct_existing_files() {
    let mut one = task("T-001", &[], "true");
    one.context.files = ["x", "./x", "x", "dir", "y", "new.txt"]
        .map(String::from)
        .to_vec();
    let mut four = task("T-002", &[], "true");
    four.context.files = ["w", "x", "y", "z"].map(String::from).to_vec();
    let problems = check_problems("distinct", &[one, four], |layout| {
        touch(layout, &["w", "x", "y", "z"]);
        std::fs::create_dir(layout.root().join("dir")).unwrap();
    });
    assert_eq!(
        problems,
        ["T-002: not atomic: modifies 4 existing files (w, x, y, z; at most 3): split it"]
    );
}

/// Seed: "If a task requires modifying more than 3 existing files …" — judged again when the task
/// starts: the file an earlier task created counts, and the task is blocked unstarted, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_judged_atomic_when_it_starts() {
    let mut second = task("T-002", &["T-001"], "true");
    second.context.files = ["out/T-001", "e1", "e2", "e3"].map(String::from).to_vec();
    let (_dir, layout) = workspace(
        "atomic-at-start",
        &[task("T-001", &[], "test -f out/T-001"), second],
        true,
    );
    touch(&layout, &["e1", "e2", "e3"]);
    check(&layout).expect("three existing files when planned");
    let seen = Seen::default();
    let report = run(&layout, &TasksConfig::default(), 1, &seen).await;
    let last = lines(&layout).pop().unwrap();
    assert_eq!((last.id.as_str(), last.status), ("T-002", Status::Blocked));
    assert!(
        last.summary
            .starts_with("never started: T-002: not atomic: modifies 4 existing files"),
        "{}",
        last.summary
    );
    assert!(seen.lock().unwrap().iter().all(|(id, _, _)| id != "T-002"));
    assert!(!report.all_completed());
}

/// Seed: "Orchestrator must decide to retry or create a new "Fix" task." and "move those JSON
/// files into docs/tasks/ARCHIVE.jsonl" — the completed fix task, archived, still stands in for
/// the task it fixed: what requires that task starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_fix_task_still_stands_in() {
    let original = task("T-001", &[], "false");
    let dependent = task("T-002", &["T-001"], "test -f out/T-002");
    let (_dir, layout) = workspace("archived-fix", &[original.clone(), dependent], true);
    let fix = Task {
        id: "T-001-FIX-1".into(),
        ..original
    };
    let mut archived = serde_json::to_string(&fix).unwrap();
    archived.push('\n');
    std::fs::write(layout.archive(), archived).unwrap();
    let failed = [Status::Pending, Status::InProgress, Status::Failed];
    ledger_says(
        &layout,
        "T-001",
        &[&failed[..], &[Status::Blocked]].concat(),
    );
    ledger_says(
        &layout,
        "T-001-FIX-1",
        &[Status::Pending, Status::InProgress, Status::Completed],
    );
    let seen = Seen::default();
    let config = TasksConfig {
        retries: 0,
        ..TasksConfig::default()
    };
    run(&layout, &config, 1, &seen).await;
    assert_eq!(
        statuses(&lines(&layout), "T-002"),
        [Status::Pending, Status::InProgress, Status::Completed]
    );
}

/// Seed: "Failed/Blocked: Issue identified. Orchestrator must decide to retry or create a new
/// "Fix" task." — `blocked` is not forever: the user asks, the orchestrator writes the retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_task_is_retried_on_request() {
    let tasks = [
        task("T-001", &[], "test -f ok"),
        task("T-002", &["T-001"], "test -f out/T-002"),
    ];
    let (_dir, layout) = workspace("retry", &tasks, true);
    let config = TasksConfig {
        retries: 0,
        ..TasksConfig::default()
    };
    let seen = Seen::default();
    run(&layout, &config, 1, &seen).await;
    assert_eq!(
        statuses(&lines(&layout), "T-001").last(),
        Some(&Status::Blocked)
    );
    let mut ledger = Ledger::open(layout.ledger()).unwrap();
    let refused = orchestrator::retry(&mut ledger, &layout, &config, "T-002").unwrap_err();
    assert!(
        refused.to_string().starts_with(
            "cannot retry T-002: its latest ledger line is pending, and only a blocked task is retried"
        ),
        "{refused}"
    );
    let line = orchestrator::retry(&mut ledger, &layout, &config, "T-001").unwrap();
    assert_eq!(line.status, Status::Pending);
    drop(ledger);
    touch(&layout, &["ok"]);
    let report = run(&layout, &config, 1, &seen).await;
    assert!(report.all_completed(), "{}", report.table());
    use Status::{Blocked, Completed, Failed, InProgress, Pending};
    assert_eq!(
        statuses(&lines(&layout), "T-001"),
        [
            Pending, InProgress, Failed, Blocked, Pending, InProgress, Completed
        ]
    );
}

/// Seed: "Orchestrator must decide to retry or create a new "Fix" task." — a retry is decided by
/// `[tasks] on_exhausted` as it is set now, not as it was when the task was blocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_honours_a_changed_on_exhausted() {
    let (_dir, layout) = workspace("retry-fix", &[task("T-001", &[], "false")], true);
    let blocked = TasksConfig {
        retries: 0,
        ..TasksConfig::default()
    };
    let seen = Seen::default();
    run(&layout, &blocked, 1, &seen).await;
    let fix = TasksConfig {
        on_exhausted: Exhausted::FixTask,
        ..blocked
    };
    let mut ledger = Ledger::open(layout.ledger()).unwrap();
    orchestrator::retry(&mut ledger, &layout, &fix, "T-001").unwrap();
    drop(ledger);
    run(&layout, &fix, 1, &seen).await;
    let all = lines(&layout);
    let last = all.iter().rev().find(|l| l.id == "T-001").unwrap();
    assert_eq!(
        (last.status, last.summary.as_str()),
        (
            Status::Blocked,
            "failed 2 attempt(s); fix task T-001-FIX-1 created"
        )
    );
    assert!(layout.tasks_dir().join("T-001-FIX-1.json").exists());
    assert!(statuses(&all, "T-001-FIX-1").contains(&Status::InProgress));
}

/// Seed: "When docs/tasks/ contains more than 10 completed tasks, the Maintenance Prompt should
/// be triggered to move those JSON files into docs/tasks/ARCHIVE.jsonl" — at the start of a run
/// too, when nothing is left to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_nothing_to_start_still_archives() {
    let tasks: Vec<Task> = (1..=11)
        .map(|i| task(&format!("T-{i:03}"), &[], "true"))
        .collect();
    let (_dir, layout) = workspace("maintain", &tasks, true);
    let mut ledger = Ledger::open(layout.ledger()).unwrap();
    for t in &tasks {
        for status in [Status::Pending, Status::InProgress, Status::Completed] {
            ledger
                .append(Line::now(&t.id, status, "an earlier run"))
                .unwrap();
        }
    }
    drop(ledger);
    let report = run(&layout, &TasksConfig::default(), 1, &Seen::default()).await;
    assert_eq!((report.started, report.archived.len()), (0, 11));
    assert!(!layout.tasks_dir().join("T-001.json").exists());
    assert_eq!(jq_lines(&layout.archive()), 11);
}

/// Issue 38: "`tasks check` is looser than `task.schema.json`" — check refuses what the schema
/// refuses (each file named with the field), so a run never blocks on an empty verification.
/// Seed: "title": "Short descriptive title", "acceptance_criteria": [...],
/// "verification_command": "npm test or custom shell command", "skills": ["task-indexer"].
#[test]
fn check_refuses_what_the_task_schema_refuses() {
    type Edit = fn(&mut Task);
    let cases: [(Edit, &str, bool); 7] = [
        (|t| t.title = " ".into(), "T-001: title: is blank", true),
        (
            |t| t.acceptance_criteria.clear(),
            "T-001: acceptance_criteria: is empty",
            true,
        ),
        (
            |t| t.acceptance_criteria = vec![String::new()],
            "T-001: acceptance_criteria: criterion 1 is blank",
            true,
        ),
        (
            |t| t.verification_command = String::new(),
            "T-001: verification_command: is blank",
            true,
        ),
        (
            |t| t.requires = vec!["T-002".into(), "T-002".into()],
            "T-001: requires: T-002 is named twice",
            true,
        ),
        (
            |t| t.context.skills = vec!["deploy".into()],
            "T-001: context.skills: unknown skill `deploy` (known: task-indexer, command)",
            true,
        ),
        (
            |t| t.context.files = vec!["../outside".into()],
            "T-001: context.files: `../outside` is not a path inside the project",
            false,
        ),
    ];
    for (edit, expected, schema_too) in cases {
        let mut bad = task("T-001", &[], "true");
        edit(&mut bad);
        let problems = check_problems(
            "schema-rules",
            &[bad.clone(), task("T-002", &[], "true")],
            |_| {},
        );
        assert!(
            problems.iter().any(|p| p.starts_with(expected)),
            "{expected:?} not in {problems:?}"
        );
        let errors = schema_errors("task.schema.json", &[serde_json::to_string(&bad).unwrap()]);
        assert_eq!(!errors.is_empty(), schema_too, "{expected}: {errors:?}");
    }
}

/// A worker that hands back the same delta for every task, whatever it was asked.
struct FixedDelta(Delta);

#[async_trait]
impl Listener for FixedDelta {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let a: Assignment = decode(msg.payload().as_str()).map_err(ListenerError::failed)?;
        cx.reply(payload("delta", &a.task.id, &self.0));
        Ok(())
    }
}

/// Seed: "A task is valid ONLY if it focuses on a single logical change." and "If a task
/// requires modifying more than 3 existing files …" — the worker's delta is held to its task:
/// a path outside `context.files`, or more than 3 existing files modified, fails the attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delta_beyond_the_tasks_files_fails_the_attempt() {
    let mut wide = task("T-001", &[], "true");
    wide.context.files = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
    let four = Delta {
        files_changed: ["a", "./b", "c"].map(String::from).to_vec(),
        files_removed: vec!["d".into()],
        ..Delta::default()
    };
    let outside = Delta {
        files_added: vec!["out/T-001".into(), "src/other.rs".into()],
        ..Delta::default()
    };
    let cases = [
        (
            task("T-001", &[], "true"),
            outside,
            "attempt 1: the worker's delta touches `src/other.rs`, which is not in T-001's \
             context.files [out/T-001]: a worker changes only its task's files",
        ),
        (
            wide,
            four,
            "attempt 1: the worker's delta modifies 4 existing files (a, b, c, d), more than the \
             3 the atomic constraint allows",
        ),
    ];
    for (t, delta, expected) in cases {
        let (_dir, layout) = workspace("delta-beyond", &[t], true);
        let config = TasksConfig {
            retries: 0,
            ..TasksConfig::default()
        };
        let pump = pump_with(&layout, &config, FixedDelta(delta));
        let ledger = Ledger::open(layout.ledger()).unwrap();
        orchestrator::run(&pump, ledger, check(&layout).unwrap(), &layout, &config, 1)
            .await
            .unwrap();
        pump.shutdown(std::time::Duration::from_secs(5)).await;
        let failed = lines(&layout)
            .into_iter()
            .find(|l| l.status == Status::Failed)
            .expect("the attempt failed");
        assert_eq!(failed.summary, expected);
    }
}

/// Seed: "Agents must NOT read the entire task-status.jsonl into context." — the orchestrator's
/// `command` tool refuses a worker's call that names the ledger, saying what to use instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cannot_cat_the_ledger_through_the_command_tool() {
    let (_dir, layout) = workspace("cat-ledger", &[task("T-001", &[], "true")], true);
    let config = TasksConfig {
        retries: 0,
        work_command: Some("cat docs/current/task-status.jsonl".into()),
        ..TasksConfig::default()
    };
    let mut builder = PumpBuilder::new();
    for r in orchestrator::registrations(&layout, &config, &[]).unwrap() {
        builder = builder.register(r);
    }
    let pump = builder.build().unwrap();
    let ledger = Ledger::open(layout.ledger()).unwrap();
    orchestrator::run(&pump, ledger, check(&layout).unwrap(), &layout, &config, 1)
        .await
        .unwrap();
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    let failed = lines(&layout)
        .into_iter()
        .find(|l| l.status == Status::Failed)
        .expect("the attempt failed");
    assert!(
        failed.summary.contains(
            "command tool error not-allowed: the call names the task ledger, which only the \
             orchestrator reads and writes (seed 004); read a task's status with the task-indexer tool"
        ),
        "{}",
        failed.summary
    );
}

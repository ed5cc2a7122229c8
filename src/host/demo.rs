//! `agentpump demo`: runs the demo organism of `listeners/demo/` on the embedded defaults
//! (in-process pump, SQLite history in a file, no network) and shows what happened.

mod approval;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::organism::Organism;
use crate::history::export;
use crate::host::HostError;
use crate::{PumpHandle, ThreadId};

/// The demo organism, built into the binary so the demo runs from anywhere.
pub const DEMO_ORGANISM: &str = include_str!("../../listeners/demo/organism.toml");

/// The process files the demo organism names, built into the binary with it.
const EMBEDDED: [(&str, &str); 3] = [
    (
        "../processes/newton.aps",
        include_str!("../../listeners/processes/newton.aps"),
    ),
    (
        "../processes/planner.aps",
        include_str!("../../listeners/processes/planner.aps"),
    ),
    (
        "../processes/distance.aps",
        include_str!("../../listeners/processes/distance.aps"),
    ),
];

/// The demo organism's MCP server: agentpump's own `units` (`agentpump mcp-units`).
pub const UNITS_SERVER: &str = "units";

/// The demo organism, its process files embedded, its MCP server run by `agentpump`, the
/// executable at `agentpump` (`agentpump demo` passes its own): what `agentpump demo` builds
/// its pump from.
///
/// # Errors
///
/// Only if the built-in organism text is broken (a test keeps it whole).
pub fn organism(agentpump: &Path) -> Result<Organism, HostError> {
    let mut organism = Organism::parse(DEMO_ORGANISM, "listeners/demo/organism.toml")?;
    for (path, text) in EMBEDDED {
        organism.embed(path, text);
    }
    organism.set_mcp_program(UNITS_SERVER, agentpump);
    Ok(organism)
}

/// The phuc-loop's workspace, as the demo organism names it (relative to the database's
/// folder); the demo replaces it on each run.
pub const LOOP_WORKSPACE: &str = "agentpump-demo-loop";

/// The demo's starting messages: (what it shows, addressee, payload).
pub const STARTS: [(&str, &str, &str); 7] = [
    (
        "Newton's method for √2 as a process: the calculator tool, exact residuals, CONVERGED",
        "newton",
        r#"<sqrt xmlns="urn:agentpump:demo:v1" target="2"/>"#,
    ),
    (
        "a planner process: PAR over three worker processes in child threads (each carved a wall clock), JOIN in lexical order",
        "planner",
        "<plan xmlns=\"urn:agentpump:demo:v1\"><left>12.5 * 4</left><middle>(1 + 2 + 3) / 4</middle><right>0.1 + 0.2</right></plan>",
    ),
    (
        "a claim checked by an independent verifier, certified EXACT",
        "scripted-author",
        r#"<claim xmlns="urn:agentpump:demo:v1" expr="6 * 7" equals="42"/>"#,
    ),
    (
        "an agent that never stops, halted by its turn budget (TIMEOUT)",
        "scripted-runaway",
        "<ruminate xmlns=\"urn:agentpump:demo:v1\">0</ruminate>",
    ),
    (
        "two agents stuck passing the same ball (no-progress)",
        "scripted-ping",
        r#"<ball xmlns="urn:agentpump:demo:v1"/>"#,
    ),
    (
        "a phuc-loop (seed 002): Scout, Solver and Skeptic child threads per iteration take Newton steps for √2, CONVERGED",
        "phuc",
        "<run xmlns=\"urn:agentpump:loop:v1\" certificates=\"CONVERGED DIVERGED\" r-p=\"0.0001\" max-iterations=\"6\" residual-metric=\"|x² − 2|\"><goal>approximate √2 by Newton steps</goal><criterion id=\"close\">x² is within 0.0001 of 2</criterion></run>",
    ),
    (
        "an MCP tool: a process USEs `units.convert` of a stdio MCP server (agentpump mcp-units, a child of the host)",
        "distance",
        r#"<race xmlns="urn:agentpump:demo:v1" km="42.195"/>"#,
    ),
];

/// Where `distance`, the thread of the MCP tool, is in [`STARTS`].
const MCP_START: usize = 6;

/// Runs the demo, writing its history to `db` (default: the organism's `agentpump-demo.db` in
/// the current directory, replaced if it exists), and returns the text to print.
///
/// # Errors
///
/// One line saying what failed (the database cannot be written, the pump does not build).
pub fn run(db: Option<PathBuf>) -> Result<String, HostError> {
    let origin = "listeners/demo/organism.toml";
    let agentpump = std::env::current_exe().map_err(HostError::System)?;
    let mut organism = organism(&agentpump)?;
    organism.report_process_warnings();
    let db = db.unwrap_or_else(|| organism.store.path.clone());
    remove_database(&db)?;
    remove_loop_workspace(&loop_workspace(&db))?;
    organism.set_base(db.parent().unwrap_or(Path::new("")));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    runtime.block_on(async {
        let store = Arc::new(organism.open_store_at(&db)?);
        let outcome = drive(&organism, origin, Arc::clone(&store), &db).await;
        // Every exit path closes the store, so `db` alone holds the whole history.
        let closed = store.close().map_err(HostError::from);
        outcome.and_then(|text| closed.map(|()| text))
    })
}

/// Builds the pump on `store`, runs the demo's threads to their end (or until Ctrl-C), shuts
/// the pump down and returns the text to print.
async fn drive(
    organism: &Organism,
    origin: &str,
    store: Arc<crate::history::SqliteHistory>,
    db: &Path,
) -> Result<String, HostError> {
    let pump = organism
        .start_builder(origin)
        .await?
        .history(store)
        .build()?;
    let started = tokio::select! {
        biased;
        _ = tokio::signal::ctrl_c() => Err(HostError::Interrupted(format!(
            "interrupted; what ran so far is in {}",
            db.display()
        ))),
        started = start_and_settle(&pump) => started,
    };
    // Then a person in the loop: a call held for approval, answered by the demo itself.
    let waited = match started {
        Ok(roots) => approval::run(&pump)
            .await
            .map(|(held, text)| (roots, held, text)),
        Err(e) => Err(e),
    };
    // Shown after the shutdown, which drains every thread and waits for every runner and
    // commit: read earlier, under load, the planner's last delivery was sometimes counted but
    // its answer not yet in history. The count below includes the shutdown records, so it is
    // the count `verify` prints.
    pump.shutdown(Duration::from_secs(5)).await;
    let (roots, held, approval) = waited?;
    let mut text = format!(
        "agentpump demo — every message below is in {}\n\n",
        db.display()
    );
    text.push_str(&show(&pump, &roots, held).await?);
    text.push_str(&show_loop(&pump, roots[5], &loop_workspace(db)).await?);
    text.push_str(&approval);
    let verified = pump.verify().await?;
    let _ = writeln!(text, "\nHash chains verified: {verified} records.");
    text.push_str(&inspect_commands(&roots, db));
    Ok(text)
}

/// Starts the demo's root threads and waits until each has settled.
async fn start_and_settle(pump: &PumpHandle) -> Result<Vec<ThreadId>, HostError> {
    let mut roots = Vec::new();
    for (_, to, payload) in STARTS {
        let receipt = pump.post(None, Some(to), payload).await?;
        roots.push(receipt.thread());
    }
    for &root in &roots {
        if tokio::time::timeout(Duration::from_secs(30), pump.settle(root))
            .await
            .is_err()
        {
            return Err(HostError::Unsettled(format!(
                "thread {root} did not settle within 30 s"
            )));
        }
    }
    Ok(roots)
}

/// The loop's workspace for the database `db`: beside it.
fn loop_workspace(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new("")).join(LOOP_WORKSPACE)
}

/// Removes the previous demo's loop workspace; refuses a folder that is not a phuc-loop's.
fn remove_loop_workspace(dir: &Path) -> Result<(), HostError> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.join("evidence/loop/plan.json").is_file() {
        return Err(HostError::Usage(format!(
            "{} exists and is not a phuc-loop workspace (no evidence/loop/plan.json); the demo replaces only its own, run it in another directory",
            dir.display()
        )));
    }
    std::fs::remove_dir_all(dir).map_err(|e| HostError::io(dir, e))
}

/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Removes the previous demo's history; refuses a file that is not an agentpump history.
///
/// Nothing is opened with SQLite before the file is known to be a SQLite database: opening a
/// file that is not one can still rewrite or delete a `-wal` file beside it.
fn remove_database(db: &Path) -> Result<(), HostError> {
    let refuse = |why: String| {
        HostError::Usage(format!(
            "{why}; the demo replaces only an agentpump history, choose another --db"
        ))
    };
    let sidecar = |suffix: &str| PathBuf::from(format!("{}{suffix}", db.display()));
    if !db.exists() {
        if let Some(orphan) = ["-wal", "-shm"]
            .map(sidecar)
            .into_iter()
            .find(|f| f.exists())
        {
            return Err(refuse(format!(
                "{} exists without {}: it is not the demo's",
                orphan.display(),
                db.display()
            )));
        }
        return Ok(());
    }
    let mut header = [0u8; 16];
    let read = std::fs::File::open(db)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut header))
        .map_err(|e| HostError::io(db, e))?;
    if read < header.len() || &header != SQLITE_HEADER {
        return Err(refuse(format!(
            "{}: not an agentpump database (not an SQLite file)",
            db.display()
        )));
    }
    crate::history::SqliteHistory::open_read_only(db).map_err(|e| refuse(e.to_string()))?;
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", db.display()));
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(HostError::Replace { path: file, source }),
        }
    }
    Ok(())
}

/// What ran: the root threads of [`STARTS`], then `held`, the thread whose call waited for a
/// person; each with its tree.
async fn show(pump: &PumpHandle, roots: &[ThreadId], held: ThreadId) -> Result<String, HostError> {
    let mut out = String::new();
    let _ = writeln!(out, "What ran (one root thread each):");
    let what = STARTS
        .iter()
        .map(|(what, _, _)| *what)
        .chain([approval::WHAT]);
    let every: Vec<ThreadId> = roots.iter().copied().chain([held]).collect();
    for (what, root) in what.zip(&every) {
        let _ = writeln!(out, "  {}  {what}", &root.to_string()[..8]);
    }
    let _ = writeln!(out, "\nThread tree:");
    for &root in &every {
        for t in pump.tree(root) {
            let indent = "  ".repeat(t.depth as usize + 1);
            let why = if t.depth == 0 && t.state == crate::ThreadState::Idle {
                "  (answered; a root thread stays open for more input until its agent signals done or it is stopped)"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "{indent}{:<24} {:<7} {:>3} deliveries{why}",
                t.path, t.state, t.counters.deliveries
            );
        }
    }
    let _ = writeln!(
        out,
        "\nTranscript of the √2 thread (the process calls the calculator, reports its residual, loops):"
    );
    let records = pump.history(roots[0]).await?;
    out.push_str(&export::transcript(&records, 2));
    let _ = writeln!(out, "\nHalts (each with a halting report):");
    for &root in roots {
        for t in pump.tree(root) {
            for r in pump.reports(t.id).await? {
                let cert = r
                    .halting_certificate
                    .as_ref()
                    .map_or("no certificate".to_owned(), |c| {
                        format!("certificate {} (lane {})", c.kind, c.lane)
                    });
                let _ = writeln!(
                    out,
                    "  {:<24} {:<16} {:<22} {cert}",
                    t.path, r.class, r.stop_reason
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "\nTranscript of the MCP thread (the process USEs `units.convert`, a tool of the `units` MCP server):"
    );
    out.push_str(&export::transcript(
        &pump.history(roots[MCP_START]).await?,
        2,
    ));
    let returned = pump.history(roots[1]).await?;
    if let Some(answer) = returned
        .iter()
        .rfind(|r| r.kind == crate::history::RecordKind::Egress)
    {
        let _ = writeln!(out, "\nThe planner process returned: {}", answer.payload);
    }
    Ok(out)
}

/// The phuc-loop's AGENTS.md and its halting certificate.
async fn show_loop(
    pump: &PumpHandle,
    root: ThreadId,
    workspace: &Path,
) -> Result<String, HostError> {
    let mut out = String::new();
    let path = workspace.join("AGENTS.md");
    let agents = std::fs::read_to_string(&path).map_err(|e| HostError::io(&path, e))?;
    let _ = writeln!(
        out,
        "\nThe phuc-loop's {} (written by the controller only):\n",
        path.display()
    );
    for line in agents.lines() {
        let _ = writeln!(out, "  {line}");
    }
    let certificate = pump
        .reports(root)
        .await?
        .pop()
        .and_then(|r| r.halting_certificate)
        .map_or_else(
            || "none".to_owned(),
            |c| serde_json::to_string_pretty(&c).unwrap_or_default(),
        );
    let _ = writeln!(out, "\nThe phuc-loop's halting certificate:");
    for line in certificate.lines() {
        let _ = writeln!(out, "  {line}");
    }
    Ok(out)
}

/// The commands that inspect the demo's database.
fn inspect_commands(roots: &[ThreadId], db: &Path) -> String {
    let mut out = String::new();
    let db = db.display();
    let _ = writeln!(out, "\nInspect it yourself:");
    let _ = writeln!(out, "  agentpump threads --db {db}");
    // The short ids printed above name the threads as well as the full ones.
    let short = |root: ThreadId| root.to_string()[..8].to_owned();
    let _ = writeln!(out, "  agentpump history {} --db {db}", short(roots[0]));
    let _ = writeln!(
        out,
        "  agentpump history {} --db {db} --tree",
        short(roots[1])
    );
    let _ = writeln!(out, "  agentpump report {} --db {db}", short(roots[2]));
    let _ = writeln!(out, "  agentpump verify --db {db}");
    let _ = writeln!(
        out,
        "(with cargo: cargo run --release -- threads --db {db}, …)"
    );
    let _ = writeln!(
        out,
        "\nOr browse it (a web page; open the URL it prints):\n  agentpump view --db {db}"
    );
    out
}

//! `agentpump demo`: runs the demo organism of `listeners/demo/` on the embedded defaults
//! (in-process pump, SQLite history in a file, no network) and shows what happened.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::organism::Organism;
use crate::history::export;
use crate::listeners::scripted::DEMO_NS;
use crate::{PumpHandle, ThreadId};

/// The demo organism, built into the binary so the demo runs from anywhere.
pub const DEMO_ORGANISM: &str = include_str!("../../listeners/demo/organism.toml");

/// The demo's starting messages: (what it shows, addressee, payload).
const STARTS: [(&str, &str, &str); 5] = [
    (
        "Newton's method for √2, reporting exact residuals until CONVERGED",
        "scripted-newton",
        r#"<sqrt xmlns="urn:agentpump:demo:v1" of="2"/>"#,
    ),
    (
        "a plan fanned out to three child threads with budget carve-outs",
        "scripted-planner",
        "<plan xmlns=\"urn:agentpump:demo:v1\">12.5 * 4; (1 + 2 + 3) / 4; 0.1 + 0.2</plan>",
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
];

/// Runs the demo, writing its history to `db` (default: the organism's `agentpump-demo.db` in
/// the current directory, replaced if it exists), and returns the text to print.
///
/// # Errors
///
/// One line saying what failed (the database cannot be written, the pump does not build).
pub fn run(db: Option<PathBuf>) -> Result<String, String> {
    let origin = "listeners/demo/organism.toml";
    let organism = Organism::parse(DEMO_ORGANISM, origin)?;
    let db = db.unwrap_or_else(|| organism.store.path.clone());
    remove_database(&db)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let store = organism.open_store_at(&db)?;
        let pump = organism
            .builder(origin)?
            .history(Arc::new(store))
            .build()
            .map_err(|e| e.to_string())?;
        let mut roots = Vec::new();
        for (_, to, payload) in STARTS {
            let receipt = pump
                .post(None, Some(to), payload)
                .await
                .map_err(|e| e.to_string())?;
            roots.push(receipt.thread());
        }
        for &root in &roots {
            if tokio::time::timeout(Duration::from_secs(30), pump.settle(root))
                .await
                .is_err()
            {
                return Err(format!("thread {root} did not settle within 30 s"));
            }
        }
        let text = show(&pump, &roots, &db).await?;
        pump.shutdown(Duration::from_secs(5)).await;
        Ok(text)
    })
}

/// Removes the previous demo's history; refuses a file that is not an agentpump history.
fn remove_database(db: &Path) -> Result<(), String> {
    if db.exists() {
        crate::history::SqliteHistory::open_read_only(db).map_err(|e| {
            format!("{e}; the demo replaces only an agentpump history, choose another --db")
        })?;
    }
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", db.display()));
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: cannot replace it: {e}", file.display())),
        }
    }
    Ok(())
}

async fn show(pump: &PumpHandle, roots: &[ThreadId], db: &Path) -> Result<String, String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "agentpump demo — every message below is in {}\n",
        db.display()
    );
    let _ = writeln!(out, "What ran (one root thread each):");
    for ((what, _, _), root) in STARTS.iter().zip(roots) {
        let _ = writeln!(out, "  {}  {what}", &root.to_string()[..8]);
    }
    let _ = writeln!(out, "\nThread tree:");
    for &root in roots {
        for t in pump.tree(root) {
            let indent = "  ".repeat(t.depth as usize + 1);
            let _ = writeln!(
                out,
                "{indent}{:<24} {:<7} {:>3} deliveries",
                t.path, t.state, t.counters.deliveries
            );
        }
    }
    let _ = writeln!(
        out,
        "\nTranscript of the √2 thread (the agent asks the calculator, reports its residual, iterates):"
    );
    let records = pump.history(roots[0]).await.map_err(|e| e.to_string())?;
    out.push_str(&export::transcript(&records, 2));
    let _ = writeln!(out, "\nHalts (each with a halting report):");
    for &root in roots {
        for t in pump.tree(root) {
            for r in pump.reports(t.id).await.map_err(|e| e.to_string())? {
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
    let collected = pump.history(roots[1]).await.map_err(|e| e.to_string())?;
    if let Some(answer) = collected.iter().rfind(|r| r.root.is(DEMO_NS, "collected")) {
        let _ = writeln!(out, "\nThe planner collected: {}", answer.payload);
    }
    let verified = pump.verify().await.map_err(|e| e.to_string())?;
    let _ = writeln!(out, "\nHash chains verified: {verified} records.");
    let db = db.display();
    let _ = writeln!(out, "\nInspect it yourself:");
    let _ = writeln!(out, "  agentpump threads --db {db}");
    let _ = writeln!(out, "  agentpump history {} --db {db}", roots[0]);
    let _ = writeln!(out, "  agentpump history {} --db {db} --tree", roots[1]);
    let _ = writeln!(out, "  agentpump report {} --db {db}", roots[2]);
    let _ = writeln!(out, "  agentpump verify --db {db}");
    let _ = writeln!(
        out,
        "(with cargo: cargo run --release -- threads --db {db}, …)"
    );
    let _ = writeln!(
        out,
        "\nOr browse it (a web page; open the URL it prints):\n  agentpump view --db {db}"
    );
    Ok(out)
}

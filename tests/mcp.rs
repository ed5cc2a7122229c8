//! MCP both ways (issue 30), against real implementations: the MCP project's reference server
//! (`@modelcontextprotocol/server-everything`, npm) and a server and client written with the
//! official Python SDK (`mcp` on PyPI; tests/fixtures/mcp/). `.ci/run` installs them, pinned,
//! and sets `AGENTPUMP_TESTS_NEED_MCP=1`: there a missing one fails the test; elsewhere the
//! test says it skips.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentpump::history::RecordKind;
use agentpump::host::organism::Organism;
use agentpump::tool::ErrorType;
use agentpump::value::Value;
use agentpump::{PumpHandle, ThreadId};
use support::Scratch;
use support::process::{failure, fields, go, run};

/// The version `.ci/run` installs of each, under `AGENTPUMP_CI_CACHE`.
const EVERYTHING: &str = "server-everything-2026.8.31";

/// A tool the test needs: the path in `var`, else where `.ci/run` caches it; `None` (the
/// test skips, saying so) when it is not installed, unless `AGENTPUMP_TESTS_NEED_MCP=1`.
fn installed(var: &str, cached: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).or_else(|| {
        let cache = std::env::var_os("AGENTPUMP_CI_CACHE")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/agentpump-ci")))?;
        Some(cache.join(cached))
    })?;
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("AGENTPUMP_TESTS_NEED_MCP").is_none(),
        "{} is not installed (set {var} or run .ci/run)",
        path.display()
    );
    println!("skipped: {} is not installed (.ci/run installs it)", path.display());
    None
}

/// The reference server's stdio command.
fn everything() -> Option<PathBuf> {
    installed(
        "AGENTPUMP_MCP_EVERYTHING",
        &format!("{EVERYTHING}/node_modules/.bin/mcp-server-everything"),
    )
}

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
    format!("[store]\npath = \"history.db\"\n\n[[mcp]]\nname = \"ev\"\ncommand = [{command}]\n{extra}\n")
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
    let organism = everything_table(&format!("{:?}", server.display().to_string()), "")
        + &listener("main");
    let host = Host::start(&dir, &organism, &[("main.aps", &process(body))]).await;
    for tool in ["ev.echo", "ev.get-sum", "ev.get-structured-content"] {
        assert!(host.tools.iter().any(|t| t == tool), "{tool} in {:?}", host.tools);
    }
    let (thread, records) = run(&host.pump, &go("")).await;
    let got = fields(&records);
    assert_eq!(got["SUM"], Value::Str("The sum of 2 and 40 is 42.".into()));
    assert_eq!(got["ECHO"], Value::Str("Echo: hi".into()));
    // Each call and each answer is a record of the thread.
    assert_eq!(crossing(&records), ["call ev.get-sum", "result ev.get-sum", "call ev.echo", "result ev.echo"], "{thread}");
    host.verify(&dir).await;
}

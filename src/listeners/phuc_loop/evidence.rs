//! The files the loop leaves (§10.1): AGENTS.md and its final snapshot, `plan.json`, the
//! cumulative `manifest.json`, `budget_log.json`, the per-iteration folder, and the
//! budget-reduction and compaction logs — each rewritten whole from the loop's state, so a
//! restart writes the same bytes.

use serde_json::json;

use super::agents_md::{self, Metadata};
use super::journal::Run;
use super::workspace::{AGENTS_MD, EVIDENCE, Workspace, WorkspaceError};
use super::{LoopBudget, LoopConfig};

/// AGENTS.md as the state says it is, and the `[COMPACTION]` line if it was compacted.
pub fn agents_md(config: &LoopConfig, budget: &LoopBudget, run: &Run) -> (String, Option<String>) {
    let d = &run.declaration;
    let meta = Metadata {
        goal: d.goal.clone(),
        started: agents_md::iso_date(run.started_us),
        r_p: d.r_p.map_or("(none declared)".into(), |r| r.to_string()),
        max_iterations: budget.max_iterations,
        metric: d.residual_metric.clone().unwrap_or_else(|| "custom".into()),
    };
    let entries: Vec<_> = run.judged().cloned().collect();
    agents_md::render(&meta, &entries, config.compaction_tokens)
}

/// Writes what the loop starts with: AGENTS.md, `plan.json` (the DREAM_GOAL block), an empty
/// manifest, and the budget-reduction log when the profile reduced anything.
///
/// # Errors
///
/// A file that cannot be written.
pub async fn initialise(
    ws: &Workspace,
    config: &LoopConfig,
    budget: &LoopBudget,
    run: &Run,
    reductions: &[String],
) -> Result<(), WorkspaceError> {
    ws.write(AGENTS_MD, &agents_md(config, budget, run).0, "log")
        .await?;
    let d = &run.declaration;
    let plan = json!({
        "goal": d.goal,
        "acceptance_criteria": d.acceptance_criteria.iter().map(|(id, t)| format!("{id}: {t}")).collect::<Vec<_>>(),
        "halting_certificates_applicable": d.halting_certificates_applicable.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "R_p": d.r_p.map(|r| r.to_string()),
        "max_iterations": budget.max_iterations,
        "residual_metric": d.residual_metric,
        "profile": config.profile.as_str(),
    });
    ws.write(&format!("{EVIDENCE}/plan.json"), &pretty(&plan), "plan")
        .await?;
    write_manifest(ws, run).await?;
    if !reductions.is_empty() {
        let log = reductions.join("\n") + "\n";
        ws.write(&format!("{EVIDENCE}/budget_reduction.log"), &log, "log")
            .await?;
    }
    Ok(())
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).expect("plain JSON") + "\n"
}

/// Writes the cumulative manifest (§10.3); returns its sha256.
///
/// # Errors
///
/// The file cannot be written.
pub async fn write_manifest(ws: &Workspace, run: &Run) -> Result<String, WorkspaceError> {
    let artifacts: Vec<_> = run
        .manifest()
        .into_iter()
        .map(|(n, l)| json!({ "iteration": n, "file_path": l.path, "sha256": l.sha256, "role": l.role }))
        .collect();
    let manifest =
        json!({ "schema_version": "1.0", "loop_id": "phuc-loop", "artifacts": artifacts });
    let link = ws
        .write(
            &format!("{EVIDENCE}/manifest.json"),
            &pretty(&manifest),
            "log",
        )
        .await?;
    Ok(link.sha256)
}

/// After an iteration is judged: AGENTS.md and its final snapshot, the iteration's folder
/// (entry, artifacts, certificate), the manifest, the budget log, the compaction log. Returns
/// (manifest sha256, AGENTS.md sha256 without its date).
///
/// # Errors
///
/// A file that cannot be written.
pub async fn after_iteration(
    ws: &Workspace,
    config: &LoopConfig,
    budget: &LoopBudget,
    run: &Run,
    n: u64,
    tool_calls_used: Option<u64>,
    seconds: i64,
) -> Result<(String, String), WorkspaceError> {
    let (text, compaction) = agents_md(config, budget, run);
    ws.write(AGENTS_MD, &text, "log").await?;
    ws.write(&format!("{EVIDENCE}/agents_md_final.md"), &text, "snapshot")
        .await?;
    let it = &run.iterations[n as usize];
    let dir = format!("{EVIDENCE}/iter_{n}");
    if let Some(entry) = &it.entry {
        let block = agents_md::block(
            entry,
            run.declaration
                .residual_metric
                .as_deref()
                .unwrap_or("custom"),
        );
        ws.write(&format!("{dir}/agents_md_entry.md"), &block, "log")
            .await?;
        let certificate = json!({
            "iteration": n,
            "type": entry.certificate,
            "residual_decimal_string": entry.residual,
            "direction": entry.direction,
            "criteria": it.criteria,
        });
        ws.write(
            &format!("{dir}/certificate.json"),
            &pretty(&certificate),
            "proof",
        )
        .await?;
    }
    let artifacts = json!(it.plan.iter().chain(&it.artifacts).collect::<Vec<_>>());
    ws.write(&format!("{dir}/artifacts.json"), &pretty(&artifacts), "log")
        .await?;
    let manifest = write_manifest(ws, run).await?;
    write_budget_log(ws, n, tool_calls_used, seconds).await?;
    if let Some(line) = compaction {
        ws.write(&format!("{EVIDENCE}/compaction.log"), &(line + "\n"), "log")
            .await?;
    }
    Ok((manifest, agents_md::digest(&text)))
}

/// `budget_log.json`: per iteration, tool calls and seconds used (the earlier lines are read
/// back from the file's previous state, kept in the iteration entries' order).
async fn write_budget_log(
    ws: &Workspace,
    n: u64,
    tool_calls_used: Option<u64>,
    seconds: i64,
) -> Result<(), WorkspaceError> {
    let path = format!("{EVIDENCE}/budget_log.json");
    let mut lines: Vec<serde_json::Value> = ws
        .read(&path)
        .await?
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    lines.retain(|l| l["iteration"].as_u64().is_some_and(|i| i < n));
    lines.push(
        json!({ "iteration": n, "tool_calls_used": tool_calls_used, "seconds_elapsed": seconds }),
    );
    ws.write(&path, &pretty(&json!(lines)), "log").await?;
    Ok(())
}

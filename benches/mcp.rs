//! `cargo bench --bench mcp`: the cost a governed MCP call adds (issue 30, "Measured"). The
//! same stdio server (agentpump's own `units`, `agentpump mcp-units`, a child process) is
//! called `n` times per run, one call at a time:
//!
//! - **M1**: through the pump, as `<call tool="units.convert">` posted into one thread and
//!   settled each time (the governor on), against the baseline: the same server called
//!   directly by a small rmcp client, in the same run;
//! - **M2**: where the time goes: the same governed call of a local tool (the calculator), no
//!   MCP: the pump's own share. M1 ≈ M2 + the direct call + the mapping (schema check,
//!   arguments to JSON, the answer to fields).
//!
//! Sizes: `AGENTPUMP_BENCH_MCP_N` calls per run (default 2 000; 20 in the smoke test).

mod common;

use std::time::{Duration, Instant};

use agentpump::host::organism::Organism;
use agentpump::tool::Call;
use agentpump::{PumpBuilder, PumpHandle};
use common::report::{Better, Figure};
use rmcp::ServiceExt as _;
use serde_json::json;

/// The organism of M1: the `units` server, started by the host.
fn organism() -> Organism {
    let text = format!(
        "[[mcp]]\nname = \"units\"\ncommand = [{:?}, \"mcp-units\"]\n",
        env!("CARGO_BIN_EXE_agentpump")
    );
    Organism::parse(&text, "bench").expect("the bench organism parses")
}

/// The call M1 posts.
fn convert() -> String {
    Call::new("units.convert")
        .arg("from", "km")
        .arg("to", "mi")
        .arg(
            "value",
            agentpump::value::Value::from_json("42.195").expect("a number"),
        )
        .to_xml()
}

/// The call M2 posts.
fn calculate() -> String {
    Call::new("calculator")
        .arg("expression", "42.195 / 1.609344")
        .to_xml()
}

/// `n` calls of `payload` on one fresh thread of `pump`: post, then settle; each answered.
async fn through_pump(pump: &PumpHandle, payload: &str, n: usize) -> Duration {
    let thread = pump
        .post(None, None, payload)
        .await
        .expect("accepted")
        .thread();
    pump.settle(thread).await;
    let started = Instant::now();
    for _ in 0..n {
        pump.post(Some(thread), None, payload)
            .await
            .expect("accepted");
        pump.settle(thread).await;
    }
    let elapsed = started.elapsed();
    let records = pump.history(thread).await.expect("the history");
    let answers: Vec<&str> = records
        .iter()
        .filter(|r| r.to.as_deref() == Some("client"))
        .map(|r| r.root.local())
        .collect();
    assert!(
        answers.len() == n + 1 && answers.iter().all(|a| *a == "result"),
        "every call was answered with a result: {answers:?}"
    );
    elapsed
}

/// `n` calls of `convert` by an rmcp client of its own to a `units` server of its own.
async fn direct(n: usize) -> Duration {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentpump"));
    command.arg("mcp-units");
    let transport = rmcp::transport::TokioChildProcess::new(command).expect("mcp-units starts");
    let client = ().serve(transport).await.expect("the MCP handshake");
    let args = json!({"from": "km", "to": "mi", "value": 42.195});
    let call = || {
        rmcp::model::CallToolRequestParams::new("convert")
            .with_arguments(args.as_object().cloned().unwrap_or_default())
    };
    client.call_tool(call()).await.expect("a warm-up call");
    let started = Instant::now();
    for _ in 0..n {
        let answer = client.call_tool(call()).await.expect("an answer");
        assert_ne!(answer.is_error, Some(true), "{answer:?}");
    }
    let elapsed = started.elapsed();
    let _ = client.cancel().await;
    elapsed
}

/// Microseconds per call.
fn per_call(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

fn main() {
    let cfg = common::Config::from_env(5);
    let n = cfg.size("AGENTPUMP_BENCH_MCP_N", 2_000, 20);
    let rt = common::runtime();
    let mut report = common::Report::new("mcp", &cfg);
    let (mut pumped, mut baseline, mut local) = (Vec::new(), Vec::new(), Vec::new());
    rt.block_on(async {
        for _ in 0..cfg.runs {
            let registrations = organism()
                .start_registrations("bench", &[])
                .await
                .expect("the units server starts");
            let pump = registrations
                .into_iter()
                .fold(
                    PumpBuilder::new().config(common::config(common::governed())),
                    PumpBuilder::register,
                )
                .build()
                .expect("the MCP pump builds");
            pumped.push(per_call(through_pump(&pump, &convert(), n).await, n));
            pump.shutdown(Duration::from_secs(5)).await;
            baseline.push(per_call(direct(n).await, n));
            let pump = PumpBuilder::new()
                .config(common::config(common::governed()))
                .register(agentpump::tool::register(agentpump::listeners::Calculator))
                .build()
                .expect("the calculator pump builds");
            local.push(per_call(through_pump(&pump, &calculate(), n).await, n));
            pump.shutdown(Duration::from_secs(5)).await;
        }
    });
    let params = json!({ "calls_per_run": n, "runtime": common::runtime_name() });
    report.add(
        Figure::new(
            "M1",
            "a governed MCP call through the pump (stdio server, one call at a time)",
            "µs/call",
            Better::Lower,
            pumped,
        )
        .baseline(
            "the same server called directly by an rmcp client",
            baseline,
        )
        .params(params.clone())
        .note("M1 ≈ M2 (the pump's own share) + the direct call + the mapping"),
    );
    report.add(
        Figure::new(
            "M2",
            "where the time goes: the same governed call of a local tool (calculator), no MCP",
            "µs/call",
            Better::Lower,
            local,
        )
        .params(params),
    );
    report.finish();
}

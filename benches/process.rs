//! `cargo bench --bench process`: the process engine (issue 15).
//!
//! - **P1** local statements: a process runs `FOREACH i IN ITEMS: SET XX := XX + i * 2` then
//!   `IF X > LIMIT: SET Y := 1` over `range(N)` on the pump (its `continue` turns included),
//!   against a plain Rust loop doing the same decimal work. Statements counted: SET, IF and the
//!   FOREACH step per item (3 per item).
//! - **P2** USE round trip: a process that USEs a tool `M` times in a FOREACH (call → tool →
//!   answer → CAPTURE), against the echo round trip (post → echo → settled) in the same run on
//!   the same runtime. Target: a USE within 1.5× an echo round trip. The tool is written the
//!   documented way (`impl Tool`, `tool::register`: the adapter checks the arguments against
//!   the signature and shares the pump's reading of the call).
//! - **P2r** the same with the tool as a bare `Listener` that reads its call with `Call::parse`
//!   (a copy of the pump's reading) and no signature check: how P2 was measured before
//!   2026-11-25.
//! - **P2m** P2 as users run it: `#[tokio::main]`'s multi-threaded runtime, the client (post,
//!   settle) on the bench's main thread through `Runtime::block_on`, against the echo round trip
//!   driven the same way on the same runtime (figure U1's form). No target: the echo's client
//!   waits across threads for every round trip, a process's USEs never leave its runner.
//!
//! `AGENTPUMP_BENCH_PROFILE=1 AGENTPUMP_BENCH_ONLY=P2` runs only the process's side of P2 (no echo,
//! no report), for a profiler.
//!
//! Sizes: `AGENTPUMP_BENCH_PROCESS_N` items (default 100 000), `AGENTPUMP_BENCH_PROCESS_USES`
//! (default 5 000). Current-thread runtime (but P2m), MemoryHistory, governor on with the turn
//! limit lifted.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentpump::history::MemoryHistory;
use agentpump::process::engine::{ProcessListener, Program};
use agentpump::tool::{self, Call, Signature, TOOL_NS, Tool, ToolError, ToolResult};
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, PumpHandle, QName, Registration, Role,
};
use common::report::{Better, Figure};
use common::{config, governed, median, on_workers};
use rust_decimal::Decimal;
use serde_json::json;

const NS: &str = "urn:bench:process:v1";

/// A tool answering every call with its argument `v` as its field `v`, written as the docs
/// show a tool.
struct Mirror;

#[agentpump::async_trait]
impl Tool for Mirror {
    fn signature(&self) -> Signature {
        Signature::new("mirror", "answers with its argument")
            .arg("v", "number", "any number", true)
            .field("v", "number", "the same number")
    }

    async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        Ok(call.result().field("v", call.args["v"].clone()))
    }
}

/// The same tool as a bare listener: reads a copy of the call, checks nothing (P2r).
struct RawMirror;

#[agentpump::async_trait]
impl Listener for RawMirror {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let call = Call::parse(msg.payload()).map_err(|e| ListenerError::failed(e.to_string()))?;
        let mut result = call.result();
        result.fields = call.args;
        cx.reply(result.to_xml());
        Ok(())
    }
}

fn program(body: &str) -> Arc<Program> {
    let text = format!(
        "<constants>\nLIMIT: 1000000000000\n</constants>\n<triggers>\n<trigger event=\"{{{NS}}}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\" args=\"n: Number\">\n{body}</process>\n</processes>\n"
    );
    Program::parse(&text).expect("the bench process checks")
}

/// Which mirror answers the process's USEs.
#[derive(Debug, Clone, Copy)]
enum Mirrors {
    /// `impl Tool` registered with `tool::register` (P1, P2).
    Documented,
    /// A bare listener (P2r).
    Raw,
}

fn pump(body: &str, mirror: Mirrors) -> PumpHandle {
    let main = ProcessListener::new(program(body), "main").expect("main");
    let tool = match mirror {
        Mirrors::Documented => tool::register(Mirror),
        Mirrors::Raw => Registration::new("mirror", RawMirror)
            .role(Role::Tool)
            .accepts(QName::new(TOOL_NS, "call")),
    };
    PumpBuilder::new()
        .config(config(governed()))
        .history(Arc::new(MemoryHistory::new()))
        .register(main.registration())
        .register(tool)
        .build()
        .expect("the bench pump builds")
}

const LOCAL: &str = "  SET ITEMS := range(n)\n  SET XX := 0\n  SET YY := 0\n  FOREACH i IN ITEMS:\n    SET XX := XX + i * 2\n    IF XX > LIMIT:\n      SET YY := 1\n  RETURN: x=XX\n";
const USES: &str = "  SET ITEMS := range(n)\n  FOREACH i IN ITEMS:\n    USE `mirror` where: v=i\n    CAPTURE VV from `mirror` map: \"v\"→VV\n  RETURN: last=VV\n";

/// Starts the process on `n` and waits until its thread settles.
async fn run(body: &'static str, n: usize, mirror: Mirrors) -> Duration {
    let pump = pump(body, mirror);
    let started = Instant::now();
    let thread = pump
        .post(None, None, &format!("<go xmlns=\"{NS}\"><n>{n}</n></go>"))
        .await
        .expect("accepted")
        .thread();
    pump.settle(thread).await;
    let elapsed = started.elapsed();
    let history = pump.history(thread).await.expect("history");
    assert!(
        history.iter().any(|r| r.root.local() == "return"),
        "the process returned"
    );
    elapsed
}

/// The same decimal work as LOCAL, in Rust.
fn rust_loop(n: usize) -> Duration {
    let started = Instant::now();
    let limit = Decimal::from(1_000_000_000_000u64);
    let (mut x, mut y) = (Decimal::ZERO, Decimal::ZERO);
    for i in 0..n {
        x += Decimal::from(i) * Decimal::TWO;
        if x > limit {
            y = Decimal::ONE;
        }
    }
    std::hint::black_box((x, y));
    started.elapsed()
}

fn main() {
    let cfg = common::Config::from_env(5);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut report = common::Report::new("process", &cfg);
    let n = cfg.size("AGENTPUMP_BENCH_PROCESS_N", 100_000, 2_000);
    let m = cfg.size("AGENTPUMP_BENCH_PROCESS_USES", 5_000, 200);
    if cfg.wants("P1") {
        let (mut engine, mut plain) = (Vec::new(), Vec::new());
        on_workers(&rt, run(LOCAL, n / 10, Mirrors::Documented));
        for _ in 0..cfg.runs {
            let d = on_workers(&rt, run(LOCAL, n, Mirrors::Documented));
            engine.push((3 * n) as f64 / d.as_secs_f64());
            plain.push((3 * n) as f64 / rust_loop(n).as_secs_f64());
        }
        let ratio = median(&plain) / median(&engine);
        let per_item_us = 3e6 / median(&engine);
        report.add(
            Figure::new(
                "P1",
                "process local statements (SET, IF, FOREACH step) on the pump",
                "statements/s",
                Better::Higher,
                engine,
            )
            .baseline("a plain Rust loop doing the same decimal work", plain)
            .params(json!({ "items": n, "statements_per_item": 3, "steps_per_turn": 10_000 }))
            .note(&format!(
                "the Rust loop is {ratio:.0}× faster; an item costs the process {per_item_us:.2} µs"
            )),
        );
    }
    if cfg.wants("P2") && common::profiling() {
        // Under a profiler: the process's side only.
        on_workers(&rt, run(USES, m, Mirrors::Documented));
        return;
    }
    let main_rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a multi-threaded runtime");
    for (id, mirror, how, users) in [
        ("P2", Mirrors::Documented, "the tool an `impl Tool`", false),
        (
            "P2r",
            Mirrors::Raw,
            "the tool a bare listener reading a copy",
            false,
        ),
        (
            "P2m",
            Mirrors::Documented,
            "the tool an `impl Tool`, on `#[tokio::main]`'s runtime",
            true,
        ),
    ] {
        if !cfg.wants(id) {
            continue;
        }
        // The client as a task on the current-thread runtime, or on the main thread.
        let drive = |f: std::pin::Pin<Box<dyn std::future::Future<Output = Duration> + Send>>| {
            if users {
                main_rt.block_on(f)
            } else {
                on_workers(&rt, f)
            }
        };
        let (mut uses, mut echoes) = (Vec::new(), Vec::new());
        drive(Box::pin(run(USES, m / 10, mirror)));
        for _ in 0..cfg.runs {
            let d = drive(Box::pin(run(USES, m, mirror)));
            uses.push(m as f64 / d.as_secs_f64());
            let echo = common::echo::echo_pump(governed(), Arc::new(MemoryHistory::new()));
            let d = drive(Box::pin(common::echo::round_trips(echo, m)));
            echoes.push(m as f64 / d.as_secs_f64());
        }
        let ratio = median(&echoes) / median(&uses);
        let figure = Figure::new(
            id,
            &format!("process USE round trip (call → tool → answer → CAPTURE), {how}"),
            "uses/s",
            Better::Higher,
            uses,
        )
        .baseline("echo round trip (post → echo → settled), same run", echoes)
        .params(json!({ "uses": m }))
        .note(&format!("a USE costs {ratio:.2}× an echo round trip"));
        report.add(match (mirror, users) {
            (Mirrors::Documented, false) => {
                figure.target("a USE within 1.5× an echo round trip", ratio <= 1.5)
            }
            _ => figure,
        });
    }
    report.finish();
}

//! `agentpump process run FILE --input k=v …`: runs one process of a file on an in-process
//! pump (memory history, no network) with the organism's tools — or, without `--organism`,
//! with the calculator — and prints the transcript of its thread tree and its RETURN. The file's
//! warnings (and those of the organism's process files) go to stderr first; they do not stop
//! the run.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::organism::Organism;
use super::process_check::Names;
use crate::host::HostError;
use crate::process::check::Policy;
use crate::process::engine::{ProcessListener, Program};
use crate::process::{Code, check_source_with};
use crate::tool::{Answer, Call, TOOL_NS};
use crate::value::Value;
use crate::{Payload, PumpBuilder, PumpHandle, ThreadId};

/// `process run`'s arguments.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The process file.
    pub file: PathBuf,
    /// The process to run (default: the file's first).
    #[arg(long)]
    pub process: Option<String>,
    /// An input argument, `name=value` (repeatable); typed as the process declares it.
    #[arg(long = "input", value_name = "NAME=VALUE")]
    pub inputs: Vec<String>,
    /// An organism file whose listeners (the tools) run alongside; default: the calculator.
    #[arg(long)]
    pub organism: Option<PathBuf>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout_secs: u64,
}

/// Runs the process; the text to print, and an error when it did not return.
pub fn run(args: &RunArgs) -> (String, Result<(), HostError>) {
    let mut out = String::new();
    let result = run_into(args, &mut out);
    (out, result)
}

fn run_into(args: &RunArgs, out: &mut String) -> Result<(), HostError> {
    let name = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file).map_err(|e| HostError::Io {
        path: args.file.clone(),
        source: e,
    })?;
    let organism = args.organism.as_deref().map(Organism::load).transpose()?;
    // The organism's `[[mcp]]` servers run on this runtime, the pump too.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    let registrations = match (&organism, &args.organism) {
        (Some(organism), Some(path)) => {
            organism.report_process_warnings();
            runtime.block_on(organism.start_registrations(&path.display().to_string(), &[]))?
        }
        _ => vec![crate::tool::register(
            crate::listeners::calculator::Calculator,
        )],
    };
    // The tools are known here: a USE of one the pump would refuse is an error at its line.
    let policy = Policy {
        registered: Some(Names::of(&registrations).all),
        ..Policy::default()
    };
    let unknown: Vec<_> = check_source_with(&text, &policy)
        .diagnostics
        .into_iter()
        .filter(|d| d.code == Code::ToolPolicy)
        .collect();
    let program = match unknown.is_empty() {
        true => Program::parse(&text).map_err(|e| e.0),
        false => Err(unknown),
    }
    .map_err(|errors| {
        for d in &errors {
            let _ = writeln!(out, "{}", d.render(&name, &text));
        }
        HostError::Check(format!("{name}: {} errors; nothing ran", errors.len()))
    })?;
    // Warnings do not stop the run (07): they go to stderr, as `process check` shows them,
    // and the transcript to stdout.
    for w in &program.warnings {
        eprintln!("{}", w.render(&name, &text));
    }
    let id = match &args.process {
        Some(id) => id.clone(),
        None => program
            .process_ids()
            .first()
            .map(|s| (*s).to_owned())
            .ok_or_else(|| HostError::Usage(format!("{name} has no process")))?,
    };
    let mut call = Call::new(&id).id("run");
    for input in &args.inputs {
        let (k, v) = input
            .split_once('=')
            .ok_or_else(|| HostError::Usage(format!("--input `{input}`: write name=value")))?;
        call = call.arg(k, v);
    }
    let config = match (&organism, &args.organism) {
        (Some(organism), Some(path)) => organism.config(&path.display().to_string())?,
        _ => crate::PumpConfig {
            telemetry: crate::TelemetryConfig::default().with_env()?,
            ..crate::PumpConfig::default()
        },
    };
    let max_outputs = config.limits.max_outputs;
    let registered: Vec<String> = registrations.iter().map(|r| r.name().to_owned()).collect();
    let mut builder = PumpBuilder::new().config(config);
    builder = registrations
        .into_iter()
        .fold(builder, PumpBuilder::register);
    let max_value_bytes = organism.as_ref().and_then(Organism::max_value_bytes);
    for pid in program.process_ids() {
        if registered.iter().any(|r| r == pid) {
            // The organism runs this file's process already; another process of that name is
            // a clash to name, not a "registered twice" to leave unexplained.
            let same = organism
                .as_ref()
                .and_then(|o| o.process_file(pid))
                .is_some_and(|theirs| same_file(&theirs, &args.file));
            if same {
                continue;
            }
            return Err(HostError::Usage(format!(
                "{name}: the process `{pid}` has the name of the organism's listener `{pid}`, which does not run this file's process; rename one of them"
            )));
        }
        let mut listener = ProcessListener::new(Arc::clone(&program), pid)
            .map_err(|e| HostError::Usage(e.to_string()))?
            .max_outputs(max_outputs);
        if let Some(limit) = max_value_bytes {
            listener = listener.max_value_bytes(limit);
        }
        builder = builder.register(listener.registration());
    }
    let pump = builder.build()?;
    let limit = Duration::from_secs(args.timeout_secs);
    runtime.block_on(async {
        let thread = pump
            .post(None, Some(&id), &call.to_xml())
            .await
            .map_err(|e| HostError::Ingress(Box::new(e)))?
            .thread();
        tokio::time::timeout(limit, pump.settle(thread))
            .await
            .map_err(|_| {
                HostError::Unsettled(format!("the process did not end within {limit:?}"))
            })?;
        transcript(&pump, thread, 0, out).await?;
        answer(&pump, thread, out).await
    })
}

/// Whether `a` and `b` name one file (compared resolved, so `./p.aps` is `p.aps`).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// One line per record of `thread`, children indented under the record that spawned them.
async fn transcript(
    pump: &PumpHandle,
    thread: ThreadId,
    depth: usize,
    out: &mut String,
) -> Result<(), HostError> {
    let records = pump.history(thread).await?;
    let indent = "  ".repeat(depth);
    for r in &records {
        let to = r.to.as_deref().unwrap_or("(recorded)");
        let _ = writeln!(
            out,
            "{indent}{:>6}  {} → {to}  {}",
            r.seq, r.from, r.payload
        );
        if r.root.local() == "thread-spawned"
            && let Some(child) = crate::listener::notices::thread_spawned(&r.payload)
        {
            Box::pin(transcript(pump, child.child(), depth + 1, out)).await?;
        }
    }
    Ok(())
}

/// The RETURN the client got, printed as JSON; an error when the process failed.
async fn answer(pump: &PumpHandle, thread: ThreadId, out: &mut String) -> Result<(), HostError> {
    let records = pump.history(thread).await?;
    let found = records.iter().rev().find_map(|r| {
        let p = Payload::parse(&r.payload, &crate::Limits::default()).ok()?;
        (p.qname().namespace() == TOOL_NS && r.to.as_deref() == Some("client"))
            .then(|| Answer::parse(&p))
            .flatten()
            .and_then(Result::ok)
    });
    match found {
        Some(Answer::Result(r)) => {
            let _ = writeln!(out, "RETURN {}", Value::Object(r.fields).to_json());
            Ok(())
        }
        Some(Answer::Error(e)) => Err(HostError::Check(format!(
            "the process failed: {}",
            e.message
        ))),
        None => Err(HostError::Unsettled(match halt(pump, thread).await {
            Some((class, reason)) => format!("the process was halted: {class} {reason}"),
            None => "the process ended without answering (see the transcript)".into(),
        })),
    }
}

/// The class and stop reason of the thread's halting report, if the governor halted it.
async fn halt(pump: &PumpHandle, thread: ThreadId) -> Option<(String, String)> {
    let reports = pump.reports(thread).await.ok()?;
    let last = reports.last()?;
    Some((last.class.clone(), last.stop_reason.clone()))
}

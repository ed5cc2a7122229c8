//! `agentpump tasks …`: check the task files, create the ledger, read statuses, run the
//! orchestrator (seed 004). The work is in [`crate::tasks`]; this module parses and prints.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};

use super::organism::Organism;
use crate::host::HostError;
use crate::tasks::{self, Layout, Ledger, Task, TasksConfig};

/// The `tasks` subcommands.
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Check the task files and the ledger: ids, `requires`, cycles, the atomic constraint.
    Check {
        /// The project root.
        #[command(flatten)]
        at: At,
    },
    /// Create the empty ledger (the planner's bootstrap step).
    Init {
        /// The project root.
        #[command(flatten)]
        at: At,
    },
    /// Print the latest ledger line of each task (or of the ids given), read from the end.
    Status {
        /// Only these tasks.
        ids: Vec<String>,
        /// The project root.
        #[command(flatten)]
        at: At,
        /// Output format.
        #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
        format: StatusFormat,
    },
    /// The seed's Planner: ask the organism's planner listener (`[tasks] planner`) for task
    /// files reaching GOAL; they are checked before any is written, and a proposal check
    /// refuses goes back to the planner once with the check's advice.
    Plan {
        /// What the tasks are to achieve.
        goal: String,
        /// The project root.
        #[command(flatten)]
        at: At,
    },
    /// Give a blocked task fresh attempts: the orchestrator writes it a `pending` line, and the
    /// next run retries it (then applies `[tasks] on_exhausted` as set then).
    Retry {
        /// The blocked task.
        id: String,
        /// The project root.
        #[command(flatten)]
        at: At,
    },
    /// The seed's maintenance: archive the completed task files when more than
    /// `[tasks] archive_after` are completed (`run` does it first too).
    Maintain {
        /// The project root.
        #[command(flatten)]
        at: At,
    },
    /// Run the orchestrator: every task whose requirements are completed, in its own thread.
    Run {
        /// The project root.
        #[command(flatten)]
        at: At,
        /// Tasks worked at once (default: the organism's `[tasks] parallel`, else 2).
        #[arg(long)]
        parallel: Option<usize>,
    },
}

/// Where the project is.
#[derive(Debug, clap::Args)]
pub struct At {
    /// The project root (default: here).
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// The organism file: its listeners and `[tasks]` section (default: ROOT/organism.toml
    /// when it exists).
    #[arg(long)]
    pub organism: Option<PathBuf>,
}

/// How `tasks status` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFormat {
    /// One line per task.
    Text,
    /// The ledger lines, one JSON object per line.
    Json,
}

/// Runs a `tasks` subcommand; returns what to print.
///
/// # Errors
///
/// What failed, in one line (or the check's list); `tasks run` fails when a task is not
/// completed, after printing the summary.
pub fn run(command: TasksCommand) -> Result<String, HostError> {
    match command {
        TasksCommand::Check { at } => check(&at),
        TasksCommand::Init { at } => {
            let (_, config) = organism(&at)?;
            let layout = config.layout(&at.root);
            let created = Ledger::init(layout.ledger())?;
            std::fs::create_dir_all(layout.tasks_dir())
                .map_err(|e| HostError::io(layout.tasks_dir(), e))?;
            let verb = if created { "created" } else { "exists:" };
            Ok(format!("{verb} {}\n", layout.ledger().display()))
        }
        TasksCommand::Status { ids, at, format } => {
            let (_, config) = organism(&at)?;
            status(&config.layout(&at.root), ids, format)
        }
        TasksCommand::Run { at, parallel } => orchestrate(&at, parallel),
        TasksCommand::Plan { goal, at } => plan(&at, &goal),
        TasksCommand::Retry { id, at } => retry(&at, &id),
        TasksCommand::Maintain { at } => maintain(&at),
    }
}

/// `tasks check`: the task files and the graph, and the organism a run would build — every
/// problem found, in one list.
fn check(at: &At) -> Result<String, HostError> {
    let (organism, config) = organism(at)?;
    let layout = config.layout(&at.root);
    let mut problems = Vec::new();
    let mut count = 0;
    match tasks::check(&layout) {
        Ok(checked) => count = checked.tasks.len(),
        Err(tasks::TasksError::Check(found)) => problems.extend(found),
        Err(e) => problems.push(e.to_string()),
    }
    let (organism, origin, _) = resolved(at, organism, &at.root)?;
    // The `[[mcp]]` servers are started to learn their tools, then stopped with the runtime.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    if let Err(e) = assemble(&organism, &origin, &layout, &config, &runtime) {
        problems.push(format!("{origin}: {e}"));
    }
    if problems.is_empty() {
        Ok(format!("{count} task(s) ok\n"))
    } else {
        Err(tasks::TasksError::Check(problems).into())
    }
}

/// The organism of a run (an empty one when there is none), its origin for messages, and the
/// folder its relative paths start from.
fn resolved(
    at: &At,
    organism: Option<Organism>,
    root: &Path,
) -> Result<(Organism, String, PathBuf), HostError> {
    Ok(match organism {
        Some(o) => {
            let path = at
                .organism
                .clone()
                .unwrap_or_else(|| at.root.join("organism.toml"));
            let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
            (o, path.display().to_string(), base)
        }
        None => (
            Organism::parse("", "(no organism)")?,
            "(no organism)".to_owned(),
            root.to_path_buf(),
        ),
    })
}

/// The pump of a task run, not built yet: the organism's listeners, then the orchestrator's
/// (an organism's `command`, `task-indexer` or worker is used instead of the orchestrator's),
/// checked as the build will check them.
///
/// # Errors
///
/// The organism's listeners do not load; its `[tools.command]` cannot run shell lines; it
/// declares a name the orchestrator needs; the whole does not validate (a duplicate name, an
/// unknown peer).
fn assemble(
    organism: &Organism,
    origin: &str,
    layout: &Layout,
    config: &TasksConfig,
    runtime: &tokio::runtime::Runtime,
) -> Result<crate::PumpBuilder, HostError> {
    let declared = organism.command_policy(origin)?;
    let policy = match &declared {
        Some(policy) => {
            tasks::orchestrator::check_command_policy(policy)?;
            tasks::orchestrator::guarded(policy.clone(), layout)
        }
        None => tasks::orchestrator::command_policy(layout, config),
    };
    // The organism's `command` tool, guarded as the orchestrator's: no call names the ledger.
    let own = runtime
        .block_on(organism.start_registrations(origin, &tasks::worker::peer_docs(&policy)))?
        .into_iter()
        .map(|r| match declared {
            Some(_) if r.name() == tasks::listeners::COMMAND => {
                crate::listeners::CommandTool::new(policy.clone()).registration()
            }
            _ => r,
        })
        .collect::<Vec<_>>();
    let names: Vec<&str> = own.iter().map(crate::Registration::name).collect();
    let mut extra = tasks::orchestrator::registrations(layout, config, &names)?;
    if !names.contains(&tasks::planner::PLAN_INTAKE) {
        extra.push(tasks::planner::intake()); // what a planner listener's peers may name
    }
    let builder = own.into_iter().chain(extra).fold(
        crate::PumpBuilder::new().config(organism.config(origin)?),
        crate::PumpBuilder::register,
    );
    builder.check()?;
    Ok(builder)
}

/// The organism (given, or ROOT/organism.toml, or none) and its `[tasks]` section.
fn organism(at: &At) -> Result<(Option<Organism>, TasksConfig), HostError> {
    let path = at.organism.clone().or_else(|| {
        let default = at.root.join("organism.toml");
        default.is_file().then_some(default)
    });
    match path {
        Some(p) => {
            let o = Organism::load(&p)?;
            o.tasks.check()?;
            let config = o.tasks.clone();
            Ok((Some(o), config))
        }
        None => Ok((None, TasksConfig::default())),
    }
}

/// The task layout of the project at `root`: its organism's `[tasks]` section when
/// ROOT/organism.toml exists, else the seed's defaults.
///
/// # Errors
///
/// The organism file does not load.
pub(crate) fn layout(root: &Path) -> Result<Layout, HostError> {
    let at = At {
        root: root.to_path_buf(),
        organism: None,
    };
    let (_, config) = organism(&at)?;
    Ok(config.layout(root))
}

/// `tasks status`: the latest line of each task asked for (of every task when none is). An id
/// asked for that is not a task id, or has no line, is an error naming it.
fn status(layout: &Layout, ids: Vec<String>, format: StatusFormat) -> Result<String, HostError> {
    if let Some(bad) = ids.iter().find(|id| !tasks::is_task_id(id)) {
        return Err(HostError::Check(format!(
            "`{bad}` is not a task id (T- and three or more digits, -FIX-n for a fix task)"
        )));
    }
    let asked = !ids.is_empty();
    let ids = if asked {
        ids
    } else {
        match Task::load_dir(layout.tasks_dir()) {
            Ok(tasks) => tasks.into_iter().map(|(_, t)| t.id).collect(),
            Err(_) => Vec::new(),
        }
    };
    let latest = tasks::latest(layout.ledger(), &ids)?;
    let missing: Vec<&str> = ids
        .iter()
        .filter(|id| !latest.lines.contains_key(*id))
        .map(String::as_str)
        .collect();
    if asked && !missing.is_empty() {
        return Err(HostError::Check(format!(
            "no line for {} in the ledger {} (a task gets its first line when `tasks run` starts; \
             `tasks status` without ids lists every task)",
            missing.join(", "),
            layout.ledger().display()
        )));
    }
    let order: Vec<&String> = if ids.is_empty() {
        latest.lines.keys().collect()
    } else {
        ids.iter().collect()
    };
    let mut out = String::new();
    for id in order {
        match (latest.lines.get(id), format) {
            (Some(line), StatusFormat::Json) => {
                let _ = writeln!(out, "{}", serde_json::to_string(line).expect("serializes"));
            }
            (Some(line), StatusFormat::Text) => {
                let _ = writeln!(
                    out,
                    "{:<16} {:<12} {}  {}",
                    line.id,
                    line.status.as_str(),
                    line.updated_at,
                    line.summary
                );
            }
            (None, StatusFormat::Text) => {
                let _ = writeln!(out, "{id:<16} {:<12} not in the ledger yet", "-");
            }
            (None, StatusFormat::Json) => {}
        }
    }
    Ok(out)
}

/// `tasks plan GOAL`: the organism's listeners and the plan intake on a pump; the planner's
/// tasks checked and written.
fn plan(at: &At, goal: &str) -> Result<String, HostError> {
    let (organism, config) = organism(at)?;
    let root = std::path::absolute(&at.root).map_err(|e| HostError::io(&at.root, e))?;
    let layout = config.layout(&root);
    let (organism, origin, base) = resolved(at, organism, &root)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    let own = runtime
        .block_on(organism.start_registrations(origin.as_str(), &tasks::worker::planner_docs()))?;
    if !own.iter().any(|r| r.name() == config.planner) {
        return Err(HostError::Check(format!(
            "no planner: {origin} declares no listener `{}` ([tasks] planner) accepting \
             {{urn:agentpump:tasks:v1}}plan",
            config.planner
        )));
    }
    let builder = own.into_iter().fold(
        crate::PumpBuilder::new()
            .config(organism.config(&origin)?)
            .register(tasks::planner::intake()),
        crate::PumpBuilder::register,
    );
    let patience = std::time::Duration::from_millis(config.wall_clock_ms);
    let ids = runtime.block_on(async {
        let store = organism.open_history(&base).await?;
        let pump = builder.history(store.shared()).build()?;
        let planned = tasks::planner::plan(&pump, &config.planner, &layout, goal, patience).await;
        pump.shutdown(super::run::SHUTDOWN_GRACE).await;
        let closed = store.close().map_err(HostError::from);
        let planned = planned?;
        closed.map(|()| planned)
    })?;
    Ok(format!(
        "planned {} task(s) in {}: {}\n",
        ids.len(),
        layout.tasks_dir().display(),
        ids.join(", ")
    ))
}

/// `tasks retry ID`: a `pending` line for a blocked task, written under the ledger's lock.
fn retry(at: &At, id: &str) -> Result<String, HostError> {
    if !tasks::is_task_id(id) {
        return Err(HostError::Check(format!(
            "`{id}` is not a task id (T- and three or more digits, -FIX-n for a fix task)"
        )));
    }
    let (_, config) = organism(at)?;
    let layout = config.layout(&at.root);
    let mut ledger = Ledger::open(layout.ledger())?;
    let line = tasks::orchestrator::retry(&mut ledger, &layout, &config, id)?;
    Ok(format!(
        "{id}: pending ({}); `agentpump tasks run` retries it\n",
        line.summary
    ))
}

/// `tasks maintain`: finish what a crash left, then archive, under the ledger's lock.
fn maintain(at: &At) -> Result<String, HostError> {
    let (_, config) = organism(at)?;
    let layout = config.layout(&at.root);
    let ledger = Ledger::open(layout.ledger())?;
    let recovery = tasks::recover(&layout, &ledger)?;
    let mut text = String::new();
    if let Some(r) = &recovery.repair {
        let _ = writeln!(text, "{r}");
    }
    for path in &recovery.removed {
        let _ = writeln!(text, "removed a half-written fix task: {}", path.display());
    }
    let mut moved = recovery.archived;
    moved.extend(tasks::archive(&layout, config.archive_after)?);
    drop(ledger);
    let _ = if moved.is_empty() {
        writeln!(
            text,
            "nothing to archive: completed task files are archived once more than {} are",
            config.archive_after
        )
    } else {
        writeln!(
            text,
            "archived into {}: {}",
            layout.archive().display(),
            moved.join(", ")
        )
    };
    Ok(text)
}

/// `tasks run`: lock the ledger, check, build the pump, orchestrate, print the ledger and the
/// summary.
fn orchestrate(at: &At, parallel: Option<usize>) -> Result<String, HostError> {
    let (organism, config) = organism(at)?;
    let root = std::path::absolute(&at.root).map_err(|e| HostError::io(&at.root, e))?;
    let layout = config.layout(&root);
    let ledger = Ledger::open(layout.ledger())?;
    let recovery = tasks::recover(&layout, &ledger)?;
    let checked = tasks::check(&layout)?;
    let parallel = parallel.unwrap_or(config.parallel);
    let (organism, origin, base) = resolved(at, organism, &root)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    let builder = assemble(&organism, &origin, &layout, &config, &runtime)?;
    let report = runtime.block_on(async {
        let store = organism.open_history(&base).await?;
        let pump = builder.history(store.shared()).build()?;
        let work = tasks::orchestrator::run(&pump, ledger, checked, &layout, &config, parallel);
        let report = tokio::select! {
            report = work => report.map_err(HostError::from),
            () = super::run::signal() => Err(HostError::Interrupted(format!(
                "interrupted; the ledger {} says where each task is, and the next run continues",
                layout.ledger().display()
            ))),
        };
        pump.shutdown(super::run::SHUTDOWN_GRACE).await;
        let closed = store.close().map_err(HostError::from);
        let report = report?;
        closed.map(|()| report)
    })?;
    let mut text = String::new();
    for r in report.repaired.iter().chain(&recovery.repair) {
        let _ = writeln!(text, "{r}");
    }
    if !recovery.archived.is_empty() {
        let _ = writeln!(
            text,
            "finished archiving (cut short by a crash): {}",
            recovery.archived.join(", ")
        );
    }
    for path in &recovery.removed {
        let _ = writeln!(text, "removed a half-written fix task: {}", path.display());
    }
    let ledger =
        std::fs::read_to_string(layout.ledger()).map_err(|e| HostError::io(layout.ledger(), e))?;
    let _ = writeln!(text, "ledger {}:\n{ledger}", layout.ledger().display());
    if !report.archived.is_empty() {
        let _ = writeln!(text, "archived: {}", report.archived.join(", "));
    }
    text.push_str(&report.table());
    if report.all_completed() {
        Ok(text)
    } else {
        print!("{text}");
        Err(HostError::Check(
            "not every task is completed (see the summary above)".into(),
        ))
    }
}

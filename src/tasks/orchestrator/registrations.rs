//! The listeners a task run adds to an organism's, and the `command` tool policy it needs.

use crate::governor::Budget;
use crate::tasks::listeners::{COMMAND, COORDINATOR, Coordinator, ShellWorker, Verifier};
use crate::tasks::wire::TASKS_NS;
use crate::tasks::{Layout, TasksConfig, TasksError};
use crate::{QName, Registration, Role};

/// The listeners a task run adds to an organism whose own listeners are named `declared`: the
/// coordinator and the verifier always; the `task-indexer` tool unless declared; the shell
/// worker when the config's worker is not declared and the config names a `work_command`; the
/// `command` tool, allowed only `sh` in the task root with [`TASKS_ENV`], unless declared.
///
/// # Errors
///
/// [`TasksError::Config`] when a declared name is the coordinator's or the verifier's, or when
/// there is no worker: no listener of that name and no `work_command`.
pub fn registrations(
    layout: &Layout,
    config: &TasksConfig,
    declared: &[&str],
) -> Result<Vec<Registration>, TasksError> {
    if let Some(taken) = declared
        .iter()
        .find(|n| [COORDINATOR, crate::tasks::listeners::VERIFIER].contains(n))
    {
        return Err(TasksError::Config(format!(
            "the organism declares a listener `{taken}`, a name the task orchestrator registers \
             itself (its coordinator is `{COORDINATOR}`, its verifier `{}`): rename it",
            crate::tasks::listeners::VERIFIER
        )));
    }
    let has = |name: &str| declared.contains(&name);
    let ns = |local| QName::new(TASKS_NS, local);
    let root = layout.root().display().to_string();
    let budget = Budget {
        turns: Some(config.turns),
        wall_clock: Some(std::time::Duration::from_millis(config.wall_clock_ms)),
        ..Budget::default()
    };
    let verifier = crate::tasks::listeners::VERIFIER;
    let mut out = vec![
        Registration::new(
            COORDINATOR,
            Coordinator::new(config.worker.clone(), verifier, budget),
        )
        .accepts(ns("task"))
        .accepts(ns("delta"))
        .accepts(ns("verdict"))
        .accepts(ns("failed"))
        .role(Role::Process)
        .peers([config.worker.as_str(), verifier])
        .description("coordinates one task thread: goal, worker, verification, outcome"),
        Registration::new(verifier, Verifier::new(root.clone(), COORDINATOR))
            .accepts(ns("verify"))
            .role(Role::Verifier)
            .peers([COMMAND, COORDINATOR])
            .description("runs a task's verification command through the command tool"),
    ];
    if !has(&config.worker) {
        let Some(command) = &config.work_command else {
            return Err(TasksError::Config(format!(
                "no worker: the organism declares no listener `{}` and [tasks] has no work_command",
                config.worker
            )));
        };
        out.push(
            Registration::new(
                config.worker.clone(),
                ShellWorker::new(root, command.clone()),
            )
            .accepts(ns("work"))
            .role(Role::Agent)
            .peers([COMMAND, COORDINATOR])
            .description("does a task by running the work command"),
        );
    }
    if !has(crate::tasks::listeners::TASK_INDEXER) {
        out.push(
            Registration::new(
                crate::tasks::listeners::TASK_INDEXER,
                crate::tasks::listeners::TaskIndexer::new(layout.ledger()),
            )
            .accepts(QName::new(crate::tasks::wire::TOOL_NS, "call"))
            .role(Role::Tool)
            .blocking()
            .description("the latest ledger line of the tasks named (`ids`: a JSON list)"),
        );
    }
    if !has(COMMAND) {
        let tool = crate::listeners::CommandTool::new(command_policy(layout, config));
        out.push(tool.registration());
    }
    Ok(out)
}

/// The environment variables the orchestrator's own `command` tool passes through: what a
/// verification such as the seed's `npm test` needs (npm keeps its cache under `HOME`). An
/// organism's `[tools.command]` replaces the tool, and its `env` this list.
pub const TASKS_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

/// The policy of the orchestrator's own `command` tool. The seed's verification_command is a
/// shell line: it runs `sh` only, in the task root, within the task's wall-clock budget, with
/// [`TASKS_ENV`], [`guarded`].
pub fn command_policy(layout: &Layout, config: &TasksConfig) -> crate::listeners::CommandConfig {
    let policy = crate::listeners::CommandConfig {
        allow: vec!["sh".into()],
        allow_shell: true,
        cwd: layout.root().to_path_buf(),
        timeout: std::time::Duration::from_millis(config.wall_clock_ms),
        env: TASKS_ENV.map(String::from).to_vec(),
        ..crate::listeners::CommandConfig::default()
    };
    guarded(policy, layout)
}

/// `policy` refusing every call that names the ledger or the archive by file name (seed 004:
/// agents must not read the ledger; workers read a status with `task-indexer`). A guard
/// against the direct read, not a sandbox: a glob or a computed name is not seen.
pub fn guarded(
    mut policy: crate::listeners::CommandConfig,
    layout: &Layout,
) -> crate::listeners::CommandConfig {
    let name = |p: &std::path::Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    for (word, what) in [
        (name(layout.ledger()), "the task ledger"),
        (name(&layout.archive()), "the task archive"),
    ] {
        policy.deny.push(crate::listeners::Deny {
            word,
            what: format!(
                "{what}, which only the orchestrator reads and writes (seed 004); read a task's \
                 status with the task-indexer tool"
            ),
        });
    }
    policy
}

/// Checks that an organism's own `command` tool (its `[tools.command]`) can run what the
/// orchestrator sends it: verification and work commands are shell lines, run as `sh -c`.
///
/// # Errors
///
/// [`TasksError::Config`] saying what to add to `[tools.command]`.
pub fn check_command_policy(policy: &crate::listeners::CommandConfig) -> Result<(), TasksError> {
    if policy.allow.iter().any(|p| p == "sh") && policy.allow_shell {
        return Ok(());
    }
    Err(TasksError::Config(
        "[tools.command] cannot run the task orchestrator's commands: a verification_command is \
         a shell line, run as `sh -c`; add \"sh\" to its allow list and set allow_shell = true"
            .into(),
    ))
}

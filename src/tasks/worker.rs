//! The worker protocol as an LLM worker's prompt teaches it: how its peers — the coordinator
//! `tasks`, the `task-indexer` tool and the `command` tool — are described to the model, each
//! with an example payload taken from `schemas/examples` (which `tests/schemas.rs` validates).

use crate::listeners::CommandConfig;
use crate::listeners::llm::PeerDoc;
use crate::tool::Call;
use crate::value::Value;

use super::listeners::{COMMAND, COORDINATOR, TASK_INDEXER};

const DELTA: &str = include_str!("../../schemas/examples/tasks-delta.xml");
const FAILED: &str = include_str!("../../schemas/examples/tasks-failed.xml");
const INDEXER_CALL: &str = include_str!("../../schemas/examples/tool-call-task-indexer.xml");
const PROPOSAL: &str = include_str!("../../schemas/examples/tasks-tasks.xml");

/// How the plan intake is described to a planner listener (`agentpump tasks plan`): where its
/// `<tasks>` go, and the rules its proposal is checked by.
pub fn planner_docs() -> Vec<PeerDoc> {
    vec![PeerDoc {
        name: super::planner::PLAN_INTAKE.into(),
        description: "takes in your answer to <plan> (JSON: `goal`; `existing`, the ids already \
             planned; `advice`, why your last proposal was refused): <tasks> with a JSON list of \
             task files, each {id (T- and three or more digits, not an existing id), title, \
             description, requires, context {files, docs, skills (task-indexer, command)}, \
             acceptance_criteria (at least one), verification_command (a shell line)}. A task \
             may modify at most 3 existing files: split larger work into tasks that require \
             each other. Nothing is written until every task passes the check"
            .into(),
        example: element_of(PROPOSAL).into(),
    }]
}

/// How the peers of a task worker are described to it. `command` is the policy of the
/// `command` tool the run registers (the organism's `[tools.command]`, or the orchestrator's).
pub fn peer_docs(command: &CommandConfig) -> Vec<PeerDoc> {
    vec![
        PeerDoc {
            name: COORDINATOR.into(),
            description: format!(
                "the coordinator of this task thread. It briefed you with <work> (JSON: `task`, the \
                 task file; `attempt`, from 1; `feedback`, why the previous attempt failed). Do the \
                 task in the project, then answer it with <delta> (JSON: `files_added`, \
                 `files_changed`, `files_removed`, paths relative to the project root, and \
                 `summary`; an empty delta fails) — or, when you cannot do it, with <failed> \
                 (JSON: `summary`, why), for example {}. After a delta the task's \
                 verification_command runs: only its exit code 0 completes the task, and a \
                 failure comes back to you in `feedback` on the next attempt",
                element_of(FAILED)
            ),
            example: element_of(DELTA).into(),
        },
        PeerDoc {
            name: TASK_INDEXER.into(),
            description: "the latest status-ledger line of each task named (`ids`, a JSON list): \
                 read a task's status with it, never the ledger itself. Answers <result> with \
                 the field `lines`, a JSON list of {id, status, updated_at, summary, delta}"
                .into(),
            example: element_of(INDEXER_CALL).into(),
        },
        PeerDoc {
            name: COMMAND.into(),
            description: format!(
                "runs a program ({}) with `args` (a JSON list of strings) in {}, without a shell \
                 unless the program is one; answers <result> with `exit_code`, `stdout`, \
                 `stderr`, `truncated`, `duration_ms`. A run past {} ms is killed with every \
                 process it started; nothing it starts outlives the call",
                allowed(command),
                command.cwd.display(),
                command.timeout.as_millis()
            ),
            example: Call::new(COMMAND)
                .id("look")
                .arg("program", "sh")
                .arg(
                    "args",
                    Value::List(vec![Value::from("-c"), Value::from("ls docs/tasks")]),
                )
                .to_xml(),
        },
    ]
}

fn allowed(command: &CommandConfig) -> String {
    if command.allow.is_empty() {
        "none is allowed".into()
    } else {
        format!("allowed: {}", command.allow.join(", "))
    }
}

/// The element of an example file: what follows its XML declaration and comment.
fn element_of(file: &'static str) -> &'static str {
    let start = file.rfind("-->").map_or(0, |i| i + 3);
    file[start..].trim()
}

#[cfg(test)]
mod tests {
    #[test]
    fn examples_are_one_element_each() {
        for file in [
            super::DELTA,
            super::FAILED,
            super::INDEXER_CALL,
            super::PROPOSAL,
        ] {
            let element = super::element_of(file);
            assert!(
                element.starts_with('<') && !element.starts_with("<?"),
                "{element}"
            );
            assert_eq!(element.lines().count(), 1, "{element}");
        }
    }
}

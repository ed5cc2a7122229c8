//! Tasks (seed 004): task files, their dependency graph, the JSON Lines status ledger only the
//! orchestrator writes, and the orchestrator that works each task in a thread of the pump.
//!
//! # Layout
//!
//! - [`Layout`] and [`TasksConfig`]: where the task files and the ledger are, and the
//!   orchestrator's settings (the organism's `[tasks]` section).
//! - [`Task`]: one task file (`docs/tasks/T-XXX.json`), read strictly.
//! - [`check`]: the graph checks — ids, `requires`, cycles, the atomic constraint, the ledger.
//! - [`Ledger`]: the sole writer — an exclusive lock, whole lines made durable, torn lines
//!   repaired.
//! - [`latest`]: the latest line per task, read from the ledger's end (the surgical read).
//! - [`archive()`]: completed task files moved into `ARCHIVE.jsonl`; [`recover`]: what a crash
//!   left of a move, finished.
//! - [`Repair`]: a torn last line cut off the ledger or the archive.
//! - [`wire`]: the payloads of `urn:agentpump:tasks:v1` and the tool protocol the orchestrator
//!   speaks.
//! - [`listeners`]: the listeners the orchestrator registers: the coordinator of each task
//!   thread, its verifier, a shell worker and a stand-in `command` tool.
//! - [`orchestrator`]: `tasks run` — tasks in dependency order, each in its own thread.
//! - [`planner`]: `tasks plan` — a goal turned into checked task files by a planner listener.
//! - `worker` (feature `llm`): the worker protocol as an LLM worker's prompt describes its
//!   peers.

pub mod archive;
mod check;
mod error;
mod layout;
mod ledger;
pub mod listeners;
pub mod orchestrator;
pub mod planner;
mod repair;
mod status;
mod task;
mod time;
pub mod wire;
#[cfg(feature = "llm")]
pub mod worker;

pub use archive::{Recovery, archive, recover};
pub use check::{Checked, MAX_EXISTING_FILES, check};
pub use error::TasksError;
pub use layout::{Exhausted, Layout, MAX_FIX_GENERATIONS, TasksConfig};
pub use ledger::{Delta, Ledger, Line, Status};
pub use repair::Repair;
pub use status::{Latest, latest};
pub use task::{SKILLS, Task, TaskContext, fix_generation, is_task_id, project_path};
pub use time::now_rfc3339;

//! [`PhucLoop`]: seed 002's loop controller on the pump — the outer while-not-done loop that
//! builds a CNF capsule, runs a Scout→Solver→Skeptic mini-cycle per iteration (each role a
//! fresh child thread, served by any listener), collects artifacts into a manifest, writes
//! AGENTS.md, and exits by the governor's certificates.
//!
//! One loop is one thread. It starts with a `<run>` (the §3.2 declaration); each step is a
//! delivery to the controller in that thread:
//!
//! - `<run>`: NULL_CHECK, the goal declared to the governor (certificates, R_p, criteria, the
//!   loop's totals as budget), AGENTS.md and `evidence/loop/plan.json` initialised, then
//!   `<next>` to itself;
//! - `<next>` (one self-iteration = one loop iteration): the budget check (MAX_ITERS), the
//!   backpressure signals, then the Scout's thread;
//! - `thread-result` of a role: its answer collected (the plan and the artifacts become files
//!   in the workspace, hashed into the manifest), the next role's thread spawned; after the
//!   Skeptic, the AGENTS.md entry, the evidence files, and the criteria and residual reported
//!   to the governor — which halts on CONVERGED, EXACT or DIVERGED; if it does not, `<next>`
//!   comes back.
//!
//! In a role's thread the controller is the spawner: the role answers it (`<reply>`, or any
//! payload it sends back), and the controller ends that thread with the answer, which arrives
//! in the loop thread as `thread-result`. Each step is journaled as a `<progress>` record to
//! `client`; the controller's state is the fold of those records (`journal::Run`).

mod agents_md;
mod config;
mod evidence;
mod journal;
mod steps;
mod wire;
mod workspace;

use std::sync::Arc;

use async_trait::async_trait;

pub use agents_md::{Entry, iso_date};
pub use config::{LoopBudget, LoopConfig, Profile};
pub use journal::{CriterionState, Role, Step};
pub use wire::{ArtifactClaim, Artifacts, Declaration, Verdict};
pub use workspace::{AGENTS_MD, DiskProbe, EVIDENCE, STOP_FLAG, Workspace, WorkspaceError, sha256};

use crate::listener::{Context, Delivery, Listener, ListenerError};
use crate::{QName, Registration, Role as ListenerRole};

/// The loop's namespace: `<run>`, `<next>`, the capsules `<scout>`, `<solver>`, `<skeptic>`, `<plan>`, `<artifacts>`,
/// `<verdict>`, `<progress>`.
pub const LOOP_NS: &str = "urn:agentpump:loop:v1";

/// The `<run>` a client may start a loop with (the schema's own example): what the viewer's
/// compose form offers for a loop listener.
const EXAMPLE: &str = include_str!("../../schemas/examples/loop-run.xml");

/// The loop controller. See the module documentation.
#[derive(Clone)]
pub struct PhucLoop {
    config: LoopConfig,
    disk: DiskProbe,
}

impl std::fmt::Debug for PhucLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhucLoop")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PhucLoop {
    /// A controller with `config`, reading disk usage with statvfs.
    pub fn new(config: LoopConfig) -> Self {
        Self {
            config,
            disk: Arc::new(workspace::disk_usage),
        }
    }

    /// Reads disk usage with `probe` instead (a test, or a quota the OS does not show).
    pub fn disk_probe(mut self, probe: DiskProbe) -> Self {
        self.disk = probe;
        self
    }

    /// The roots the controller accepts: `run`, `next`, and the roles' answers.
    pub fn roots() -> Vec<QName> {
        ["run", "next", "plan", "artifacts", "verdict"]
            .into_iter()
            .map(|local| QName::new(LOOP_NS, local))
            .collect()
    }

    /// The controller registered as `name`, an agent that may address its three roles.
    pub fn registration(self, name: &str) -> Registration {
        let roles: Vec<String> = self.config.roles().map(str::to_owned).to_vec();
        Self::roots().into_iter().fold(
            Registration::new(name, self)
                .role(ListenerRole::Agent)
                .peers(roles)
                .description("runs a phuc-loop (seed 002): Scout, Solver, Skeptic per iteration")
                .example(EXAMPLE.trim_end()),
            Registration::accepts,
        )
    }
}

/// The roots of the capsules the controller sends its roles, one per role: a role listener
/// accepts its own (`{urn:agentpump:loop:v1}scout`, `…solver`, `…skeptic`).
pub fn role_root(role: Role) -> QName {
    QName::new(LOOP_NS, role.as_str())
}

/// Whether `root` is a role's capsule.
pub fn is_capsule(root: &QName) -> bool {
    [Role::Scout, Role::Solver, Role::Skeptic]
        .into_iter()
        .any(|r| *root == role_root(r))
}

/// The capsule's JSON inside a role's capsule payload (how an LLM role in capsule mode sees
/// exactly what the controller built).
pub fn capsule_of(payload: &str) -> String {
    wire::text_of(payload)
}

#[async_trait]
impl Listener for PhucLoop {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let root = msg.qname();
        if root.is(LOOP_NS, "run") {
            return steps::start(self, msg, cx).await;
        }
        if root.is(LOOP_NS, "next") {
            return steps::next(self, msg, cx).await;
        }
        if msg.thread_result().is_some() {
            return steps::role_done(self, msg, cx).await;
        }
        if msg.thread_spawned().is_some() {
            return Ok(());
        }
        finish_role_thread(msg, cx).await
    }
}

/// In a role's thread: ends it with the role's answer (or with what went wrong), which the
/// loop thread receives as `thread-result`. Anything else (a notice in the loop thread) is
/// left alone.
async fn finish_role_thread(msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    let history = cx.history().await.map_err(ListenerError::failed)?;
    let in_role_thread = history
        .iter()
        .any(|r| is_capsule(&r.root) && &*r.from == cx.me());
    if !in_role_thread {
        return Ok(());
    }
    if msg
        .system_error()
        .is_some_and(|e| e.code() == "budget-warning")
    {
        return Ok(());
    }
    let answer = match (msg.system_error(), msg.huh()) {
        (Some(e), _) => steps::role_failed(e.code(), e.message()),
        (None, Some(h)) => steps::role_failed(h.code(), h.message()),
        (None, None) => msg.payload().as_str().to_owned(),
    };
    cx.done(answer);
    Ok(())
}

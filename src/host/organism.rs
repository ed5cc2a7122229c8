//! `organism.toml`: the listeners of an organism, its governor policy, its store and its server.
//! Unknown keys and bad values are errors naming the key and the line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use serde::Deserialize;
use toml::Spanned;

mod inbox;
mod telemetry;

use crate::governor::{Budget, GovernorPolicy, IterationBudget, messages_decimal};
use crate::history::{
    Durability, HistoryError, HistoryStore, JetStreamHistory, JetStreamOptions, LeaseOptions,
    SqliteHistory, SqliteOptions,
};
use crate::host::HostError;
use crate::host::mcp::{McpTools, ServerConfig};
use crate::listeners::llm::{ContextMode, LlmAgent, LlmConfig, PeerDoc};
use crate::listeners::{CommandConfig, CommandTool, builtin};
use crate::{Limits, PumpBuilder, PumpConfig, QName, Registration, Role};

/// How long a thread tree stays quiet before it leaves memory, when `[limits] evict_idle_ms`
/// is not set (10 minutes): a host is meant to run for months.
pub const EVICT_IDLE_MS: u64 = 600_000;

/// A parsed organism file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Organism {
    /// `[organism]`: its name.
    #[serde(default)]
    pub organism: Meta,
    /// `[store]`: where history is kept.
    #[serde(default)]
    pub store: Store,
    /// `[governor]`: the policy.
    #[serde(default)]
    governor: Governor,
    /// `[limits]`: message limits and queue capacity.
    #[serde(default)]
    limits: LimitsSection,
    /// `[server]`: the HTTP API.
    #[serde(default)]
    pub server: Server,
    /// `[agentserver]`: AgentServer v2.1 interop.
    #[serde(default)]
    agentserver: AgentServerSection,
    /// `[cluster]`: the NATS server that `remote = true` listeners are reached through.
    #[serde(default)]
    pub cluster: Option<crate::host::cluster::ClusterSection>,
    /// `[[listener]]`: the listeners, in registration order.
    #[serde(default)]
    listener: Vec<Spanned<ListenerSection>>,
    /// `[tools.…]`: the tools that need a policy (off unless enabled).
    #[serde(default)]
    tools: ToolsSection,
    /// `[inbox]`: approvals, the questions budget, waiting and the wall clock.
    #[serde(default)]
    inbox: inbox::InboxSection,
    /// `[[mcp]]`: MCP servers whose tools become tools of the pump (`docs/tools.md`).
    #[serde(default)]
    mcp: Vec<Spanned<crate::host::mcp::McpSection>>,
    /// `[telemetry]`: OpenTelemetry export (off unless an endpoint is set, here or by
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`).
    #[serde(default)]
    telemetry: telemetry::TelemetrySection,
    /// `[tasks]`: the task orchestrator's settings (`agentpump tasks run`).
    #[serde(default)]
    pub tasks: crate::tasks::TasksConfig,
    #[serde(skip)]
    text: String,
    #[serde(skip)]
    base: PathBuf,
    /// Files given with the organism text instead of read from disk (the demo's, built into
    /// the binary): path as the organism writes it, and the text.
    #[serde(skip)]
    embedded: Vec<(String, &'static str)>,
}

/// `[tools]`: one table per tool that needs a policy.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsSection {
    /// `[tools.command]`.
    command: Option<Spanned<CommandSection>>,
}

/// `[tools.command]`: the `command` tool's policy (`CommandConfig`'s fields; durations in ms).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandSection {
    /// Registers the tool as `command`; off unless `true`.
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    allow: Vec<String>,
    /// Relative to the organism file.
    cwd: Option<PathBuf>,
    timeout_ms: Option<u64>,
    max_output: Option<usize>,
    env: Option<Vec<String>>,
    #[serde(default)]
    allow_shell: bool,
    /// Calls that wait for a person's approval: `true`, or patterns of the call's line.
    approve: Option<inbox::Approve>,
}

/// `[agentserver]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentServerSection {
    /// The namespace AgentServer payloads in no namespace are taken into.
    namespace: Option<Spanned<String>>,
}

/// `[organism]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// A name for logs and listings.
    #[serde(default)]
    pub name: String,
}

/// `[store]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// `sqlite` (default: a file beside the organism) or `jetstream` (a NATS JetStream stream).
    #[serde(default)]
    pub kind: StoreKind,
    /// The SQLite history file (default `agentpump.db`), relative to the organism file.
    #[serde(default = "Store::default_path")]
    pub path: PathBuf,
    /// `full` (default) or `normal`.
    #[serde(default)]
    pub durability: DurabilitySetting,
    /// `kind = "jetstream"`: the NATS servers, comma-separated.
    pub url: Option<String>,
    /// `kind = "jetstream"`: the stream's name (default `agentpump-history`).
    pub stream: Option<String>,
    /// `kind = "jetstream"`: how many servers keep a copy (default 1; 3 in a 3-node cluster).
    pub replicas: Option<usize>,
    /// `kind = "jetstream"`: the writer's lease in milliseconds. Set, several hosts may run on
    /// one stream: one writes and serves, the others wait (standby) and take over within about
    /// this long after it dies. Unset: this host writes at once (one host per stream).
    pub lease_ms: Option<u64>,
    /// `kind = "jetstream"` with `lease_ms`: the organism's threads in this many partitions,
    /// each a stream of its own (`STREAM-p0`, `STREAM-p1`, …) written by whichever host holds
    /// its lease (default 1: one stream, `STREAM`). See docs/history.md, "Partitions".
    pub partitions: Option<u32>,
    /// With `partitions` above 1: a spawned child whose `<budget>` bounds it in every
    /// dimension its parent's chain limits goes to the partitions in turn, run by their pumps,
    /// its grant held in its parent's account until it returns (default false: every child
    /// with its parent). See docs/history.md, "Children on other pumps".
    #[serde(default)]
    pub spread_children: bool,
}

/// `store.kind`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// A SQLite file.
    #[default]
    Sqlite,
    /// A NATS JetStream stream (docs/history.md, "On NATS JetStream").
    Jetstream,
}

impl Store {
    fn default_path() -> PathBuf {
        PathBuf::from("agentpump.db")
    }
}

impl Default for Store {
    fn default() -> Self {
        Self {
            kind: StoreKind::Sqlite,
            path: Self::default_path(),
            durability: DurabilitySetting::Full,
            url: None,
            stream: None,
            replicas: None,
            lease_ms: None,
            partitions: None,
            spread_children: false,
        }
    }
}

/// `store.durability`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DurabilitySetting {
    /// Survives a power loss.
    #[default]
    Full,
    /// Survives a process crash.
    Normal,
}

/// An organism's history, opened where `[store]` keeps it.
#[derive(Debug, Clone)]
pub enum OpenHistory {
    /// A SQLite file.
    Sqlite(Arc<SqliteHistory>),
    /// A NATS JetStream stream.
    JetStream(Arc<JetStreamHistory>),
}

impl OpenHistory {
    /// The store, for a pump or a hub.
    pub fn shared(&self) -> Arc<dyn HistoryStore> {
        match self {
            Self::Sqlite(store) => store.clone(),
            Self::JetStream(store) => store.clone(),
        }
    }

    /// Closes a SQLite file (its last group committed, its lock released); a stream has
    /// nothing to close: every append was acknowledged before the pump's shutdown ended.
    ///
    /// # Errors
    ///
    /// The file's last commit failed.
    pub fn close(&self) -> Result<(), HistoryError> {
        match self {
            Self::Sqlite(store) => store.close(),
            Self::JetStream(_) => Ok(()),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Governor {
    enabled: Option<bool>,
    warning_fraction: Option<Spanned<String>>,
    no_progress_window: Option<usize>,
    cycle_max_period: Option<usize>,
    divergence_window: Option<usize>,
    r_p: Option<Spanned<String>>,
    queue_full_limit: Option<u32>,
    stop_file: Option<PathBuf>,
    #[serde(default)]
    budget: BudgetSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetSection {
    turns: Option<u64>,
    tokens: Option<u64>,
    cost: Option<Spanned<String>>,
    tool_calls: Option<u64>,
    threads: Option<u64>,
    wall_clock_ms: Option<u64>,
    depth: Option<u32>,
    tool_calls_per_iteration: Option<u64>,
    wall_clock_ms_per_iteration: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsSection {
    max_bytes: Option<usize>,
    max_depth: Option<usize>,
    max_attributes: Option<usize>,
    max_outputs: Option<usize>,
    queue_capacity: Option<usize>,
    refusal_window_ms: Option<u64>,
    evict_idle_ms: Option<u64>,
    /// The largest value a process may build (bytes of JSON).
    max_value_bytes: Option<usize>,
}

/// `[server]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// Address to listen on (default `127.0.0.1:7878`).
    #[serde(default = "Server::default_bind")]
    pub bind: String,
    /// Environment variable holding the bearer token, if set.
    pub token_env: Option<String>,
    /// File holding the bearer token (default `agentpump.token` next to the organism file);
    /// generated on first start, readable only by the owner.
    pub token_file: Option<PathBuf>,
    /// Largest request body in bytes (default 1 MiB).
    #[serde(default = "Server::default_body")]
    pub max_body_bytes: usize,
    /// How long requests still running at shutdown (SIGINT, SIGTERM) may take before their
    /// connections are closed, in milliseconds (default 5000).
    #[serde(default = "Server::default_shutdown_timeout")]
    pub shutdown_timeout_ms: u64,
    /// `Host` names `/mcp` answers besides the loopback ones and the bind address: `name`
    /// (any port) or `name:port` each (a proxy's public name, a DNS name of this machine).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

impl Server {
    /// The `Host` names `/mcp` answers besides the loopback ones: `allowed_hosts`, and the
    /// bind address's host unless it is an unspecified address (`0.0.0.0`, `::`).
    pub fn mcp_hosts(&self) -> Vec<String> {
        let host = self
            .bind
            .rsplit_once(':')
            .map_or(self.bind.as_str(), |(h, _)| h);
        let unspecified = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified());
        let bound = (!unspecified && !host.is_empty()).then(|| host.to_owned());
        bound
            .into_iter()
            .chain(self.allowed_hosts.clone())
            .collect()
    }

    fn default_bind() -> String {
        "127.0.0.1:7878".to_owned()
    }
    fn default_body() -> usize {
        1 << 20
    }
    fn default_shutdown_timeout() -> u64 {
        super::server::DEFAULT_SHUTDOWN_TIMEOUT.as_millis() as u64
    }
}

impl Default for Server {
    fn default() -> Self {
        Self {
            bind: Self::default_bind(),
            token_env: None,
            token_file: None,
            max_body_bytes: Self::default_body(),
            shutdown_timeout_ms: Self::default_shutdown_timeout(),
            allowed_hosts: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListenerSection {
    name: Spanned<String>,
    kind: Spanned<String>,
    builtin: Option<Spanned<String>>,
    accepts: Option<Vec<Spanned<String>>>,
    description: Option<String>,
    #[serde(default)]
    peers: Vec<String>,
    role: Option<Spanned<String>>,
    may_loop: Option<bool>,
    timeout_ms: Option<u64>,
    /// An example payload, shown to LLM agents that may address this listener.
    example: Option<String>,
    // `kind = "llm"`: the model endpoint and the agent's definition.
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    request_timeout_ms: Option<u64>,
    retries: Option<u32>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    price_in_per_1k: Option<Spanned<String>>,
    price_out_per_1k: Option<Spanned<String>>,
    context: Option<Spanned<String>>,
    /// A file (relative to the organism file) with the agent's role prompt.
    definition: Option<Spanned<String>>,
    /// The role prompt inline.
    prompt: Option<String>,
    // `kind = "process"`: the APS file (relative to the organism file) holding the process
    // named like the listener, and its statements per turn.
    file: Option<Spanned<String>>,
    steps_per_turn: Option<u64>,
    /// The listener that answers `(from "Agent Inference")` (off when absent, as 03 defaults).
    infer_with: Option<String>,
    /// AG-W02 LaxTime: warn for every USE without `timeout_ms` (off when absent).
    #[serde(default)]
    require_timeout: bool,
    /// Served by `agentpump worker` processes over the `[cluster]`'s NATS, not in the pump.
    #[serde(default)]
    remote: bool,
    /// `kind = "loop"`: the `[listener.loop]` table (roles, workspace, profile, budget).
    #[serde(rename = "loop")]
    phuc_loop: Option<crate::listeners::LoopConfig>,
}

impl Organism {
    /// Parses an organism file's text; `origin` names it in errors.
    ///
    /// # Errors
    ///
    /// One message naming the file, the line and the key or value at fault.
    pub fn parse(text: &str, origin: &str) -> Result<Self, HostError> {
        let mut organism: Organism = toml::from_str(text).map_err(|e| HostError::Organism {
            origin: origin.to_owned(),
            line: e.span().map(|s| line_of(text, s.start)),
            message: e.message().to_owned(),
        })?;
        organism.text = text.to_owned();
        Ok(organism)
    }

    /// Gives the text of a file the organism names (`file = "…"` of a process listener), so
    /// that it is not read from disk: how the demo, built into the binary, runs from anywhere.
    pub fn embed(&mut self, path: &str, text: &'static str) {
        self.embedded.push((path.to_owned(), text));
    }

    /// Resolves the organism's relative paths (a loop's workspace; process files and prompts
    /// that are not embedded) against `dir`, as [`Organism::load`] does with the file's folder:
    /// how the demo keeps its loop workspace next to its database.
    pub fn set_base(&mut self, dir: impl Into<PathBuf>) {
        self.base = dir.into();
    }

    /// Reads and parses an organism file.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or as [`Organism::parse`].
    pub fn load(path: &Path) -> Result<Self, HostError> {
        let text = std::fs::read_to_string(path).map_err(|e| HostError::io(path, e))?;
        let mut organism = Self::parse(&text, &path.display().to_string())?;
        organism.base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(organism)
    }

    /// `[limits] max_value_bytes`: the largest value its processes may build, if it says.
    pub fn max_value_bytes(&self) -> Option<usize> {
        self.limits.max_value_bytes
    }

    /// The error of a peer no listener is named, as the other errors of this file are: the
    /// file and the line of the listener's `peers` (or of its section). A task project's
    /// organism names the task orchestrator, `tasks`, which only `agentpump tasks run`
    /// registers: the error says to run it so.
    pub(crate) fn unknown_peer(&self, origin: &str, listener: &str, peer: &str) -> HostError {
        let section = self
            .listener
            .iter()
            .find(|l| l.get_ref().name.get_ref() == listener);
        // The section's `peers = …` line: after its header, before the next table's.
        let line = section.map(|s| {
            let start = line_of(&self.text, s.span().start);
            let after = self.text.lines().enumerate().skip(start);
            let peers = after
                .take_while(|(_, l)| !l.trim_start().starts_with('['))
                .find(|(_, l)| l.trim_start().starts_with("peers"));
            peers.map_or(start, |(i, _)| i + 1)
        });
        let mut message = format!("listener `{listener}` names unknown peer `{peer}`");
        if peer == crate::tasks::listeners::COORDINATOR {
            message.push_str(&format!(
                "; `{peer}` is the task orchestrator, which `agentpump tasks run` registers: this is a task project's organism, run it with `agentpump tasks run --root DIR` (`agentpump tasks check --root DIR` checks it first)"
            ));
        } else {
            let names: Vec<&str> = self
                .listener
                .iter()
                .map(|l| l.get_ref().name.get_ref().as_str())
                .collect();
            message.push_str(&format!(
                "; a peer is a listener of this organism ({}), a tool it enables or an MCP server's tool",
                names.join(", ")
            ));
        }
        HostError::Organism {
            origin: origin.to_owned(),
            line,
            message,
        }
    }

    fn at<T>(&self, origin: &str, spanned: &Spanned<T>, message: String) -> HostError {
        HostError::Organism {
            origin: origin.to_owned(),
            line: Some(line_of(&self.text, spanned.span().start)),
            message,
        }
    }

    /// `[limits]`: what the pump parses payloads with.
    fn limits(&self) -> Limits {
        let (l, d) = (&self.limits, Limits::default());
        Limits {
            max_bytes: l.max_bytes.unwrap_or(d.max_bytes),
            max_depth: l.max_depth.unwrap_or(d.max_depth),
            max_attributes: l.max_attributes.unwrap_or(d.max_attributes),
            max_outputs: l.max_outputs.unwrap_or(d.max_outputs),
        }
    }

    /// The pump configuration: limits, queue capacity and governor policy.
    ///
    /// # Errors
    ///
    /// A value that is not an exact decimal, naming its key and line.
    pub fn config(&self, origin: &str) -> Result<PumpConfig, HostError> {
        let mut config = PumpConfig::default();
        let l = &self.limits;
        config.limits = self.limits();
        config.queue_capacity = l.queue_capacity.unwrap_or(config.queue_capacity);
        let command = self.tools.command.as_ref().map(Spanned::get_ref);
        config.inbox = self.inbox.policy(command.and_then(|c| c.approve.as_ref()));
        config.telemetry = self.telemetry.config(origin)?;
        if let Some(ms) = l.refusal_window_ms {
            config.refusal_window = std::time::Duration::from_millis(ms);
        }
        // A host runs for months: quiet trees leave memory after 10 minutes unless the file
        // says otherwise; 0 keeps every thread in memory.
        config.evict_idle_after = Some(l.evict_idle_ms.unwrap_or(EVICT_IDLE_MS))
            .filter(|&ms| ms > 0)
            .map(std::time::Duration::from_millis);
        let g = &self.governor;
        let decimal =
            |key: &str, value: &Option<Spanned<String>>| -> Result<Option<Decimal>, HostError> {
                value
                    .as_ref()
                    .map(|v| {
                        messages_decimal(v.get_ref(), key)
                            .map_err(|m| self.at(origin, v, m.to_string()))
                    })
                    .transpose()
            };
        let defaults = GovernorPolicy::default();
        let b = &g.budget;
        let default_budget = GovernorPolicy::default_budget();
        config.governor = GovernorPolicy {
            enabled: g.enabled.unwrap_or(true),
            budget: Budget {
                turns: b.turns.or(default_budget.turns),
                tokens: b.tokens,
                cost: decimal("cost", &b.cost)?,
                tool_calls: b.tool_calls,
                threads: b.threads.or(default_budget.threads),
                wall_clock: b
                    .wall_clock_ms
                    .map(Duration::from_millis)
                    .or(default_budget.wall_clock),
                depth: b.depth.or(default_budget.depth),
            },
            iteration: IterationBudget {
                tool_calls: b.tool_calls_per_iteration,
                wall_clock: b.wall_clock_ms_per_iteration.map(Duration::from_millis),
            },
            warning_fraction: decimal("warning_fraction", &g.warning_fraction)?
                .unwrap_or(defaults.warning_fraction),
            no_progress_window: g.no_progress_window.unwrap_or(defaults.no_progress_window),
            cycle_max_period: g.cycle_max_period.unwrap_or(defaults.cycle_max_period),
            divergence_window: g.divergence_window.unwrap_or(defaults.divergence_window),
            r_p: decimal("r_p", &g.r_p)?.unwrap_or(defaults.r_p),
            queue_full_limit: g.queue_full_limit.unwrap_or(defaults.queue_full_limit),
            stop_file: g.stop_file.clone(),
        };
        if let Some(ns) = &self.agentserver.namespace {
            if !crate::pump::usable_namespace(ns.get_ref()) {
                let message = format!(
                    "`namespace` must be a namespace URI (`urn:…`): not empty, no spaces, quotes, `<` or `&`, not pump-owned; got `{}`",
                    ns.get_ref()
                );
                return Err(self.at(origin, ns, message));
            }
            config.agentserver.namespace = Some(ns.get_ref().clone());
        }
        Ok(config)
    }

    /// The registrations, in file order.
    ///
    /// # Errors
    ///
    /// An unknown or not-yet-available kind, an unknown builtin, a root that is not Clark
    /// notation, an unknown role — naming the key and line; an organism with `[[mcp]]`
    /// servers (see [`Organism::registrations_with`]).
    pub fn registrations(&self, origin: &str) -> Result<Vec<Registration>, HostError> {
        self.registrations_with(origin, &[])
    }

    /// The registrations, in file order, with `extra` describing listeners registered beside
    /// the organism's (the task orchestrator's) to the LLM agents that name them as peers.
    ///
    /// # Errors
    ///
    /// As [`Organism::registrations`].
    ///
    /// An organism with `[[mcp]]` servers is refused, naming the first: its tools are known
    /// once the servers are started ([`Organism::start_registrations`]).
    pub fn registrations_with(
        &self,
        origin: &str,
        extra: &[PeerDoc],
    ) -> Result<Vec<Registration>, HostError> {
        if let Some(first) = self.mcp.first() {
            let message = format!(
                "[[mcp]] `{}`: an organism with MCP servers is loaded with its servers started (Organism::start_registrations)",
                first.get_ref().name
            );
            return Err(self.at(origin, first, message));
        }
        self.listener_registrations(origin, extra)
    }

    /// The organism's registrations with its `[[mcp]]` servers started: the one place that
    /// builds an organism's tools for `run`, `mcp`, `demo`, `worker`, `tasks` and `process
    /// check`/`run`. Its listeners (LLM agents see `extra` and the MCP tools like any peer),
    /// then each MCP tool. The servers run as long as a registration of theirs lives.
    ///
    /// # Errors
    ///
    /// As [`Organism::start_mcp`] and [`Organism::registrations`].
    pub async fn start_registrations(
        &self,
        origin: &str,
        extra: &[PeerDoc],
    ) -> Result<Vec<Registration>, HostError> {
        let mcp = self.start_mcp(origin).await?;
        self.registrations_with_mcp(origin, extra, mcp)
    }

    /// The organism's listeners with the tools of its started MCP servers.
    fn registrations_with_mcp(
        &self,
        origin: &str,
        extra: &[PeerDoc],
        mcp: McpTools,
    ) -> Result<Vec<Registration>, HostError> {
        let docs: Vec<PeerDoc> = extra.iter().chain(mcp.docs()).cloned().collect();
        let mut all = self.listener_registrations(origin, &docs)?;
        all.extend(mcp.into_registrations());
        Ok(all)
    }

    /// The listeners the organism declares, the `command` tool and `ask`.
    fn listener_registrations(
        &self,
        origin: &str,
        extra: &[PeerDoc],
    ) -> Result<Vec<Registration>, HostError> {
        if self.cluster.is_none()
            && let Some(l) = self.listener.iter().find(|l| l.get_ref().remote)
        {
            return Err(self.at(
                origin,
                &l.get_ref().name,
                "a `remote = true` listener needs a [cluster] section (url = \"nats://…\")".into(),
            ));
        }
        let docs: Vec<PeerDoc> = self
            .listener
            .iter()
            .map(|l| doc(l.get_ref()))
            .chain(extra.iter().cloned())
            .chain(self.inbox.ask_doc())
            .collect();
        let mut all = self
            .listener
            .iter()
            .map(|section| self.registration(origin, section.get_ref(), &docs))
            .collect::<Result<Vec<_>, _>>()?;
        self.check_ack_wait(origin, &all)?;
        all.extend(self.command_tool(origin)?);
        all.extend(self.ask_tool(origin)?);
        Ok(all)
    }

    /// Refuses a `[cluster] ack_wait_ms` that would redeliver a remote listener's delivery
    /// only after the pump gave up on it, naming the listener's line.
    fn check_ack_wait(&self, origin: &str, all: &[Registration]) -> Result<(), HostError> {
        let Some(cluster) = &self.cluster else {
            return Ok(());
        };
        for (section, r) in self.listener.iter().zip(all) {
            let l = section.get_ref();
            if l.remote {
                cluster
                    .check_ack_wait(&r.name, r.delivery_timeout())
                    .map_err(|e| self.at(origin, &l.name, e))?;
            }
        }
        Ok(())
    }

    /// The `ask` tool, unless `[inbox] ask = false`; a listener of the organism named `ask`
    /// is refused then, naming its line.
    fn ask_tool(&self, origin: &str) -> Result<Option<Registration>, HostError> {
        let Some(ask) = self.inbox.ask_tool() else {
            return Ok(None);
        };
        match self.listener.iter().find(|l| l.get_ref().name.get_ref() == ask.name()) {
            Some(l) => Err(self.at(
                origin,
                &l.get_ref().name,
                "`ask` is the inbox's tool: name this listener otherwise, or set `[inbox] ask = false`".into(),
            )),
            None => Ok(Some(ask)),
        }
    }

    /// The `command` tool, when `[tools.command]` enables it.
    fn command_tool(&self, origin: &str) -> Result<Option<Registration>, HostError> {
        let policy = self.command_policy(origin)?;
        Ok(policy.map(|config| CommandTool::new(config).registration()))
    }

    /// The `command` tool's policy, when `[tools.command]` enables it.
    ///
    /// # Errors
    ///
    /// A policy that contradicts itself (a shell allowed without `allow_shell`), naming the
    /// section's line.
    pub fn command_policy(&self, origin: &str) -> Result<Option<CommandConfig>, HostError> {
        let Some(section) = &self.tools.command else {
            return Ok(None);
        };
        let c = section.get_ref();
        if !c.enabled {
            return Ok(None);
        }
        let d = CommandConfig::default();
        let config = CommandConfig {
            allow: c.allow.clone(),
            cwd: self.base.join(c.cwd.as_deref().unwrap_or(&d.cwd)),
            timeout: c.timeout_ms.map_or(d.timeout, Duration::from_millis),
            max_output: c.max_output.unwrap_or(d.max_output),
            env: c.env.clone().unwrap_or(d.env),
            allow_shell: c.allow_shell,
            deny: d.deny,
        };
        config
            .check()
            .map_err(|e| self.at(origin, section, format!("[tools.command]: {e}")))?;
        Ok(Some(config))
    }

    fn registration(
        &self,
        origin: &str,
        l: &ListenerSection,
        docs: &[PeerDoc],
    ) -> Result<Registration, HostError> {
        let found = match l.kind.get_ref().as_str() {
            "llm" => self.llm(origin, l, docs)?,
            "builtin" => {
                let name = l.builtin.as_ref().ok_or_else(|| {
                    self.at(
                        origin,
                        &l.kind,
                        "a builtin listener needs `builtin = \"…\"`".into(),
                    )
                })?;
                builtin(name.get_ref()).ok_or_else(|| {
                    let known = crate::listeners::BUILTINS.join(", ");
                    self.at(
                        origin,
                        name,
                        format!("unknown builtin `{}`; builtins are {known}", name.get_ref()),
                    )
                })?
            }
            "process" => return self.process(origin, l),
            "loop" => return self.phuc_loop(origin, l),
            other => {
                return Err(self.at(
                    origin,
                    &l.kind,
                    format!("unknown kind `{other}`, expected builtin, llm, process or loop"),
                ));
            }
        };
        let mut r = Registration::from_shared(l.name.get_ref(), Arc::clone(&found.listener))
            .role(found.role)
            .description(
                l.description
                    .clone()
                    .unwrap_or_else(|| found.description.to_owned()),
            )
            .peers(&l.peers);
        let roots = match &l.accepts {
            Some(list) => list
                .iter()
                .map(|root| {
                    clark(root.get_ref()).ok_or_else(|| {
                        self.at(
                            origin,
                            root,
                            format!(
                                "`{}` is not a root: write `{{namespace}}local`",
                                root.get_ref()
                            ),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => found.accepts.clone(),
        };
        for root in roots {
            r = r.accepts(root);
        }
        if let Some(role) = &l.role {
            let parsed = match role.get_ref().as_str() {
                "tool" => Role::Tool,
                "agent" => Role::Agent,
                "verifier" => Role::Verifier,
                "process" => Role::Process,
                other => {
                    return Err(self.at(
                        origin,
                        role,
                        format!(
                            "unknown role `{other}`, expected tool, agent, verifier or process"
                        ),
                    ));
                }
            };
            r = r.role(parsed);
        }
        if let Some(may) = l.may_loop {
            r = r.may_loop(may);
        }
        if let Some(timeout) = l.timeout_ms.map(Duration::from_millis).or(found.timeout) {
            r = r.timeout(timeout);
        }
        Ok(r)
    }

    /// The names of the listeners marked `remote = true`, in file order.
    pub fn remote_names(&self) -> Vec<String> {
        self.listener
            .iter()
            .filter(|l| l.get_ref().remote)
            .map(|l| l.get_ref().name.get_ref().clone())
            .collect()
    }

    /// The `[[mcp]]` servers, checked, in file order.
    ///
    /// # Errors
    ///
    /// A table that contradicts itself or names a server twice, naming the table's line.
    pub fn mcp_servers(&self, origin: &str) -> Result<Vec<ServerConfig>, HostError> {
        let mut servers: Vec<ServerConfig> = Vec::new();
        for section in &self.mcp {
            let config = section
                .get_ref()
                .check(&self.base)
                .map_err(|e| self.at(origin, section, e))?;
            if servers.iter().any(|s| s.name == config.name) {
                let message = format!("[[mcp]] name `{}` is used twice", config.name);
                return Err(self.at(origin, section, message));
            }
            servers.push(config);
        }
        Ok(servers)
    }

    /// Runs the stdio `[[mcp]]` server `server` with `program` instead of the one its
    /// `command` names (its arguments kept): the demo runs its `units` server with the
    /// executable that runs the demo. A server that is not there or not stdio is left as is.
    pub fn set_mcp_program(&mut self, server: &str, program: &Path) {
        let found = self
            .mcp
            .iter_mut()
            .map(Spanned::get_mut)
            .find(|s| s.name == server);
        if let Some(first) = found.and_then(|s| s.command.as_mut()?.first_mut()) {
            *first = program.display().to_string();
        }
    }

    /// Starts the `[[mcp]]` servers and maps their tools (see [`McpTools::start`]).
    ///
    /// # Errors
    ///
    /// As [`Organism::mcp_servers`] and [`McpTools::start`].
    pub async fn start_mcp(&self, origin: &str) -> Result<McpTools, HostError> {
        let servers = self.mcp_servers(origin)?;
        let max_bytes = self.limits.max_bytes.unwrap_or(Limits::DEFAULT_MAX_BYTES);
        Ok(McpTools::start(&servers, max_bytes).await?)
    }

    /// A pump builder with this organism's listeners, the tools of its started MCP servers
    /// (LLM agents see them like any peer) and its configuration.
    ///
    /// # Errors
    ///
    /// As [`Organism::config`] and [`Organism::registrations`].
    pub fn builder_with_mcp(&self, origin: &str, mcp: McpTools) -> Result<PumpBuilder, HostError> {
        let registrations = self.registrations_with_mcp(origin, &[], mcp)?;
        self.builder_of(origin, registrations)
    }

    /// A pump builder with this organism's listeners, the tools of its `[[mcp]]` servers
    /// (started here, see [`Organism::start_registrations`]) and its configuration.
    ///
    /// # Errors
    ///
    /// As [`Organism::config`] and [`Organism::start_registrations`].
    pub async fn start_builder(&self, origin: &str) -> Result<PumpBuilder, HostError> {
        let registrations = self.start_registrations(origin, &[]).await?;
        self.builder_of(origin, registrations)
    }

    /// A pump builder with this organism's listeners and configuration.
    ///
    /// # Errors
    ///
    /// As [`Organism::config`] and [`Organism::registrations`].
    pub fn builder(&self, origin: &str) -> Result<PumpBuilder, HostError> {
        let registrations = self.registrations(origin)?;
        self.builder_of(origin, registrations)
    }

    /// A pump builder with `registrations` and this organism's configuration.
    fn builder_of(
        &self,
        origin: &str,
        registrations: Vec<Registration>,
    ) -> Result<PumpBuilder, HostError> {
        Ok(registrations.into_iter().fold(
            PumpBuilder::new().config(self.config(origin)?),
            PumpBuilder::register,
        ))
    }

    /// Opens the store this organism names (a relative path is relative to `base`).
    ///
    /// # Errors
    ///
    /// The history file cannot be opened.
    pub fn open_store(&self, base: &Path) -> Result<SqliteHistory, HostError> {
        if self.store.kind == StoreKind::Jetstream {
            return Err(HostError::Usage(
                "[store] kind = \"jetstream\": this command works on a SQLite history file; run the organism with `agentpump run` and reach its history over HTTP (`--url`)".into(),
            ));
        }
        self.open_store_at(&base.join(&self.store.path))
    }

    /// Opens the organism's history wherever `[store]` keeps it: its SQLite file (relative to
    /// `base`), or its NATS JetStream stream.
    ///
    /// # Errors
    ///
    /// The file cannot be opened, `kind = "jetstream"` has no `url`, or the stream cannot be
    /// reached or read back.
    pub async fn open_history(&self, base: &Path) -> Result<OpenHistory, HostError> {
        match self.jetstream_options()? {
            None => Ok(OpenHistory::Sqlite(Arc::new(self.open_store(base)?))),
            Some(options) => Self::open_stream(options).await,
        }
    }

    /// The store's JetStream options (`None` for SQLite), with the lease of this process when
    /// `lease_ms` is set.
    ///
    /// # Errors
    ///
    /// `kind = "jetstream"` without `url`, or `lease_ms = 0`.
    pub fn jetstream_options(&self) -> Result<Option<JetStreamOptions>, HostError> {
        self.partition_options(None)
    }

    /// How many partitions the organism's threads are in (`[store] partitions`, default 1).
    ///
    /// # Errors
    ///
    /// `partitions = 0`, partitions above 1 without `kind = "jetstream"` and `lease_ms`, or
    /// `spread_children` with fewer than 2 partitions.
    pub fn partitions(&self) -> Result<u32, HostError> {
        if self.store.spread_children && self.store.partitions.unwrap_or(1) < 2 {
            return Err(HostError::Usage(
                "[store] spread_children needs partitions above 1: children are spread over the partitions".into(),
            ));
        }
        match self.store.partitions {
            None | Some(1) => Ok(1),
            Some(0) => Err(HostError::Usage(
                "[store] partitions must be 1 or more".into(),
            )),
            Some(n) if self.store.kind != StoreKind::Jetstream || self.store.lease_ms.is_none() => {
                Err(HostError::Usage(format!(
                    "[store] partitions = {n} needs kind = \"jetstream\" and lease_ms: a partition is a stream written by whichever host holds its lease"
                )))
            }
            Some(n) => Ok(n),
        }
    }

    /// The JetStream options of `partition`'s stream (`STREAM-pI`; `None`: the organism's one
    /// stream), with the lease of this process when `lease_ms` is set.
    ///
    /// # Errors
    ///
    /// As [`Organism::jetstream_options`].
    pub fn partition_options(
        &self,
        partition: Option<crate::thread::Partition>,
    ) -> Result<Option<JetStreamOptions>, HostError> {
        if self.store.kind != StoreKind::Jetstream {
            return Ok(None);
        }
        let url = self.store.url.clone().ok_or_else(|| {
            HostError::Usage(
                "[store] kind = \"jetstream\" needs `url` (the NATS servers, comma-separated)"
                    .into(),
            )
        })?;
        let stream = self
            .store
            .stream
            .clone()
            .unwrap_or_else(|| "agentpump-history".to_owned());
        let stream = match partition {
            Some(p) if p.count() > 1 => format!("{stream}-p{}", p.index()),
            _ => stream,
        };
        let mut options = JetStreamOptions::new(url, stream);
        options.replicas = self.store.replicas.unwrap_or(1);
        options.limits = self.limits();
        options.lease = match self.store.lease_ms {
            Some(0) => {
                return Err(HostError::Usage(
                    "[store] lease_ms must be above 0 (the lease's time to live in milliseconds)"
                        .into(),
                ));
            }
            Some(ms) => Some(LeaseOptions::this_process(Duration::from_millis(ms))),
            None => None,
        };
        Ok(Some(options))
    }

    /// Opens the JetStream store with `options` (waiting for its lease, if it has one).
    ///
    /// # Errors
    ///
    /// The stream cannot be reached or read back.
    pub async fn open_stream(options: JetStreamOptions) -> Result<OpenHistory, HostError> {
        let store = JetStreamHistory::open(options).await?;
        Ok(OpenHistory::JetStream(Arc::new(store)))
    }

    /// Opens the history file at `path` with this organism's store settings.
    ///
    /// # Errors
    ///
    /// The history file cannot be opened.
    pub fn open_store_at(&self, path: &Path) -> Result<SqliteHistory, HostError> {
        let durability = match self.store.durability {
            DurabilitySetting::Full => Durability::Full,
            DurabilitySetting::Normal => Durability::Normal,
        };
        SqliteHistory::open_with(
            path,
            SqliteOptions {
                durability,
                ..SqliteOptions::default()
            },
        )
        .map_err(HostError::from)
    }
}

/// A warning in a process file an organism loads: 07 has warnings surfaced, and the process
/// still runs.
#[derive(Debug, Clone)]
pub struct ProcessWarning {
    /// The file, joined to the organism's folder.
    pub file: PathBuf,
    /// The warning.
    pub diagnostic: crate::process::Diagnostic,
    /// The warning as `agentpump process check` shows it (rustc-style, with the source line).
    pub rendered: String,
}

impl Organism {
    /// The text of the process file `file` (embedded, or read relative to the organism), and
    /// its path.
    fn process_text(&self, file: &str) -> Result<(PathBuf, String), (PathBuf, std::io::Error)> {
        let path = self.base.join(file);
        match self.embedded.iter().find(|(p, _)| p == file) {
            Some((_, text)) => Ok((path, (*text).to_owned())),
            None => match std::fs::read_to_string(&path) {
                Ok(text) => Ok((path, text)),
                Err(e) => Err((path, e)),
            },
        }
    }

    /// The file the `kind = "process"` listener `name` loads, resolved against the organism's
    /// folder, if it has such a listener.
    pub(crate) fn process_file(&self, name: &str) -> Option<PathBuf> {
        self.listener.iter().map(Spanned::get_ref).find_map(|l| {
            let file = l.file.as_ref()?;
            (l.name.get_ref() == name && l.kind.get_ref() == "process")
                .then(|| self.base.join(file.get_ref()))
        })
    }

    /// The warnings of the process files its `kind = "process"` listeners load, each file
    /// once, in listener order: what `agentpump run` and `agentpump demo` log and print when
    /// they load the organism. A file that cannot be read or has hard errors adds none: loading
    /// its listener fails with them.
    pub fn process_warnings(&self) -> Vec<ProcessWarning> {
        let mut seen: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for l in &self.listener {
            let l = l.get_ref();
            let Some(file) = l.file.as_ref().filter(|_| l.kind.get_ref() == "process") else {
                continue;
            };
            if seen.contains(&file.get_ref().as_str()) {
                continue;
            }
            seen.push(file.get_ref());
            let Ok((path, text)) = self.process_text(file.get_ref()) else {
                continue;
            };
            let Ok(program) = crate::process::engine::Program::parse(&text) else {
                continue;
            };
            let shown = path.display().to_string();
            out.extend(program.warnings.iter().map(|d| ProcessWarning {
                file: path.clone(),
                diagnostic: d.clone(),
                rendered: d.render(&shown, &text),
            }));
        }
        out
    }

    /// Logs each of [`Organism::process_warnings`] (`tracing::warn!` with file, line and code)
    /// and prints it to stderr as `process check` does.
    pub(crate) fn report_process_warnings(&self) {
        for w in self.process_warnings() {
            let d = &w.diagnostic;
            tracing::warn!(
                file = %w.file.display(),
                line = d.span.line,
                column = d.span.column,
                code = d.code.as_str(),
                "process file warning: {}",
                d.message
            );
            eprintln!("{}", w.rendered);
        }
    }

    /// A `kind = "process"` listener: the process named like the listener, from `file`,
    /// registered with its triggers, tool calls and the tools it calls as peers (plus any
    /// `peers` the section names).
    fn process(&self, origin: &str, l: &ListenerSection) -> Result<Registration, HostError> {
        use crate::process::engine::{ProcessListener, Program};
        let file = l.file.as_ref().ok_or_else(|| {
            self.at(
                origin,
                &l.kind,
                "a process listener needs `file = \"….aps\"`".into(),
            )
        })?;
        let (path, text) = self.process_text(file.get_ref()).map_err(|(path, e)| {
            self.at(origin, file, format!("cannot read {}: {e}", path.display()))
        })?;
        // An organism that allows inference lets unresolved placeholders be inferred (03).
        let parsed = match &l.infer_with {
            Some(_) => Program::parse_inferring(&text),
            None => Program::parse(&text),
        };
        let program = parsed.map_err(|e| {
            let first =
                e.0.first()
                    .map(|d| d.render(&path.display().to_string(), &text));
            self.at(
                origin,
                file,
                format!(
                    "{} has {} error(s) (agentpump process check shows them all):\n{}",
                    path.display(),
                    e.0.len(),
                    first.unwrap_or_default()
                ),
            )
        })?;
        let name = l.name.get_ref();
        let mut listener = ProcessListener::new(program, name).map_err(|_| {
            self.at(
                origin,
                &l.name,
                format!(
                    "{} has no <process id=\"{name}\">: a process listener is named after its process",
                    path.display()
                ),
            )
        })?;
        if let Some(steps) = l.steps_per_turn {
            listener = listener.steps_per_turn(steps);
        }
        if let Some(tool) = &l.infer_with {
            listener = listener.infer_with(tool.clone());
        }
        listener = listener.require_timeout(l.require_timeout);
        if let Some(limit) = self.limits.max_value_bytes {
            listener = listener.max_value_bytes(limit);
        }
        if let Some(max) = self.limits.max_outputs {
            listener = listener.max_outputs(max);
        }
        let mut peers = listener.references();
        peers.extend(l.peers.iter().cloned());
        let mut r = listener.registration().peers(peers);
        if let Some(description) = &l.description {
            r = r.description(description.clone());
        }
        if let Some(timeout) = l.timeout_ms {
            r = r.timeout(Duration::from_millis(timeout));
        }
        Ok(r)
    }

    /// A `kind = "loop"` listener: a phuc-loop controller (seed 002) whose `[listener.loop]`
    /// names its roles; its workspace is relative to the organism file.
    fn phuc_loop(&self, origin: &str, l: &ListenerSection) -> Result<Registration, HostError> {
        let mut config = l.phuc_loop.clone().ok_or_else(|| {
            self.at(
                origin,
                &l.kind,
                "a loop listener needs a [listener.loop] table (scout, solver, skeptic, workspace)"
                    .into(),
            )
        })?;
        config.workspace = self.base.join(&config.workspace);
        let mut r = crate::listeners::PhucLoop::new(config).registration(l.name.get_ref());
        if let Some(description) = &l.description {
            r = r.description(description.clone());
        }
        Ok(r)
    }

    /// A `kind = "llm"` listener: an [`LlmAgent`] with its peers described to the model.
    fn llm(
        &self,
        origin: &str,
        l: &ListenerSection,
        docs: &[PeerDoc],
    ) -> Result<crate::listeners::Builtin, HostError> {
        let need = |what: &str| {
            self.at(
                origin,
                &l.kind,
                format!("an llm listener needs `{what} = \"…\"`"),
            )
        };
        let mut config = LlmConfig::new(
            l.base_url.clone().ok_or_else(|| need("base_url"))?,
            l.model.clone().ok_or_else(|| need("model"))?,
        );
        config.api_key_env.clone_from(&l.api_key_env);
        if let Some(ms) = l.request_timeout_ms {
            config.timeout = Duration::from_millis(ms);
        }
        config.retries = l.retries.unwrap_or(config.retries);
        config.temperature = l.temperature;
        config.max_tokens = l.max_tokens.unwrap_or(config.max_tokens);
        for (key, value, slot) in [
            (
                "price_in_per_1k",
                &l.price_in_per_1k,
                &mut config.price_in_per_1k,
            ),
            (
                "price_out_per_1k",
                &l.price_out_per_1k,
                &mut config.price_out_per_1k,
            ),
        ] {
            if let Some(v) = value {
                *slot = messages_decimal(v.get_ref(), key)
                    .map_err(|m| self.at(origin, v, m.to_string()))?;
            }
        }
        if let Some(mode) = &l.context {
            config.context = match mode.get_ref().as_str() {
                "full" => ContextMode::Full,
                "capsule" => ContextMode::Capsule,
                other => {
                    return Err(self.at(
                        origin,
                        mode,
                        format!("unknown context `{other}`, expected full or capsule"),
                    ));
                }
            };
        }
        let definition = match (&l.definition, &l.prompt) {
            (Some(file), _) => {
                let path = self.base.join(file.get_ref());
                std::fs::read_to_string(&path)
                    .map_err(|e| self.at(origin, file, format!("{}: {e}", path.display())))?
            }
            (None, Some(prompt)) => prompt.clone(),
            (None, None) => return Err(need("definition")),
        };
        if l.accepts.as_ref().is_none_or(Vec::is_empty) {
            return Err(self.at(
                origin,
                &l.kind,
                "an llm listener needs `accepts`: its own root at least".into(),
            ));
        }
        let patience = config.patience();
        let agent = l
            .peers
            .iter()
            .filter_map(|peer| docs.iter().find(|d| &d.name == peer))
            .fold(LlmAgent::new(config, definition), |agent, doc| {
                agent.with_peer(doc.clone())
            });
        Ok(crate::listeners::Builtin {
            listener: Arc::new(agent),
            accepts: Vec::new(),
            role: Role::Agent,
            description: "an LLM agent",
            example: "",
            timeout: Some(patience),
        })
    }
}

/// How a listener is described to LLM agents that may address it.
fn doc(l: &ListenerSection) -> PeerDoc {
    let builtin = l.builtin.as_ref().and_then(|b| builtin(b.get_ref()));
    PeerDoc {
        name: l.name.get_ref().clone(),
        description: l
            .description
            .clone()
            .or_else(|| builtin.as_ref().map(|b| b.description.to_owned()))
            .unwrap_or_default(),
        example: l
            .example
            .clone()
            .or_else(|| builtin.as_ref().map(|b| b.example.to_owned()))
            .unwrap_or_default(),
    }
}

/// `{namespace}local` (a namespace is required).
fn clark(text: &str) -> Option<QName> {
    let (ns, local) = text.strip_prefix('{')?.rsplit_once('}')?;
    (!ns.is_empty() && !local.is_empty()).then(|| QName::new(ns, local))
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_organism_parses() {
        // With its process files embedded, as `agentpump demo` builds it.
        let organism = crate::host::demo::organism(Path::new("agentpump")).unwrap();
        // Its listeners, the loop controller and its three roles, the `command` tool (every
        // call approved by a person) and `ask`; the tool of its MCP server comes when the
        // server is started (tests/demo.rs), and only then does it build.
        let listeners = organism.listener_registrations("organism.toml", &[]);
        assert_eq!(listeners.unwrap().len(), 16);
        let refused = organism.registrations("organism.toml").unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "organism.toml:{}: [[mcp]] `units`: an organism with MCP servers is loaded with its servers started (Organism::start_registrations)",
                line_of(
                    crate::host::demo::DEMO_ORGANISM,
                    crate::host::demo::DEMO_ORGANISM.find("[[mcp]]").unwrap()
                )
            )
        );
        // Without them, the process files are read from disk relative to the organism file,
        // and a missing one is an error naming it.
        let bare =
            Organism::parse(include_str!("../../listeners/demo/organism.toml"), "o.toml").unwrap();
        let err = bare.listener_registrations("o.toml", &[]).unwrap_err();
        assert!(err.to_string().contains("../processes/newton.aps"), "{err}");
    }

    #[test]
    fn mcp_answers_the_bind_address_unless_unspecified_and_the_allowed_hosts() {
        let hosts = |text: &str| Organism::parse(text, "o.toml").unwrap().server.mcp_hosts();
        assert_eq!(hosts(""), ["127.0.0.1"]);
        assert!(hosts("[server]\nbind = \"0.0.0.0:80\"\n").is_empty());
        assert!(hosts("[server]\nbind = \"[::]:80\"\n").is_empty());
        assert_eq!(
            hosts("[server]\nbind = \"10.0.0.5:80\"\nallowed_hosts = [\"a.example\"]\n"),
            ["10.0.0.5", "a.example"]
        );
    }

    #[test]
    fn a_host_evicts_quiet_trees_after_ten_minutes_unless_told_otherwise() {
        let evict = |text: &str| {
            let organism = Organism::parse(text, "o.toml").unwrap();
            organism.config("o.toml").unwrap().evict_idle_after
        };
        assert_eq!(evict(""), Some(Duration::from_secs(600)));
        assert_eq!(
            evict("[limits]\nevict_idle_ms = 250\n"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(evict("[limits]\nevict_idle_ms = 0\n"), None);
    }

    #[test]
    fn a_remote_listener_needs_a_cluster_and_is_listed() {
        let listener = "[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\n\
                        accepts = [\"{urn:x:v1}say\"]\nremote = true\n";
        let alone = Organism::parse(listener, "o.toml").unwrap();
        let refused = alone.registrations("o.toml").unwrap_err().to_string();
        assert_eq!(
            refused,
            "o.toml:2: a `remote = true` listener needs a [cluster] section (url = \"nats://…\")"
        );
        let text =
            format!("[cluster]\nurl = \"nats://10.0.0.1:4222\"\nhistory_window = 5\n{listener}");
        let organism = Organism::parse(&text, "o.toml").unwrap();
        assert_eq!(organism.remote_names(), ["echo"]);
        assert_eq!(organism.registrations("o.toml").unwrap().len(), 2);
        let cluster = organism.cluster.as_ref().unwrap();
        assert_eq!((cluster.history_window, cluster.in_flight), (5, 64));
        let names = cluster.names("shop.eu");
        assert_eq!(names.stream, "AGENTPUMP_SHOP_EU");
        assert_eq!(names.work("a.b"), "agentpump.shop_eu.work.a_b");
    }

    /// Issue 28: "`ack_wait_ms` and the listener's `timeout_ms` are both 30 s, so redelivery
    /// comes too late. Make the defaults consistent (redelivery well inside the timeout)."
    #[test]
    fn the_ack_wait_is_well_inside_every_remote_listeners_timeout() {
        let organism = |cluster: &str, timeout: &str| {
            let text = format!(
                "[cluster]\n{cluster}\n[[listener]]\nname = \"local\"\nkind = \"builtin\"\n\
                 builtin = \"echo\"\naccepts = [\"{{urn:x:v1}}a\"]\ntimeout_ms = 1000\n\
                 [[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\n\
                 accepts = [\"{{urn:x:v1}}say\"]\nremote = true\n{timeout}"
            );
            Organism::parse(&text, "o.toml").unwrap()
        };
        // Default: a third of each listener's timeout (30 s unless it says otherwise).
        let default = organism("", "");
        let cluster = default.cluster.as_ref().unwrap();
        assert_eq!(
            cluster.ack_wait(Duration::from_secs(30)),
            Duration::from_secs(10)
        );
        assert_eq!(
            cluster.ack_wait(Duration::from_millis(150)),
            Duration::from_millis(100)
        );
        assert_eq!(default.registrations("o.toml").unwrap().len(), 3);
        // Set: at most half of every remote listener's timeout; a local listener's is no matter.
        let half = organism("ack_wait_ms = 15000", "");
        assert!(half.registrations("o.toml").is_ok());
        assert_eq!(
            half.cluster
                .as_ref()
                .unwrap()
                .ack_wait(Duration::from_secs(30)),
            Duration::from_secs(15)
        );
        let refused = organism("ack_wait_ms = 30000", "")
            .registrations("o.toml")
            .unwrap_err()
            .to_string();
        assert_eq!(
            refused,
            "o.toml:10: [cluster] ack_wait_ms = 30000 is over half of remote listener `echo`'s \
             timeout (30000 ms): a delivery held by a worker that died would reach another worker \
             only after 30000 ms, too late to be answered before the pump gives up on it; set \
             ack_wait_ms to at most 15000, or leave it out (a third of each listener's timeout)"
        );
        let short = organism("ack_wait_ms = 1000", "timeout_ms = 1500");
        assert!(
            short
                .registrations("o.toml")
                .unwrap_err()
                .to_string()
                .contains("at most 750"),
        );
    }

    #[test]
    fn the_command_tool_is_off_unless_enabled_and_checked() {
        let count = |text: &str| {
            Organism::parse(text, "o.toml")
                .and_then(|o| o.registrations("o.toml"))
                .map(|r| r.iter().filter(|r| r.name() == "command").count())
                .map_err(|e| e.to_string())
        };
        assert_eq!(count(""), Ok(0));
        assert_eq!(count("[tools.command]\nallow = [\"ls\"]"), Ok(0));
        assert_eq!(
            count("[tools.command]\nenabled = true\nallow = [\"ls\"]\ntimeout_ms = 500"),
            Ok(1)
        );
        let unknown = count("[tools.command]\nenabled = true\nshell = true").unwrap_err();
        assert!(unknown.contains("unknown field `shell`"), "{unknown}");
        let shell = count("[tools.command]\nenabled = true\nallow = [\"bash\"]").unwrap_err();
        assert!(
            shell.contains("`bash` on the allow list is a shell"),
            "{shell}"
        );
        let docs = include_str!("../../docs/tools.md");
        let section = docs.split("```toml\n").nth(1).unwrap().split("```").next();
        assert_eq!(count(section.unwrap()), Ok(1), "docs/tools.md's section");
    }

    #[test]
    fn the_readme_reference_parses() {
        let readme = include_str!("../../docs/organism.md");
        let section = &readme[readme.find("## Running an organism").unwrap()..];
        let text = section
            .split("```toml\n")
            .nth(1)
            .unwrap()
            .split("```")
            .next()
            .unwrap();
        let organism = Organism::parse(text, "README.md").unwrap();
        let config = organism.config("README.md").unwrap();
        assert_eq!(config.governor.budget.cost, Some(Decimal::new(500, 2)));
        assert_eq!(organism.registrations("README.md").unwrap().len(), 2);
    }

    #[test]
    fn the_assistant_organism_builds_an_llm_agent() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("listeners/assistant/organism.toml");
        let organism = Organism::load(&path).unwrap();
        let registrations = organism.registrations("organism.toml").unwrap();
        assert_eq!(registrations[1].name(), "assistant");
        assert_eq!(registrations[1].listener_role(), Role::Agent);
        // Without `timeout_ms`, a delivery may last as long as every retry of the model call.
        let patience = registrations[1].delivery_timeout();
        assert!(patience > Duration::from_secs(4 * 60), "{patience:?}");
        let text = "[[listener]]\nname = \"a\"\nkind = \"llm\"\nbase_url = \"http://h/v1\"\n\
                    model = \"m\"\nprompt = \"p\"\naccepts = [\"{urn:a}q\"]\ntimeout_ms = 50\n";
        let organism = Organism::parse(text, "o.toml").unwrap();
        let registrations = organism.registrations("o.toml").unwrap();
        assert_eq!(
            registrations[0].delivery_timeout(),
            Duration::from_millis(50),
            "an explicit timeout_ms wins"
        );
        let text = "[[listener]]\nname = \"a\"\nkind = \"llm\"\nmodel = \"m\"\n";
        let err = Organism::parse(text, "o.toml")
            .unwrap()
            .registrations("o.toml")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "o.toml:3: an llm listener needs `base_url = \"…\"`"
        );
    }

    #[test]
    fn the_warnings_of_its_process_files_are_surfaced_once_per_file() {
        // 07: "AG-W01, name: SymbolNotUsed, desc: Defined but never used." — what `run` and
        // `demo` log and print when they load the organism.
        let file = "<constants>\nUNUSED: 1\n</constants>\n<processes>\n<process id=\"main\">\n  RETURN: ok=true\n</process>\n<process id=\"other\">\n  RETURN: ok=true\n</process>\n</processes>\n";
        let text = "[[listener]]\nname = \"main\"\nkind = \"process\"\nfile = \"p.aps\"\n\n\
                    [[listener]]\nname = \"other\"\nkind = \"process\"\nfile = \"p.aps\"\n";
        let mut organism = Organism::parse(text, "o.toml").unwrap();
        organism.embed("p.aps", file);
        assert_eq!(organism.registrations("o.toml").unwrap().len(), 3);
        let warnings = organism.process_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        let w = &warnings[0];
        assert_eq!(w.file, Path::new("p.aps"));
        assert_eq!(w.diagnostic.code, crate::process::Code::SymbolNotUsed);
        assert_eq!(w.diagnostic.span.line, 2);
        assert!(
            w.rendered.starts_with(
                "warning[AG-W01 SymbolNotUsed]: UNUSED is defined but never used\n --> p.aps:2:1\n"
            ),
            "{}",
            w.rendered
        );
    }

    #[test]
    fn errors_name_the_key_and_the_line() {
        let cases = [
            (
                "[store]\npath = \"x.db\"\ncolour = \"red\"\n",
                "organism.toml:3: unknown field `colour`",
            ),
            (
                "[governor]\nr_p = \"0.1f\"\n",
                "organism.toml:2: r_p=\"0.1f\" is not an exact decimal",
            ),
            (
                "[governor.budget]\nturns = -3\n",
                "organism.toml:2: invalid value",
            ),
            (
                "[[listener]]\nname = \"a\"\nkind = \"process\"\n",
                "organism.toml:3: a process listener needs `file",
            ),
            (
                "[[listener]]\nname = \"a\"\nkind = \"builtin\"\nbuiltin = \"oracle\"\n",
                "organism.toml:4: unknown builtin `oracle`",
            ),
            (
                "[[listener]]\nname = \"a\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"say\"]\n",
                "organism.toml:5: `say` is not a root",
            ),
            (
                "[[listener]]\nname = \"a\"\nkind = \"builtin\"\nbuiltin = \"echo\"\nrole = \"boss\"\n",
                "organism.toml:5: unknown role `boss`",
            ),
            ("[store\n", "organism.toml:1: "),
        ];
        for (text, expected) in cases {
            let err = Organism::parse(text, "organism.toml")
                .and_then(|o| {
                    o.config("organism.toml")
                        .and_then(|_| o.registrations("organism.toml"))
                        .map(|_| ())
                })
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(expected), "{text:?}: {err}");
        }
    }
}

//! Argument parsing for the `agentpump` binary (clap derive), separate from the work.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::check;
use super::inspect::{self, HistoryFormat, ThreadsFormat};
use super::remote::Host;
use crate::ThreadState;
use crate::host::HostError;

/// agentpump: an agent runtime that routes namespaced XML between listeners on threads.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an organism: its listeners, the pump and the HTTP API, until SIGINT or SIGTERM.
    Run {
        /// The organism file.
        #[arg(default_value_os_t = super::run::default_organism())]
        organism: PathBuf,
        /// Listen on this address instead of the organism's `[server] bind` (host:port).
        #[arg(long)]
        bind: Option<String>,
        /// Listen on this port (on the organism's host, 127.0.0.1 by default).
        #[arg(long, conflicts_with = "bind")]
        port: Option<u16>,
        /// With `[store] partitions`: a partition this host writes when it is free (repeat, or
        /// comma-separated). Without any, every partition; the others it takes over only once
        /// they have had no writer for a lease's time.
        #[arg(long = "partition", value_delimiter = ',')]
        partitions: Vec<u32>,
    },
    /// Serve an organism's remote listeners (`remote = true`) for a pump elsewhere, over the
    /// NATS server of its `[cluster]` section, until SIGINT or SIGTERM.
    Worker {
        /// The organism file (the same as the pump's).
        #[arg(long)]
        organism: PathBuf,
        /// Only these listeners, comma-separated (default: every `remote = true` listener).
        #[arg(long, value_delimiter = ',')]
        listeners: Option<Vec<String>>,
        /// Deliveries handled at once per listener.
        #[arg(long, default_value_t = super::cluster::worker::DEFAULT_CONCURRENCY)]
        concurrency: usize,
    },
    /// Serve an organism as an MCP server on standard input and output (for Claude Code or
    /// any MCP client): tools to post, list threads, read histories and reports, stop, resume.
    Mcp {
        /// The organism file.
        #[arg(long, default_value_os_t = super::run::default_organism())]
        organism: PathBuf,
    },
    /// Serve `units`, agentpump's own small MCP server (one tool, `convert`), on standard
    /// input and output: what the demo organism starts as its `[[mcp]]` server.
    #[command(hide = true)]
    McpUnits,
    /// Run the demo organism (listeners/demo/) offline and show what happened.
    Demo {
        /// Where to write the history (default: agentpump-demo.db here; replaced if it exists).
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Check that files are valid envelopes or payloads, as the pump would parse them.
    ///
    /// Prints the dialect, addressee, thread and routing root of each; exits 1 at the first
    /// invalid file with the parser's message (line and column).
    Check {
        /// Files to check; `-` reads standard input.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List the threads of a history file (or a running host), with counts per state.
    Threads {
        /// Where to read from.
        #[command(flatten)]
        source: Source,
        /// How to authenticate to a running host.
        #[command(flatten)]
        auth: Auth,
        /// Only threads in this state (active, idle, done, halted).
        #[arg(long)]
        state: Option<ThreadState>,
        /// Only the root threads whose records, or their child threads' records, hold TEXT in
        /// a payload (its text, attributes or root), a sender or an addressee, or whose path
        /// does (case-insensitive): the viewer's search.
        #[arg(long, value_name = "TEXT")]
        search: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ThreadsFormat::Text)]
        format: ThreadsFormat,
    },
    /// Print a thread's history; `history prune` and `history export` keep a history file small.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    History {
        /// Retention: `prune` and `export`.
        #[command(subcommand)]
        retention: Option<Retention>,
        /// The thread: its id, a unique prefix of it, or its path (46a2acab.part1).
        #[arg(required_unless_present = "all")]
        thread: Option<String>,
        /// Every record of every thread instead of one thread's, in the order the history
        /// accepted them (`--format jsonl` or `xml` for the whole history as data).
        #[arg(long, conflicts_with_all = ["thread", "tree"])]
        all: bool,
        /// Where to read from.
        #[command(flatten)]
        source: Source,
        /// How to authenticate to a running host.
        #[command(flatten)]
        auth: Auth,
        /// Output format.
        #[arg(long, value_enum, default_value_t = HistoryFormat::Text)]
        format: HistoryFormat,
        /// Include every thread spawned below it, indented by depth.
        #[arg(long)]
        tree: bool,
    },
    /// Print a thread's halting reports: a JSON array, oldest first (from a file or a host).
    Report {
        /// The thread: its id, a unique prefix of it, or its path (46a2acab.part1).
        thread: String,
        /// Where to read from.
        #[command(flatten)]
        source: Source,
        /// How to authenticate to a running host.
        #[command(flatten)]
        auth: Auth,
    },
    /// Send an envelope or payload from FILE (or `-` for stdin) to a running host.
    Send {
        /// The file.
        file: PathBuf,
        /// Into this thread: an id, a unique prefix, or a path (default: a new thread).
        #[arg(long)]
        thread: Option<String>,
        /// To this listener (for a bare payload; default: every listener of its root).
        #[arg(long)]
        to: Option<String>,
        /// Wait for the thread to settle, then print what happened after the message.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits, in seconds.
        #[arg(long, default_value_t = 60, requires = "wait")]
        wait_secs: u64,
        /// The running host.
        #[command(flatten)]
        host: HostArgs,
    },
    /// Stop a thread on a running host (it halts with BACKPRESSURE).
    Stop {
        /// The thread: its id, a unique prefix of it, or its path (46a2acab.part1).
        thread: String,
        /// The running host.
        #[command(flatten)]
        host: HostArgs,
    },
    /// Resume a halted thread on a running host, adding budget.
    Resume {
        /// The thread: its id, a unique prefix of it, or its path (46a2acab.part1).
        thread: String,
        /// Turns to add.
        #[arg(long)]
        turns: Option<u64>,
        /// Tokens to add.
        #[arg(long)]
        tokens: Option<u64>,
        /// Wall clock to add, in milliseconds.
        #[arg(long)]
        wall_clock_ms: Option<u64>,
        /// The running host.
        #[command(flatten)]
        host: HostArgs,
    },
    /// List a person's open requests (questions and approvals), oldest first, from a history
    /// file or a running host.
    Inbox {
        /// Only this thread's: its id, a unique prefix of it, or its path.
        #[arg(long)]
        thread: Option<String>,
        /// Only those this listener asked.
        #[arg(long)]
        listener: Option<String>,
        /// Where to read from.
        #[command(flatten)]
        source: Source,
        /// How to authenticate to a running host.
        #[command(flatten)]
        auth: Auth,
        /// Output format.
        #[arg(long, value_enum, default_value_t = super::inbox::InboxFormat::Text)]
        format: super::inbox::InboxFormat,
    },
    /// Answer an open request on a running host: `--approve`, `--deny REASON`, `--edit JSON`
    /// (an approval) or `--value JSON` (a question). Applied once: a second answer is refused
    /// naming who answered and when.
    Answer {
        /// The request's id (from `agentpump inbox`).
        id: String,
        /// The decision.
        #[command(flatten)]
        decision: super::inbox::DecisionArgs,
        /// Who answers, as recorded.
        #[arg(long, default_value = "cli")]
        by: String,
        /// The running host.
        #[command(flatten)]
        host: HostArgs,
    },
    /// Browse a history file in a web browser, read-only (prints the URL to open).
    View {
        /// The history database.
        #[arg(long)]
        db: PathBuf,
        /// Where to listen.
        #[arg(long, default_value = super::view::DEFAULT_ADDR)]
        addr: String,
        /// A task project's root: the tasks view reads its ledger (the layout of
        /// ROOT/organism.toml's `[tasks]` section when there is one, else docs/current/task-status.jsonl).
        #[arg(long, value_name = "ROOT")]
        tasks: Option<PathBuf>,
    },
    /// Work with process files (the APS control language): `process check FILE…`.
    Process {
        /// What to do.
        #[command(subcommand)]
        command: super::process_check::ProcessCommand,
    },
    /// Work with seed 004's tasks: `tasks check`, `init`, `status`, `run`, `retry`, `maintain`.
    Tasks {
        /// What to do.
        #[command(subcommand)]
        command: super::tasks::TasksCommand,
    },
    /// Recompute every hash chain; exit 1 naming the first record that does not match.
    ///
    /// With --db, reads the history file itself: a running host's file can be verified while
    /// it runs, since reading never blocks the writer. With --url, reads every thread's records
    /// from a running host (any host of a partitioned organism) and recomputes them here.
    Verify {
        /// The history file, or the running host.
        #[command(flatten)]
        source: Source,
        /// How to authenticate (with --url).
        #[command(flatten)]
        auth: Auth,
        /// Also re-derive every halt from the recorded history (residuals, criteria, goal,
        /// signals, budgets) and check it against its stored halting report; exit 1 naming
        /// each thread whose report the history does not support.
        #[arg(long)]
        certificates: bool,
    },
}

/// `agentpump history prune | export`.
#[derive(Debug, Subcommand)]
pub enum Retention {
    /// Remove finished threads' records older than a cut, leaving an anchor per thread that
    /// `verify` proves the rest from. Only threads whose whole tree is done or halted with
    /// nothing pending lose records. On a stopped host's file (--db) or a running host (--url).
    Prune {
        /// The cut.
        #[command(flatten)]
        cut: super::retention::Cut,
        /// Where to prune.
        #[command(flatten)]
        source: Source,
        /// How to authenticate to a running host.
        #[command(flatten)]
        auth: Auth,
        /// Write the removed records to FILE first (gzip-compressed JSON lines), in the prune's
        /// transaction: if the archive fails, nothing is removed. Needs --db; FILE must not exist.
        #[arg(long, value_name = "FILE", requires = "db")]
        archive: Option<PathBuf>,
    },
    /// Write the records a prune with the same cut would remove, as JSON lines: the archive to
    /// keep before pruning — records of finished trees only (done or halted, nothing pending),
    /// never of an idle root thread. Reads the file only (a running host's too). For every
    /// record, use `agentpump history --all --format jsonl`.
    Export {
        /// The cut.
        #[command(flatten)]
        cut: super::retention::Cut,
        /// The history database.
        #[arg(long)]
        db: PathBuf,
        /// Compress with gzip.
        #[arg(long)]
        gzip: bool,
        /// The file to write (must not exist).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

/// Where to read from: a history file, or a running host (the default, as for `send`).
#[derive(Debug, clap::Args)]
#[group(id = "source", multiple = false)]
pub struct Source {
    /// The history database file.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// A running host's base URL.
    #[arg(long, default_value = DEFAULT_URL)]
    pub url: String,
}

/// Where `agentpump run` listens unless told otherwise, and where the client commands look.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7878";

/// A running host.
#[derive(Debug, clap::Args)]
pub struct HostArgs {
    /// The host's base URL.
    #[arg(long, default_value = DEFAULT_URL)]
    pub url: String,
    /// How to authenticate.
    #[command(flatten)]
    pub auth: Auth,
}

/// How to authenticate to a running host.
#[derive(Debug, clap::Args)]
pub struct Auth {
    /// The bearer token (default: AGENTPUMP_TOKEN, then --token-file, then ./agentpump.token,
    /// then the token the host at --url recorded in ~/.local/state/agentpump/hosts/).
    #[arg(long)]
    pub token: Option<String>,
    /// File holding the token (default: ./agentpump.token if it exists, then the host's
    /// recorded token).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

fn host(url: &str, auth: Auth) -> Result<Host, HostError> {
    Host::new(url, auth.token, auth.token_file)
}

/// Runs the command line: parses `std::env::args`, runs the command, returns the exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr, filtered by RUST_LOG (default: warnings and errors).
    // Colour only on a terminal: logs written to a file or a pipe carry no escape codes.
    let _ = tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    match dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("agentpump: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `history prune` or `history export`.
fn retention(command: Retention) -> Result<String, HostError> {
    let now = super::retention::now_us();
    match command {
        Retention::Prune {
            cut,
            source,
            auth,
            archive,
        } => match source.db {
            Some(db) => super::retention::prune(&db, cut.before_us(now), archive.as_deref()),
            None => host(&source.url, auth).and_then(|h| h.prune(cut.before_us(now))),
        },
        Retention::Export { cut, db, gzip, out } => {
            super::retention::export(&db, cut.before_us(now), gzip, &out)
        }
    }
}

/// Runs one command, printing its output. Standard output is locked only to print a
/// command's text: MCP owns it while it serves (`mcp`, `mcp-units`).
fn dispatch(command: Command) -> Result<(), HostError> {
    let print = |text: Result<String, HostError>| {
        text.and_then(|t| {
            let mut out = std::io::stdout().lock();
            out.write_all(t.as_bytes())
                .and_then(|()| out.flush())
                .map_err(HostError::System)
        })
    };
    match command {
        Command::Demo { db } => print(super::demo::run(db)),
        Command::Worker {
            organism,
            listeners,
            concurrency,
        } => print(super::cluster::worker::run(
            &organism,
            listeners,
            concurrency,
        )),
        Command::Run {
            organism,
            bind,
            port,
            partitions,
        } => print(super::run::run(&organism, bind, port, &partitions)),
        Command::Mcp { organism } => super::run::serve_mcp(&organism),
        Command::McpUnits => super::run::serve_units(),
        Command::Check { files } => {
            let mut text = Vec::new();
            let checked = check::run(&files, &mut text);
            print(Ok(String::from_utf8_lossy(&text).into_owned()))?;
            checked
        }
        Command::Threads {
            source,
            auth,
            state,
            search,
            format,
        } => print(match source.db {
            Some(db) => inspect::threads(&db, state, search.as_deref(), format),
            None => host(&source.url, auth)
                .and_then(|h| h.threads(state.map(|s| s.as_str()), search.as_deref(), format)),
        }),
        Command::History {
            retention: Some(retention),
            ..
        } => print(self::retention(retention)),
        Command::History {
            retention: None,
            thread,
            all,
            source,
            auth,
            format,
            tree,
        } => print(match (thread, source.db) {
            (None, Some(db)) if all => inspect::whole_history(&db, format),
            (None, None) if all => host(&source.url, auth).and_then(|h| h.whole_history(format)),
            (Some(thread), Some(db)) => inspect::history(&db, &thread, format, tree),
            (Some(thread), None) => {
                host(&source.url, auth).and_then(|h| h.history(&thread, format, tree))
            }
            (None, _) => unreachable!("clap requires a thread or --all without a subcommand"),
        }),
        Command::Report {
            thread,
            source,
            auth,
        } => print(match source.db {
            Some(db) => inspect::report(&db, &thread),
            None => host(&source.url, auth).and_then(|h| h.report(&thread)),
        }),
        Command::Inbox {
            thread,
            listener,
            source,
            auth,
            format,
        } => print(match source.db {
            Some(db) => {
                super::inbox::list_file(&db, thread.as_deref(), listener.as_deref(), format)
            }
            None => host(&source.url, auth).and_then(|h| {
                super::inbox::list_host(&h, thread.as_deref(), listener.as_deref(), format)
            }),
        }),
        Command::Answer {
            id,
            decision,
            by,
            host: h,
        } => print(host(&h.url, h.auth).and_then(|h| super::inbox::answer(&h, &id, decision, &by))),
        Command::Verify {
            source,
            auth,
            certificates,
        } => match source.db {
            Some(db) => {
                print(inspect::verify(&db))?;
                if certificates {
                    print(inspect::verify_certificates(&db))?;
                }
                Ok(())
            }
            None => {
                let host = host(&source.url, auth);
                let host = match host {
                    Ok(host) => host,
                    Err(e) => return print(Err(e)),
                };
                print(host.verify())?;
                if certificates {
                    print(host.verify_certificates())?;
                }
                Ok(())
            }
        },
        Command::View { db, addr, tasks } => print(super::view::run(&db, &addr, tasks.as_deref())),
        Command::Tasks { command } => print(super::tasks::run(command)),
        Command::Process { command } => {
            let (text, result) = super::process_check::run(command);
            print(Ok(text))?;
            result
        }
        Command::Send {
            file,
            thread,
            to,
            wait,
            wait_secs,
            host: h,
        } => {
            let wait = wait.then(|| std::time::Duration::from_secs(wait_secs));
            print(
                host(&h.url, h.auth)
                    .and_then(|h| h.send(&file, thread.as_deref(), to.as_deref(), wait)),
            )
        }
        Command::Stop { thread, host: h } => {
            print(host(&h.url, h.auth).and_then(|h| h.stop(&thread)))
        }
        Command::Resume {
            thread,
            turns,
            tokens,
            wall_clock_ms,
            host: h,
        } => {
            let budget = crate::governor::Budget {
                turns,
                tokens,
                wall_clock: wall_clock_ms.map(std::time::Duration::from_millis),
                ..Default::default()
            };
            print(host(&h.url, h.auth).and_then(|h| h.resume(&thread, &budget)))
        }
    }
}

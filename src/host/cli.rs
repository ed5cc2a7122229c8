//! Argument parsing for the `agentpump` binary (clap derive), separate from the work.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::check;
use super::inspect::{self, HistoryFormat, ThreadsFormat};
use crate::ThreadState;

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
    },
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
    /// List the threads of a history file, with counts per state.
    Threads {
        /// The history database.
        #[arg(long)]
        db: PathBuf,
        /// Only threads in this state (active, idle, done, halted).
        #[arg(long)]
        state: Option<ThreadState>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ThreadsFormat::Text)]
        format: ThreadsFormat,
    },
    /// Print a thread's history.
    History {
        /// The thread id.
        thread: String,
        /// The history database.
        #[arg(long)]
        db: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = HistoryFormat::Text)]
        format: HistoryFormat,
        /// Include every thread spawned below it, indented by depth.
        #[arg(long)]
        tree: bool,
    },
    /// Print a thread's halting report (JSON).
    Report {
        /// The thread id.
        thread: String,
        /// The history database.
        #[arg(long)]
        db: PathBuf,
    },
    /// Recompute every hash chain; exit 1 naming the first record that does not match.
    Verify {
        /// The history database.
        #[arg(long)]
        db: PathBuf,
    },
}

/// Runs the command line: parses `std::env::args`, runs the command, returns the exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr, filtered by RUST_LOG (default: warnings and errors).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let mut out = std::io::stdout().lock();
    let printed = |text: Result<String, String>, out: &mut dyn std::io::Write| {
        text.and_then(|t| out.write_all(t.as_bytes()).map_err(|e| e.to_string()))
    };
    let result = match cli.command {
        Command::Demo { db } => printed(super::demo::run(db), &mut out),
        Command::Run { organism } => printed(super::run::run(&organism), &mut out),
        Command::Check { files } => check::run(&files, &mut out),
        Command::Threads { db, state, format } => {
            printed(inspect::threads(&db, state, format), &mut out)
        }
        Command::History {
            thread,
            db,
            format,
            tree,
        } => printed(inspect::history(&db, &thread, format, tree), &mut out),
        Command::Report { thread, db } => printed(inspect::report(&db, &thread), &mut out),
        Command::Verify { db } => printed(inspect::verify(&db), &mut out),
    };
    let _ = out.flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("agentpump: {message}");
            ExitCode::FAILURE
        }
    }
}

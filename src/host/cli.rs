//! Argument parsing for the `agentpump` binary (clap derive), separate from the work.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::check;

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
    /// Check that files are valid envelopes or payloads, as the pump would parse them.
    ///
    /// Prints the dialect, addressee, thread and routing root of each; exits 1 at the first
    /// invalid file with the parser's message (line and column).
    Check {
        /// Files to check; `-` reads standard input.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// Runs the command line: parses `std::env::args`, runs the command, returns the exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let mut out = std::io::stdout().lock();
    let result = match cli.command {
        Command::Check { files } => check::run(&files, &mut out),
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

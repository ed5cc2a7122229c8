//! `agentpump process check FILE…`: read, parse and statically check process files, print
//! every diagnostic (rustc-style, or one JSON object per line for editors), and fail if any
//! is a hard error.

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};

use crate::process::{Severity, check_source};

/// The `process` subcommands.
#[derive(Debug, Subcommand)]
pub enum ProcessCommand {
    /// Check process files statically: every hard error and warning, exit 1 on any error.
    Check {
        /// The process files (APS documents with `<processes>`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// How diagnostics are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// rustc-style: header, position, source line, caret line, hint; a summary per file.
    Text,
    /// One JSON object per line and diagnostic: file, line, column, length, code, name,
    /// severity, message, hint.
    Json,
}

/// Runs a `process` subcommand: the text to print, and an error message when it failed.
pub fn run(command: ProcessCommand) -> (String, Result<(), String>) {
    let ProcessCommand::Check { files, format } = command;
    let (mut out, mut errors, mut failed) = (String::new(), 0, Vec::new());
    for file in &files {
        let name = file.display().to_string();
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                failed.push(format!("{name}: {e}"));
                continue;
            }
        };
        let checked = check_source(&text);
        let count = |s| {
            checked
                .diagnostics
                .iter()
                .filter(|d| d.severity() == s)
                .count()
        };
        let (e, w) = (count(Severity::Error), count(Severity::Warning));
        errors += e;
        for d in &checked.diagnostics {
            match format {
                Format::Text => out.push_str(&format!("{}\n", d.render(&name, &text))),
                Format::Json => out.push_str(&format!("{}\n", d.to_json(&name))),
            }
        }
        if format == Format::Text {
            let n = checked.processes.len();
            out.push_str(&format!(
                "{name}: {n} processes, {e} errors, {w} warnings\n"
            ));
        }
    }
    if errors > 0 {
        failed.push(format!("{errors} errors in process files"));
    }
    let result = if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    };
    (out, result)
}

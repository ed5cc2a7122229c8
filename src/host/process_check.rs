//! `agentpump process check FILE…`: read, parse and statically check process files, print
//! every diagnostic (rustc-style, or one JSON object per line for editors), and fail if any
//! is a hard error. `agentpump process run FILE --input k=v …`: run a process on an
//! in-process pump with the organism's tools and print its transcript and RETURN
//! (`process_run.rs`).

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};

use crate::host::HostError;
use crate::host::organism::Organism;
use crate::process::check::Policy;
use crate::process::{Severity, check_source_with};

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
        /// The time policy: warn AG-W02 LaxTime for every USE without `timeout_ms`.
        #[arg(long)]
        require_timeout: bool,
        /// An organism file: a process of the file that is called and shares its id with a
        /// tool (or agent) the organism registers is AG-034 PredefinedToolCollision.
        #[arg(long, value_name = "FILE")]
        organism: Option<PathBuf>,
    },
    /// Run a process on an in-process pump: print its transcript and its RETURN; exit 1 when
    /// it fails.
    Run(super::process_run::RunArgs),
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
pub fn run(command: ProcessCommand) -> (String, Result<(), HostError>) {
    let (files, format, require_timeout, organism) = match command {
        ProcessCommand::Check {
            files,
            format,
            require_timeout,
            organism,
        } => (files, format, require_timeout, organism),
        ProcessCommand::Run(args) => return super::process_run::run(&args),
    };
    let names = match organism.as_deref().map(organism_names).transpose() {
        Ok(names) => names,
        Err(e) => return (String::new(), Err(e)),
    };
    let policy = Policy {
        require_timeout,
        tools: names.iter().flat_map(|n| n.tools.clone()).collect(),
        registered: names.map(|n| n.all),
    };
    let (mut out, mut errors, mut failed) = (String::new(), 0, Vec::new());
    for file in &files {
        match std::fs::read_to_string(file) {
            Ok(text) => {
                let name = file.display().to_string();
                errors += check_file(&name, &text, &policy, format, &mut out);
            }
            Err(e) => failed.push(format!("{}: {e}", file.display())),
        }
    }
    if errors > 0 {
        failed.push(format!("{errors} errors in process files"));
    }
    let result = if failed.is_empty() {
        Ok(())
    } else {
        Err(HostError::Check(failed.join("; ")))
    };
    (out, result)
}

/// Checks one file, appends its diagnostics (and, as text, a summary line) to `out`, and
/// returns its number of hard errors.
fn check_file(name: &str, text: &str, policy: &Policy, format: Format, out: &mut String) -> usize {
    let checked = check_source_with(text, policy);
    let count = |s| {
        checked
            .diagnostics
            .iter()
            .filter(|d| d.severity() == s)
            .count()
    };
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    for d in &checked.diagnostics {
        match format {
            Format::Text => out.push_str(&format!("{}\n", d.render(name, text))),
            Format::Json => out.push_str(&format!("{}\n", d.to_json(name))),
        }
    }
    if format == Format::Text {
        let n = checked.processes.len();
        out.push_str(&format!(
            "{name}: {n} processes, {errors} errors, {warnings} warnings\n"
        ));
    }
    errors
}

/// The names an organism registers.
pub(crate) struct Names {
    /// With a role other than process: its tools and agents (AG-034).
    pub tools: Vec<String>,
    /// Every one (AG-017 for a USE of any other).
    pub all: Vec<String>,
}

/// The names the listeners of an organism file register.
fn organism_names(path: &std::path::Path) -> Result<Names, HostError> {
    let origin = path.display().to_string();
    let organism = Organism::load(path)?;
    // The `[[mcp]]` servers are started to learn their tools, then stopped with the runtime.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    let registrations = runtime.block_on(organism.start_registrations(&origin, &[]))?;
    Ok(Names::of(&registrations))
}

impl Names {
    /// The names of `registrations`.
    pub(crate) fn of(registrations: &[crate::Registration]) -> Self {
        let name = |r: &crate::Registration| r.name().to_owned();
        Self {
            tools: registrations
                .iter()
                .filter(|r| r.listener_role() != crate::Role::Process)
                .map(name)
                .collect(),
            all: registrations.iter().map(name).collect(),
        }
    }
}

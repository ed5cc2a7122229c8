//! The `agentpump` binary: see `agentpump --help`.

fn main() -> std::process::ExitCode {
    agentpump::host::cli::run()
}

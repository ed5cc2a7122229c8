//! The `agentpump` binary: see `agentpump --help`.

/// mimalloc instead of the system allocator: the pump allocates and frees many small
/// envelopes and records across worker threads (`cargo bench --bench allocator`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    agentpump::host::cli::run()
}

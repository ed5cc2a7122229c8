//! `cargo bench --bench users`: figures U1–U4, speed as users run the pump — `#[tokio::main]`'s
//! multi-threaded runtime with the client on the main thread, through the public API — each
//! beside the current-thread figure and the bare baseline of the same run.

mod common;

fn main() {
    let cfg = common::Config::from_env(5);
    let mut report = common::Report::new("users", &cfg);
    common::users::figures(&cfg, &mut report);
    report.finish();
}

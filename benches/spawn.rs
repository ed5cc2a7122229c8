//! `cargo bench --bench spawn`: figure 4 (spawn fan-out to 10 000 children, time to the last
//! `thread-result`, against spawning bare tokio tasks).

mod common;

fn main() {
    let cfg = common::Config::from_env(5);
    let rt = common::runtime();
    let mut report = common::Report::new("spawn", &cfg);
    common::spawn::figures(&cfg, &rt, &mut report, "");
    report.finish();
}

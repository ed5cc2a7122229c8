//! `cargo bench --bench echo`: figure 1 (echo round trip on one thread, against the bare
//! parse-and-channel baseline) and figure 7 (the governor's overhead on the same echo).

mod common;

fn main() {
    let cfg = common::Config::from_env(7);
    let rt = common::runtime();
    let mut report = common::Report::new("echo", &cfg);
    common::echo::figures(&cfg, &rt, &mut report, "");
    report.finish();
}

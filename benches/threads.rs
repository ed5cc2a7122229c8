//! `cargo bench --bench threads`: figure 2 (echo across 10 000 threads concurrently, one-way
//! messages per second, against many bare tasks with a bounded channel each).

mod common;

fn main() {
    let cfg = common::Config::from_env(5);
    let rt = common::runtime();
    let mut report = common::Report::new("threads", &cfg);
    common::threads::figures(&cfg, &rt, &mut report, "");
    report.finish();
}

//! `cargo bench --bench iteration`: figure 3 (self-iteration hop latency at 1, 1 000 and
//! 100 000 iterations on one thread, and the ratio hop(100 000) / hop(1)).

mod common;

fn main() {
    let cfg = common::Config::from_env(5);
    let rt = common::runtime();
    let mut report = common::Report::new("iteration", &cfg);
    common::iteration::figures(&cfg, &rt, &mut report, "");
    report.finish();
}

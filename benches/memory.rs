//! `cargo bench --bench memory`: figure 5 (resident memory per idle thread with 1 000 000
//! threads). Each variant runs in a child process of this binary.

mod common;

fn main() {
    if common::memory::child_if_asked() {
        return;
    }
    let cfg = common::Config::from_env(5);
    let mut report = common::Report::new("memory", &cfg);
    common::memory::figures(&cfg, &mut report, "");
    report.finish();
}

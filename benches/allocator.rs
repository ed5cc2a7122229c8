//! `cargo bench --bench allocator`: figures 1 and 2 again with mimalloc as the global allocator
//! (this binary only; the library and the other benches keep the system allocator), to set side
//! by side with `cargo bench --bench echo` and `--bench threads`. Rows carry the suffix
//! `-mimalloc`. `AGENTPUMP_BENCH_ONLY=1,2,3,4,5` runs other figures too (default `1,2`).

mod common;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    if common::memory::child_if_asked() {
        return;
    }
    let mut cfg = common::Config::from_env(5);
    if cfg.only.is_none() {
        cfg.only = Some(vec!["1".to_owned(), "2".to_owned()]);
    }
    let rt = common::runtime();
    let mut report = common::Report::new("allocator", &cfg);
    let suffix = "-mimalloc";
    common::echo::figures(&cfg, &rt, &mut report, suffix);
    common::threads::figures(&cfg, &rt, &mut report, suffix);
    common::iteration::figures(&cfg, &rt, &mut report, suffix);
    common::spawn::figures(&cfg, &rt, &mut report, suffix);
    common::memory::figures(&cfg, &mut report, suffix);
    report.finish();
}

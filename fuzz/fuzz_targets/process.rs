//! Fuzzes the process language (parse, check, run with stub tools); the invariants are
//! `check_process` in `fuzz/checks.rs`.

#![no_main]

#[allow(dead_code)] // each target uses one of the checks
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_process(data));

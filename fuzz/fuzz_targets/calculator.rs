//! Fuzzes the calculator's expressions; the invariants are `check_calculator` in
//! `fuzz/checks.rs`.

#![no_main]

#[allow(dead_code)] // each target uses one of the checks
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_calculator(data));

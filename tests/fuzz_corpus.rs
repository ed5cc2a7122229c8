//! The checked-in fuzz corpus, replayed through the fuzz targets' own checks on every test run:
//! inputs that once crashed or broke an invariant stay fixed without a fuzzer installed.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

#[path = "../fuzz/checks.rs"]
mod checks;

/// Runs every file of `fuzz/corpus/<target>` through `check`; fails naming each file that
/// panicked, or when the folder is missing or empty.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.expect("a readable corpus entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no inputs", dir.display());
    let failed: Vec<String> = files
        .iter()
        .filter(|path| {
            let data = fs::read(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            panic::catch_unwind(AssertUnwindSafe(|| check(&data))).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} {target} inputs fail their check (messages above):\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
}

/// Envelopes and payloads: schema examples, test fixtures, hostile XML and what the fuzzer kept.
#[test]
fn the_envelope_corpus_passes() {
    replay("envelope", checks::check_envelope);
}

/// Model output: prose with fenced XML, Ask-Loop controls, near-XML prose.
#[test]
fn the_extract_corpus_passes() {
    replay("extract", checks::check_extract);
}

/// Organism files: the shipped ones, docs/organism.md's reference and broken variants.
#[test]
fn the_organism_corpus_passes() {
    replay("organism", checks::check_organism);
}

/// Calculator expressions: arithmetic, hostile nesting (parentheses, `sqrt(`, unary minus far
/// past the limit) and what the fuzzer kept.
#[test]
fn the_calculator_corpus_passes() {
    replay("calculator", checks::check_calculator);
}

/// Process files: the shipped ones, the deep and wide cases of issue 28, what the fuzzer kept.
#[test]
fn the_process_corpus_passes() {
    replay("process", checks::check_process);
}

//! No input makes the front end panic: every prefix of the shipped files, and each of their
//! files with every fifth character replaced by each of a set of troublesome ones, is checked.

use agentpump::process::check_source;

const FILES: [&str; 4] = [
    "tests/fixtures/processes/all_constructs.aps",
    "listeners/processes/newton.aps",
    "listeners/processes/planner.aps",
    "listeners/processes/safety.aps",
];

fn texts() -> Vec<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    FILES
        .iter()
        .map(|f| std::fs::read_to_string(format!("{root}/{f}")).unwrap())
        .collect()
}

#[test]
fn every_prefix_checks_without_panic() {
    for text in texts() {
        for (i, _) in text.char_indices() {
            let checked = check_source(&text[..i]);
            for d in &checked.diagnostics {
                assert!(d.span.line >= 1 && d.span.column >= 1, "{d:?}");
            }
        }
    }
}

#[test]
fn replaced_characters_check_without_panic() {
    let odd = ['"', '`', '<', ':', '(', ']', '{', '\t', 'é', '\\'];
    for text in texts() {
        let chars: Vec<char> = text.chars().collect();
        for i in (0..chars.len()).step_by(5) {
            for c in odd {
                let mut changed = chars.clone();
                changed[i] = c;
                let changed: String = changed.into_iter().collect();
                let _ = check_source(&changed);
            }
        }
    }
}

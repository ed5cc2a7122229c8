//! The README's examples are the files the repository ships: what a new user copies runs.

use std::fs;

/// The `text` block after "This is the whole file" in the README's Processes section.
fn readme_process() -> String {
    let readme = fs::read_to_string("README.md").unwrap();
    let (_, after) = readme
        .split_once("This is the whole file,")
        .expect("the README's Processes section shows a whole process file");
    let (_, block) = after.split_once("```text\n").expect("a text block");
    let (body, _) = block.split_once("```").expect("the block ends");
    body.to_owned()
}

#[test]
fn the_readme_process_is_the_shipped_newton_file() {
    let shipped = fs::read_to_string("listeners/processes/newton.aps").unwrap();
    assert_eq!(readme_process(), shipped);
}

//! The crate's floors: no two top-level modules import each other (issue 14). A module may use
//! the ones below it — `envelope` at the bottom, then `extract`, `governor`, `thread`, `history`,
//! `system`, `listener`, `listeners`, `pump`, `process`, `host` — never one above. This test reads
//! the `crate::` paths of every file under `src/` (names re-exported at the crate root count for
//! the module that defines them) and fails naming any pair that imports both ways.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules: `src/NAME.rs` and `src/NAME/`.
fn modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let module = name.strip_suffix(".rs").unwrap_or(&name).to_owned();
            (!matches!(module.as_str(), "lib" | "main" | "bin")).then_some(module)
        })
        .collect()
}

/// Names `lib.rs` re-exports at the crate root, and the module each comes from.
fn root_names(lib: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(rest) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        if !modules.contains(module) {
            continue;
        }
        for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
            let item = item.trim().rsplit("::").next().unwrap_or("").trim();
            if !item.is_empty() {
                names.insert(item.to_owned(), module.to_owned());
            }
        }
    }
    names
}

/// Every Rust file below `dir` (or `dir` itself).
fn files(path: &Path) -> Vec<std::path::PathBuf> {
    if path.is_file() {
        return vec![path.to_owned()];
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return Vec::new();
    };
    entries.flat_map(|e| files(&e.unwrap().path())).collect()
}

/// The modules `text` refers to through `crate::…`.
fn uses(
    text: &str,
    modules: &BTreeSet<String>,
    root: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let words: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            group[..end].split(',').collect()
        } else {
            vec![rest]
        };
        for word in words {
            let name: String = word
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if modules.contains(&name) {
                out.insert(name);
            } else if let Some(module) = root.get(&name) {
                out.insert(module.clone());
            }
        }
    }
    out
}

#[test]
fn no_two_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    let root = root_names(
        &std::fs::read_to_string(src.join("lib.rs")).unwrap(),
        &modules,
    );
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for module in &modules {
        let mut paths = files(&src.join(format!("{module}.rs")));
        paths.extend(files(&src.join(module)));
        for path in paths {
            // Code only: a doc link names a module without depending on it.
            let text: String = std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            let found = uses(&text, &modules, &root);
            graph
                .entry(module.clone())
                .or_default()
                .extend(found.into_iter().filter(|m| m != module));
        }
    }
    let mut both = Vec::new();
    for (a, targets) in &graph {
        for b in targets {
            if a < b && graph.get(b).is_some_and(|t| t.contains(a)) {
                both.push(format!("{a} <-> {b}"));
            }
        }
    }
    assert!(
        both.is_empty(),
        "modules that import each other: {both:?}\n{graph:#?}"
    );
}

//! The crate's floors and the map that describes them. A module may use the ones below it —
//! `envelope` and `value` at the bottom, `host` at the top — never one above: this test reads
//! the `crate::` paths of every file under `src/` (names re-exported at the crate root count for
//! the module that defines them), fails naming any cycle of imports, of any length, and fails
//! when ARCHITECTURE.md's floors table or the README's Layout table disagrees with the code.
//! It also prints the pump core's shape (the fields of `Shared`, the largest group of `pump/`
//! files that call each other round) and holds it to a ceiling that only goes down.

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

/// The module graph: each top-level module and the modules it imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    let root = root_names(&read(&src.join("lib.rs")), &modules);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for module in &modules {
        let mut paths = files(&src.join(format!("{module}.rs")));
        paths.extend(files(&src.join(module)));
        let entry = graph.entry(module.clone()).or_default();
        for path in paths {
            let found = uses(&code(&path), &modules, &root);
            entry.extend(found.into_iter().filter(|m| m != module));
        }
    }
    graph
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A file's code without its comments: a doc link names a module without depending on it.
fn code(path: &Path) -> String {
    read(path)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The strongly connected groups of a graph with more than one member (Tarjan's algorithm,
/// iterative over the sorted nodes so the answer is stable).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        groups: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                s.groups.push(group);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.groups
}

/// The rows of the first Markdown table after `heading` whose first cell is in backticks:
/// first cell without its backticks and any `src/` / `*` / `.rs` / `/` decoration, then the
/// other cells.
fn table(doc: &str, heading: &str) -> Vec<(String, Vec<String>)> {
    let at = doc
        .find(heading)
        .unwrap_or_else(|| panic!("no heading {heading:?}"));
    let mut rows = Vec::new();
    let mut seen_table = false;
    for line in doc[at..].lines().skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            if seen_table {
                break;
            }
            continue;
        }
        seen_table = true;
        let cells: Vec<String> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_owned())
            .collect();
        let Some(first) = cells[0].strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
            continue;
        };
        let name = first
            .trim_start_matches("src/")
            .trim_end_matches('*')
            .trim_end_matches(".rs")
            .trim_end_matches('/')
            .to_owned();
        rows.push((name, cells[1..].to_vec()));
    }
    rows
}

/// `` `a`, `b` `` or `nothing` → the set of names.
fn names(cell: &str) -> BTreeSet<String> {
    cell.split(',')
        .map(|n| n.trim().trim_matches('`').to_owned())
        .filter(|n| !n.is_empty() && n != "nothing")
        .collect()
}

/// ARCHITECTURE.md, "The floors: which module may import which": no cycle between modules.
#[test]
fn no_modules_import_each_other_round_a_cycle_of_any_length() {
    let graph = graph();
    let groups = cycles(&graph);
    assert!(
        groups.is_empty(),
        "modules that import each other round a cycle: {groups:?}\n{graph:#?}"
    );
}

/// The cycle finder itself: a three-module cycle is found, a chain is not.
#[test]
fn a_cycle_of_three_is_found_and_a_chain_is_not() {
    let edges = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry((*a).into()).or_default().insert((*b).into());
            g.entry((*b).into()).or_default();
        }
        g
    };
    let ring = edges(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]);
    assert_eq!(
        cycles(&ring),
        vec![["a", "b", "c"].iter().map(|s| s.to_string()).collect()]
    );
    assert!(cycles(&edges(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
}

/// ARCHITECTURE.md's floors table names, for every module, exactly the modules it imports.
#[test]
fn the_architecture_floors_table_is_the_code() {
    let graph = graph();
    let doc = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"));
    let rows: BTreeMap<String, BTreeSet<String>> = table(&doc, "## Floors")
        .into_iter()
        .map(|(name, cells)| (name, names(&cells[0])))
        .collect();
    let mut wrong = Vec::new();
    for (module, imports) in &graph {
        match rows.get(module) {
            None => wrong.push(format!("{module}: no row (imports {imports:?})")),
            Some(said) if said != imports => wrong.push(format!(
                "{module}: the table says {said:?}, the code imports {imports:?}"
            )),
            Some(_) => {}
        }
    }
    for module in rows.keys().filter(|m| !graph.contains_key(*m)) {
        wrong.push(format!("{module}: a row for a module that does not exist"));
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's floors table is stale:\n{}",
        wrong.join("\n")
    );
}

/// The README's Layout table has a row for every top-level module and none for a module
/// that does not exist.
#[test]
fn the_readme_layout_has_a_row_for_every_module() {
    let graph = graph();
    let readme = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
    let rows: BTreeSet<String> = table(&readme, "## Layout")
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| !name.contains('/') && !name.is_empty())
        .collect();
    let dirs = [
        "listeners",
        "schemas",
        "docs",
        "tests",
        "benches",
        "examples",
        "fuzz",
    ];
    let missing: Vec<_> = graph.keys().filter(|m| !rows.contains(*m)).collect();
    let extra: Vec<_> = rows
        .iter()
        .filter(|r| !graph.contains_key(*r) && !dirs.contains(&r.as_str()))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README Layout: no row for {missing:?}; rows for no module: {extra:?}"
    );
}

/// The number of fields of `struct Shared` in `src/pump.rs`.
fn shared_fields() -> usize {
    let pump = code(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pump.rs"));
    let start = pump
        .find("struct Shared {")
        .expect("struct Shared in src/pump.rs");
    let body = &pump[start..];
    let body = &body[..body.find("\n}").unwrap()];
    body.lines()
        .skip(1)
        .filter(|l| {
            let l = l.trim();
            l.split_once(':').is_some_and(|(name, _)| {
                name.trim_start_matches("pub ")
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_')
            }) && !l.starts_with('#')
        })
        .count()
}

/// The files of `src/pump/` (and `src/pump.rs`) and which of them call a function defined in
/// another: a call is `.name(` or `::name(` of a function defined in exactly one file of the
/// crate, so method names std also uses do not count.
fn pump_calls() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut defined: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let all = files(&root);
    for path in &all {
        let text = code(path);
        let file = path.strip_prefix(&root).unwrap().display().to_string();
        for (at, _) in text.match_indices("fn ") {
            let before = text[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let name: String = text[at + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                defined.entry(name).or_default().insert(file.clone());
            }
        }
    }
    let pump: Vec<_> = all
        .iter()
        .filter(|p| {
            let f = p.strip_prefix(&root).unwrap().display().to_string();
            f == "pump.rs" || f.starts_with("pump/")
        })
        .collect();
    let names: BTreeSet<String> = pump
        .iter()
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    let mut calls: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in pump {
        let file = path.strip_prefix(&root).unwrap().display().to_string();
        let text = code(path);
        let entry = calls.entry(file.clone()).or_default();
        for (name, homes) in &defined {
            let [home] = homes.iter().collect::<Vec<_>>()[..] else {
                continue;
            };
            if *home == file || !names.contains(home) {
                continue;
            }
            if text.contains(&format!(".{name}(")) || text.contains(&format!("::{name}(")) {
                entry.insert(home.clone());
            }
        }
    }
    calls
}

/// The pump core's shape, printed, and held to ceilings that only go down: `Shared`'s fields,
/// and the largest group of `pump/` files that call each other round (a reader following the
/// calls leaves and re-enters each file of such a group).
#[test]
fn the_pump_core_stays_within_its_ceilings() {
    const SHARED_FIELDS: usize = 12;
    const LARGEST_GROUP: usize = 3;
    let fields = shared_fields();
    let calls = pump_calls();
    let groups = cycles(&calls);
    let largest = groups.iter().map(BTreeSet::len).max().unwrap_or(1);
    println!("Shared fields: {fields} (ceiling {SHARED_FIELDS}, target 12)");
    println!(
        "largest group of pump files calling each other round: {largest} (ceiling {LARGEST_GROUP}, target 3)"
    );
    for group in &groups {
        println!("  group: {group:?}");
        for file in group {
            let inside: Vec<_> = calls[file].intersection(group).collect();
            println!("    {file} calls {inside:?}");
        }
    }
    assert!(
        fields <= SHARED_FIELDS,
        "Shared has {fields} fields, over its ceiling {SHARED_FIELDS}"
    );
    assert!(
        largest <= LARGEST_GROUP,
        "a group of {largest} pump files call each other round: {groups:?}"
    );
}

/// Every `tests/FILE.rs::name` ARCHITECTURE.md cites as holding an invariant exists.
#[test]
fn every_test_the_architecture_cites_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = read(&root.join("ARCHITECTURE.md"));
    let mut missing = Vec::new();
    let mut cited = 0;
    for (at, _) in doc.match_indices("tests/") {
        let rest = &doc[at..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || "_/.:".contains(c)))
            .unwrap_or(rest.len());
        let Some((file, name)) = rest[..end].split_once(".rs::") else {
            continue;
        };
        cited += 1;
        let text = std::fs::read_to_string(root.join(format!("{file}.rs"))).unwrap_or_default();
        if !text.contains(&format!("fn {name}(")) {
            missing.push(format!("{file}.rs::{name}"));
        }
    }
    assert!(
        cited >= 10,
        "only {cited} tests cited: is the invariants section there?"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md cites tests that do not exist: {missing:?}"
    );
}

/// docs/decisions/README.md lists every decision record, and every record has the three parts.
#[test]
fn every_decision_record_is_listed_and_complete() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/decisions");
    let index = read(&dir.join("README.md"));
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name == "README.md" || !name.ends_with(".md") {
            continue;
        }
        if !index.contains(&format!("({name})")) {
            wrong.push(format!("{name}: not listed in README.md"));
        }
        let text = read(&dir.join(&name));
        for part in ["## Context", "## Decision", "## Consequences"] {
            if !text.contains(part) {
                wrong.push(format!("{name}: no {part}"));
            }
        }
    }
    assert!(wrong.is_empty(), "decision records: {wrong:#?}");
}

/// Every inherent `impl` of a type sits in the file that defines it or in that file's own
/// submodules (`apply.rs` → `apply/…`), so a reader finds a type's methods beside it. The
/// pump's `Shared` and `PumpHandle` are split by step on purpose (see
/// docs/decisions/2026-11-26-layering.md); `Goal`'s wire form and its rules are in two files of
/// the governor; the process checker's `Walker` and the section `Reader` are one pass each,
/// split by concern over the files of their directory.
#[test]
fn every_impl_sits_beside_its_type() {
    const SPLIT_ON_PURPOSE: [&str; 5] = ["Shared", "PumpHandle", "Goal", "Walker", "Reader"];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all = files(&src);
    let rel = |p: &Path| p.strip_prefix(&src).unwrap().display().to_string();
    let mut defined: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &all {
        for line in code(path).lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let Some(at) = words.iter().position(|w| *w == "struct" || *w == "enum")
                && let Some(name) = words.get(at + 1)
            {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                    defined.entry(name).or_default().insert(rel(path));
                }
            }
        }
    }
    let mut astray = Vec::new();
    for path in &all {
        for line in code(path).lines().filter(|l| l.starts_with("impl")) {
            if line.contains(" for ") {
                continue;
            }
            let rest = line.trim_start_matches("impl");
            let rest = if rest.starts_with('<') {
                &rest[rest.find('>').map_or(0, |i| i + 1)..]
            } else {
                rest
            };
            let name: String = rest
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let Some(homes) = defined.get(&name).filter(|h| h.len() == 1) else {
                continue;
            };
            let home = homes.iter().next().unwrap();
            let here = rel(path);
            let own_dir = home.trim_end_matches(".rs").to_owned() + "/";
            if here != *home
                && !here.starts_with(&own_dir)
                && !SPLIT_ON_PURPOSE.contains(&name.as_str())
            {
                astray.push(format!("impl {name} in {here}, defined in {home}"));
            }
        }
    }
    assert!(
        astray.is_empty(),
        "impls away from their types: {astray:#?}"
    );
}

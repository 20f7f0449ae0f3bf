//! The module map in ARCHITECTURE.md, checked: the harness's top-level
//! modules, and those of every crate under `crates/`, depend on each other in
//! one direction only (no import circle), nothing in the harness that measures
//! or runs depends on an exporter, and `service` builds on `telemetry`, never
//! the reverse. Edges are read from `crate::<module>` paths (grouped imports
//! and the crate root's re-exports resolved to the module that defines the
//! item) in each module's code outside its tests and comments.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// A source file's code: before its tests, without comment lines.
fn code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let before_tests = text.split("#[cfg(test)]").next().unwrap_or("");
    before_tests.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn ident(text: &str) -> String {
    text.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
}

/// The first segment of every path a `crate::` names: `crate::a::X` gives
/// `a`, `crate::{a::X, b}` gives `a` and `b`.
fn named_after(prefix: &str, code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for part in code.split(prefix).skip(1) {
        match part.strip_prefix('{') {
            Some(group) => {
                let (mut depth, mut end) = (0, group.len());
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            end = i;
                            break;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                let (mut depth, mut start) = (0, 0);
                let group = &group[..end];
                for (i, c) in group.char_indices().chain([(group.len(), ',')]) {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            names.push(ident(&group[start..i]));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            None => names.push(ident(part)),
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// Item → the top-level module it comes from, for the crate root's
/// `pub use module::…` re-exports.
fn reexports(src: &Path, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut items = BTreeMap::new();
    let Ok(root) = std::fs::read_to_string(src.join("lib.rs")) else { return items };
    for stmt in root.split("pub use ").skip(1) {
        let stmt = stmt.split(';').next().unwrap_or("");
        let module = ident(stmt);
        if !modules.contains(&module) {
            continue;
        }
        let rest = &stmt[module.len()..];
        for word in rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()) {
            items.insert(word.to_owned(), module.clone());
        }
    }
    items
}

/// Top-level module → the top-level modules its code names, for the crate
/// whose sources are under `src`.
fn edges(src: &Path) -> Graph {
    let mut files = Vec::new();
    common::sources(src, &mut files);
    let top = |file: &Path| {
        let rel = file.strip_prefix(src).unwrap();
        rel.iter().next().unwrap().to_string_lossy().trim_end_matches(".rs").to_owned()
    };
    let modules: BTreeSet<String> = files.iter().map(|f| top(f)).filter(|m| m != "lib" && m != "main").collect();
    let items = reexports(src, &modules);
    let mut graph = Graph::new();
    for file in &files {
        let module = top(file);
        if !modules.contains(&module) {
            continue;
        }
        let code = code(file);
        let mut names = named_after("crate::", &code);
        // In a file directly under src/, `super::` outside its tests is the
        // crate root.
        if file.parent() == Some(src) {
            names.extend(named_after("super::", &code));
        }
        let deps = graph.entry(module.clone()).or_default();
        for name in names {
            let target = if modules.contains(&name) { Some(&name) } else { items.get(&name) };
            if let Some(target) = target.filter(|t| **t != module) {
                deps.insert(target.clone());
            }
        }
    }
    graph
}

fn harness_edges() -> Graph {
    edges(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// Every crate under `crates/` with its module graph.
fn crate_edges() -> BTreeMap<String, Graph> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("src").is_dir() {
            all.insert(dir.file_name().unwrap().to_string_lossy().into_owned(), edges(&dir.join("src")));
        }
    }
    all
}

fn circles(graph: &Graph) -> Vec<(String, String)> {
    graph
        .iter()
        .flat_map(|(m, deps)| deps.iter().map(move |d| (m.clone(), d.clone())))
        .filter(|(m, d)| reaches(graph, d, m))
        .collect()
}

fn reaches(graph: &Graph, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_owned()];
    while let Some(m) = stack.pop() {
        for next in graph.get(&m).into_iter().flatten() {
            if next == to {
                return true;
            }
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    false
}

#[test]
fn the_harness_modules_form_no_circle() {
    let graph = harness_edges();
    assert!(graph.len() >= 8, "{graph:?}");
    let circles = circles(&graph);
    assert!(circles.is_empty(), "import circles between harness modules: {circles:?}\n{graph:#?}");
}

#[test]
fn the_modules_of_every_crate_form_no_circle() {
    let all = crate_edges();
    for name in ["caller", "downstream", "service", "telemetry", "payload"] {
        assert!(all.contains_key(name), "crates/{name} not found: {:?}", all.keys());
    }
    // The reader sees edges at all: the clients name the trait they implement.
    assert!(all["caller"]["grpc"].contains("outbound"), "{:#?}", all["caller"]);
    for (name, graph) in &all {
        let circles = circles(graph);
        assert!(circles.is_empty(), "import circles between modules of crates/{name}: {circles:?}\n{graph:#?}");
    }
}

#[test]
fn service_builds_on_telemetry_never_the_reverse() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let manifest = |name: &str| std::fs::read_to_string(crates.join(name).join("Cargo.toml")).unwrap();
    let depends = |manifest: &str, on: &str| {
        manifest
            .lines()
            .any(|l| l.trim_start().starts_with(&format!("{on}.")) || l.trim_start().starts_with(&format!("{on} =")))
    };
    assert!(depends(&manifest("service"), "telemetry"));
    assert!(!depends(&manifest("telemetry"), "service"), "telemetry must not depend on service");
}

#[test]
fn nothing_that_measures_or_runs_depends_on_an_exporter() {
    let graph = harness_edges();
    for stage in ["config", "tiers", "load", "measure", "judge", "run", "result"] {
        assert!(!reaches(&graph, stage, "export"), "{stage} reaches export: {graph:#?}");
    }
    assert!(graph["config"].is_empty(), "config depends on nothing: {:?}", graph["config"]);
}

//! The module map in ARCHITECTURE.md, checked: the harness's top-level
//! modules depend on each other in one direction only (no import circle), and
//! nothing that measures or runs depends on an exporter. Edges are read from
//! `crate::<module>` paths in each module's source outside its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Top-level module → the top-level modules its code names.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel.iter().next().unwrap().to_string_lossy().trim_end_matches(".rs").to_owned();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let deps = graph.entry(top.clone()).or_default();
        for part in code.split("crate::").skip(1) {
            let name: String = part.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() && name != top {
                deps.insert(name);
            }
        }
    }
    graph
}

fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
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
    let graph = edges();
    assert!(graph.len() >= 8, "{graph:?}");
    let circles: Vec<(String, String)> = graph
        .iter()
        .flat_map(|(m, deps)| deps.iter().map(move |d| (m.clone(), d.clone())))
        .filter(|(m, d)| reaches(&graph, d, m))
        .collect();
    assert!(circles.is_empty(), "import circles between harness modules: {circles:?}\n{graph:#?}");
}

#[test]
fn nothing_that_measures_or_runs_depends_on_an_exporter() {
    let graph = edges();
    for stage in ["config", "tiers", "load", "measure", "judge", "run", "result"] {
        assert!(!reaches(&graph, stage, "export"), "{stage} reaches export: {graph:#?}");
    }
    assert!(graph["config"].is_empty(), "config depends on nothing: {:?}", graph["config"]);
}

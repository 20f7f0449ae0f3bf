//! The module map in ARCHITECTURE.md, checked: the harness's top-level
//! modules, and those of every crate under `crates/`, depend on each other in
//! one direction only (no import circle), and so do the files of every folder
//! below them (`export/markdown.rs` and `export/generators.rs` may not name
//! each other); nothing in the harness that measures or runs depends on an
//! exporter, and `service` builds on `telemetry`, never the reverse.
//!
//! Edges are read from the `crate::`, `super::` and `self::` paths in each
//! file's code outside its tests and comments: grouped imports are expanded,
//! each path is resolved from the file's own module (`super::` in
//! `export/markdown.rs` is `export`, in `export/mod.rs` the crate root), and
//! an item a module re-exports (`pub use …`, as `lib.rs` and `mod.rs` do) is
//! followed to the module that defines it. A folder's nodes are its files and
//! sub-folders; its `mod.rs` is their parent, not one of them, as `lib.rs` is
//! for the top-level modules. `main.rs` and `src/bin/` are crates of their
//! own and not read.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// A module's path from its crate's root: `src/export/markdown.rs` is
/// `["export", "markdown"]`, `src/export/mod.rs` is `["export"]`, `src/lib.rs`
/// is `[]`.
type ModulePath = Vec<String>;

/// A source file's code: before its tests, without comment lines.
fn code(text: &str) -> String {
    let before_tests = text.split("#[cfg(test)]").next().unwrap_or("");
    before_tests.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn skip_space(s: &[u8], mut i: usize) -> usize {
    while s.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// A path as written, and the name it is brought in as (`use a::B as C`).
type Written = (Vec<String>, Option<String>);

/// The paths of the use-tree (or plain path) that starts at `s[i..]`, each
/// after `prefix`: `a::{b, c::{D, E as F}, self}` gives `a::b`, `a::c::D`,
/// `a::c::E` (as `F`) and `a::self`; a glob ends in `*`. Returns where the
/// tree ends.
fn tree(s: &[u8], i: usize, prefix: Vec<String>, out: &mut Vec<Written>) -> usize {
    let (mut path, mut i) = (prefix, skip_space(s, i));
    loop {
        match s.get(i) {
            Some(b'{') => return group(s, i + 1, &path, out),
            Some(b'*') => {
                path.push("*".to_owned());
                out.push((path, None));
                return i + 1;
            }
            _ => {}
        }
        let start = i;
        while s.get(i).copied().is_some_and(is_ident) {
            i += 1;
        }
        if i == start {
            return i;
        }
        path.push(String::from_utf8_lossy(&s[start..i]).into_owned());
        let after = skip_space(s, i);
        if s[after..].starts_with(b"::") {
            i = skip_space(s, after + 2);
            continue;
        }
        let alias = s[after..].strip_prefix(b"as").filter(|r| r.first().is_some_and(u8::is_ascii_whitespace));
        if let Some(rest) = alias {
            let start = skip_space(s, after + 2);
            let len = rest.iter().skip(start - after - 2).take_while(|b| is_ident(**b)).count();
            out.push((path, Some(String::from_utf8_lossy(&s[start..start + len]).into_owned())));
            return start + len;
        }
        out.push((path, None));
        return i;
    }
}

/// The trees of a `{…}` group whose body starts at `s[i..]`; returns where
/// the group ends.
fn group(s: &[u8], mut i: usize, prefix: &[String], out: &mut Vec<Written>) -> usize {
    loop {
        i = skip_space(s, i);
        match s.get(i) {
            None => return i,
            Some(b'}') => return i + 1,
            Some(b',') => i += 1,
            Some(_) => {
                let end = tree(s, i, prefix.to_vec(), out);
                // Something no tree starts with: step over it.
                i = if end == i { i + 1 } else { end };
            }
        }
    }
}

/// `path` written in `module`, from the crate root: `crate::` starts at the
/// root, `super::` at the parent, `self::` (and, with `bare`, a first
/// segment that is none of these) at `module` itself. `None` for a path that
/// starts elsewhere (another crate).
fn absolute(module: &[String], path: &[String], bare: bool) -> Option<ModulePath> {
    let mut base = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "super" | "self" => module.to_vec(),
        _ if bare => module.to_vec(),
        _ => return None,
    };
    let mut rest = path.strip_prefix(&["crate".to_owned()]).unwrap_or(path);
    while let Some(first) = rest.first().filter(|s| *s == "super" || *s == "self") {
        if first == "super" {
            base.pop();
        }
        rest = &rest[1..];
    }
    // `a::{self, B}` names `a`; `a::*` names what is in `a`.
    base.extend(rest.iter().filter(|s| *s != "self" && *s != "*").cloned());
    Some(base)
}

/// Every path the code of `module` names from `crate::`, `super::` or
/// `self::`, from the crate root.
fn named(module: &[String], code: &str) -> Vec<ModulePath> {
    let s = code.as_bytes();
    let (mut paths, mut i) = (Vec::new(), 0);
    while i < s.len() {
        let starts = ["crate::", "super::", "self::"].iter().any(|k| s[i..].starts_with(k.as_bytes()));
        let boundary = i == 0 || !(is_ident(s[i - 1]) || s[i - 1] == b':' || s[i - 1] == b'$');
        if !(starts && boundary) {
            i += 1;
            continue;
        }
        let mut written = Vec::new();
        i = tree(s, i, Vec::new(), &mut written);
        paths.extend(written.iter().filter_map(|(p, _)| absolute(module, p, false)));
    }
    paths
}

/// Name → the path it stands for, for every `pub use` in the code of
/// `module` (a first segment that is not `crate`, `super` or `self` is
/// `module`'s own: a child, or another crate, which no module path matches).
fn reexports(module: &[String], code: &str) -> BTreeMap<String, ModulePath> {
    let mut items = BTreeMap::new();
    for stmt in code.split("pub use ").skip(1).chain(code.split("pub(crate) use ").skip(1)) {
        let mut written = Vec::new();
        tree(stmt.as_bytes(), 0, Vec::new(), &mut written);
        for (path, alias) in written.into_iter().filter(|(p, _)| p.last().is_some_and(|l| l != "*")) {
            let name = alias.unwrap_or_else(|| path.last().unwrap().clone());
            let Some(target) = absolute(module, &path, true) else { continue };
            // `pub use child;` names the child itself: nothing to follow.
            let the_child = target.split_last().is_some_and(|(last, parent)| *last == name && parent == module);
            if !the_child && !target.is_empty() {
                items.insert(name, target);
            }
        }
    }
    items
}

/// `path` with every re-exported item on it replaced by the path it stands
/// for, until it names where the item is defined.
fn canonical(mut path: ModulePath, exports: &BTreeMap<ModulePath, BTreeMap<String, ModulePath>>) -> ModulePath {
    // Bounded: re-exports that point at each other would loop for ever.
    for _ in 0..8 {
        let reexported = (0..path.len()).find_map(|k| Some((k, exports.get(&path[..k])?.get(&path[k])?)));
        let Some((k, target)) = reexported else { break };
        path = target.iter().chain(&path[k + 1..]).cloned().collect();
    }
    path
}

/// Folder → its nodes (files and sub-folders) and what each names of the
/// others, for one crate's modules given as (module path, code).
fn folder_graphs(modules: &[(ModulePath, String)]) -> BTreeMap<ModulePath, Graph> {
    let exports: BTreeMap<ModulePath, BTreeMap<String, ModulePath>> =
        modules.iter().map(|(m, code)| (m.clone(), reexports(m, code))).collect();
    let mut graphs: BTreeMap<ModulePath, Graph> = BTreeMap::new();
    for (module, _) in modules {
        for k in 0..module.len() {
            graphs.entry(module[..k].to_vec()).or_default().entry(module[k].clone()).or_default();
        }
    }
    for (module, code) in modules {
        for path in named(module, code).into_iter().map(|p| canonical(p, &exports)) {
            // In the deepest folder that holds both, the file's node names
            // the path's (if the path goes below that folder's own items).
            let shared = module.iter().zip(&path).take_while(|(a, b)| a == b).count();
            if shared < module.len() && shared < path.len() {
                let graph = graphs.get_mut(&module[..shared]).unwrap();
                if graph.contains_key(&path[shared]) {
                    graph.get_mut(&module[shared]).unwrap().insert(path[shared].clone());
                }
            }
        }
    }
    graphs
}

/// The crate under `src`: every module of its library with its code.
fn modules(src: &Path) -> Vec<(ModulePath, String)> {
    let mut files = Vec::new();
    common::sources(src, &mut files);
    let mut modules = Vec::new();
    for file in files {
        let rel: Vec<String> =
            file.strip_prefix(src).unwrap().iter().map(|s| s.to_string_lossy().into_owned()).collect();
        if rel == ["main.rs"] || rel[0] == "bin" {
            continue;
        }
        let mut module = rel;
        let stem = module.pop().unwrap().trim_end_matches(".rs").to_owned();
        if stem != "mod" && stem != "lib" {
            module.push(stem);
        }
        modules.push((module, code(&std::fs::read_to_string(&file).unwrap())));
    }
    modules
}

/// `harness/src` and each `crates/*/src`, as named in messages, with its
/// folders' graphs.
fn every_crate() -> BTreeMap<String, BTreeMap<ModulePath, Graph>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut all = BTreeMap::new();
    all.insert("harness/src/".to_owned(), folder_graphs(&modules(&root.join("harness/src"))));
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("src").is_dir() {
            let name = format!("crates/{}/src/", dir.file_name().unwrap().to_string_lossy());
            all.insert(name, folder_graphs(&modules(&dir.join("src"))));
        }
    }
    all
}

fn harness_edges() -> Graph {
    folder_graphs(&modules(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))).remove(&ModulePath::new()).unwrap()
}

/// Every crate under `crates/` with its module graph.
fn crate_edges() -> BTreeMap<String, Graph> {
    every_crate()
        .into_iter()
        .filter_map(|(name, mut graphs)| {
            let name = name.strip_prefix("crates/")?.strip_suffix("/src/")?.to_owned();
            Some((name, graphs.remove(&ModulePath::new()).unwrap_or_default()))
        })
        .collect()
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

fn strings(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| t.to_string()).collect()
}

#[test]
fn the_reader_resolves_super_crate_self_groups_and_reexports() {
    let module = strings(&["export", "markdown"]);
    let text = [
        "use super::{generators::x, setup::{self, Y as Z}};",
        "use crate::export::replicas::*;",
        "fn f() { self::inner::g(); super::super::judge::h(); crate::export::link::section(); }",
        "    // super::comment::ignored",
        "#[cfg(test)]",
        "use super::tests_only::x;",
    ]
    .join("\n");
    let paths = named(&module, &code(&text));
    let expected: Vec<ModulePath> = [
        &["export", "generators", "x"][..],
        &["export", "setup"],
        &["export", "setup", "Y"],
        &["export", "replicas"],
        &["export", "markdown", "inner", "g"],
        &["judge", "h"],
        &["export", "link", "section"],
    ]
    .iter()
    .map(|p| strings(p))
    .collect();
    assert_eq!(paths, expected);
    let root = reexports(&strings(&["export"]), "pub use files::{read_runs, write_run as write};\npub use x::*;\n");
    assert_eq!(root["write"], strings(&["export", "files", "write_run"]));
    assert_eq!(root["read_runs"], strings(&["export", "files", "read_runs"]));
    assert_eq!(root.len(), 2, "{root:?}");
}

/// (module path, code) of a synthetic module: `"export/markdown"`.
fn module(path: &str, text: &str) -> (ModulePath, String) {
    (path.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect(), code(text))
}

#[test]
fn a_folder_whose_files_name_one_way_has_no_circle() {
    let modules = [
        module("", "pub mod export;\npub mod judge;\n"),
        // The parent: its own items and its children are not a node.
        module("export", "pub mod generators;\npub use generators::section;\nfn arm_names() { markdown::num(); }\n"),
        module("export/numbers", "pub fn num() {}\n"),
        // `super::section` is the generators' (re-exported by the parent).
        module("export/markdown", "use super::{arm_names, numbers::num};\nfn f() { super::section(); }\n"),
        module("export/generators", "use crate::export::numbers::num;\nuse super::super::judge::x;\n"),
        module("export/deep", "use super::markdown::num;\n"),
        module("export/deep/inner", "use super::super::generators::section;\n"),
        module("judge", "pub fn x() {}\n"),
    ];
    let graphs = folder_graphs(&modules);
    let export = &graphs[&strings(&["export"])];
    let set = |names: &[&str]| strings(names).into_iter().collect::<BTreeSet<_>>();
    assert_eq!(export["markdown"], set(&["generators", "numbers"]));
    assert_eq!(export["generators"], set(&["numbers"]));
    assert_eq!(export["deep"], set(&["generators", "markdown"]));
    assert!(circles(export).is_empty(), "{export:?}");
    assert_eq!(graphs[&ModulePath::new()]["export"], set(&["judge"]));
}

#[test]
fn two_files_of_one_folder_that_name_each_other_are_a_circle() {
    for (markdown, generators) in [
        ("use super::generators::x;\n", "use super::markdown::num;\n"),
        ("fn f() { crate::export::generators::x(); }\n", "use crate::export::markdown::num;\n"),
        ("use super::{numbers::num, generators::{self, X}};\n", "use self::super::markdown::num;\n"),
        ("fn f() { super::section(); }\n", "use super::{numbers, markdown::{self, num as n}};\n"),
    ] {
        let modules = [
            module("export", "pub mod generators;\npub use generators::section;\n"),
            module("export/numbers", "pub fn num() {}\n"),
            module("export/markdown", markdown),
            module("export/generators", generators),
        ];
        let graphs = folder_graphs(&modules);
        let export = &graphs[&strings(&["export"])];
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        let expected = [pair("generators", "markdown"), pair("markdown", "generators")];
        assert_eq!(circles(export), expected, "{markdown}{generators}{export:?}");
        assert!(circles(&graphs[&ModulePath::new()]).is_empty(), "a folder is not a circle of its crate");
    }
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
fn no_two_files_of_one_folder_form_a_circle() {
    let all = every_crate();
    let folder = |krate: &str, path: &[&str]| all[krate].get(&strings(path)).cloned().unwrap_or_default();
    // The reader sees edges inside folders: the comparison names its findings.
    assert!(folder("harness/src/", &["export"])["comparison"].contains("findings"), "{:#?}", all["harness/src/"]);
    let mut found = Vec::new();
    for (krate, graphs) in &all {
        for (path, graph) in graphs {
            let name = format!("{krate}{}", path.iter().map(|p| format!("{p}/")).collect::<String>());
            found.extend(circles(graph).into_iter().map(|(a, b)| format!("{name}: {a} → {b}")));
        }
    }
    assert!(
        found.is_empty(),
        "import circles between files of one folder (a → b: a names b, and b reaches a): {found:#?}"
    );
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

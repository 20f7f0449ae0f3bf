//! Sizes a newcomer can read: no file under `src/config/` over 450 lines
//! (one subject per file) nor under `src/tiers/` over 350, and no function
//! in any Rust file of the workspace (the harness and every crate under
//! `crates/`: sources and binaries, tests, benches, examples, build
//! scripts) over 80 lines. A function is measured
//! from its `fn` line to the first line after it that closes at the same
//! indentation, as rustfmt lays code out.

use crate::common;

use std::path::{Path, PathBuf};

const MAX_CONFIG_FILE_LINES: usize = 450;
const MAX_FUNCTION_LINES: usize = 80;

/// The indentation of a line that starts a function with a body, if it does.
fn function_start(line: &str) -> Option<&str> {
    let code = line.trim_start();
    let indent = &line[..line.len() - code.len()];
    let mut rest = code;
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let named = rest.strip_prefix("fn ")?.starts_with(|c: char| c.is_alphabetic() || c == '_');
    (named && !code.ends_with(';')).then_some(indent)
}

/// (first line, length) of every function in `text` longer than `max`.
fn long_functions(text: &str, max: usize) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(indent) = function_start(line) else { continue };
        let close = format!("{indent}}}");
        if let Some(end) = lines[i..].iter().position(|l| *l == close)
            && end + 1 > max
        {
            long.push((i + 1, end + 1));
        }
    }
    long
}

#[test]
fn the_measure_finds_a_long_function_and_passes_a_short_one() {
    let body = "    x();\n".repeat(MAX_FUNCTION_LINES);
    let long =
        format!("fn a() {{\n{body}}}\n\nimpl T {{\n    pub(crate) async fn b(\n        x: u8,\n    ) {{\n    }}\n}}\n");
    assert_eq!(long_functions(&long, MAX_FUNCTION_LINES), [(1, MAX_FUNCTION_LINES + 2)]);
    assert_eq!(long_functions(&long, 3), [(1, MAX_FUNCTION_LINES + 2), (MAX_FUNCTION_LINES + 5, 4)]);
    assert_eq!(long_functions("trait T {\n    fn f(&self);\n}\n", 0), []);
}

/// Every Rust file of the workspace's packages: the harness and each crate
/// under `crates/`, their `src/` (with `src/bin/`), `tests/`, `benches/`,
/// `examples/` and build script.
fn workspace_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut packages = vec![root.join("harness")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        packages.push(entry.unwrap().path());
    }
    let mut files = Vec::new();
    for package in packages.iter().filter(|p| p.join("Cargo.toml").is_file()) {
        for dir in ["src", "tests", "benches", "examples"] {
            common::sources(&package.join(dir), &mut files);
        }
        files.extend(Some(package.join("build.rs")).filter(|f| f.is_file()));
    }
    files
}

#[test]
fn no_function_in_the_workspace_is_over_80_lines() {
    let files = workspace_sources();
    assert!(files.len() > 150, "{files:?}");
    for seen in ["harness/tests/sizes.rs", "crates/downstream/src/server.rs", "crates/caller/src/bin/plain-caller.rs"] {
        assert!(files.iter().any(|f| f.ends_with(seen)), "{seen} not among {files:?}");
    }
    let long: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            long_functions(&text, MAX_FUNCTION_LINES)
                .into_iter()
                .map(move |(line, len)| format!("{}:{line} ({len} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "functions over {MAX_FUNCTION_LINES} lines: {long:#?}");
}

/// Folders whose files stay short, and how short: one subject per file
/// under `config/`, one node kind or launcher per file under `tiers/`.
const MAX_FOLDER_FILE_LINES: [(&str, usize); 2] = [("src/config", MAX_CONFIG_FILE_LINES), ("src/tiers", 350)];

#[test]
fn no_file_under_config_or_tiers_is_over_its_bound() {
    let mut long = Vec::new();
    for (folder, max) in MAX_FOLDER_FILE_LINES {
        let mut files = Vec::new();
        common::sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join(folder), &mut files);
        assert!(files.len() >= 8, "{folder}: {files:?}");
        long.extend(
            files
                .iter()
                .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
                .filter(|(_, n)| *n > max)
                .map(|(f, n)| format!("{} ({n} lines, at most {max})", f.display())),
        );
    }
    assert!(long.is_empty(), "files over their folder's bound: {long:?}");
}

/// Every `file.rs` or `folder/` a code-map row names, found under the row's
/// folder (or the workspace root).
fn named_paths(cell: &str) -> Vec<&str> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| !t.contains(' ') && (t.ends_with(".rs") || t.ends_with(".md") || t.ends_with('/')))
        .collect()
}

fn found_under(dir: &Path, name: &str) -> bool {
    let name = name.trim_end_matches('/');
    if dir.join(name).exists() {
        return true;
    }
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| e.path().is_dir() && found_under(&e.path(), name))
}

#[test]
fn the_code_map_is_a_map_with_short_true_cells() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let map = &text[text.find("## Code map").unwrap()..text.find("## Invariants").unwrap()];
    let rows: Vec<Vec<&str>> = map
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    assert!(rows.len() >= 18, "{rows:?}");
    let mut problems = Vec::new();
    for row in &rows {
        let folder = row[0].trim_matches('`');
        let base = if root.join(folder).exists() { root.join(folder) } else { root.join("harness/src").join(folder) };
        assert!(base.exists(), "the code map names {folder}, which does not exist");
        for cell in &row[1..] {
            let words = cell.split_whitespace().count();
            if words > 60 {
                problems.push(format!("{folder}: a cell of {words} words"));
            }
            for name in named_paths(cell) {
                if !found_under(&base, name) && !root.join(name).exists() {
                    problems.push(format!("{folder}: names `{name}`, not found"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

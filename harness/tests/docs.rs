//! The manual is checked the way a reader uses it: every link in README.md
//! and the guide under `docs/` leads to a file that is there (and a
//! `#heading` to a heading in it), and every harness command shown in a
//! `sh` block parses with the harness's own flags and, for a run, passes
//! the checks a run makes before any load. A flag renamed or removed fails
//! here, not in a reader's terminal.

use std::path::{Path, PathBuf};

use clap::Parser;
use harness::app::Cli;
use harness::config::Plan;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// README.md and every page of the guide.
fn manual() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped,
/// spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines outside fenced code blocks, and the blocks' lines by language.
fn split(text: &str) -> (Vec<&str>, Vec<(String, Vec<&str>)>) {
    let (mut prose, mut blocks) = (Vec::new(), Vec::new());
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        match (line.trim_start().strip_prefix("```"), open.take()) {
            (Some(lang), None) => open = Some((lang.trim().to_owned(), Vec::new())),
            (Some(_), Some(block)) => blocks.push(block),
            (None, Some(mut block)) => {
                block.1.push(line);
                open = Some(block);
            }
            (None, None) => prose.push(line),
        }
    }
    (prose, blocks)
}

fn anchors(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    split(&text)
        .0
        .iter()
        .filter_map(|l| l.trim_start_matches('#').strip_prefix(' ').filter(|_| l.starts_with('#')))
        .map(slug)
        .collect()
}

/// Every `](target)` of the prose.
fn links(prose: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose {
        let mut rest = *line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    out
}

#[test]
fn every_link_in_the_manual_leads_somewhere() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in manual() {
        let text = std::fs::read_to_string(&file).unwrap();
        for link in links(&split(&text).0) {
            if link.starts_with("http://") || link.starts_with("https://") {
                continue;
            }
            checked += 1;
            let (path, anchor) = link.split_once('#').map_or((link.as_str(), None), |(p, a)| (p, Some(a)));
            let target = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", file.display()));
            } else if let Some(a) = anchor
                && !anchors(&target).iter().any(|h| h == a)
            {
                broken.push(format!("{}: {link} (no such heading)", file.display()));
            }
        }
    }
    assert!(checked > 30, "only {checked} links found");
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// Splits a shell line into words, with single and double quotes.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut quote, mut started) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (None, c) => word.push(c),
        }
    }
    if started || !word.is_empty() {
        out.push(word);
    }
    out
}

/// The harness commands of the manual's `sh` blocks, as arguments after
/// the program name: `cargo run … -p harness -- ARGS` or `harness ARGS`.
/// Lines continued with `\` are joined; a comment is cut; a command with a
/// placeholder (`<folder>`, `[--out FILE]`, `…`, `$VAR`) is a template, not
/// a command, and is left out.
fn commands() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for file in manual() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (lang, lines) in split(&text).1 {
            if lang != "sh" {
                continue;
            }
            let joined = lines.join("\n").replace("\\\n", " ");
            for line in joined.lines() {
                let line = line.split(" #").next().unwrap_or("").trim();
                if line.contains(['<', '[', '…', '$', '|', '&', ';']) {
                    continue;
                }
                let w = words(line);
                let args = if w.first().is_some_and(|c| c == "cargo") && w.iter().any(|x| x == "harness") {
                    match w.iter().position(|x| x == "--") {
                        Some(i) => w[i + 1..].to_vec(),
                        None => continue,
                    }
                } else if w.first().is_some_and(|c| c == "harness") {
                    w[1..].to_vec()
                } else {
                    continue;
                };
                out.push((format!("{}: {line}", file.display()), args));
            }
        }
    }
    out
}

#[test]
fn every_harness_command_in_the_manual_parses_and_passes_the_checks_before_load() {
    let commands = commands();
    assert!(commands.len() >= 25, "only {} commands found: {commands:#?}", commands.len());
    // Paths in the commands are the repository's.
    std::env::set_current_dir(root()).unwrap();
    let mut refused = Vec::new();
    for (where_, args) in &commands {
        let cli = match Cli::try_parse_from(std::iter::once("harness".to_owned()).chain(args.iter().cloned())) {
            Ok(cli) => cli,
            Err(e) => {
                refused.push(format!("{where_}\n  {}", e.to_string().lines().next().unwrap_or("")));
                continue;
            }
        };
        if cli.command.is_none()
            && let Err(e) = Plan::from_args(&cli.run)
        {
            refused.push(format!("{where_}\n  {e}"));
        }
    }
    assert!(refused.is_empty(), "commands the harness refuses: {refused:#?}");
}

//! Records how this harness was built, so a run can say which code measured
//! it and whether its figures come from optimised code: the commit (and
//! whether the checkout had uncommitted changes; unknown outside a git
//! checkout, e.g. a source tarball), the optimisation level and the profile's
//! name.
//!
//! A second `cargo build` must compile nothing: cargo reruns a build script
//! whose watched file is missing, or changed after the script last ran, so
//! this one watches only files that exist and that git moves when the commit
//! does, and asks git without refreshing its index (`--no-optional-locks`:
//! a plain `git status` rewrites `.git/index`, which would then look newer
//! than this script's last run).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let out = Command::new("git").arg("-C").arg(dir).arg("--no-optional-locks").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    for var in ["OPT_LEVEL", "PROFILE"] {
        println!("cargo:rerun-if-env-changed={var}");
        let value = std::env::var(var).unwrap_or_else(|_| "unknown".to_owned());
        println!("cargo:rustc-env=HARNESS_BUILD_{var}={value}");
    }

    let commit = git(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty());
    // `git status` prints nothing for a clean tree.
    let dirty =
        commit.as_ref().and_then(|_| git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty()));
    println!("cargo:rustc-env=HARNESS_GIT_COMMIT={}", commit.as_deref().unwrap_or(""));
    println!("cargo:rustc-env=HARNESS_GIT_DIRTY={}", dirty.map_or("", |d| if d { "true" } else { "false" }));

    // Build again when any source that goes into the binary changes (the
    // dirty state), and when the commit moves: HEAD itself (a checkout),
    // its reflog (appended at every commit, reset or checkout), the loose
    // ref of the branch it names and packed refs. Worktrees keep these in
    // different folders: ask git for each path, and watch only those that
    // exist.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let workspace = Path::new(&manifest).parent().unwrap_or(Path::new("."));
    for source in ["harness/src", "harness/Cargo.toml", "crates", "proto", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", workspace.join(source).display());
    }
    if commit.is_some() {
        let branch = git(&["rev-parse", "--symbolic-full-name", "HEAD"]).filter(|b| b.starts_with("refs/"));
        let mut paths = vec!["HEAD".to_owned(), "logs/HEAD".to_owned(), "packed-refs".to_owned()];
        paths.extend(branch);
        for p in paths {
            if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &p])
                && Path::new(&path).exists()
            {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}

//! `harness merge DIR…`: one run folder from the folders of a run's
//! segments (`--segment I/N`), written by N generators.

use std::io::IsTerminal;
use std::path::PathBuf;

use super::exit::{EXIT_FAILED, EXIT_USAGE, exit_code};
use crate::config::Plan;
use crate::export::files::{RunFolder, read_runs, run_folders_in, write_results};
use crate::export::{folder_name, qps_part, summary};
use crate::judge::merge::{Part, check, merge};
use crate::result::RunResult;

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The segments' run folders, each written by one generator with
    /// --segment I/N; or a folder holding them (every run folder directly
    /// inside it), as a Kubernetes Job's volume does.
    #[arg(required = true)]
    pub folders: Vec<PathBuf>,
    /// Directory the merged run's folder is created in.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Print the merged run as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
}

pub fn merge_main(args: &MergeArgs) -> u8 {
    let segments = match read_segments(&args.folders) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("harness merge: {e}");
            return EXIT_USAGE;
        }
    };
    let runs = match merged(&segments) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harness merge: {e}");
            return EXIT_USAGE;
        }
    };
    let first = &runs[0];
    let plan = Plan {
        config: first.config.clone(),
        arms: runs.iter().map(|r| r.config.transport).collect(),
        rates: vec![first.config.load.qps],
        payload: None,
        codecs: Vec::new(),
    };
    let load = format!("{}-merged{}", qps_part(first.config.load.qps), segments.len());
    let name = folder_name(&first.started_at, &plan.transport_name(), &load, first.config.output.label.as_deref());
    let written = RunFolder::create(&args.out, &name).and_then(|folder| match write_results(folder.path(), &runs) {
        Ok(()) => folder.commit(),
        Err(e) => Err(e),
    });
    let folder = match written {
        Ok(f) => f,
        Err(e) => {
            eprintln!("harness merge: writing the merged run under {}: {e}; nothing was kept", args.out.display());
            return EXIT_FAILED;
        }
    };
    if args.json {
        println!("{}", summary::json(&runs, Some(&folder)));
    } else {
        eprintln!("harness merge: {} segments into one run", segments.len());
        print!("{}", summary::text(&runs, Some(&folder), std::io::stdout().is_terminal()));
    }
    exit_code(first.status, true)
}

/// Each segment folder's runs (one per arm), with the folder's name. A
/// folder that is not a run folder is read as one holding run folders: of
/// the runs whose segments it holds (a Compose or Kubernetes volume used
/// again), the newest ([`newest_run`]), the others named on stderr.
fn read_segments(folders: &[PathBuf]) -> Result<Vec<(String, Vec<RunResult>)>, String> {
    let mut segments = Vec::new();
    for folder in folders {
        match read_runs(folder) {
            Ok(runs) => segments.push((folder.display().to_string(), runs)),
            Err(e) => {
                let inside = run_folders_in(folder);
                if inside.is_empty() {
                    return Err(e);
                }
                let mut held = Vec::new();
                for f in inside {
                    held.push((f.display().to_string(), read_runs(&f)?));
                }
                let (newest, earlier) = newest_run(held);
                if !earlier.is_empty() {
                    eprintln!(
                        "harness merge: {} holds segments of earlier runs too; merging the newest run's {}, \
                         leaving out {} (remove them once merged, or give the folders of one run): {}",
                        folder.display(),
                        newest.len(),
                        earlier.len(),
                        earlier.join(", ")
                    );
                }
                segments.extend(newest);
            }
        }
    }
    Ok(segments)
}

/// When a segment's generator began its schedule: its `--start-at` instant,
/// else when its run started.
fn began(runs: &[RunResult]) -> Option<std::time::SystemTime> {
    let run = runs.first()?;
    let at = run.generators.first().and_then(|g| g.start_at.as_deref()).unwrap_or(&run.started_at);
    humantime::parse_rfc3339_weak(at).ok()
}

/// The segments of the newest run among `held`, and the folders of earlier
/// runs. The generators of one run begin together (one `--start-at`), each
/// within its run's length of the others; a later run begins after the
/// one before it ended, so a segment that began a run's length or more
/// before the newest is another run's. A segment whose start cannot be read
/// is kept, for `check` to judge.
fn newest_run(held: Vec<(String, Vec<RunResult>)>) -> (Vec<(String, Vec<RunResult>)>, Vec<String>) {
    let newest = held.iter().filter_map(|(_, runs)| Some((began(runs)?, runs))).max_by_key(|(at, _)| *at);
    let Some((latest, runs)) = newest else { return (held, Vec::new()) };
    let length =
        runs.iter().flat_map(|r| &r.rounds).map(|r| r.started_seconds + r.window_seconds).fold(1.0_f64, f64::max);
    let earliest = latest.checked_sub(std::time::Duration::from_secs_f64(length)).unwrap_or(latest);
    let (mut this, mut earlier) = (Vec::new(), Vec::new());
    for (folder, runs) in held {
        match began(&runs) {
            Some(at) if at <= earliest => earlier.push(folder),
            _ => this.push((folder, runs)),
        }
    }
    (this, earlier)
}

/// Every arm merged across the segments; the segments must hold the same arms.
fn merged(segments: &[(String, Vec<RunResult>)]) -> Result<Vec<RunResult>, String> {
    let (first_folder, first) = &segments[0];
    let arms: Vec<_> = first.iter().map(|r| r.config.transport).collect();
    for (folder, runs) in segments {
        let these: Vec<_> = runs.iter().map(|r| r.config.transport).collect();
        if these != arms {
            return Err(format!(
                "{folder} holds the arms {these:?} but {first_folder} holds {arms:?}: they are not one run"
            ));
        }
    }
    (0..arms.len())
        .map(|k| {
            let parts: Vec<Part<'_>> =
                segments.iter().map(|(folder, runs)| Part { folder: folder.as_str(), run: &runs[k] }).collect();
            Ok(merge(&check(&parts)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use caller::Transport;

    use super::*;
    use crate::config::Segment;

    /// Segment `index` of 2 of a run of `arms`.
    fn segment(index: u32, arms: &[Transport]) -> (String, Vec<RunResult>) {
        let runs = arms
            .iter()
            .map(|t| {
                let mut r = crate::testing::run(*t, 1.0);
                r.config.generators.segment = Some(Segment { index, count: 2, sample_tiers: index == 0 });
                r
            })
            .collect();
        (format!("seg{index}"), runs)
    }

    /// Writes `segment(index)` of 2, begun at `at`, as run folder `name` in `dir`.
    fn write_segment(dir: &std::path::Path, name: &str, index: u32, at: &str) {
        let (_, mut runs) = segment(index, &[Transport::Grpc]);
        for r in &mut runs {
            r.started_at = at.to_owned();
            r.config.generators.start_at = Some(at.to_owned());
            r.generators = vec![crate::result::Generator {
                segment: index,
                count: 2,
                sampled_tiers: index == 0,
                hostname: None,
                start_at: Some(at.to_owned()),
                late_seconds: Some(0.0),
                own: None,
            }];
        }
        let folder = dir.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        crate::export::files::write_results(&folder, &runs).unwrap();
    }

    #[test]
    fn a_folder_two_runs_wrote_into_merges_the_newest_and_refuses_only_a_true_double() {
        let dir = std::env::temp_dir().join(format!("gvr-merge-twice-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // The Compose profile run twice: both runs' generators write into one folder.
        for (run, at) in [("first", "2026-12-05T07:00:00Z"), ("second", "2026-12-05T07:05:00Z")] {
            for index in 0..2 {
                write_segment(&dir, &format!("{run}-{index}"), index, at);
            }
        }
        let segments = read_segments(std::slice::from_ref(&dir)).unwrap();
        let names: Vec<&str> = segments.iter().map(|(f, _)| f.rsplit('/').next().unwrap()).collect();
        assert_eq!(names, ["second-0", "second-1"]);
        let runs = merged(&segments).unwrap();
        assert_eq!((runs[0].started_at.as_str(), runs[0].generators.len()), ("2026-12-05T07:05:00Z", 2));
        // A segment of the newest run given twice is truly doubled: refused,
        // naming both folders and what to do.
        write_segment(&dir, "second-1-copy", 1, "2026-12-05T07:05:01Z");
        let err = merged(&read_segments(std::slice::from_ref(&dir)).unwrap()).unwrap_err();
        assert!(err.contains("is given twice") && err.contains("second-1-copy") && err.contains("remove"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_arm_of_a_comparison_is_merged_and_the_arms_must_match() {
        let both = [Transport::Grpc, Transport::Rest];
        let runs = merged(&[segment(0, &both), segment(1, &both)]).unwrap();
        let transports: Vec<Transport> = runs.iter().map(|r| r.config.transport).collect();
        assert_eq!(transports, both);
        assert!(runs.iter().all(|r| r.generators.len() == 2 && r.rounds[0].requests.scheduled == 12_000));
        let err = merged(&[segment(0, &both), segment(1, &both[..1])]).unwrap_err();
        assert!(err.contains("seg1 holds the arms"), "{err}");
    }
}

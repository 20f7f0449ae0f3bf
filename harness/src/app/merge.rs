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
/// folder that is not a run folder is read as one holding run folders.
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
                for f in inside {
                    segments.push((f.display().to_string(), read_runs(&f)?));
                }
            }
        }
    }
    Ok(segments)
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

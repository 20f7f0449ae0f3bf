//! `harness compare A B [C …]`: the comparison of saved run folders.

use std::path::PathBuf;

use super::Gates;
use super::exit::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, with_gates};
use crate::config::GateArgs;
use crate::export::comparison::{self, Arm};
use crate::export::files::{read_runs, write_comparison, write_comparison_page};
use crate::result::RunResult;

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Run folders written by the harness (at least two runs in all).
    #[arg(required = true)]
    pub folders: Vec<PathBuf>,
    /// Write comparison.md, report.html and the overlaid charts into this folder instead of
    /// printing the comparison.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub gates: GateArgs,
}

pub fn compare(args: &CompareArgs) -> u8 {
    let mut runs = Vec::new();
    for folder in &args.folders {
        match read_runs(folder) {
            Ok(r) => runs.extend(r),
            Err(e) => {
                eprintln!("harness compare: {e}");
                return EXIT_USAGE;
            }
        }
    }
    if runs.len() < 2 {
        eprintln!("harness compare: these folders hold {} run(s); a comparison needs at least two", runs.len());
        return EXIT_USAGE;
    }
    let transports: Vec<_> = runs.iter().map(|r| r.config.transport).collect();
    let gates = match Gates::parse(&args.gates, &transports) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("harness compare: {e}");
            return EXIT_USAGE;
        }
    };
    let refs: Vec<&RunResult> = runs.iter().collect();
    let names = crate::export::arm_names(&refs);
    let arms: Vec<Arm<'_>> = names.iter().zip(&runs).map(|(name, run)| Arm { name, run }).collect();
    for w in comparison::config_warnings(&arms) {
        eprintln!("harness compare: warning: {w}");
    }
    match &args.out {
        Some(out) => {
            if let Err(e) = std::fs::create_dir_all(out)
                .and_then(|()| write_comparison(out, &refs))
                .and_then(|()| write_comparison_page(out, &refs, false))
            {
                eprintln!("harness compare: writing into {}: {e}", out.display());
                return EXIT_FAILED;
            }
            println!("written to {}", out.join("comparison.md").display());
        }
        None => print!("{}", comparison::render(&arms, false)),
    }
    with_gates(EXIT_OK, gates.report(&runs))
}

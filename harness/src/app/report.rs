//! `harness report DIR --html`: `report.html` for a folder saved before,
//! rendered from its data files (a run, a comparison, a sweep, a merged
//! run), as a run writes it now; without `--html`, the Markdown report.

use std::path::PathBuf;

use super::exit::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::export::comparison::{self, Arm};
use crate::export::files::{Saved, read_saved, write_saved_page};
use crate::export::{arm_names, capacity, markdown, payload};
use crate::result::RunResult;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A folder written by the harness, by this version or an earlier one:
    /// one run, a `--transport both` comparison, a sweep or a merged run.
    pub folder: PathBuf,
    /// Write report.html, the one self-contained page (findings, decision
    /// record, tables, charts inline, the data embedded), into the folder.
    #[arg(long)]
    pub html: bool,
    /// With --html: write the page to this file instead of DIR/report.html.
    #[arg(long, requires = "html")]
    pub out: Option<PathBuf>,
}

pub fn report(args: &ReportArgs) -> u8 {
    let saved = match read_saved(&args.folder) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("harness report: {e}");
            return EXIT_USAGE;
        }
    };
    if !args.html {
        print!("{}", markdown_of(&saved));
        return EXIT_OK;
    }
    let path = args.out.clone().unwrap_or_else(|| args.folder.join("report.html"));
    if let Err(e) = write_saved_page(&path, &saved) {
        eprintln!("harness report: writing {}: {e}", path.display());
        return EXIT_FAILED;
    }
    println!("written to {}", path.display());
    EXIT_OK
}

/// The folder's Markdown report, rendered again.
fn markdown_of(saved: &Saved) -> String {
    match saved {
        Saved::Capacity(c, setup) => capacity::render(c, setup),
        Saved::Payload(p, setup) => payload::render(p, setup),
        Saved::Runs(runs) if runs.len() == 1 => markdown::render(&runs[0], false),
        Saved::Runs(runs) => {
            let refs: Vec<&RunResult> = runs.iter().collect();
            let names = arm_names(&refs);
            let arms: Vec<Arm<'_>> = names.iter().zip(runs).map(|(name, run)| Arm { name, run }).collect();
            comparison::render(&arms, false)
        }
    }
}

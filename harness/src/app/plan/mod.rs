//! `harness plan FILE`: an experiment. A plan file's cells (the base
//! configuration crossed or zipped with its axes, or a crossover search's
//! probes) each run as a plain run, a child process of this executable
//! with the cell's argument list and `--out` inside the experiment folder,
//! so each cell's folder is exactly what the same flags write. Then the
//! experiment's summary. `--check` stops after the check; `--resume DIR`
//! finishes an experiment, running only its missing cells.
//!
//! * [`check`]: the plan file through the flags' own parser and rules;
//! * [`cells`]: one cell run as a child, its progress, whether it finished;
//! * [`matrix`]: the experiment folder, the cells in order, the search.

mod cells;
mod check;
mod matrix;

use std::path::PathBuf;
use std::time::Duration;

use super::exit::{EXIT_FAILED, EXIT_USAGE};
use crate::config::experiment::MAX_PLAN_BYTES;
use crate::config::hd;

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The plan file (TOML): flags as keys (`qps = 100`), `[[axis]]` tables
    /// (`flag = "items"`, `values = [1, 10, 100]`, `zip = true`), or one
    /// axis with `find = "crossover"` (README: "Experiments").
    pub file: PathBuf,
    /// Check the plan and every cell against the flags' rules, run nothing.
    #[arg(long)]
    pub check: bool,
    /// Refuse a plan whose estimated time is longer than this.
    #[arg(long, value_parser = crate::config::duration)]
    pub budget: Option<Duration>,
    /// Folder under which the experiment folder is written.
    #[arg(long, default_value = "results", conflicts_with = "resume")]
    pub out: PathBuf,
    /// An experiment folder of this plan to finish: only its missing cells run.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
}

pub fn plan_main(args: &PlanArgs) -> u8 {
    let name = args.file.display().to_string();
    let text = match read(&args.file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("harness plan: {name}: {e}");
            return EXIT_USAGE;
        }
    };
    let checked = match check::check(&text) {
        Ok(c) => c,
        Err(errors) => {
            for e in &errors {
                eprintln!("{}", e.display(&name));
            }
            eprintln!("harness plan: {} error{} in {name}", errors.len(), if errors.len() == 1 { "" } else { "s" });
            return EXIT_USAGE;
        }
    };
    let what = match &checked.search {
        Some(s) => format!("a crossover search of at most {} probes", crate::judge::crossover::most_probes(s)),
        None => format!("{} cell{}", checked.cells.len(), if checked.cells.len() == 1 { "" } else { "s" }),
    };
    let estimate = format!("estimated {}", hd(Duration::from_secs(checked.estimate.as_secs())));
    if let Some(budget) = args.budget.filter(|b| checked.estimate > *b) {
        eprintln!("harness plan: {name}: {what}, {estimate}: longer than the budget of {}", hd(budget));
        return EXIT_USAGE;
    }
    if args.check {
        println!("{name}: ok: {what}, {estimate}");
        return super::exit::EXIT_OK;
    }
    eprintln!("harness plan: {name}: {what}, {estimate}");
    let Some(runtime) = super::runtime("harness", Some(1)) else { return EXIT_FAILED };
    runtime.block_on(matrix::run(&checked, &text, args))
}

/// The plan file's text, at most [`MAX_PLAN_BYTES`].
fn read(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    file.take(MAX_PLAN_BYTES as u64 + 1).read_to_string(&mut text).map_err(|e| e.to_string())?;
    if text.len() > MAX_PLAN_BYTES {
        return Err(format!("larger than the {MAX_PLAN_BYTES} bytes a plan file may be"));
    }
    Ok(text)
}

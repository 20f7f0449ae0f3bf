//! `harness adr <folder>`: the MADR decision record of a saved comparison,
//! printed or written to a file, with an outcome only when `--prefer` names one.

use std::path::PathBuf;
use std::time::SystemTime;

use caller::Transport;

use super::exit::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::export::adr::{self, Record};
use crate::export::comparison::Arm;
use crate::export::files::{read_runs, write_record};
use crate::result::RunResult;

#[derive(Debug, clap::Args)]
pub struct AdrArgs {
    /// A run folder holding two arms (a `--transport both` folder).
    pub folder: PathBuf,
    /// Write the record to this file instead of printing it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The option the people deciding chose: fills in the decision outcome
    /// and its consequences. Without it the outcome is left open.
    #[arg(long, value_enum)]
    pub prefer: Option<Transport>,
}

pub fn adr(args: &AdrArgs) -> u8 {
    let runs = match read_runs(&args.folder) {
        Ok(r) if r.len() == 2 => r,
        Ok(r) => {
            eprintln!(
                "harness adr: {} holds {} run(s); a decision record needs the two arms of one comparison \
                 (a --transport both folder)",
                args.folder.display(),
                r.len()
            );
            return EXIT_USAGE;
        }
        Err(e) => {
            eprintln!("harness adr: {e}");
            return EXIT_USAGE;
        }
    };
    if let Some(t) = args.prefer.filter(|t| runs.iter().all(|r| r.config.transport != *t)) {
        eprintln!("harness adr: --prefer {}: that transport is not an option in this folder", t.as_str());
        return EXIT_USAGE;
    }
    let refs: Vec<&RunResult> = runs.iter().collect();
    let names = crate::export::arm_names(&refs);
    let arms: Vec<Arm<'_>> = names.iter().zip(&runs).map(|(name, run)| Arm { name, run }).collect();
    let today = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let folder = args.folder.display().to_string();
    let record = Record { date: &today[..10], prefer: args.prefer, folder: &folder };
    match &args.out {
        Some(path) => {
            if let Err(e) = write_record(path, &arms, &record) {
                eprintln!("harness adr: writing {}: {e}", path.display());
                return EXIT_FAILED;
            }
            println!("written to {}", path.display());
        }
        None => print!("{}", adr::render(&arms, &record)),
    }
    EXIT_OK
}

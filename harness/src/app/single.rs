//! One measured run (one transport, or several compared) into one new folder.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::SystemTime;

use super::exit::{EXIT_FAILED, exit_code, with_gates};
use super::{report_abort, timeseries_sink};
use crate::config::Plan;
use crate::export::files::{RunFolder, write_results};
use crate::export::{folder_name, qps_part, summary};
use crate::result::RunStatus;
use crate::run::interrupt::Interrupt;

pub async fn single_main(
    plan: &Plan,
    contract: Option<&Arc<contract::Loaded>>,
    interrupt: &Interrupt,
    gates: &super::Gates,
) -> u8 {
    let cfg = &plan.config;
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let load = if cfg.load.closed_loop { format!("{}conn", cfg.load.connections) } else { qps_part(cfg.load.qps) };
    let load = match cfg.generators.segment {
        Some(s) => format!("{load}-seg{}of{}", s.index, s.count),
        None => load,
    };
    let name = folder_name(&started_at, &plan.transport_name(), &load, cfg.output.label.as_deref());
    let folder = match RunFolder::create(&cfg.output.out, &name) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("harness: creating the run folder under {}: {e}", cfg.output.out.display());
            return EXIT_FAILED;
        }
    };
    let tls = match super::tls_files(plan, folder.path()) {
        Ok(tls) => tls,
        Err(e) => {
            eprintln!("harness: {e}");
            return EXIT_FAILED;
        }
    };
    let sink = timeseries_sink(&folder.path().join("timeseries.csv"), plan);
    let runs = match crate::run::run(plan, tls.as_ref(), contract, started_at, interrupt, sink).await {
        Ok(r) => r,
        Err(e) => {
            folder.discard();
            eprintln!("harness: {e:#}");
            return EXIT_FAILED;
        }
    };
    report_abort(&runs);
    let written = write_results(folder.path(), &runs).and_then(|()| folder.commit());
    let folder = match written {
        Ok(f) => Some(f),
        Err(e) => {
            // The unfinished folder removed itself (RunFolder's drop).
            eprintln!("harness: writing the run folder under {}: {e}; nothing was kept", cfg.output.out.display());
            None
        }
    };
    if cfg.output.json {
        println!("{}", summary::json(&runs, folder.as_deref()));
    } else if !cfg.output.quiet {
        print!("{}", summary::text(&runs, folder.as_deref(), std::io::stdout().is_terminal()));
    }
    let code = exit_code(runs.first().map_or(RunStatus::Aborted, |r| r.status), folder.is_some());
    with_gates(code, gates.report(&runs))
}

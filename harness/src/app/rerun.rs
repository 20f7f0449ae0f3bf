//! `harness rerun <folder>`: the saved run's configuration measured again,
//! exactly (every flag that shaped it, given explicitly), into a new folder;
//! what differs in the environment is said first. A sweep folder is repeated
//! with its whole list of offered rates.

use std::path::PathBuf;

use clap::Parser;

use super::exit::{EXIT_FAILED, EXIT_USAGE};
use super::{Cli, Gates};
use crate::config::{DEFAULT_LOAD_THREADS, GateArgs, Plan, TransportArg, command_line};
use crate::export::files::{read_runs, read_sweep};
use crate::judge::capacity::Capacity;
use crate::result::{Environment, RunResult};

#[derive(Debug, clap::Args)]
pub struct RerunArgs {
    /// A run folder written by the harness (one transport, both, or a sweep).
    pub folder: PathBuf,
    /// The saved run's load target, given again: a rerun sends load only to
    /// loopback unless every other address the saved run names is given
    /// here too (as --caller-url or --downstream-url took it), so a
    /// run.json from elsewhere cannot aim load at a host by itself.
    #[arg(long, value_name = "URL")]
    pub target: Vec<String>,
    #[command(flatten)]
    pub gates: GateArgs,
}

/// The plan that repeats the saved runs, checked to give their configuration
/// back field for field; and the gates.
/// What differs between the contract a run measured and the one its files
/// hold now: the compiled descriptor set, and each side's data.
fn contract_changes(then: &contract::Report, now: &contract::Report) -> Vec<String> {
    let mut changes = Vec::new();
    if then.descriptor_sha256 != now.descriptor_sha256 {
        changes.push(format!(
            "the .proto files have changed since the run: descriptor set {} then, {} now",
            &then.descriptor_sha256[..12.min(then.descriptor_sha256.len())],
            &now.descriptor_sha256[..12.min(now.descriptor_sha256.len())]
        ));
    }
    for (side, a, b) in [("request", &then.requests, &now.requests), ("answer", &then.answers, &now.answers)] {
        if a.source != b.source || a.count != b.count {
            changes.push(format!(
                "the {side} data has changed since the run: {} then ({} messages), {} now ({} messages)",
                serde_json::to_string(&a.source).unwrap_or_default(),
                a.count,
                serde_json::to_string(&b.source).unwrap_or_default(),
                b.count
            ));
        }
    }
    changes
}

/// The saved run's plan, its contract loaded beside it, its gates and runs.
pub type Rerun = (Plan, Option<std::sync::Arc<contract::Loaded>>, Gates, Vec<RunResult>);

pub fn plan(args: &RerunArgs) -> Result<Rerun, String> {
    // A sweep: its first step's runs give the configuration, capacity.json the rates.
    let (runs, rates) = match read_sweep(&args.folder) {
        Some(sweep) => {
            let (capacity, runs) = sweep?;
            (runs, sweep_rates(&capacity))
        }
        None => (read_runs(&args.folder)?, Vec::new()),
    };
    let transports: Vec<_> = runs.iter().map(|r| r.config.transport).collect();
    let arg = TransportArg::from_arms(&transports)
        .ok_or_else(|| format!("{}: these arms cannot be given as one --transport", args.folder.display()))?;
    let mut line = vec!["harness".to_owned()];
    line.extend(command_line(&runs[0].config, arg));
    if !rates.is_empty()
        && let Some(i) = line.iter().position(|a| a == "--qps")
    {
        line[i + 1] = rates.iter().map(f64::to_string).collect::<Vec<_>>().join(",");
    }
    line.extend(args.gates.replay());
    let cli = Cli::try_parse_from(&line).map_err(|e| format!("the saved configuration does not parse: {e}"))?;
    let plan = Plan::from_args(&cli.run).map_err(|e| e.to_string())?;
    for run in &runs {
        let mut step = if rates.is_empty() { plan.arm(run.config.transport) } else { sweep_step(&plan, run) };
        // A run from before --load-threads ran one worker per core; this build
        // runs its default, which `rerun` says.
        if run.config.load.load_threads.is_none() {
            step.load.load_threads = None;
        }
        if step != run.config {
            return Err(format!(
                "this build cannot repeat {}'s configuration exactly (saved: {}; this build: {})",
                run.config.transport.as_str(),
                serde_json::to_string(&run.config).unwrap_or_default(),
                serde_json::to_string(&step).unwrap_or_default()
            ));
        }
    }
    let gates = Gates::from_args(&cli.run.output.gates, &plan)?;
    check_targets(&plan.config, &args.target)?;
    let contract = super::load_contract(&plan)?;
    if let (Some(then), Some(now)) = (runs[0].contract.as_ref(), contract.as_ref()) {
        for change in contract_changes(then, &now.report()) {
            eprintln!("harness rerun: {change}");
        }
    }
    Ok((plan, contract, gates, runs))
}

/// Where a plan sends load: the remote callers' front doors and a
/// downstream called directly (none when the harness starts the tiers).
fn targets(c: &crate::config::Config) -> Vec<String> {
    let mut t: Vec<String> = c.deploy.remote.caller_url.values().cloned().collect();
    t.extend(c.deploy.downstream_url.clone());
    t
}

/// Whether `url` (`http://host:port`) names this machine.
fn is_loopback(url: &str) -> bool {
    let host = url.trim_start_matches("http://").rsplit_once(':').map_or(url, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Refuses a saved target off this machine that was not given again.
fn check_targets(c: &crate::config::Config, given: &[String]) -> Result<(), String> {
    let given: Vec<&str> = given.iter().flat_map(|g| g.split(',')).map(|g| g.trim().trim_end_matches('/')).collect();
    for t in targets(c).iter().filter(|t| !is_loopback(t)) {
        if !given.contains(&t.as_str()) {
            return Err(format!(
                "the saved run sends load to {t}, which is not this machine; give it again to confirm: \
                 harness rerun FOLDER --target {t}"
            ));
        }
    }
    Ok(())
}

/// A sweep's offered rates: as it recorded them, or for an older sweep every
/// rate a step ran at or was left unrun.
fn sweep_rates(c: &Capacity) -> Vec<f64> {
    if !c.offered_qps.is_empty() {
        return c.offered_qps.clone();
    }
    let mut rates: Vec<f64> = c.arms.iter().flat_map(|a| a.steps.iter().map(|s| s.offered_qps)).collect();
    rates.extend(c.interrupted.iter().flat_map(|i| i.not_run_qps.iter().copied()));
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    rates
}

/// The configuration the rerun's plan gives `run`'s arm at `run`'s step.
fn sweep_step(plan: &Plan, run: &RunResult) -> crate::config::Config {
    plan.step(run.config.load.qps, &plan.arms).arm(run.config.transport)
}

/// What differs between the saved environment and this one, one line each.
pub fn environment_changes(saved: &Environment, now: &Environment) -> Vec<String> {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    let num = |v: Option<usize>| v.map_or("unknown".into(), |n| n.to_string());
    let fields = [
        ("commit", opt(&saved.git_commit), opt(&now.git_commit)),
        ("uncommitted changes", format!("{:?}", saved.git_dirty), format!("{:?}", now.git_dirty)),
        ("build", saved.build_text(), now.build_text()),
        ("rustc", opt(&saved.rustc), opt(&now.rustc)),
        ("kernel", opt(&saved.kernel), opt(&now.kernel)),
        ("OS", opt(&saved.os), opt(&now.os)),
        ("transparent huge pages", opt(&saved.transparent_huge_pages), opt(&now.transparent_huge_pages)),
        ("CPU", opt(&saved.cpu_model), opt(&now.cpu_model)),
        ("logical cores", num(saved.logical_cores), num(now.logical_cores)),
        ("memory bytes", format!("{:?}", saved.memory_bytes), format!("{:?}", now.memory_bytes)),
        ("host", opt(&saved.hostname), opt(&now.hostname)),
    ];
    fields.into_iter().filter(|(_, a, b)| a != b).map(|(what, a, b)| format!("{what}: {a} → {b}")).collect()
}

pub fn rerun(args: &RerunArgs) -> u8 {
    let (plan, contract, gates, runs) = match plan(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("harness rerun: {e}");
            return EXIT_USAGE;
        }
    };
    // Where the load goes and where the run is written, before anything starts.
    let to = targets(&plan.config);
    let to = if to.is_empty() { "tiers it starts on this machine".to_owned() } else { to.join(", ") };
    eprintln!("harness rerun: sending load to {to}; writing under {}", plan.config.output.out.display());
    let changes = environment_changes(&runs[0].environment, &crate::measure::environment::capture());
    if changes.is_empty() {
        eprintln!(
            "harness rerun: same environment as the saved run (commit, build, kernel, huge pages, CPU, cores, memory, host)"
        );
    }
    for c in &changes {
        eprintln!("harness rerun: environment differs: {c}");
    }
    let threads = runs[0].config.load.load_threads;
    if threads.is_none() {
        eprintln!(
            "harness rerun: the saved run did not record --load-threads (its harness ran one worker per core); this \
             run uses {DEFAULT_LOAD_THREADS}"
        );
    }
    let Some(runtime) = super::runtime("harness", Some(threads.unwrap_or(DEFAULT_LOAD_THREADS))) else {
        return EXIT_FAILED;
    };
    runtime.block_on(super::measure_main(plan, contract, gates))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_goes_off_this_machine_only_to_a_target_given_again() {
        let mut c = crate::testing::config(caller::Transport::Grpc);
        assert_eq!(check_targets(&c, &[]), Ok(()));
        c.deploy.remote.caller_url.insert("grpc".into(), "http://127.0.0.7:8000".into());
        assert_eq!(check_targets(&c, &[]), Ok(()));
        c.deploy.remote.caller_url.insert("rest".into(), "http://10.0.0.6:8001".into());
        let err = check_targets(&c, &[]).unwrap_err();
        assert!(err.contains("http://10.0.0.6:8001") && err.contains("--target"), "{err}");
        assert!(check_targets(&c, &["http://10.0.0.6:8000".into()]).is_err());
        assert_eq!(check_targets(&c, &["http://10.0.0.6:8001/".into()]), Ok(()));
        c.deploy.downstream_url = Some("http://[::1]:9".into());
        assert_eq!(check_targets(&c, &["http://10.0.0.6:8001".into()]), Ok(()));
        c.deploy.downstream_url = Some("http://example.org:80".into());
        assert!(check_targets(&c, &["http://10.0.0.6:8001".into()]).unwrap_err().contains("example.org"));
        assert!(is_loopback("http://localhost:1") && !is_loopback("http://192.168.1.1:1"));
    }

    #[test]
    fn environment_changes_name_each_field_that_differs() {
        let saved = crate::testing::environment();
        assert!(environment_changes(&saved, &saved).is_empty());
        let now = Environment {
            kernel: Some("6.12.0".into()),
            git_commit: Some("abc".into()),
            transparent_huge_pages: Some("always".into()),
            ..saved.clone()
        };
        assert_eq!(
            environment_changes(&saved, &now),
            [
                "commit: 0123456789abcdef0123456789abcdef01234567 → abc",
                "kernel: 6.1.0 → 6.12.0",
                "transparent huge pages: unknown → always"
            ]
        );
    }
}

//! `harness conform`: does a tier, ours or a team's own stack, speak the
//! built-in contract on every arm it claims? One line per check (PASS,
//! FAIL with the fix, SKIP for what is not served and not required); exit 0
//! when none fails, 1 when one does, 2 on bad flags.
//!
//! * [`checks`]: the verdicts, pure;
//! * [`probe`]: each check's request and its answer, bounded;
//! * [`custom`]: the checks of a team's own method (`--proto`);
//! * [`commanded`]: a downstream given as a command, started and stopped
//!   by the run's own launcher of foreign tiers (`tiers::foreign`).

pub mod checks;
pub mod custom;
pub mod probe;

use std::time::Duration;

use super::exit::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use checks::Check;
use probe::{Bounds, Probe};

#[derive(Debug, clap::Args)]
pub struct ConformArgs {
    /// A running downstream's gRPC listener (host:port or http://host:port):
    /// its gRPC arm is checked.
    #[arg(long)]
    pub downstream_grpc: Option<String>,
    /// A running downstream's REST listener (host:port or http://host:port):
    /// its REST arm is checked.
    #[arg(long)]
    pub downstream_rest: Option<String>,
    /// Start the downstream with this command (split as a shell would, run
    /// without one, as a run's --downstream-cmd is) and check both arms;
    /// {grpc_addr} and {rest_addr} become free loopback host:port pairs, e.g.
    /// 'python3 examples/stacks/python/downstream.py --grpc {grpc_addr} --rest {rest_addr}'.
    #[arg(long, conflicts_with_all = ["downstream_grpc", "downstream_rest"])]
    pub downstream_cmd: Option<String>,
    /// A running caller's front door (http://host:port): POST /v1/call is checked.
    #[arg(long)]
    pub caller_url: Option<String>,
    /// The fan-out the caller at --caller-url was started with.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub fanout: u32,
    /// Records (or points) each answer check asks for.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub items: u32,
    /// How long each check may take, its answer read to the end.
    #[arg(long, default_value = "10s", value_parser = service::parse_positive_duration)]
    pub check_timeout: Duration,
    /// How long a --downstream-cmd may take to listen on both addresses.
    #[arg(long, default_value = "60s", value_parser = service::parse_positive_duration)]
    pub ready_timeout: Duration,
    /// A team's own method instead of the built-in one: each arm is called
    /// with its first request and must answer the method's output type.
    #[command(flatten)]
    pub contract: contract::ContractArgs,
}

/// What to check, from the flags: base URLs (http://host:port).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Targets {
    pub grpc: Option<String>,
    pub rest: Option<String>,
    pub caller: Option<String>,
}

/// `host:port` or `http://host:port` as `http://host:port`; anything else
/// (another scheme, a path, no port) is refused with the flag's name.
pub fn base_url(flag: &str, value: &str) -> Result<String, String> {
    let rest = value.strip_prefix("http://").unwrap_or(value).trim_end_matches('/');
    if value.contains("://") && !value.starts_with("http://") {
        return Err(format!("{flag} {value:?}: conform speaks cleartext http:// only"));
    }
    let port = rest.rsplit_once(':').map(|(host, port)| (host, port.parse::<u16>()));
    match port {
        Some((host, Ok(p))) if !host.is_empty() && !host.contains('/') && p != 0 => Ok(format!("http://{rest}")),
        _ => Err(format!("{flag} {value:?}: expected host:port or http://host:port")),
    }
}

impl ConformArgs {
    /// The running tiers to check (a commanded downstream is added once started).
    pub fn targets(&self) -> Result<Targets, String> {
        let url = |flag: &str, v: &Option<String>| v.as_deref().map(|v| base_url(flag, v)).transpose();
        let targets = Targets {
            grpc: url("--downstream-grpc", &self.downstream_grpc)?,
            rest: url("--downstream-rest", &self.downstream_rest)?,
            caller: url("--caller-url", &self.caller_url)?,
        };
        if let Some(cmd) = &self.downstream_cmd {
            let missing: Vec<&str> = ["{grpc_addr}", "{rest_addr}"].into_iter().filter(|p| !cmd.contains(p)).collect();
            if !missing.is_empty() {
                return Err(format!("--downstream-cmd must say where to listen: it lacks {}", missing.join(" and ")));
            }
        } else if targets == Targets::default() {
            return Err(
                "nothing to check: give --downstream-grpc, --downstream-rest, --downstream-cmd or --caller-url".into(),
            );
        }
        Ok(targets)
    }
}

/// Runs every check the flags ask for and prints one line each.
pub fn conform(args: &ConformArgs) -> u8 {
    let mut targets = match args.targets() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("harness conform: {e}");
            return EXIT_USAGE;
        }
    };
    let loaded = match args.contract.load() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("harness conform: {e}");
            return EXIT_USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("harness conform: starting the async runtime: {e}");
            return EXIT_FAILED;
        }
    };
    let bounds = Bounds { timeout: args.check_timeout, body_limit_bytes: BODY_LIMIT_BYTES };
    let checks = runtime.block_on(async {
        let started = match &args.downstream_cmd {
            Some(cmd) => match commanded(cmd, args.ready_timeout, &mut targets).await {
                Ok(tier) => Some(tier),
                Err(e) => {
                    return Ok(vec![Check::fail("start", e, "make the command listen on {grpc_addr} and {rest_addr}")]);
                }
            },
            None => None,
        };
        let checks = run(&targets, bounds, args.items, args.fanout, loaded.as_ref()).await;
        if let Some(tier) = started {
            crate::tiers::foreign::stop(tier, STOP_GRACE, &tokio_util::sync::CancellationToken::new()).await;
        }
        checks
    });
    let checks = match checks {
        Ok(c) => c,
        Err(e) => {
            eprintln!("harness conform: {e:#}");
            return EXIT_FAILED;
        }
    };
    for check in &checks {
        println!("{}", check.line());
    }
    let failed = checks.iter().filter(|c| c.failed()).count();
    let skipped = checks.iter().filter(|c| c.verdict == checks::Verdict::Skip).count();
    println!("conform: {} checks, {failed} failed, {skipped} not served (not required)", checks.len());
    if failed == 0 { EXIT_OK } else { EXIT_FAILED }
}

/// How long a commanded downstream has to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Starts `cmd` as the downstream with the run's launcher of foreign tiers
/// on free loopback addresses, ready once both accept a connection, and
/// points `targets` at them.
async fn commanded(
    cmd: &str,
    ready_timeout: Duration,
    targets: &mut Targets,
) -> Result<crate::tiers::process::Tier, String> {
    use crate::tiers::foreign::{Command, Listeners, Values, free_addr, start_filled};
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    let (grpc, rest) = (free_addr(loopback)?, free_addr(loopback)?);
    let values: Values = [("grpc_addr", grpc.to_string()), ("rest_addr", rest.to_string())].into();
    let listeners: Listeners = [("grpc".to_owned(), grpc), ("rest".to_owned(), rest)].into();
    let command = Command {
        tier: crate::result::TierName::Downstream,
        template: cmd,
        arm: "conform",
        huge_pages: Default::default(),
    };
    let tier = start_filled(command, &values, &listeners, ready_timeout).await.map_err(|e| e.to_string())?;
    targets.grpc = Some(format!("http://{grpc}"));
    targets.rest = Some(format!("http://{rest}"));
    Ok(tier)
}

/// The most of one answer a check reads: a thousand records or points, the
/// most `--items` asks for, are well under it.
const BODY_LIMIT_BYTES: usize = 4 * 1024 * 1024;

/// Every check of every target, in the order printed.
pub async fn run(
    targets: &Targets,
    bounds: Bounds,
    items: u32,
    fanout: u32,
    loaded: Option<&contract::Loaded>,
) -> anyhow::Result<Vec<Check>> {
    let probe = Probe::new(bounds, items)?;
    let mut checks = Vec::new();
    if let Some(base) = &targets.grpc {
        checks.extend(match loaded {
            Some(l) => custom::grpc(&probe, base, l).await,
            None => probe.grpc_arm(base).await,
        });
    }
    if let Some(base) = &targets.rest {
        checks.extend(match loaded {
            Some(l) => custom::rest(&probe, base, l).await,
            None => probe.rest(base).await,
        });
    }
    if let Some(base) = &targets.caller {
        checks.extend(match loaded {
            Some(l) => custom::caller(&probe, base, l, fanout).await,
            None => probe.caller(base, fanout).await,
        });
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_taken_with_or_without_the_scheme_and_bad_ones_named() {
        assert_eq!(base_url("--x", "127.0.0.1:80"), Ok("http://127.0.0.1:80".into()));
        assert_eq!(base_url("--x", "http://h:9/"), Ok("http://h:9".into()));
        for bad in ["https://h:1", "h", "h:0", "h:port", ":80", "h:1/path"] {
            assert!(base_url("--x", bad).unwrap_err().starts_with("--x"), "{bad}");
        }
    }
}

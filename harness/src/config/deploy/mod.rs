//! Where the tiers run and where the load goes: the target tier, tiers that
//! already run elsewhere (`remote.rs`), containers and their limits
//! (`limits.rs`), a reverse proxy on one hop, and the addresses the tiers
//! the harness starts listen on. Parsing and checks only; starting anything
//! is `tiers`' work, and where each tier listens is its launcher's to say.

mod foreign;
mod limits;
mod remote;

use std::net::IpAddr;

use caller::Transport;
use clap::Args;
use serde::{Deserialize, Serialize};

pub use foreign::{Foreign, ForeignArgs, PLACEHOLDERS, check as check_foreign, words as command_words};
pub use limits::TierLimits;
pub use remote::Remote;

use super::{ConfigError, Flags, bad};
pub use service::huge_pages::HugePages;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Where the tiers run (docs/deployment.md)")]
pub struct DeployArgs {
    /// Which tier the load goes to.
    ///
    /// the caller (three tiers), or the downstream directly over --transport (two tiers, raw-transport
    /// figures).
    #[arg(long, value_enum, default_value_t = TargetTier::Caller)]
    pub target: TargetTier,
    /// With --target downstream.
    ///
    /// send to an already running downstream at this URL (its gRPC or REST listener, per --transport)
    /// instead of starting one.
    #[arg(long)]
    pub downstream_url: Option<String>,
    /// Drive an already running caller instead of starting the tiers.
    ///
    /// its front door as http://host:port, for every arm; a caller serves one transport, so --transport
    /// both takes one per arm: grpc=http://host:port,rest=http://host:port.
    #[arg(long)]
    pub caller_url: Option<String>,
    /// The admin endpoint (http://host:port) of the caller given by --caller-url (per arm like it), sampled
    /// for CPU, memory and bytes.
    ///
    /// Without it the caller's figures are not measured.
    #[arg(long)]
    pub caller_admin: Option<String>,
    /// The admin endpoint (http://host:port) of an already running downstream (behind --caller-url, or the
    /// --downstream-url one), sampled for CPU, memory and bytes.
    ///
    /// Without it the downstream's figures are not measured.
    #[arg(long)]
    pub downstream_admin: Option<String>,
    /// How the harness starts the tiers.
    ///
    /// `processes` on this machine, or `containers` (Docker, one per tier on a private network, limited by
    /// --tier-cpus and --tier-memory).
    #[arg(long, value_enum, default_value_t = Isolation::Processes)]
    pub isolation: Isolation,
    /// With --isolation containers: CPUs per tier, e.g. caller=1,downstream=0.5 (docker run --cpus).
    ///
    /// A tier left out is not limited.
    #[arg(long)]
    pub tier_cpus: Option<String>,
    /// With --isolation containers: memory per tier, e.g. caller=256m,downstream=128m (docker run
    /// --memory).
    ///
    /// A tier left out is not limited.
    #[arg(long)]
    pub tier_memory: Option<String>,
    /// Put a real reverse proxy between two tiers (the binary must be
    /// installed: `apt-get install nginx` / `caddy`); `none` is no proxy.
    #[arg(long, value_enum)]
    pub proxy: Option<ProxyFlag>,
    /// Where the proxy sits: `internal` (caller → proxy → downstream) or
    /// `front` (harness → proxy → caller).
    #[arg(long, value_enum, default_value_t = ProxyHop::Internal)]
    pub proxy_hop: ProxyHop,
    /// IP address the tiers' service listeners (the downstream's gRPC, with reflection, and REST; the
    /// caller's front door) listen on.
    ///
    /// Anything but loopback exposes them to other machines, and their traffic is counted.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// IP address the tiers' admin listeners (/stats, /metrics) listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub admin_bind: String,
    /// Port of the caller's front listener (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub caller_port: u16,
    /// Transparent huge pages in the tiers the harness starts (a foreign command's too): off or machine.
    ///
    /// off (default): memory counted in 4 KiB pages, free of the allocator's 2 MiB rounding, at a price in CPU
    /// (more TLB refills: 13-14% more CPU a request for a plain caller at 1,000 req/s on one VM, 1-3%
    /// on another, bench/README.md). machine: as a plain service on this machine runs, its resident set in whole
    /// huge pages where the kernel grants them. Each tier's settings state what the kernel then reported.
    #[arg(long, value_enum, default_value_t = HugePages::Off)]
    pub huge_pages: HugePages,
    #[command(flatten)]
    pub foreign: ForeignArgs,
}

/// The deployment section of [`super::Config`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deploy {
    /// Where the load goes: `caller` (three tiers) or `downstream` (two).
    pub target: TargetTier,
    /// An already running downstream the load goes to (with target downstream).
    pub downstream_url: Option<String>,
    /// Already running tiers: the caller per arm, and the admin endpoints
    /// they are sampled through. Absent when the harness starts the tiers.
    #[serde(default, skip_serializing_if = "Remote::is_empty")]
    pub remote: Remote,
    /// How the harness starts its tiers: processes (absent) or containers.
    #[serde(default, skip_serializing_if = "Isolation::is_processes")]
    pub isolation: Isolation,
    /// Per-tier container CPU and memory limits (with containers).
    #[serde(default, skip_serializing_if = "TierLimits::is_empty")]
    pub tier_limits: TierLimits,
    /// A reverse proxy between two tiers, and on which hop.
    #[serde(default)]
    pub proxy: Option<ProxyKind>,
    #[serde(default = "default_hop")]
    pub proxy_hop: ProxyHop,
    /// IP address the tiers' service listeners bind.
    pub bind: IpAddr,
    /// IP address the tiers' admin listeners bind. Older runs lack it: they
    /// bound admin on `bind`, loopback unless it said otherwise.
    #[serde(default = "loopback")]
    pub admin_bind: IpAddr,
    /// Port of the caller's front listener (0: any free port).
    pub caller_port: u16,
    /// Tiers started as a command (`--downstream-cmd`, `--caller-cmd`),
    /// by arm; absent from run.json for our own tiers.
    #[serde(default, skip_serializing_if = "Foreign::is_empty")]
    pub foreign: Foreign,
    /// Transparent huge pages in the tiers the harness starts
    /// (`--huge-pages`); absent from run.json when off, as every run before
    /// it had them.
    #[serde(default, skip_serializing_if = "super::is_default")]
    pub huge_pages: HugePages,
}

fn loopback() -> IpAddr {
    IpAddr::from([127, 0, 0, 1])
}

fn default_hop() -> ProxyHop {
    ProxyHop::Internal
}

/// Which tier the harness sends its load to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetTier {
    Caller,
    Downstream,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyKind {
    Nginx,
    Caddy,
}

/// `--proxy`'s values: a proxy, or `none`, the same as leaving the flag
/// out, so that "no proxy" can be a value of an experiment's axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProxyFlag {
    None,
    Nginx,
    Caddy,
}

impl ProxyFlag {
    pub fn kind(self) -> Option<ProxyKind> {
        match self {
            ProxyFlag::None => None,
            ProxyFlag::Nginx => Some(ProxyKind::Nginx),
            ProxyFlag::Caddy => Some(ProxyKind::Caddy),
        }
    }
}

/// Which hop the proxy sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyHop {
    /// caller → proxy → downstream.
    Internal,
    /// harness → proxy → caller.
    Front,
}

/// How the harness starts the tiers it starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// Child processes on this machine (the embedded topology).
    #[default]
    Processes,
    /// One Docker container per tier, on a private network, each with its own
    /// `--tier-cpus` / `--tier-memory` limits.
    Containers,
}

impl TargetTier {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetTier::Caller => "caller",
            TargetTier::Downstream => "downstream",
        }
    }
}

impl ProxyHop {
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyHop::Internal => "internal",
            ProxyHop::Front => "front",
        }
    }
}

impl ProxyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyKind::Nginx => "nginx",
            ProxyKind::Caddy => "caddy",
        }
    }

    /// The Debian package that provides the binary.
    pub fn package(self) -> &'static str {
        self.as_str()
    }
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Processes => "processes",
            Isolation::Containers => "containers",
        }
    }

    pub fn is_processes(&self) -> bool {
        *self == Isolation::Processes
    }
}

impl DeployArgs {
    /// The harness starts the tiers as processes on this machine (no
    /// container, no tier elsewhere), so it can restart them per round.
    pub fn restartable(&self) -> bool {
        self.caller_url.is_none() && self.downstream_url.is_none()
    }

    /// The proxy asked for (`--proxy none` is none).
    pub fn proxy_kind(&self) -> Option<ProxyKind> {
        self.proxy.and_then(ProxyFlag::kind)
    }

    /// The service listeners stay on loopback.
    pub fn loopback_bind(&self) -> bool {
        self.bind.trim() == "127.0.0.1"
    }
}

impl Deploy {
    /// Validates where the tiers run, for a run over `arms`.
    pub fn from_args(a: &DeployArgs, arms: &[Transport]) -> Result<Deploy, ConfigError> {
        let (bind, admin_bind) = placement(a, arms.len())?;
        let remote = remote::remote(
            a.caller_url.as_deref(),
            a.caller_admin.as_deref(),
            a.downstream_admin.as_deref(),
            a.downstream_url.is_some(),
            arms,
        )?;
        Ok(Deploy {
            target: a.target,
            downstream_url: a.downstream_url.clone(),
            remote,
            isolation: a.isolation,
            tier_limits: containers(a)?,
            proxy: a.proxy_kind(),
            proxy_hop: a.proxy_hop,
            bind,
            admin_bind,
            caller_port: a.caller_port,
            foreign: foreign::foreign(&a.foreign, arms)?,
            huge_pages: limits::huge_pages(a)?,
        })
    }

    /// The listeners bound beyond loopback, as `flag address` pairs: other
    /// machines can reach them, and whatever they send is counted.
    pub fn exposed(&self) -> Vec<(&'static str, IpAddr)> {
        [("--bind", self.bind), ("--admin-bind", self.admin_bind)]
            .into_iter()
            .filter(|(_, ip)| !ip.is_loopback())
            .collect()
    }

    /// The deployment's part of the command line `harness rerun` replays.
    pub fn replay(&self, flags: &mut Flags) {
        flags.flag("--target", self.target.as_str());
        if let Some(url) = &self.downstream_url {
            flags.flag("--downstream-url", url.clone());
        }
        let r = &self.remote;
        if !r.caller_url.is_empty() {
            flags.flag("--caller-url", Remote::per_arm_arg(&r.caller_url));
        }
        if !r.caller_admin.is_empty() {
            flags.flag("--caller-admin", Remote::per_arm_arg(&r.caller_admin));
        }
        if let Some(url) = &r.downstream_admin {
            flags.flag("--downstream-admin", url.clone());
        }
        flags.flag("--isolation", self.isolation.as_str());
        if let Some(cpus) = self.tier_limits.cpus_arg() {
            flags.flag("--tier-cpus", cpus);
        }
        if let Some(memory) = self.tier_limits.memory_arg() {
            flags.flag("--tier-memory", memory);
        }
        if let Some(p) = self.proxy {
            flags.flag("--proxy", p.as_str());
        }
        flags.flag("--proxy-hop", self.proxy_hop.as_str());
        flags.flag("--bind", self.bind.to_string());
        flags.flag("--admin-bind", self.admin_bind.to_string());
        flags.flag("--caller-port", self.caller_port.to_string());
        flags.flag("--huge-pages", self.huge_pages.as_str());
        for (flag, value) in self.foreign.replay() {
            flags.flag(flag, value);
        }
    }
}

/// Which flags go with which topology; returns the addresses the tiers'
/// service and admin listeners bind.
fn placement(a: &DeployArgs, arms: usize) -> Result<(IpAddr, IpAddr), ConfigError> {
    if a.proxy_kind().is_some() && a.target != TargetTier::Caller {
        return Err(bad("--proxy", "goes with the three-tier topology (--target caller)"));
    }
    if a.caller_port != 0 && arms > 1 {
        return Err(bad(
            "--caller-port",
            "cannot be used with --transport both: each arm starts its own caller, and both would bind that port; \
             leave --caller-port out (any free port) or measure one transport",
        ));
    }
    if a.caller_url.is_some() {
        let conflicts = [
            ("--target", a.target != TargetTier::Caller),
            ("--proxy", a.proxy_kind().is_some()),
            ("--caller-port", a.caller_port != 0),
        ];
        if let Some((flag, _)) = conflicts.iter().find(|(_, given)| *given) {
            return Err(bad(flag, "does not go with --caller-url (the harness starts no tier: it drives that caller)"));
        }
    }
    if a.downstream_url.is_some() && a.target != TargetTier::Downstream {
        return Err(bad("--downstream-url", "goes with --target downstream"));
    }
    if let Some(url) = &a.downstream_url
        && !(url.starts_with("http://") && caller::rest::fetch_url(url).is_ok())
    {
        return Err(bad("--downstream-url", format!("{url:?}: give it as http://host:port")));
    }
    let ip = |flag: &'static str, text: &str| {
        text.trim()
            .parse::<IpAddr>()
            .map_err(|_| bad(flag, format!("{text:?} is not an IP address; e.g. {flag} 127.0.0.1 or {flag} ::1")))
    };
    Ok((ip("--bind", &a.bind)?, ip("--admin-bind", &a.admin_bind)?))
}

/// `--isolation containers` and its limits; what it cannot go with.
fn containers(a: &DeployArgs) -> Result<TierLimits, ConfigError> {
    // What the container launcher cannot give is refused by the launchers'
    // table (`config/launchers.rs`); tiers elsewhere are started by nobody.
    let conflicts = [("--caller-url", a.caller_url.is_some()), ("--downstream-url", a.downstream_url.is_some())];
    let started = !a.foreign.downstream_cmd.is_empty() || !a.foreign.caller_cmd.is_empty();
    if started && let Some((flag, _)) = conflicts.iter().find(|(_, given)| *given) {
        return Err(bad(flag, "does not go with --downstream-cmd or --caller-cmd (the harness starts those tiers)"));
    }
    if a.isolation == Isolation::Containers
        && let Some((flag, _)) = conflicts.iter().find(|(_, given)| *given)
    {
        return Err(bad(
            flag,
            "does not go with --isolation containers (the harness starts the caller and the downstream in \
             containers on a private network of their own)",
        ));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(TierLimits {
        cpus: a.tier_cpus.as_deref().map(|t| limits::tier_cpus(t, cores)).transpose()?.unwrap_or_default(),
        memory_bytes: a.tier_memory.as_deref().map(limits::tier_memory).transpose()?.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        deploy: DeployArgs,
    }

    fn deploy(args: &[&str]) -> Result<Deploy, ConfigError> {
        let cli = Cli::try_parse_from(std::iter::once("harness").chain(args.iter().copied())).unwrap();
        Deploy::from_args(&cli.deploy, &[Transport::Grpc, Transport::Rest])
    }

    #[test]
    fn proxy_none_is_no_proxy_as_leaving_the_flag_out() {
        assert_eq!(deploy(&["--proxy", "none"]).unwrap(), deploy(&[]).unwrap());
        assert_eq!(deploy(&["--proxy", "nginx"]).unwrap().proxy, Some(ProxyKind::Nginx));
        assert_eq!(deploy(&["--proxy", "caddy"]).unwrap().proxy, Some(ProxyKind::Caddy));
        // No proxy goes with every topology; a proxy only with three tiers.
        assert!(deploy(&["--proxy", "none", "--target", "downstream"]).is_ok());
        assert_eq!(deploy(&["--proxy", "nginx", "--target", "downstream"]).unwrap_err().flag, "--proxy");
    }

    #[test]
    fn huge_pages_set_the_tiers_the_harness_starts_and_only_those() {
        assert_eq!(deploy(&[]).unwrap().huge_pages, HugePages::Off);
        assert_eq!(deploy(&["--huge-pages", "machine"]).unwrap().huge_pages, HugePages::Machine);
        assert!(Cli::try_parse_from(["harness", "--huge-pages", "sometimes"]).is_err());
        let (caller, downstream) = (["--caller-url", "grpc=http://a:1,rest=http://b:2"], ["--target", "downstream"]);
        for elsewhere in [&caller[..], &[&downstream[..], &["--downstream-url", "http://a:1"]].concat()] {
            let args = [&["--huge-pages", "machine"][..], elsewhere].concat();
            assert_eq!(deploy(&args).unwrap_err().flag, "--huge-pages", "{args:?}");
            assert!(deploy(elsewhere).is_ok(), "{elsewhere:?}");
        }
    }
}

//! `--downstream-cmd` and `--caller-cmd`: tiers in any language, started
//! by the harness as a command (split with shell-words rules, run without a
//! shell) with placeholders for the addresses it listens on and calls;
//! `--downstream-image` and `--caller-image` run that tier in a container
//! of the image (with `--isolation containers`), the command its arguments.
//! Parsing and checks only; starting the command is `tiers/foreign.rs`'s,
//! the container `tiers/containers.rs`'s.

use std::collections::BTreeMap;

use caller::Transport;
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::config::{Compression, Config, ConfigError, TlsMode, bad};

/// Every placeholder a command may hold, and what the harness puts there.
pub const PLACEHOLDERS: [(&str, &str); 9] = [
    ("grpc_addr", "the downstream's gRPC listener, host:port"),
    ("rest_addr", "the downstream's REST listener, host:port"),
    ("listen", "the caller's front door, host:port"),
    ("downstream_grpc", "the caller's gRPC upstream, http://host:port"),
    ("downstream_rest", "the caller's REST upstream, http://host:port"),
    ("downstream", "the caller's upstream for the arm's transport, http://host:port"),
    ("transport", "the arm's transport (grpc, rest, …)"),
    ("delay_ms", "the downstream's service time, --delay in milliseconds"),
    ("admin_addr", "an admin listener serving this project's /stats (a foreign tier usually has none)"),
];

#[derive(Debug, Clone, Args)]
pub struct ForeignArgs {
    /// Start the downstream as this command instead of our own (any language): `{grpc_addr}`,
    /// `{rest_addr}`, `{delay_ms}` and the other placeholders of docs/stacks.md are filled in.
    ///
    /// One command for every arm, or per arm: `grpc=CMD` (the flag repeated). Split with shell-words
    /// rules and run without a shell; measured from outside (its process tree's CPU and memory).
    #[arg(long, allow_hyphen_values = true)]
    pub downstream_cmd: Vec<String>,
    /// Start the caller as this command (placeholders `{listen}`, `{downstream_grpc}`,
    /// `{downstream_rest}`, `{downstream}`, `{transport}`), per arm like --downstream-cmd.
    #[arg(long, allow_hyphen_values = true)]
    pub caller_cmd: Vec<String>,
    /// How long a tier started as a command may take until every address it was given accepts a connection.
    #[arg(long, value_parser = crate::config::duration, default_value = "30s")]
    pub foreign_ready_timeout: std::time::Duration,
    /// Run the downstream in a container of this image (local: nothing is pulled), with
    /// --isolation containers; --downstream-cmd gives the arguments after the image, its
    /// placeholders the container's addresses. One for every arm, or per arm: `grpc=IMAGE`.
    #[arg(long)]
    pub downstream_image: Vec<String>,
    /// Run the caller in a container of this image, its arguments --caller-cmd's.
    #[arg(long)]
    pub caller_image: Vec<String>,
}

/// The foreign tiers' commands, by arm (transport name), as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Foreign {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub downstream_cmd: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub caller_cmd: BTreeMap<String, String>,
    /// How long a command may take to be ready (`--foreign-ready-timeout`).
    #[serde(default = "default_ready_timeout", with = "crate::config::secs")]
    pub ready_timeout: std::time::Duration,
    /// The images the commands run in, by arm (`--isolation containers`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub downstream_image: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub caller_image: BTreeMap<String, String>,
}

fn default_ready_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(30)
}

impl Default for Foreign {
    fn default() -> Foreign {
        Foreign {
            downstream_cmd: BTreeMap::new(),
            caller_cmd: BTreeMap::new(),
            ready_timeout: default_ready_timeout(),
            downstream_image: BTreeMap::new(),
            caller_image: BTreeMap::new(),
        }
    }
}

impl Foreign {
    pub fn is_empty(&self) -> bool {
        self.downstream_cmd.is_empty() && self.caller_cmd.is_empty()
    }

    /// The flags that give these commands back, each arm's on its own.
    pub fn replay(&self) -> Vec<(&'static str, String)> {
        let each = |flag, map: &BTreeMap<String, String>| {
            map.iter().map(move |(arm, cmd)| (flag, format!("{arm}={cmd}"))).collect::<Vec<_>>()
        };
        let mut flags = each("--downstream-cmd", &self.downstream_cmd);
        flags.extend(each("--caller-cmd", &self.caller_cmd));
        flags.extend(each("--downstream-image", &self.downstream_image));
        flags.extend(each("--caller-image", &self.caller_image));
        if !self.is_empty() {
            flags.push(("--foreign-ready-timeout", crate::config::duration_text(self.ready_timeout)));
        }
        flags
    }
}

/// The words of `cmd`, split as a POSIX shell would (quotes, escapes), with
/// no shell run: `None` for an unterminated quote.
pub fn words(cmd: &str) -> Option<Vec<String>> {
    shlex::split(cmd).filter(|w| !w.is_empty())
}

/// The placeholders `text` names, in order; an unknown one is an error.
pub fn placeholders(text: &str) -> Result<Vec<&str>, String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let name = &after[..close];
        if name.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !name.is_empty() {
            if !PLACEHOLDERS.iter().any(|(p, _)| *p == name) {
                let known: Vec<String> = PLACEHOLDERS.iter().map(|(p, _)| format!("{{{p}}}")).collect();
                return Err(format!("{{{name}}} is not a placeholder (known: {})", known.join(", ")));
            }
            found.push(name);
        }
        rest = &after[close + 1..];
    }
    Ok(found)
}

/// One flag's values by arm: a plain command is every arm's; `arm=CMD` is
/// that arm's alone. Every arm gets one command or none does.
fn per_arm(flag: &'static str, given: &[String], arms: &[Transport]) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut map = BTreeMap::new();
    let names: Vec<&str> = arms.iter().map(|t| t.as_str()).collect();
    for value in given {
        let arm = value.split_once('=').map(|(k, _)| k.trim()).filter(|k| Transport::from_name(k).is_some());
        let (keys, cmd) = match arm {
            Some(k) if !names.contains(&k) => {
                return Err(bad(flag, format!("{k:?} is not an arm of this run ({})", names.join(", "))));
            }
            Some(k) => (vec![k], value.split_once('=').map_or("", |(_, c)| c)),
            None => (names.clone(), value.as_str()),
        };
        if words(cmd).is_none() {
            return Err(bad(flag, format!("{cmd:?}: give a command, its quotes closed (split as a shell would)")));
        }
        placeholders(cmd).map_err(|e| bad(flag, e))?;
        for k in keys {
            if map.insert(k.to_owned(), cmd.to_owned()).is_some() {
                return Err(bad(flag, format!("the {k} arm is given two commands")));
            }
        }
    }
    if !map.is_empty()
        && let Some(missing) = names.iter().find(|n| !map.contains_key(**n))
    {
        return Err(bad(flag, format!("no command for the {missing} arm")));
    }
    Ok(map)
}

/// Checks the commands against the arms: each downstream command names the
/// listener its arm reaches, each caller command its front door.
pub fn foreign(a: &ForeignArgs, arms: &[Transport]) -> Result<Foreign, ConfigError> {
    let f = Foreign {
        downstream_cmd: per_arm("--downstream-cmd", &a.downstream_cmd, arms)?,
        caller_cmd: per_arm("--caller-cmd", &a.caller_cmd, arms)?,
        ready_timeout: a.foreign_ready_timeout,
        downstream_image: per_arm("--downstream-image", &a.downstream_image, arms)?,
        caller_image: per_arm("--caller-image", &a.caller_image, arms)?,
    };
    for (flag, images, cmd, cmds) in [
        ("--downstream-image", &f.downstream_image, "--downstream-cmd", &f.downstream_cmd),
        ("--caller-image", &f.caller_image, "--caller-cmd", &f.caller_cmd),
    ] {
        if let Some((arm, image)) = images.iter().find(|(_, i)| placeholders(i).is_ok_and(|p| !p.is_empty())) {
            return Err(bad(flag, format!("the {arm} arm's image {image:?} holds a placeholder: they go in {cmd}")));
        }
        if !images.is_empty() && cmds.is_empty() {
            return Err(bad(
                flag,
                format!("give {cmd} too: the arguments after the image, with the placeholders of where to listen"),
            ));
        }
    }
    for t in arms {
        let need = |flag: &'static str, map: &BTreeMap<String, String>, names: &[&str]| {
            let Some(cmd) = map.get(t.as_str()) else { return Ok(()) };
            let given = placeholders(cmd).unwrap_or_default();
            match names.iter().find(|n| !given.contains(*n)) {
                Some(n) => Err(bad(flag, format!("the {t} arm's command must say where to listen or call: {{{n}}}"))),
                None => Ok(()),
            }
        };
        need("--downstream-cmd", &f.downstream_cmd, &[format!("{}_addr", t.listener()).as_str()])?;
        let upstream = if f.caller_cmd.get(t.as_str()).is_some_and(|c| c.contains("{downstream}")) {
            "downstream".to_owned()
        } else {
            format!("downstream_{}", t.listener())
        };
        need("--caller-cmd", &f.caller_cmd, &["listen", upstream.as_str()])?;
    }
    Ok(f)
}

/// What a foreign tier is not told, refused by flag: the harness passes our
/// tiers these settings as flags a foreign command does not take.
pub fn check(cfg: &Config) -> Result<(), ConfigError> {
    let f = &cfg.deploy.foreign;
    if f.is_empty() {
        return Ok(());
    }
    let why = "a foreign tier is given only the placeholders of docs/stacks.md, not this setting";
    let refused = [
        ("--tls", cfg.hop.tls != TlsMode::None),
        ("--compression", cfg.hop.compression != Compression::None),
        ("--link", cfg.link.is_some()),
        ("--downstream-replicas", cfg.replicas.downstream_replicas > 1 || cfg.replicas.balance.has_balancer()),
        ("--fanout", !f.caller_cmd.is_empty() && cfg.work.fanout != 1),
    ];
    match refused.iter().find(|(_, asked)| *asked) {
        Some((flag, _)) => Err(bad(flag, format!("does not go with --downstream-cmd or --caller-cmd: {why}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(downstream: &[&str], caller: &[&str]) -> ForeignArgs {
        ForeignArgs {
            downstream_cmd: downstream.iter().map(|s| (*s).to_owned()).collect(),
            caller_cmd: caller.iter().map(|s| (*s).to_owned()).collect(),
            foreign_ready_timeout: std::time::Duration::from_secs(30),
            downstream_image: Vec::new(),
            caller_image: Vec::new(),
        }
    }

    #[test]
    fn commands_per_arm_with_known_placeholders() {
        let both = [Transport::Grpc, Transport::Rest];
        let d = "python3 d.py --grpc {grpc_addr} --rest {rest_addr}";
        let f = foreign(&args(&[d], &[]), &both).unwrap();
        assert_eq!((f.downstream_cmd["grpc"].as_str(), f.downstream_cmd["rest"].as_str()), (d, d));
        let c = "node c.js --listen {listen} --to {downstream} --{transport}";
        let f = foreign(&args(&[d], &[c]), &both).unwrap();
        assert_eq!(f.caller_cmd.len(), 2);
        // Replayed, it parses back to the same.
        let again: Vec<String> = f.replay().into_iter().filter(|(k, _)| *k == "--caller-cmd").map(|(_, v)| v).collect();
        let again: Vec<&str> = again.iter().map(String::as_str).collect();
        assert_eq!(foreign(&args(&[d], &again), &both).unwrap(), f);
        assert_eq!(words("a 'b c' \"d\\\"e\"").unwrap(), ["a", "b c", "d\"e"]);
    }

    #[test]
    fn what_a_command_lacks_is_named() {
        let both = [Transport::Grpc, Transport::Rest];
        let err = |d: &[&str], c: &[&str]| foreign(&args(d, c), &both).unwrap_err();
        assert!(err(&["srv {grpc_addr}"], &[]).problem.contains("{rest_addr}"));
        assert!(err(&["srv {grpc} {rest_addr}"], &[]).problem.contains("{grpc} is not a placeholder"));
        assert!(err(&["grpc=srv {grpc_addr}"], &[]).problem.contains("no command for the rest arm"));
        assert!(err(&["srv 'unclosed {grpc_addr} {rest_addr}"], &[]).problem.contains("quotes"));
        let e = err(&["grpc=a {grpc_addr}", "grpc=b {grpc_addr}", "rest=c {rest_addr}"], &[]);
        assert!(e.problem.contains("two commands"), "{e}");
        assert!(err(&[], &["c {listen}"]).problem.contains("{downstream_grpc}"));
        // An image takes its arguments from the command, placeholders there.
        let images = ForeignArgs { caller_image: vec!["x".into()], ..args(&[], &[]) };
        assert!(foreign(&images, &both).unwrap_err().problem.contains("give --caller-cmd too"));
        let images =
            ForeignArgs { downstream_image: vec!["x:{grpc_addr}".into()], ..args(&["{grpc_addr} {rest_addr}"], &[]) };
        assert!(foreign(&images, &both).unwrap_err().problem.contains("holds a placeholder"));
        let images = ForeignArgs { downstream_image: vec!["grpc=x".into()], ..args(&["{grpc_addr} {rest_addr}"], &[]) };
        assert!(foreign(&images, &both).unwrap_err().problem.contains("no command for the rest arm"));
        // JSON bodies and other braces are left alone.
        assert_eq!(placeholders("x '{\"a\":1}' {grpc_addr}").unwrap(), ["grpc_addr"]);
    }
}

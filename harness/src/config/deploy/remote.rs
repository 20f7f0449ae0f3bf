//! `--caller-url`, `--caller-admin` and `--downstream-admin`: tiers that
//! already run elsewhere, driven by URL and sampled through their admin
//! endpoints. Parsing and checks only.

use std::collections::BTreeMap;

use caller::Transport;
use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, bad};

/// Tiers that already run elsewhere: the caller's front door per arm, and
/// the admin endpoints the harness samples them through. Keys are transport
/// names (`grpc`, `rest`): a caller serves one transport, so `--transport
/// both` needs one caller per arm. One downstream serves both listeners.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remote {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub caller_url: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub caller_admin: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downstream_admin: Option<String>,
}

impl Remote {
    pub fn is_empty(&self) -> bool {
        self.caller_url.is_empty() && self.caller_admin.is_empty() && self.downstream_admin.is_none()
    }

    /// The flag value that gives `map` back (`grpc=URL,rest=URL`).
    pub fn per_arm_arg(map: &BTreeMap<String, String>) -> String {
        map.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// `http://host:port`, with an optional trailing `/`: the form every URL flag takes.
fn base_url(flag: &'static str, text: &str) -> Result<String, ConfigError> {
    let t = text.trim().trim_end_matches('/');
    let rest = t.strip_prefix("http://").unwrap_or("");
    if rest.is_empty() || rest.contains('/') || rest.contains(',') || !rest.contains(':') {
        return Err(bad(flag, format!("{text:?}: give it as http://host:port")));
    }
    Ok(t.to_owned())
}

/// A per-arm URL flag: one URL for every arm, or `grpc=URL,rest=URL`.
/// Every arm must get one; a plain URL is refused for arms of two
/// transports (a caller serves one).
pub fn per_arm_urls(
    flag: &'static str,
    text: &str,
    arms: &[Transport],
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut map = BTreeMap::new();
    let names: Vec<&str> = arms.iter().map(|t| t.as_str()).collect();
    if !text.contains('=') {
        let url = base_url(flag, text)?;
        if names.iter().any(|n| *n != names[0]) {
            return Err(bad(
                flag,
                format!(
                    "a caller serves one transport, so --transport both needs one per arm: {flag} grpc=http://host:port,rest=http://host:port"
                ),
            ));
        }
        map.insert(names[0].to_owned(), url);
        return Ok(map);
    }
    for part in text.split(',') {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            bad(flag, format!("{part:?}: write transport=http://host:port, e.g. grpc=http://10.0.0.5:8000"))
        })?;
        let k = k.trim();
        if !names.contains(&k) {
            return Err(bad(flag, format!("{k:?} is not an arm of this run ({})", names.join(", "))));
        }
        if map.insert(k.to_owned(), base_url(flag, v)?).is_some() {
            return Err(bad(flag, format!("{k} is given twice")));
        }
    }
    if let Some(missing) = names.iter().find(|n| !map.contains_key(**n)) {
        return Err(bad(flag, format!("no URL for the {missing} arm")));
    }
    Ok(map)
}

/// `--caller-url`, `--caller-admin`, `--downstream-admin`, checked together.
pub fn remote(
    caller_url: Option<&str>,
    caller_admin: Option<&str>,
    downstream_admin: Option<&str>,
    downstream_url: bool,
    arms: &[Transport],
) -> Result<Remote, ConfigError> {
    let mut r = Remote::default();
    if let Some(text) = caller_url {
        r.caller_url = per_arm_urls("--caller-url", text, arms)?;
    }
    if let Some(text) = caller_admin {
        if r.caller_url.is_empty() {
            return Err(bad("--caller-admin", "goes with --caller-url (a caller the harness did not start)"));
        }
        r.caller_admin = per_arm_urls("--caller-admin", text, arms)?;
    }
    if let Some(text) = downstream_admin {
        if r.caller_url.is_empty() && !downstream_url {
            return Err(bad(
                "--downstream-admin",
                "goes with --caller-url or --downstream-url (a downstream the harness did not start)",
            ));
        }
        r.downstream_admin = Some(base_url("--downstream-admin", text)?);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_per_arm() {
        let both = [Transport::Grpc, Transport::Rest];
        let m = per_arm_urls("--caller-url", "grpc=http://a:1,rest=http://b:2/", &both).unwrap();
        assert_eq!(m["grpc"], "http://a:1");
        assert_eq!(m["rest"], "http://b:2");
        assert_eq!(per_arm_urls("--caller-url", &Remote::per_arm_arg(&m), &both).unwrap(), m);
        assert!(per_arm_urls("--caller-url", "http://a:1", &both).unwrap_err().problem.contains("one per arm"));
        assert!(per_arm_urls("--caller-url", "grpc=http://a:1", &both).unwrap_err().problem.contains("rest arm"));
        let aa = [Transport::Grpc, Transport::Grpc];
        assert_eq!(per_arm_urls("--caller-url", "http://a:1", &aa).unwrap().len(), 1);
        for bad in ["a:1", "http://", "http://a:1/v1/call", "soap=http://a:1", "http://a"] {
            assert!(per_arm_urls("--caller-url", bad, &both[..1]).is_err(), "{bad}");
        }
    }

    #[test]
    fn admin_urls_need_a_remote_tier() {
        let arms = [Transport::Grpc];
        assert_eq!(remote(None, Some("http://a:1"), None, false, &arms).unwrap_err().flag, "--caller-admin");
        assert_eq!(remote(None, None, Some("http://a:1"), false, &arms).unwrap_err().flag, "--downstream-admin");
        assert!(remote(None, None, Some("http://a:1"), true, &arms).is_ok());
        let r = remote(Some("http://c:1"), Some("http://c:2"), Some("http://d:2"), false, &arms).unwrap();
        assert_eq!(
            (r.caller_admin["grpc"].as_str(), r.downstream_admin.as_deref()),
            ("http://c:2", Some("http://d:2"))
        );
    }
}

//! What a run writes and prints: the folder (`--out`, `--label`), the
//! terminal (`--quiet`, `--json`), the rate costs are projected to
//! (`--plan-qps`) and the CI gates (`--fail-if`, `--fail-on-invalid`, whose
//! grammar is `judge::gate`'s). Whether `--out` can hold the run folder is
//! checked where folders are written (`export::files`). Tiers get none of it.

use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Flags, bad};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Output and gates (docs/comparing.md)")]
pub struct OutputArgs {
    /// Folder under which the run folder is written.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// A word added to the run folder's name and the report.
    #[arg(long)]
    pub label: Option<String>,
    /// Print nothing but errors.
    #[arg(long)]
    pub quiet: bool,
    /// Print the machine-readable summary on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The rate (req/s) the comparison projects costs to.
    ///
    /// CPU cores, memory and internal-hop egress per day [default: the measured rate].
    #[arg(long)]
    pub plan_qps: Option<String>,
    #[command(flatten)]
    pub gates: GateArgs,
}

/// The CI gates, the same for a run, `harness compare` and `harness rerun`.
#[derive(Debug, Clone, Default, Args)]
pub struct GateArgs {
    /// CI gate: exit 99 when this holds, e.g. 'p99>505ms' or 'rest.cpu_us_per_request.caller > 1.2 * grpc'
    /// (docs/comparing.md: "Gates for CI").
    ///
    /// Repeat for several; one line on stderr per breach.
    #[arg(long = "fail-if", value_name = "GATE")]
    pub fail_if: Vec<String>,
    /// CI gate: exit 99 when any arm is not a valid measurement.
    #[arg(long)]
    pub fail_on_invalid: bool,
}

impl GateArgs {
    /// The flags that give these gates again.
    pub fn replay(&self) -> Vec<String> {
        let mut line: Vec<String> = self.fail_if.iter().flat_map(|g| ["--fail-if".to_owned(), g.clone()]).collect();
        if self.fail_on_invalid {
            line.push("--fail-on-invalid".into());
        }
        line
    }
}

/// The output section of [`super::Config`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub out: PathBuf,
    pub label: Option<String>,
    pub quiet: bool,
    pub json: bool,
    /// The rate comparisons project costs to (`--plan-qps`); `None`: the
    /// measured rate. Absent from run.json when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_qps: Option<f64>,
}

impl Output {
    pub fn from_args(a: &OutputArgs) -> Result<Output, ConfigError> {
        Ok(Output {
            out: a.out.clone(),
            label: label(a.label.as_deref())?,
            quiet: a.quiet,
            json: a.json,
            plan_qps: plan_qps(a.plan_qps.as_deref())?,
        })
    }

    /// The output's part of the command line `harness rerun` replays (the
    /// gates are given to `rerun` itself).
    pub fn replay(&self, flags: &mut Flags) {
        flags.flag("--out", self.out.display().to_string());
        if let Some(l) = &self.label {
            flags.flag("--label", l.clone());
        }
        if let Some(q) = self.plan_qps {
            flags.flag("--plan-qps", q.to_string());
        }
        flags.switch(self.quiet, "--quiet");
        flags.switch(self.json, "--json");
    }
}

/// `--plan-qps`: a positive, finite rate.
fn plan_qps(text: Option<&str>) -> Result<Option<f64>, ConfigError> {
    let Some(text) = text else { return Ok(None) };
    match text.trim().parse::<f64>() {
        Ok(q) if q > 0.0 && q.is_finite() => Ok(Some(q)),
        _ => Err(bad("--plan-qps", format!("{text:?} is not a rate above 0; e.g. --plan-qps 2000"))),
    }
}

/// `--label`: a word safe in a folder name.
fn label(label: Option<&str>) -> Result<Option<String>, ConfigError> {
    match label {
        None => Ok(None),
        Some(l)
            if !l.is_empty() && l.len() <= 64 && l.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) =>
        {
            Ok(Some(l.to_owned()))
        }
        Some(l) => Err(bad("--label", format!("{l:?}: use 1 to 64 letters, digits, '.', '_' or '-'"))),
    }
}

//! A team's own contract (`--proto`, `--import-path`, `--call`,
//! `--request-data`, `--response-data`, `--generate-data`; the flags are
//! `contract::ContractArgs`, the same on every tier): their checks against
//! the other sections, the section, its replay, and the flags both tiers
//! get (the same flags). Compiling the files and reading the data is the
//! app's, before anything starts; what it loaded travels beside the
//! configuration (`run::run`'s `contract`), never inside it.

use std::path::PathBuf;

use contract::ContractArgs;
use serde::{Deserialize, Serialize};

use super::work::{PayloadAxis, PayloadSweep, WorkArgs};
use super::{ConfigError, Deploy, Flags, TargetTier, TierRole, bad};

/// The contract section of [`super::Config`]: the flags as given, with
/// paths made absolute (a tier may start in another folder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contract {
    pub proto: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub import_path: Vec<PathBuf>,
    pub call: String,
    /// The request data file (several: a payload sweep over them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_data: Vec<PathBuf>,
    /// The answer data file (several: a payload sweep over them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub response_data: Vec<PathBuf>,
    pub generate_data: String,
}

impl Contract {
    /// Checks the contract flags against the work and deploy sections;
    /// `None` without `--proto`.
    pub fn from_args(a: &ContractArgs, work: &WorkArgs, deploy: &Deploy) -> Result<Option<Contract>, ConfigError> {
        if !a.is_set() {
            return Ok(None);
        }
        let call = a
            .call
            .clone()
            .ok_or_else(|| bad("--proto", "needs --call package.Service/Method: which method to measure"))?;
        // Sizes of the built-in records do not apply to a team's messages.
        let built_in = [
            ("--items", work.items != "10"),
            ("--request-bytes", work.request_bytes != "0"),
            ("--shape", !work.shape.is_order()),
        ];
        if let Some((flag, _)) = built_in.iter().find(|(_, given)| *given) {
            return Err(bad(
                flag,
                "sizes the built-in records; with --proto the messages come from --request-data, --response-data or --generate-data",
            ));
        }
        if deploy.target == TargetTier::Downstream {
            return Err(bad("--proto", "goes through the caller for now: drop --target downstream"));
        }
        // A tier the harness did not start is checked through its admin
        // endpoint: it must serve this contract (`run/remote.rs`).
        let started_elsewhere = !deploy.remote.caller_url.is_empty() || deploy.downstream_url.is_some();
        if !deploy.remote.caller_url.is_empty() && deploy.remote.caller_admin.is_empty() {
            return Err(bad(
                "--caller-admin",
                "is needed with --proto and --caller-url: the harness checks that the caller serves the same contract and requests",
            ));
        }
        if started_elsewhere && deploy.remote.downstream_admin.is_none() {
            return Err(bad(
                "--downstream-admin",
                "is needed with --proto and a downstream the harness did not start: it checks that the downstream serves the same contract and answers",
            ));
        }
        let absolute = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
        Ok(Some(Contract {
            proto: a.proto.iter().map(absolute).collect(),
            import_path: a.import_path.iter().map(absolute).collect(),
            call,
            request_data: a.request_data.iter().map(absolute).collect(),
            response_data: a.response_data.iter().map(absolute).collect(),
            generate_data: a.generate_data.to_string(),
        }))
    }

    /// A payload sweep over data files: a list to `--request-data` or to
    /// `--response-data` (one step per file, numbered from 1), never both,
    /// and never with several rates.
    pub fn sweep(a: &ContractArgs, rates: usize) -> Result<Option<PayloadSweep>, ConfigError> {
        let axis = match (a.request_data.len() > 1, a.response_data.len() > 1) {
            (false, false) => return Ok(None),
            (true, true) => {
                return Err(bad(
                    "--response-data",
                    "a payload sweep varies one side: a list of request files or of answer files, not both",
                ));
            }
            (true, false) => PayloadAxis::RequestData,
            (false, true) => PayloadAxis::ResponseData,
        };
        if rates > 1 {
            return Err(bad(
                axis.flag(),
                "a payload sweep goes with one rate, and --qps gives several: sweep the rate or the payload, one per command",
            ));
        }
        let files = if axis == PayloadAxis::RequestData { &a.request_data } else { &a.response_data };
        Ok(Some(PayloadSweep { axis, sizes: (1..=files.len() as u32).collect() }))
    }

    /// Step `number` (from 1) of a payload sweep over data files: that file alone.
    pub fn step(&self, axis: PayloadAxis, number: u32) -> Contract {
        let pick = |files: &[PathBuf]| files.get(number as usize - 1).cloned().into_iter().collect();
        let mut step = self.clone();
        match axis {
            PayloadAxis::RequestData => step.request_data = pick(&self.request_data),
            PayloadAxis::ResponseData => step.response_data = pick(&self.response_data),
            PayloadAxis::Items | PayloadAxis::RequestBytes | PayloadAxis::StreamItems => {}
        }
        step
    }

    /// The flags again, as every tier and `load` take them.
    pub fn args(&self) -> ContractArgs {
        ContractArgs {
            proto: self.proto.clone(),
            import_path: self.import_path.clone(),
            call: Some(self.call.clone()),
            request_data: self.request_data.clone(),
            response_data: self.response_data.clone(),
            generate_data: self.generate_data.parse().unwrap_or_default(),
        }
    }

    /// What a tier in a container must see, at the same absolute paths:
    /// each .proto file's folder (its imports are searched there), the
    /// import paths and the data files; none that another already holds.
    pub fn mounts(&self) -> Vec<PathBuf> {
        let folders = self.proto.iter().filter_map(|p| p.parent().map(PathBuf::from));
        let all: Vec<PathBuf> = folders
            .chain(self.import_path.iter().cloned())
            .chain(self.request_data.iter().cloned())
            .chain(self.response_data.iter().cloned())
            .collect();
        let mut kept: Vec<PathBuf> =
            all.iter().filter(|p| !all.iter().any(|q| q != *p && p.starts_with(q))).cloned().collect();
        kept.sort();
        kept.dedup();
        kept
    }

    /// The contract's part of the command line `harness rerun` replays.
    pub fn replay(contract: Option<&Contract>, flags: &mut Flags) {
        if let Some(c) = contract {
            flags.0.extend(c.args().to_args());
        }
    }

    /// Both tiers take the same flags: the caller sends the requests, the
    /// downstream gives the answers.
    pub fn tier_flags(&self, _role: TierRole, flags: &mut Flags) {
        flags.0.extend(self.args().to_args());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_mounts_each_folder_once_and_no_file_a_folder_holds() {
        let c = Contract {
            proto: vec!["/team/api/shop.proto".into(), "/team/api/v1/orders.proto".into()],
            import_path: vec!["/team/third_party".into()],
            call: "shop.v1.S/M".into(),
            request_data: vec!["/team/api/requests.jsonl".into()],
            response_data: vec!["/data/a.jsonl".into(), "/data/b.jsonl".into()],
            generate_data: String::new(),
        };
        let want: Vec<PathBuf> =
            ["/data/a.jsonl", "/data/b.jsonl", "/team/api", "/team/third_party"].map(PathBuf::from).into();
        assert_eq!(c.mounts(), want);
    }
}

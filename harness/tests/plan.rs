//! `harness plan`: a plan file checked with file:line for every error, a
//! budget, a matrix run as plain run folders whose configuration is the
//! same flags' own, and an experiment resumed after an interruption.

use crate::common;

use std::path::{Path, PathBuf};

use harness::result::RunResult;

/// A short run's load in the plan's words ([`common::SHORT_RUN`]).
const SHORT: &str = "qps = 20\nduration = \"1s\"\nwarmup = \"0s\"\ndelay = \"20ms\"\n";

fn write_plan(dir: &Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `harness plan --check PLAN`, which must refuse it (exit 2): the plan's
/// name as the errors give it, and its stderr.
fn refused_by_check(plan: &Path) -> (String, String) {
    let out = common::harness_cmd(&["plan".as_ref(), "--check".as_ref(), plan.as_os_str()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    (plan.display().to_string(), stderr)
}

/// The one experiment folder under `out`.
fn experiment(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> =
        std::fs::read_dir(out).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// The run folder of cell `id` and its runs.
fn cell(exp: &Path, id: &str) -> (PathBuf, Vec<RunResult>) {
    let folders = harness::export::files::run_folders_in(&exp.join("cells").join(id));
    assert_eq!(folders.len(), 1, "{id}: {folders:?}");
    let runs = harness::export::read_runs(&folders[0]).unwrap();
    (folders[0].clone(), runs)
}

#[test]
fn check_names_every_error_with_its_line_and_key_and_exits_2() {
    let dir = common::out_dir("plan-check");
    // An unknown key, a value its flag refuses, a cell the flags' rules
    // refuse, two axes on one flag.
    let text = format!(
        "transport = \"grpc\"\n{SHORT}bogus = 3\nfanout = \"many\"\n\n[[axis]]\nflag = \"rounds\"\nvalues = [1, 0]\n\n\
         [[axis]]\nflag = \"rounds\"\nvalues = [2]\n"
    );
    let plan = write_plan(&dir, "four.toml", &text);
    let (name, stderr) = refused_by_check(&plan);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines[0],
        format!("{name}:6: bogus: not a flag of a run (keys are long flag names: qps, items, transport, ...)")
    );
    assert_eq!(lines[1], format!("{name}:7: fanout: --fanout: invalid digit found in string"));
    assert_eq!(lines[2], format!("{name}:11: rounds: --rounds: must be between 1 and 10000 (cell 02-rounds-0)"));
    assert_eq!(lines[3], format!("{name}:14: rounds: two axes on one flag (the other on line 10)"));
    assert_eq!(lines[4], format!("harness plan: 4 errors in {name}"));
    assert!(!dir.join("results").exists(), "a check writes nothing");
}

#[test]
fn a_budget_refuses_a_longer_plan_with_its_estimate() {
    let dir = common::out_dir("plan-budget");
    let plan =
        write_plan(&dir, "p.toml", &format!("{SHORT}rounds = 3\n[[axis]]\nflag = \"items\"\nvalues = [1, 10]\n"));
    let args = |budget: &str| ["plan", "--check", "--budget", budget, plan.to_str().unwrap()].map(str::to_owned);
    let out = common::harness_cmd(&args("1s")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("2 cells, estimated") && stderr.contains("longer than the budget of 1s"), "{stderr}");
    let out = common::harness_cmd(&args("1h")).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok: 2 cells, estimated"));
}

#[test]
fn a_cells_configuration_is_that_of_the_same_flags_run_directly() {
    let dir = common::out_dir("plan-config");
    let plan = write_plan(
        &dir,
        "p.toml",
        &format!("transport = \"grpc\"\n{SHORT}[[axis]]\nflag = \"items\"\nvalues = [1, 3]\n"),
    );
    let out_dir = dir.join("out");
    let out = common::harness_cmd(&["plan".as_ref(), plan.as_os_str(), "--out".as_ref(), out_dir.as_os_str()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let exp = experiment(&out_dir);
    let (_, runs) = cell(&exp, "02-items-3");
    // The same flags, given by hand, into the same cell folder.
    let cell_dir = exp.join("cells").join("02-items-3");
    let line = "--transport grpc --qps 20 --duration 1s --warmup 0s --delay 20ms --items 3";
    let mut args: Vec<&str> = line.split(' ').collect();
    args.extend(["--out", cell_dir.to_str().unwrap()]);
    let direct = common::harness_cmd(&args).output().unwrap();
    assert_eq!(direct.status.code(), Some(0), "{}", String::from_utf8_lossy(&direct.stderr));
    let by_hand = harness::export::files::run_folders_in(&cell_dir)
        .into_iter()
        .map(|f| harness::export::read_runs(&f).unwrap())
        .find(|r| r[0].started_at != runs[0].started_at)
        .unwrap();
    assert_eq!(runs[0].config, by_hand[0].config);
    assert_eq!(runs[0].config.work.items, 3);
    let summary = std::fs::read_to_string(exp.join("summary.md")).unwrap();
    assert!(
        summary.contains("| 01-items-1 | 1 | gRPC |") && summary.contains("| 02-items-3 | 3 | gRPC |"),
        "{summary}"
    );
    assert!(exp.join("chart-items-p50.svg").is_file());
    // The experiment has its page too: the summary, its charts inline,
    // nothing fetched, every figure of the summary's tables in it.
    common::browser::check_folder(&exp, &["experiment", "decision", "data"], 2);
    common::browser::same_figures(&exp.join("summary.md"), &exp.join("report.html"));
    // One arm: decision.md says there is nothing to weigh, never a verdict.
    let decision = std::fs::read_to_string(exp.join("decision.md")).unwrap();
    assert!(decision.contains("No cell finished with two arms to compare."), "{decision}");
}

#[test]
fn an_interrupted_experiment_keeps_its_finished_cells_and_resumes_only_the_rest() {
    use std::io::{BufRead, BufReader};
    let dir = common::out_dir("plan-resume");
    let text = format!("transport = \"grpc\"\n{SHORT}[[axis]]\nflag = \"items\"\nvalues = [1, 2, 3]\n");
    let plan = write_plan(&dir, "p.toml", &text);
    let out_dir = dir.join("out");
    let mut child = common::harness_cmd(&["plan".as_ref(), plan.as_os_str(), "--out".as_ref(), out_dir.as_os_str()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        said.push_str(&line);
        said.push('\n');
        // Ctrl-C as the second cell starts: the first is finished.
        if line.contains("cell 2/3 02-items-2") && line.contains("starting") {
            common::signal(child.id() as i32, nix::sys::signal::Signal::SIGINT);
            break;
        }
    }
    said.extend(lines.map_while(Result::ok).map(|l| l + "\n"));
    assert_eq!(child.wait().unwrap().code(), Some(130), "{said}");
    let exp = experiment(&out_dir);
    let (first, _) = cell(&exp, "01-items-1");
    assert!(harness::export::files::run_folders_in(&exp.join("cells").join("03-items-3")).is_empty());
    let summary = std::fs::read_to_string(exp.join("summary.md")).unwrap();
    assert!(summary.contains("| 03-items-3 | 3 | not run |"), "{summary}");

    // A plan that changed since is refused, the change named.
    let changed = write_plan(&dir, "p.toml", &text.replace("qps = 20", "qps = 30"));
    let resume = |plan: &Path| {
        common::harness_cmd(&["plan".as_ref(), plan.as_os_str(), "--resume".as_ref(), exp.as_os_str()])
            .output()
            .unwrap()
    };
    let refused = resume(&changed);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the plan changed since") && stderr.contains("qps: 20 then, 30 now"), "{stderr}");

    let plan = write_plan(&dir, "p.toml", &text);
    let resumed = resume(&plan);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("cell 1/3 01-items-1") && stderr.contains("finished earlier, kept"), "{stderr}");
    assert!(!stderr.lines().any(|l| l.contains("01-items-1") && l.contains("starting")), "{stderr}");
    assert!(stderr.lines().any(|l| l.contains("02-items-2") && l.contains("starting")), "{stderr}");
    assert_eq!(cell(&exp, "01-items-1").0, first, "the finished cell is kept as it was");
    let summary = std::fs::read_to_string(exp.join("summary.md")).unwrap();
    assert!(summary.contains("3 of 3 cells finished."), "{summary}");
    for id in ["01-items-1", "02-items-2", "03-items-3"] {
        let (_, runs) = cell(&exp, id);
        assert_eq!(runs[0].status, harness::result::RunStatus::Complete);
    }
}

#[test]
fn a_crossover_search_of_an_a_a_plan_reports_none_in_range_with_every_probe() {
    let dir = common::out_dir("plan-crossover");
    let text = format!(
        "transport = \"grpc,grpc\"\n{SHORT}rounds = 3\n[[axis]]\nflag = \"items\"\nfind = \"crossover\"\n\
         range = [1, 100]\nrow = \"internal.response_wire_bytes\"\n"
    );
    let plan = write_plan(&dir, "aa.toml", &text);
    let out_dir = dir.join("out");
    let out = common::harness_cmd(&["plan".as_ref(), plan.as_os_str(), "--out".as_ref(), out_dir.as_os_str()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("no crossover of internal.response_wire_bytes in range items 1 … 100 (2 probes)"),
        "{stderr}"
    );
    let exp = experiment(&out_dir);
    let summary = std::fs::read_to_string(exp.join("summary.md")).unwrap();
    assert!(summary.contains("No crossover in range"), "{summary}");
    for id in ["p01-items-1", "p02-items-100"] {
        assert!(summary.contains(&format!("| 3 | {id} |")), "every probe is shown: {summary}");
        assert_eq!(cell(&exp, id).1.len(), 2);
    }
    assert!(exp.join("chart-items-internal-response_wire_bytes.svg").is_file());
    // A/A: the same arm twice wins nowhere on the wire.
    let decision = std::fs::read_to_string(exp.join("decision.md")).unwrap();
    assert!(
        decision.contains("**internal hop wire bytes per request, downstream → caller**: no detectable difference"),
        "{decision}"
    );
}

#[test]
fn every_named_scenario_passes_its_check() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    for file in files {
        let out = common::harness_cmd(&["plan".as_ref(), "--check".as_ref(), file.as_os_str()]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(": ok: "), "{stdout}");
        // Each names the claim it reproduces and its source.
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("# Claim") && text.contains("Source"), "{}", file.display());
        // And states it machine-readable, with its source, for the summary to check.
        assert!(text.contains("[[claim]]") && text.contains("\nsource = "), "{}", file.display());
    }
    for name in ["reverse-proxies.toml", "sequential-http1.toml"] {
        assert!(dir.join(name).is_file(), "{name}");
    }
}

#[test]
fn check_refuses_a_claim_naming_no_row_no_arm_or_no_axis() {
    let dir = common::out_dir("plan-claims");
    let claim = |body: &str| format!("[[claim]]\nsays = \"x\"\nsource = \"y\"\n{body}\n");
    let text = format!(
        "transport = \"grpc,rest\"\n{SHORT}rounds = 3\n[[axis]]\nflag = \"items\"\nvalues = [1, 10]\n\n{}{}{}{}",
        claim("row = \"p77\"\nbetter = \"grpc\""),
        claim("row = \"p50\"\nbetter = \"soap\""),
        claim("row = \"p50\"\nbetter = \"grpc\"\nconnections = \">=10\""),
        claim("row = \"p50\"\nbetter = \"grpc\"\nitems = \">=10\"\nratio = [1.5, 10]"),
    );
    let plan = write_plan(&dir, "claims.toml", &text);
    let (name, stderr) = refused_by_check(&plan);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines[0],
        format!("{name}:14: row: \"p77\" is not a report row (gate keys: p50, p99, cpu_us_per_request.caller, …)")
    );
    assert_eq!(lines[1], format!("{name}:20: better: \"soap\" is not an arm of this plan (grpc, rest)"));
    assert!(
        lines[2].starts_with(&format!("{name}:26: connections: a claim's where names an axis (items)")),
        "{stderr}"
    );
    assert_eq!(lines[3], format!("harness plan: 3 errors in {name}"), "the fourth claim is sound: {stderr}");
}

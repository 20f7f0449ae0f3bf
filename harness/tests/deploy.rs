//! `deploy/`: the Kubernetes manifests are parsed into the Kubernetes API
//! types (k8s-openapi) and checked against the Compose file: the same
//! workloads, image, entrypoint and arguments, CPU and memory limits equal
//! to Compose's `cpus` / `mem_limit`, every URL in an argument naming a
//! Service port that reaches a port the tier listens on, and the admin URLs
//! the harness samples pointing at the tiers' admin listeners. No cluster
//! runs here: the Kubernetes path is checked structurally, not run. The
//! Compose file's arguments are also checked against the harness's own flags.
//! Many generators: the Indexed Job and Compose's `generator-I` services
//! are one definition, each index a segment of the one schedule, and the
//! merge step reads the folders they write on the volume they share.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// Every workload's pod spec by name, and every Service by name.
struct Manifests {
    pods: BTreeMap<String, PodSpec>,
    /// Each Deployment's replica count.
    replicas: BTreeMap<String, i32>,
    /// The workloads of the replicas manifest (`app.kubernetes.io/component: replicas`).
    replica_workloads: std::collections::BTreeSet<String>,
    services: BTreeMap<String, Service>,
    jobs: BTreeMap<String, JobSpec>,
    claims: Vec<String>,
}

fn manifests() -> Manifests {
    let mut m = Manifests {
        pods: BTreeMap::new(),
        replicas: BTreeMap::new(),
        replica_workloads: Default::default(),
        services: BTreeMap::new(),
        jobs: BTreeMap::new(),
        claims: Vec::new(),
    };
    let mut files: Vec<_> = std::fs::read_dir(deploy_dir().join("k8s")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_yaml::Value::deserialize(doc).unwrap();
            let kind = value["kind"].as_str().unwrap_or_else(|| panic!("{}: a document without kind", file.display()));
            let name = value["metadata"]["name"].as_str().unwrap().to_owned();
            let at = |e: serde_yaml::Error| format!("{} ({kind} {name}): {e}", file.display());
            if value["metadata"]["labels"]["app.kubernetes.io/component"].as_str() == Some("replicas")
                && kind != "Service"
            {
                m.replica_workloads.insert(name.clone());
            }
            match kind {
                "Deployment" => {
                    let d: Deployment = serde_yaml::from_value(value.clone()).unwrap_or_else(|e| panic!("{}", at(e)));
                    let spec = d.spec.unwrap();
                    let labels = spec.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap();
                    let selector = spec.selector.match_labels.clone().unwrap();
                    assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)), "{name}: selector misses its pods");
                    m.replicas.insert(name.clone(), spec.replicas.unwrap_or(1));
                    m.pods.insert(name, spec.template.spec.unwrap());
                }
                "Job" => {
                    let j: Job = serde_yaml::from_value(value.clone()).unwrap_or_else(|e| panic!("{}", at(e)));
                    let spec = j.spec.unwrap();
                    m.pods.insert(name.clone(), spec.template.spec.clone().unwrap());
                    m.jobs.insert(name, spec);
                }
                "PersistentVolumeClaim" => m.claims.push(name),
                "Service" => {
                    let s: Service = serde_yaml::from_value(value.clone()).unwrap_or_else(|e| panic!("{}", at(e)));
                    m.services.insert(name, s);
                }
                other => panic!("{}: unexpected kind {other}", file.display()),
            }
        }
    }
    m
}

fn compose() -> serde_yaml::Value {
    let mut v: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(deploy_dir().join("compose.yaml")).unwrap()).unwrap();
    // `<<: *generator`: Compose merges the shared definition into each service.
    v.apply_merge().unwrap();
    v
}

fn strings(v: &serde_yaml::Value) -> Vec<String> {
    v.as_sequence().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect()
}

/// Kubernetes CPU quantity (`500m`, `1`) in CPUs.
fn cpus(q: &str) -> f64 {
    q.strip_suffix('m').map_or_else(|| q.parse().unwrap(), |m| m.parse::<f64>().unwrap() / 1000.0)
}

/// Memory quantity in bytes: Kubernetes' `Mi`/`Gi`, Compose's `m`/`g` (also binary units).
fn bytes(q: &str) -> u64 {
    let (n, unit) = q.split_at(q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len()));
    let scale = match unit {
        "" => 1,
        "Ki" | "k" => 1 << 10,
        "Mi" | "m" => 1 << 20,
        "Gi" | "g" => 1 << 30,
        other => panic!("unit {other}"),
    };
    n.parse::<u64>().unwrap() * scale
}

/// The port of every `0.0.0.0:PORT` a container's arguments bind.
fn bound_ports(args: &[String]) -> Vec<i32> {
    args.iter().filter_map(|a| a.strip_prefix("0.0.0.0:")).map(|p| p.parse().unwrap()).collect()
}

/// Every `http://host:port` in the arguments (a per-arm value holds several).
fn urls(args: &[String]) -> Vec<(String, i32)> {
    args.iter()
        .flat_map(|a| a.split([',', '=']))
        .filter_map(|part| part.strip_prefix("http://"))
        .map(|hp| {
            let (h, p) = hp.split_once(':').unwrap();
            (h.to_owned(), p.parse().unwrap())
        })
        .collect()
}

fn only_container(name: &str, pod: &PodSpec) -> Container {
    assert_eq!(pod.containers.len(), 1, "{name}: one container per pod");
    pod.containers[0].clone()
}

/// The Compose generators' start when START_AT is not set.
const COMPOSE_START_AT: &str = "${START_AT:-+30s}";

/// The workload a Compose service is in deploy/k8s: `generator-I` is index
/// I of the `generators` Indexed Job; every other has its own name.
fn workload(service: &str) -> (&str, Option<&str>) {
    match service.strip_prefix("generator-") {
        Some(index) => ("generators", Some(index)),
        None => (service, None),
    }
}

/// A container's arguments as the pod sees them: `$(VAR)` replaced by the
/// value of its env var VAR, the completion index by `index`.
fn expanded(k: &Container, index: Option<&str>) -> Vec<String> {
    let mut args = k.args.clone().unwrap();
    for var in k.env.clone().unwrap_or_default() {
        let value = match (&var.value, var.name.as_str(), index) {
            (Some(v), _, _) => v.clone(),
            (None, "SEGMENT_INDEX", Some(i)) => i.to_owned(),
            _ => continue,
        };
        for a in &mut args {
            *a = a.replace(&format!("$({})", var.name), &value);
        }
    }
    args
}

/// A Compose service's arguments, its defaults in place of unset variables.
fn compose_args(svc: &serde_yaml::Value) -> Vec<String> {
    strings(&svc["command"]).into_iter().map(|a| a.replace(COMPOSE_START_AT, "+30s")).collect()
}

#[test]
fn kubernetes_manifests_agree_with_the_compose_file() {
    let m = manifests();
    let c = compose();
    let services = c["services"].as_mapping().unwrap();
    let names: Vec<String> = services.keys().map(|k| k.as_str().unwrap().to_owned()).collect();
    let workloads: std::collections::BTreeSet<&str> = names.iter().map(|n| workload(n).0).collect();
    // The replicas manifest has no Compose twin (its own test below).
    let pods = m.pods.keys().filter(|p| !m.replica_workloads.contains(*p)).map(String::as_str);
    assert!(workloads.iter().copied().eq(pods), "{names:?} vs {:?}", m.pods.keys());
    for name in &names {
        let svc = &c["services"][name.as_str()];
        let (pod_name, index) = workload(name);
        let pod = m.pods.get(pod_name).unwrap_or_else(|| panic!("no Deployment or Job named {pod_name} in deploy/k8s"));
        let k = only_container(name, pod);
        assert_eq!(k.image.as_deref(), svc["image"].as_str(), "{name}: image");
        assert_eq!(k.image_pull_policy.as_deref(), Some("Never"), "{name}: no registry to pull from");
        assert_eq!(k.command.clone().unwrap(), strings(&svc["entrypoint"]), "{name}: entrypoint");
        let args = expanded(&k, index);
        assert_eq!(args, compose_args(svc), "{name}: arguments");
        let res = k.resources.clone().unwrap();
        let (limits, requests) = (res.limits.unwrap(), res.requests.unwrap());
        assert_eq!(cpus(&limits["cpu"].0), svc["cpus"].as_f64().unwrap(), "{name}: CPU limit = compose cpus");
        assert_eq!(bytes(&limits["memory"].0), bytes(svc["mem_limit"].as_str().unwrap()), "{name}: memory");
        assert_eq!((&requests["cpu"], &requests["memory"]), (&limits["cpu"], &limits["memory"]), "{name}: guaranteed");
        // Every port the tier binds is declared, and every declared one is bound.
        let mut declared: Vec<i32> = k.ports.clone().unwrap_or_default().iter().map(|p| p.container_port).collect();
        let mut bound = bound_ports(&args);
        declared.sort();
        bound.sort();
        assert_eq!(declared, bound, "{name}: container ports vs listen flags");
    }
    // Every URL in any arguments reaches, through a Service of that name, a
    // port the named tier listens on; admin URLs reach its --admin-addr.
    for (name, pod) in &m.pods {
        let args = only_container(name, pod).args.unwrap();
        for (i, (host, port)) in urls(&args).into_iter().enumerate() {
            let service = m.services.get(&host).unwrap_or_else(|| panic!("{name}: no Service {host}"));
            let spec = service.spec.as_ref().unwrap();
            let sp = spec.ports.as_ref().unwrap().iter().find(|p| p.port == port);
            let sp = sp.unwrap_or_else(|| panic!("{name}: Service {host} has no port {port}"));
            // The pods the Service selects (a headless Service is named apart from them).
            let selected = spec.selector.as_ref().unwrap()["app.kubernetes.io/name"].clone();
            let target = m.pods.get(&selected).map(|p| only_container(&selected, p)).unwrap();
            let target_port = match sp.target_port.as_ref().unwrap() {
                IntOrString::Int(n) => *n,
                IntOrString::String(s) => {
                    target.ports.as_ref().unwrap().iter().find(|p| p.name.as_deref() == Some(s)).unwrap().container_port
                }
            };
            assert!(host == selected || host == format!("{selected}-headless"), "{host}: selects {selected}");
            let target_args = target.args.unwrap();
            assert!(
                bound_ports(&target_args).contains(&target_port),
                "{name} → {host}:{port}: {host} does not listen on {target_port}"
            );
            let admin = target_args.iter().position(|a| a == "--admin-addr").map(|p| &target_args[p + 1]);
            let is_admin_flag = |flag: &str| {
                args.iter()
                    .position(|a| a == flag)
                    .is_some_and(|p| args[p + 1].contains(&format!("http://{host}:{port}")))
            };
            if is_admin_flag("--caller-admin") || is_admin_flag("--downstream-admin") {
                assert_eq!(admin, Some(&format!("0.0.0.0:{target_port}")), "{name}: admin URL #{i} is {host}'s admin");
            }
        }
    }
}

#[test]
fn the_replicas_sit_behind_a_cluster_ip_and_a_headless_service_each_with_its_caller() {
    use clap::Parser;
    let m = manifests();
    assert!(m.replicas["downstream-replicas"] >= 2, "several replicas: {:?}", m.replicas);
    let service = |name: &str| m.services[name].spec.clone().unwrap();
    let (l4, headless) = (service("downstream-replicas"), service("downstream-replicas-headless"));
    assert_eq!(l4.cluster_ip, None, "a ClusterIP Service: kube-proxy balances connections");
    assert_eq!(headless.cluster_ip.as_deref(), Some("None"), "headless: DNS names every pod");
    assert_eq!(l4.selector, headless.selector, "both reach the same pods");
    assert_eq!(l4.selector.unwrap()["app.kubernetes.io/name"], "downstream-replicas");
    // The replicas run the single downstream's flags, and the age on top.
    let args = |name: &str| only_container(name, &m.pods[name]).args.unwrap();
    let (one, each) = (args("downstream"), args("downstream-replicas"));
    assert_eq!(each[..one.len()], one[..], "{each:?}");
    assert_eq!(each[one.len()..], ["--grpc-max-connection-age", "30s"]);
    downstream::cli::Args::try_parse_from(std::iter::once("downstream".to_owned()).chain(each)).unwrap();
    // Each caller reaches the replicas its way, with flags the caller takes.
    for (caller, url, all) in [
        ("caller-grpc-l4", "http://downstream-replicas:50051", false),
        ("caller-grpc-headless", "http://downstream-replicas-headless:50051", true),
    ] {
        let a = args(caller);
        let at = a.iter().position(|x| x == "--downstream-grpc").unwrap();
        assert_eq!((a[at + 1].as_str(), a.contains(&"--downstream-all-addresses".to_owned())), (url, all), "{caller}");
        let parsed = caller::cli::Args::try_parse_from(std::iter::once("caller".to_owned()).chain(a)).unwrap();
        assert_eq!(parsed.downstream_all_addresses, all);
    }
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    run: harness::config::RunArgs,
}

#[test]
fn the_compose_harness_arguments_are_valid_harness_flags() {
    use clap::Parser;
    // The harness's own flag parsing and validation accept them (with a
    // writable --out instead of the container's /results).
    let c = compose();
    let mut args = strings(&c["services"]["harness"]["command"]);
    let out = std::env::temp_dir().join(format!("gvr-deploy-{}", std::process::id()));
    let at = args.iter().position(|a| a == "--out").unwrap();
    args[at + 1] = out.to_string_lossy().into_owned();
    let cli = Cli::try_parse_from(std::iter::once("harness".to_owned()).chain(args)).unwrap();
    let plan = harness::config::Plan::from_args(&cli.run).unwrap();
    assert_eq!(plan.config.deploy.remote.caller_url.len(), 2, "one caller per arm");
    assert!(plan.config.deploy.remote.downstream_admin.is_some());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_tiers_bind_loopback_unless_told_otherwise() {
    use std::io::BufRead;
    for args in [&["downstream"][..], &["caller", "--downstream-grpc", "http://127.0.0.1:1"]] {
        let role = args[0];
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
            .arg("__tier")
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let ready: service::ReadyLine = serde_json::from_str(&line).unwrap();
        assert!(ready.listeners.len() >= 2, "{line}");
        assert!(ready.listeners.values().all(|a| a.ip().is_loopback()), "{role}: {line}");
    }
}

#[test]
fn the_generators_are_the_segments_of_one_run_and_merge_reads_their_folders() {
    use clap::Parser;
    let m = manifests();
    let c = compose();
    // The Indexed Job: one pod per segment, all at once, the index from the
    // pod's completion-index annotation.
    let job = &m.jobs["generators"];
    assert_eq!(job.completion_mode.as_deref(), Some("Indexed"));
    let n = job.completions.unwrap();
    assert_eq!(job.parallelism, Some(n), "every segment runs at once");
    let k = only_container("generators", &m.pods["generators"]);
    let index = k.env.clone().unwrap().into_iter().find(|e| e.name == "SEGMENT_INDEX").unwrap();
    let field = index.value_from.unwrap().field_ref.unwrap().field_path;
    assert_eq!(field, "metadata.annotations['batch.kubernetes.io/job-completion-index']");
    // Compose lists the same segments, one service each.
    let composed: Vec<String> = c["services"]
        .as_mapping()
        .unwrap()
        .keys()
        .filter_map(|k| k.as_str().filter(|s| s.starts_with("generator-")).map(str::to_owned))
        .collect();
    assert_eq!(composed.len(), n as usize, "{composed:?}");
    // Each index is a valid run: segment I of N, only segment 0 sampling the tiers.
    let out = std::env::temp_dir().join(format!("gvr-deploy-gen-{}", std::process::id()));
    let mut outs = Vec::new();
    for i in 0..n {
        let mut args = expanded(&k, Some(&i.to_string()));
        let at = args.iter().position(|a| a == "--out").unwrap();
        outs.push(std::mem::replace(&mut args[at + 1], out.to_string_lossy().into_owned()));
        let cli = Cli::try_parse_from(std::iter::once("harness".to_owned()).chain(args)).unwrap();
        let plan = harness::config::Plan::from_args(&cli.run).unwrap_or_else(|e| panic!("index {i}: {e}"));
        let s = plan.config.generators.segment.unwrap();
        assert_eq!((s.index, s.count, s.sample_tiers), (i as u32, n as u32, i == 0));
        assert_eq!(plan.config.deploy.remote.downstream_admin.is_some(), i == 0);
    }
    let _ = std::fs::remove_dir_all(&out);
    // The merge step reads the folder the generators write into, on the same claim.
    let merge = only_container("merge", &m.pods["merge"]).args.unwrap();
    let cli = harness::app::Cli::try_parse_from(std::iter::once("harness".to_owned()).chain(merge.clone())).unwrap();
    let Some(harness::app::Command::Merge(args)) = cli.command else { panic!("merge: {merge:?}") };
    assert!(outs.iter().all(|o| std::path::Path::new(o) == args.folders[0]), "{outs:?} vs {:?}", args.folders);
    let claim = |pod: &str| -> String {
        let volumes = m.pods[pod].volumes.clone().unwrap();
        volumes.into_iter().find_map(|v| v.persistent_volume_claim).unwrap().claim_name
    };
    assert_eq!(claim("generators"), claim("merge"));
    assert!(m.claims.contains(&claim("merge")), "no PersistentVolumeClaim {}", claim("merge"));
    // Compose's merge waits for every generator to finish.
    let depends = c["services"]["merge"]["depends_on"].as_mapping().unwrap();
    for g in &composed {
        assert_eq!(depends[g.as_str()]["condition"].as_str(), Some("service_completed_successfully"), "{g}");
    }
}

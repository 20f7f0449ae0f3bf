//! Everything one service measures about itself, rendered as JSON and as
//! Prometheus text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::{Counters, CountersSnapshot, ProcessSnapshot, ProcessStats};

/// One service's counters, process stats and settings.
#[derive(Debug)]
pub struct Registry {
    service: &'static str,
    /// The host name the process runs on, read once at start.
    hostname: Option<String>,
    started: Instant,
    listeners: Vec<Arc<Counters>>,
    clients: Vec<Arc<Counters>>,
    admin: Option<Arc<Counters>>,
    process: ProcessStats,
    settings: serde_json::Value,
}

/// What `/stats` serves: the harness reads two of these and subtracts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    pub service: String,
    /// The host (or container, or pod) name the service runs on, so a
    /// harness sampling it from elsewhere can say where it ran. Absent from
    /// services built before it was reported.
    #[serde(default)]
    pub hostname: Option<String>,
    pub uptime_seconds: f64,
    pub process: ProcessSnapshot,
    /// Inbound listeners by name (`grpc`, `rest`, `front`); admin traffic is not here.
    pub listeners: BTreeMap<String, CountersSnapshot>,
    /// Outbound clients by name (`grpc`, `rest`).
    pub clients: BTreeMap<String, CountersSnapshot>,
    /// The admin listener's answers by outcome (its refusals among them);
    /// kept apart from the measured listeners, and its bytes not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<CountersSnapshot>,
    /// Every setting that affects fairness (pools, stream limits, timeouts, delay).
    pub settings: serde_json::Value,
}

impl Registry {
    pub fn new(service: &'static str) -> Self {
        Registry {
            service,
            hostname: sysinfo::System::host_name().ok().filter(|h| !h.is_empty()),
            started: Instant::now(),
            listeners: Vec::new(),
            clients: Vec::new(),
            admin: None,
            process: ProcessStats::current(),
            settings: serde_json::Value::Null,
        }
    }

    /// Records the settings `/stats` reports (set once, before serving).
    pub fn set_settings(&mut self, settings: serde_json::Value) {
        self.settings = settings;
    }

    /// Adds the fields of the object `more` to the settings (an object).
    pub fn extend_settings(&mut self, more: serde_json::Value) {
        if let (Some(map), serde_json::Value::Object(more)) = (self.settings.as_object_mut(), more) {
            map.extend(more);
        }
    }

    /// Registers inbound counters and returns them for the listener to use.
    pub fn listener(&mut self, counters: Counters) -> Arc<Counters> {
        let c = Arc::new(counters);
        self.listeners.push(c.clone());
        c
    }

    /// Registers outbound counters and returns them for the client to use.
    pub fn client(&mut self, counters: Counters) -> Arc<Counters> {
        let c = Arc::new(counters);
        self.clients.push(c.clone());
        c
    }

    /// Registers the admin listener's counters (outcomes only: its bytes are
    /// not the service's traffic) and returns them.
    pub fn admin(&mut self, counters: Counters) -> Arc<Counters> {
        let c = Arc::new(counters);
        self.admin = Some(c.clone());
        c
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let collect = |v: &[Arc<Counters>]| v.iter().map(|c| (c.name().to_owned(), c.snapshot())).collect();
        // The CPU time (read last by the process snapshot) and the uptime are
        // read back to back: a sampler divides one by the other.
        let process = self.process.snapshot();
        let uptime_seconds = self.started.elapsed().as_secs_f64();
        StatsSnapshot {
            service: self.service.to_owned(),
            hostname: self.hostname.clone(),
            uptime_seconds,
            process,
            listeners: collect(&self.listeners),
            clients: collect(&self.clients),
            admin: self.admin.as_ref().map(|c| c.snapshot()),
            settings: self.settings.clone(),
        }
    }

    /// The Prometheus text exposition format (version 0.0.4).
    pub fn prometheus(&self) -> String {
        render_prometheus(&self.snapshot())
    }
}

/// Extra labels and value of each sample an endpoint contributes to a family.
type Rows = dyn Fn(&CountersSnapshot) -> Vec<(String, Option<u64>)>;

fn render_prometheus(s: &StatsSnapshot) -> String {
    let mut out = String::new();
    let endpoints: Vec<(&str, &String, &CountersSnapshot)> = s
        .listeners
        .iter()
        .map(|(n, c)| ("listener", n, c))
        .chain(s.clients.iter().map(|(n, c)| ("client", n, c)))
        .collect();
    let svc = &s.service;
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{{service=\"{svc}\",{labels}}} {v}");
        }
    };
    // A figure an endpoint cannot see (None) is left out, never written as 0.
    let per_endpoint = |f: &Rows| {
        endpoints
            .iter()
            .flat_map(|(role, name, c)| {
                f(c).into_iter().filter_map(move |(extra, v)| {
                    Some((format!("role=\"{role}\",endpoint=\"{name}\"{extra}"), v? as f64))
                })
            })
            .collect::<Vec<_>>()
    };
    family(
        "bench_wire_bytes_total",
        "counter",
        "Bytes read (in) and written (out) on the sockets of the endpoint.",
        per_endpoint(&|c| vec![(",direction=\"in\"".into(), c.bytes_in), (",direction=\"out\"".into(), c.bytes_out)]),
    );
    family(
        "bench_message_bytes_total",
        "counter",
        "Encoded message bodies read (in) and written (out), without HTTP or gRPC framing.",
        per_endpoint(&|c| {
            vec![
                (",direction=\"in\"".into(), Some(c.message_bytes_in)),
                (",direction=\"out\"".into(), Some(c.message_bytes_out)),
            ]
        }),
    );
    family(
        "bench_connections_total",
        "counter",
        "Connections accepted (listener) or opened (client).",
        per_endpoint(&|c| vec![(String::new(), Some(c.connections))]),
    );
    family(
        "bench_connections_open",
        "gauge",
        "Connections open now.",
        per_endpoint(&|c| vec![(String::new(), c.connections_open)]),
    );
    family(
        "bench_requests_total",
        "counter",
        "Requests by outcome.",
        per_endpoint(&|c| c.requests.iter().map(|(o, v)| (format!(",outcome=\"{o}\""), Some(*v))).collect()),
    );
    // Standard process metric names; an unreadable figure is left out, not zeroed.
    if let Some(cpu) = s.process.cpu_seconds {
        let _ = writeln!(
            out,
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total{{service=\"{svc}\"}} {cpu}"
        );
    }
    if let Some(rss) = s.process.rss_bytes {
        let _ = writeln!(
            out,
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes{{service=\"{svc}\"}} {rss}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_has_every_family_and_label() {
        let mut reg = Registry::new("downstream");
        reg.set_settings(serde_json::json!({"delay_ms": 5}));
        let rest = reg.listener(Counters::new("rest", &["ok"]));
        rest.add_bytes_in(7);
        rest.record("ok");
        let text = reg.prometheus();
        assert!(text.contains(
            "bench_wire_bytes_total{service=\"downstream\",role=\"listener\",endpoint=\"rest\",direction=\"in\"} 7"
        ));
        assert!(text.contains(
            "bench_requests_total{service=\"downstream\",role=\"listener\",endpoint=\"rest\",outcome=\"ok\"} 1"
        ));
        assert!(text.contains("# TYPE bench_connections_open gauge"));
        assert!(text.contains("process_resident_memory_bytes{service=\"downstream\"}"));
        assert!(text.contains("process_cpu_seconds_total{service=\"downstream\"}"));
    }

    #[test]
    fn snapshot_round_trips_as_json() {
        let mut reg = Registry::new("caller");
        reg.client(Counters::new("grpc", &["ok", "timeout"])).record("timeout");
        let snap = reg.snapshot();
        let back: StatsSnapshot = serde_json::from_str(&serde_json::to_string(&snap).unwrap()).unwrap();
        assert_eq!(back, snap);
        assert_eq!(back.clients["grpc"].requests["timeout"], 1);
    }
}

//! The streaming arms from the harness's side of the front hop, on tiers
//! the test starts (`harness __tier`): the harness's stream client reads
//! the caller's one NDJSON answer item by item, every item whole, in order
//! and as generated, each stamped as it arrived; the first arrives before
//! the last is made, on every arm. Then whole runs: every arm measured
//! item by item, and a stream cut after k items counted as an error with k.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{harness_cmd, load, out_dir, run_folder, start_tier};
use harness::load::front::FrontClient;
use harness::result::{RunResult, StreamRound, TierName};
use payload::{StreamItem, StreamRequest, verify_item};

#[test]
fn the_harness_reads_each_arms_stream_item_by_item() {
    let downstream =
        start_tier(None, "downstream", &["--delay", "10ms", "--stream-interval", "20ms"].map(String::from));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let req = StreamRequest { request_id: "front-1".into(), items: 8, item_bytes: 32 };
    for transport in caller::Transport::STREAMING {
        let (arm, listener) = (transport.as_str(), transport.listener());
        let flag = format!("--downstream-{listener}");
        let args = ["--transport", arm, &flag, &downstream.url(listener), "--page-size", "3"].map(String::from);
        let caller = start_tier(None, "caller", &args);
        let client = FrontClient::new(&format!("{}/v1/stream", caller.url("front"))).unwrap();
        let answer = rt.block_on(client.post_stream(serde_json::to_string(&req).unwrap(), Duration::ZERO)).unwrap();
        assert_eq!((answer.status.as_u16(), answer.cut.as_ref()), (200, None), "{arm}");
        let items: Vec<StreamItem> = answer.items.iter().map(|i| serde_json::from_slice(&i.json).unwrap()).collect();
        assert_eq!(items.len(), 8, "{arm}");
        for (i, item) in items.iter().enumerate() {
            assert_eq!(verify_item(&req, item, i as u32), Ok(()), "{arm}");
        }
        // The first item's arrival, on the wall clock, before the last was made.
        let now = (Instant::now(), SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64);
        let first_arrived = now.1 - now.0.duration_since(answer.items[0].arrived).as_nanos() as i64;
        assert!(first_arrived < items[7].produced_unix_nanos, "{arm}: the first item came after the last was made");
        assert!(answer.items.windows(2).all(|w| w[1].arrived >= w[0].arrived), "{arm}: arrivals in order");
        assert!(answer.items.iter().any(|i| i.kernel_stamped), "{arm}: no item carried the kernel's stamp");
    }
}

/// Runs the harness with the flags in `args` and `extra` (flag and value
/// pairs that are not words), writing under its own folder `name`;
/// asserts it exits 0 and gives the run folder.
fn streams_run(name: &str, args: &str, extra: &[&str]) -> std::path::PathBuf {
    let out = out_dir(name);
    let mut all: Vec<&str> = args.split_whitespace().chain(extra.iter().copied()).collect();
    all.extend(["--out", out.to_str().unwrap()]);
    let o = harness_cmd(&all).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&o.stderr));
    run_folder(&out)
}

/// A stream figure of `arm`'s only round.
fn stream_of(folder: &std::path::Path, arm: &str) -> (RunResult, StreamRound) {
    let run = load(&folder.join(arm));
    let stream = run.rounds[0].stream.clone().unwrap_or_else(|| panic!("{arm}: no stream figures"));
    (run, stream)
}

#[test]
fn a_run_measures_every_streaming_arm_item_by_item_on_the_producers_schedule() {
    let (items, interval_ms, page) = (12u32, 15.0, 4.0);
    let folder = streams_run(
        "streams-run",
        "--transport grpc-stream,grpc-pages,rest-pages,rest-ndjson,rest-sse,connect-stream \
         --stream-items 12 --stream-interval 15ms --page-size 4 --delay 20ms --qps 8 \
         --duration 2s --warmup 1s --rounds 1",
        &[],
    );
    // The six arms' page, as a browser shows it (no decision: more than two options).
    crate::common::browser::check_folder(&folder, crate::common::browser::ARMS, 4);
    let mut first_item_p50 = std::collections::BTreeMap::new();
    for arm in ["grpc-stream", "grpc-pages", "rest-pages", "rest-ndjson", "rest-sse", "connect-stream"] {
        let (run, s) = stream_of(&folder, arm);
        let r = &run.rounds[0];
        assert!(r.requests.ok > 0 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
        assert_eq!((s.items, s.streams_ok), (u64::from(items) * r.requests.ok, r.requests.ok), "{arm}");
        for h in ["corrected", "first_item", "item_delay", "buffered_items"] {
            assert!(r.histograms.contains_key(h), "{arm}: no {h} histogram");
        }
        let (first, last, delay) = (s.first_item.unwrap(), s.last_item.unwrap(), s.item_delay.unwrap());
        assert_eq!(delay.count, s.items, "{arm}: a delay for every item");
        // The last item cannot come before the schedule made it: 11 intervals after the first is made.
        assert!(last.min_ms >= first.min_ms, "{arm}");
        assert!(
            last.p50_ms - first.p50_ms >= (f64::from(items) - page) * interval_ms * 0.9,
            "{arm}: {first:?} {last:?}"
        );
        // Bytes: the wire carries the message and its framing.
        let i = &s.internal;
        assert!(i.response_wire_bytes_per_item.unwrap() > i.response_message_bytes_per_item.unwrap(), "{arm}: {i:?}");
        assert!(
            s.cpu_us_per_item.contains_key(&TierName::Caller) && s.cpu_us_per_item.contains_key(&TierName::Downstream)
        );
        first_item_p50.insert(arm, (first.p50_ms, delay.p50_ms));
    }
    // A page is answered when its last item is made: the paging arms' first
    // item comes (page size - 1) intervals after the streaming arms', and
    // their items wait longer from production to arrival.
    for paged in ["grpc-pages", "rest-pages"] {
        for streamed in ["grpc-stream", "rest-ndjson", "rest-sse", "connect-stream"] {
            let (p, s) = (first_item_p50[paged], first_item_p50[streamed]);
            assert!(p.0 - s.0 >= (page - 1.0) * interval_ms * 0.9, "{paged} vs {streamed}: {p:?} {s:?}");
            assert!(p.1 > s.1, "{paged} vs {streamed}: per-item delay {p:?} {s:?}");
        }
    }
    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    for row in ["time to first item p99 (ms)", "per-item delay p50 (ms)", "downstream CPU per item (µs)"] {
        assert!(comparison.contains(row), "comparison.md lacks {row}");
    }
}

/// A REST downstream that streams the first `k` items of every stream
/// asked for, then closes the connection without ending the body; it stops
/// after `limit` streams.
fn cutting_downstream(k: u32, limit: usize) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(limit) {
            let Ok(mut tcp) = conn else { continue };
            std::thread::spawn(move || {
                use std::io::{BufRead, Write};
                let mut reader = std::io::BufReader::new(tcp.try_clone().unwrap());
                let mut head = String::new();
                while reader.read_line(&mut head).is_ok_and(|n| n > 2) {}
                let query = head.split_whitespace().nth(1).and_then(|p| p.split_once('?')).map(|q| q.1.to_owned());
                let field = |name: &str| {
                    query.as_deref()?.split('&').find_map(|kv| kv.strip_prefix(&format!("{name}="))).map(str::to_owned)
                };
                let req = StreamRequest {
                    request_id: field("requestId").unwrap_or_default(),
                    items: field("items").and_then(|n| n.parse().ok()).unwrap_or(0),
                    item_bytes: 0,
                };
                let _ = tcp.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n",
                );
                for i in 0..k.min(req.items) {
                    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64;
                    let line = serde_json::to_string(&StreamItem::new(&req, i, now, now)).unwrap() + "\n";
                    let _ = tcp.write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes());
                }
                let _ = tcp.flush();
                let _ = tcp.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_stream_cut_after_k_items_is_an_error_that_says_k() {
    let downstream = cutting_downstream(3, 400);
    let args = ["--transport", "rest-ndjson", "--downstream-rest", &downstream].map(String::from);
    let caller = start_tier(None, "caller", &args);
    let front = caller.url("front");
    let run = load(&streams_run(
        "streams-cut",
        "--transport rest-ndjson --stream-items 6 --qps 5 --duration 2s --warmup 0s \
         --rounds 1",
        &["--caller-url", &front],
    ));
    let (r, s) = (&run.rounds[0], run.rounds[0].stream.clone().unwrap());
    assert!(r.requests.sent > 0);
    assert_eq!(r.requests.errors.get("stream_cut"), Some(&r.requests.sent), "{:?}", r.requests);
    assert_eq!(r.requests.ok, 0);
    assert_eq!(s.cut_after_items.get("3"), Some(&r.requests.sent), "{:?}", s.cut_after_items);
    assert_eq!(s.items, 3 * r.requests.sent, "the items before each cut still count as delivered");
    // A caller the harness did not start may run elsewhere: its clock is not vouched for.
    assert_eq!(s.item_delay_clocks, "may_differ");
    let reason = run.error_reasons.iter().find(|e| e.class == "stream_cut").expect("a reason for the cuts");
    assert!(reason.reason.starts_with("cut after 3 of 6 items"), "{reason:?}");
}

/// The most the kernel may hold of one stream on its way to the harness:
/// on each of its two hops (downstream to caller, caller to harness) a
/// sending and a receiving socket, each grown by TCP's autotuning to at
/// most the machine's `tcp_wmem` and `tcp_rmem` maxima.
fn kernel_buffer_bytes() -> u64 {
    let max = |name: &str| -> u64 {
        let text = std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).unwrap();
        text.split_whitespace().nth(2).and_then(|v| v.parse().ok()).unwrap()
    };
    2 * (max("tcp_rmem") + max("tcp_wmem"))
}

#[test]
fn a_slow_consumer_holds_the_producer_back_and_no_tier_gathers_the_stream() {
    // Each stream is 1,500 items of 64 KiB (about 94 MiB before encoding),
    // made every 200 µs and taken every millisecond or more: more than the
    // kernel's socket buffers on the way hold, so what is in transit at once
    // is bounded by those buffers, not by the stream, unless a tier gathers.
    let (items, item_bytes) = (1500u64, 65536u64);
    // What the tiers themselves may hold on the way: a few items each in
    // their read and write buffers and HTTP/2 windows.
    let tiers_hold = 64 * item_bytes;
    let bound = kernel_buffer_bytes() + tiers_hold;
    assert!(items * item_bytes > bound, "this machine's TCP buffers ({bound} B) could hold the whole stream");
    let folder = streams_run(
        "streams-consumer",
        "--transport grpc-stream,grpc-pages,rest-pages,rest-ndjson,rest-sse,connect-stream \
         --stream-items 1500 --stream-item-bytes 65536 --stream-interval 200us \
         --consumer-delay 1ms --delay 10ms --qps 1 --duration 2s --warmup 0s --rounds 1",
        &[],
    );
    let stream_mib = (items * item_bytes) as f64 / (1024.0 * 1024.0);
    for arm in ["grpc-stream", "grpc-pages", "rest-pages", "rest-ndjson", "rest-sse", "connect-stream"] {
        let (run, s) = stream_of(&folder, arm);
        let r = &run.rounds[0];
        assert!(r.requests.ok > 0 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
        // The downstream's own counters: most items were made after their
        // due time, the producer waiting for the consumer, not running ahead.
        let d = s.downstream.as_ref().expect("the downstream's stream counters");
        assert!(d.items > 0 && d.items_late * 2 > d.items, "{arm}: the producer was not held back: {d:?}");
        // Nothing on the way gathered a stream: the downstream never held one.
        let rss = r.resources[&TierName::Downstream].rss_mib_peak.unwrap();
        assert!(rss < stream_mib, "{arm}: downstream RSS {rss} MiB against a {stream_mib} MiB stream");
        if !arm.ends_with("pages") {
            // Streamed items in transit at once (each at least its 64 KiB on
            // the wire) fit in the buffers on the way.
            let b = s.buffered_items.as_ref().unwrap();
            assert!(b.max * item_bytes as f64 <= bound as f64, "{arm}: {b:?} of {items} items in transit, {bound} B");
        }
    }
}

/// Every run.json under `folder`, at any depth.
fn runs_under(folder: &std::path::Path) -> Vec<RunResult> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(runs_under(&path));
        } else if path.file_name().is_some_and(|n| n == "run.json") {
            found.push(load(folder));
        }
    }
    found
}

#[test]
fn sweeps_of_items_per_stream_and_of_streams_per_second_measure_every_step() {
    for (sweep, values) in [("--stream-items", "3,9"), ("--qps", "4,8")] {
        let out = out_dir(&format!("streams-sweep{sweep}"));
        let mut args = vec!["--transport", "grpc-stream,rest-pages", "--stream-interval", "5ms", "--delay", "10ms"];
        args.extend(["--duration", "1s", "--warmup", "300ms", "--out", out.to_str().unwrap(), sweep, values]);
        if sweep != "--qps" {
            args.extend(["--qps", "5"]);
        }
        let o = harness_cmd(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{sweep}: {}", String::from_utf8_lossy(&o.stderr));
        let runs = runs_under(&run_folder(&out));
        assert_eq!(runs.len(), 4, "{sweep}: two arms at two steps");
        let mut steps: Vec<(u32, u64)> = Vec::new();
        for run in &runs {
            let r = &run.rounds[0];
            let s = r.stream.as_ref().expect("stream figures in every step");
            assert!(r.requests.ok > 0 && r.requests.ok == r.requests.sent, "{sweep}: {:?}", r.requests);
            assert_eq!(s.items, u64::from(s.items_per_stream) * r.requests.ok, "{sweep}");
            steps.push((s.items_per_stream, run.config.load.qps as u64));
        }
        steps.sort_unstable();
        steps.dedup();
        let expected = if sweep == "--qps" { vec![(100, 4), (100, 8)] } else { vec![(3, 5), (9, 5)] };
        assert_eq!(steps, expected, "{sweep}");
        // Each step of two arms holds its decision record, with the streams' drivers.
        let step = std::fs::read_dir(run_folder(&out)).unwrap().flatten().map(|e| e.path()).find(|p| p.is_dir());
        let step = step.expect("a step folder");
        let record = std::fs::read_to_string(step.join("decision.md")).unwrap();
        assert!(record.contains("# Transport of the internal hop: gRPC stream or REST pages"), "{record}");
        assert!(record.contains("Time to the first and the last item of a stream"), "{record}");
    }
}

#[test]
fn streams_cross_tls_and_compression_item_by_item() {
    let folder = streams_run(
        "streams-tls-gzip",
        "--transport grpc-stream,rest-ndjson,connect-stream --tls --compression gzip --stream-items 10 \
         --stream-interval 5ms --delay 5ms --qps 5 --duration 1s --warmup 300ms \
         --rounds 1 --quiet",
        &[],
    );
    for arm in ["grpc-stream", "rest-ndjson", "connect-stream"] {
        let (run, s) = stream_of(&folder, arm);
        let r = &run.rounds[0];
        assert!(r.requests.ok > 0 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
        assert_eq!(s.items, 10 * r.requests.ok, "{arm}");
        let downstream = &run.tiers[&TierName::Downstream].settings;
        assert!(downstream.to_string().contains("tls"), "{arm}: {downstream}");
    }
    // One REST stream compresses item by item, each flushed: its JSON items
    // (a record of text each) shrink on the wire.
    let (_, s) = stream_of(&folder, "rest-ndjson");
    let (wire, message) =
        (s.internal.response_wire_bytes_per_item.unwrap(), s.internal.response_message_bytes_per_item.unwrap());
    assert!(wire < message, "rest-ndjson: {wire} wire bytes per item for {message} of message");
}

#[test]
fn two_generators_of_streams_merge_into_one_measurement() {
    let at = "127.0.0.1:0".to_owned();
    let tier_args = |role_args: &[&str]| {
        let mut a: Vec<String> = role_args.iter().map(|s| s.to_string()).collect();
        a.extend(["--admin-addr".into(), at.clone()]);
        a
    };
    let downstream = start_tier(
        None,
        "downstream",
        &tier_args(&["--grpc-addr", &at, "--rest-addr", &at, "--delay", "10ms", "--stream-interval", "5ms"]),
    );
    let grpc = downstream.url("grpc");
    let caller = start_tier(
        None,
        "caller",
        &tier_args(&["--transport", "grpc-stream", "--downstream-grpc", &grpc, "--listen", &at]),
    );
    let out = out_dir("streams-segments");
    let (front, caller_admin, downstream_admin) = (caller.url("front"), caller.url("admin"), downstream.url("admin"));
    let children: Vec<_> = (0..2)
        .map(|i| {
            let segment = format!("{i}/2");
            let args = ["--transport grpc-stream --stream-items 8 --stream-interval 5ms --delay 10ms --qps 10 \
                 --duration 2s --warmup 500ms --rounds 1 --quiet --start-at +2s"];
            let mut all: Vec<&str> = args[0].split_whitespace().collect();
            all.extend(["--segment", &segment, "--caller-url", &front, "--caller-admin", &caller_admin]);
            all.extend(["--downstream-admin", &downstream_admin, "--out", out.to_str().unwrap()]);
            harness_cmd(&all).stdout(std::process::Stdio::null()).spawn().unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a segment failed");
    }
    let segments: Vec<RunResult> = crate::common::run_folders(&out).iter().map(|f| load(f)).collect();
    assert_eq!(segments.len(), 2);
    let merged_out = out.join("merged");
    let o = harness_cmd(&["merge", out.to_str().unwrap(), "--out", merged_out.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "merge: {}", String::from_utf8_lossy(&o.stderr));
    let merged = load(&run_folder(&merged_out));
    crate::common::browser::check_folder(&run_folder(&merged_out), crate::common::browser::ONE_ARM, 4);
    let m = merged.rounds[0].stream.as_ref().expect("merged stream figures");
    let each: Vec<&StreamRound> = segments.iter().map(|s| s.rounds[0].stream.as_ref().unwrap()).collect();
    // Every generator's streams, counted once: items, OK streams, first items.
    assert_eq!(m.items, each.iter().map(|s| s.items).sum::<u64>());
    assert_eq!(m.streams_ok, merged.rounds[0].requests.ok);
    assert_eq!(m.items, 8 * m.streams_ok, "{:?}", merged.rounds[0].requests);
    assert_eq!(m.first_item.as_ref().unwrap().count, m.streams_ok);
    assert_eq!(m.item_delay.as_ref().unwrap().count, m.items);
    let rate: f64 = each.iter().map(|s| s.items_per_second).sum();
    assert!((m.items_per_second - rate).abs() < 1e-9);
}

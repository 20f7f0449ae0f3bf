//! The streaming arms from the harness's side of the front hop, on tiers
//! the test starts (`harness __tier`): the harness's stream client reads
//! the caller's one NDJSON answer item by item, every item whole, in order
//! and as generated, each stamped as it arrived; the first arrives before
//! the last is made, on every arm. The harness does not drive these arms
//! in a run yet (refused, exit 2).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{harness_cmd, start_tier};
use harness::load::front::FrontClient;
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
    let o = harness_cmd(&["--transport", "grpc-stream"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a streaming arm"));
}

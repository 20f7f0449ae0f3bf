//! Client-side balancing: one client per downstream address, calls taken in
//! turn (gRPC's `round_robin` policy over a headless Service's addresses,
//! and the same for REST). Each address gets the arm's own client, so its
//! connections, pools and settings are those of one replica's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use payload::{FetchRequest, FetchResponse};

use crate::hop::merged;
use crate::outbound::{CallError, Outbound};

/// The separator of several addresses in `--downstream-grpc` and `--downstream-rest`.
pub const ADDRESS_SEPARATOR: char = ',';

/// The addresses in a target: one, or several separated by commas.
pub fn addresses(target: &str) -> Vec<&str> {
    target.split(ADDRESS_SEPARATOR).map(str::trim).filter(|a| !a.is_empty()).collect()
}

/// `target` (`http://host:port`) as every address its host name resolves
/// to, comma-separated (`http://10.0.0.7:50051,http://10.0.0.9:50051`): the
/// pods behind a headless Service. An address that is already an IP
/// resolves to itself.
pub async fn every_address(target: &str) -> std::io::Result<String> {
    let bad = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{target}: {why}"));
    let uri: http::Uri = target.parse().map_err(|e| bad(format!("not a URL: {e}")))?;
    let (scheme, host) = (uri.scheme_str().unwrap_or("http"), uri.host().ok_or_else(|| bad("no host".into()))?);
    let port = uri.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
    let mut found: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| bad(format!("resolving {host}: {e}")))?
        .collect();
    found.sort();
    found.dedup();
    if found.is_empty() {
        return Err(bad(format!("{host} has no address")));
    }
    Ok(found.iter().map(|a| format!("{scheme}://{a}")).collect::<Vec<_>>().join(","))
}

/// Calls spread in turn over one client per address.
pub struct RoundRobin {
    target: String,
    clients: Vec<Arc<dyn Outbound>>,
    next: AtomicUsize,
}

impl RoundRobin {
    /// `clients` in the order of the addresses in `target`; at least one.
    pub fn new(target: &str, clients: Vec<Arc<dyn Outbound>>) -> Self {
        assert!(!clients.is_empty(), "a balanced client needs an address");
        RoundRobin { target: target.to_owned(), clients, next: AtomicUsize::new(0) }
    }
}

impl Outbound for RoundRobin {
    fn fetch(&self, req: FetchRequest) -> BoxFuture<'static, Result<FetchResponse, CallError>> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        self.clients[i].fetch(req)
    }

    fn call(
        &self,
        method: &std::sync::Arc<crate::outbound::Method>,
        n: u64,
        message: prost_reflect::DynamicMessage,
    ) -> BoxFuture<'static, Result<prost_reflect::DynamicMessage, CallError>> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        self.clients[i].call(method, n, message)
    }

    fn items(
        &self,
        req: payload::StreamRequest,
        delivery: crate::outbound::Delivery,
        page_size: u32,
    ) -> crate::outbound::ItemStream {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        self.clients[i].items(req, delivery, page_size)
    }

    fn target(&self) -> &str {
        &self.target
    }

    fn settings(&self) -> serde_json::Value {
        merged(
            self.clients[0].settings(),
            serde_json::json!({
                "addresses": self.clients.iter().map(|c| c.target()).collect::<Vec<_>>(),
                "client_balancing": format!(
                    "round robin over {} addresses, one client each (its connections and pool its own)",
                    self.clients.len()
                ),
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_address_of_a_name_becomes_one_target_each() {
        let both = every_address("http://localhost:50051").await.unwrap();
        assert!(addresses(&both).iter().all(|a| a.starts_with("http://") && a.ends_with(":50051")), "{both}");
        assert!(addresses(&both).contains(&"http://127.0.0.1:50051"), "{both}");
        assert_eq!(every_address("http://127.0.0.2:8080").await.unwrap(), "http://127.0.0.2:8080");
        assert!(every_address("not a url").await.is_err());
    }

    #[test]
    fn addresses_are_split_at_commas_and_trimmed() {
        assert_eq!(addresses("http://a:1"), ["http://a:1"]);
        assert_eq!(addresses("http://a:1, http://b:2,"), ["http://a:1", "http://b:2"]);
    }
}

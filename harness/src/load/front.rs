//! The front hop's HTTP/1.1 client, each exchange driven inside the
//! request's own task: an answer read whole by the lean exchange
//! (`lean.rs`: the request in one write, the answer parsed by `httparse`),
//! a stream's items by hyper's connection API.
//!
//! A pooled client (reqwest, hyper-util's legacy client) runs every
//! connection as a task of its own: a request is handed to that task over a
//! channel and the answer handed back, two wake-ups between the stamp at
//! send and the first byte on the wire, and two more between the last byte
//! and the stamp at done. On two cores those wake-ups are most of the gap
//! between the harness's service time and the wire time (bench/wire-check.sh).
//! Here the request's task polls the connection itself while it waits, so
//! the bytes are written and read by the task that stamps them.
//!
//! The answer's arrival is the kernel's receive stamp of its last packet
//! (`stamped.rs`), not the clock after the read: what is left between the
//! wire and the stamp is then the kernel's own path, not the wake-up of this
//! process.
//!
//! The fairness settings stay what they were: one connection per in-flight
//! request (a new one when none is idle, kept alive without limit), no
//! retries (but for a request that never went out, see `post_json`), no
//! proxy, TCP_NODELAY; the timeout is the caller's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use futures::FutureExt;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::deferred::Deferred;
use super::lean::{self, LeanConn};
use super::stamped::{RxStamp, StampedTcp};

/// One HTTP/1.1 connection: the lean exchange's (`lean.rs`, answers read
/// whole) or hyper's (a stream's items read as they come).
enum Conn {
    Lean(LeanConn),
    Hyper(Box<HyperConn>),
}

/// One hyper HTTP/1.1 connection: the handle requests go through, and the
/// connection itself, polled only while a request of ours waits on it.
struct HyperConn {
    sender: http1::SendRequest<Full<Bytes>>,
    conn: http1::Connection<TokioIo<StampedTcp>, Full<Bytes>>,
    /// When the kernel received the last bytes read from this connection.
    rx: RxStamp,
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    /// No connection could be made.
    #[error("connecting to {0}: {1}")]
    Connect(String, std::io::Error),
    /// The connection failed or closed during the exchange, or the answer
    /// was not HTTP.
    #[error("HTTP exchange: {0}")]
    Http(#[from] hyper::Error),
    #[error("the connection closed before the answer")]
    Closed,
    /// Reading or writing the connection failed.
    #[error("on the connection: {0}")]
    Io(std::io::Error),
    /// The answer was not the HTTP/1.1 the lean exchange reads (`lean.rs`).
    #[error("the answer is not HTTP: {0}")]
    Protocol(String),
    /// The answer's body declared or ran past [`MAX_ANSWER_BYTES`].
    #[error("the answer's body is over the {MAX_ANSWER_BYTES} bytes read")]
    TooLarge,
    /// The answers being read held the harness's whole [`AnswerBudget`]:
    /// this one was cut, not held.
    #[error(
        "the harness held {held} bytes of answers at once, all answers together, and {max} is its limit \
         (a caller answering large and slowly); this answer was cut"
    )]
    Full { held: usize, max: usize },
}

pub use super::lean::MAX_ANSWER_BYTES;

/// The most answer bytes the harness holds at once, every answer being
/// read together: [`MAX_ANSWER_BYTES`] bounds one answer, and a caller
/// answering that much to every request and holding the connections would
/// otherwise take the harness past its memory (3 GB in 12 s at 10 req/s,
/// issue 51). Four of the largest answers; the contract's largest answer
/// (10,000 records × fan-out 10 as JSON) is tens of MB.
pub const MAX_HELD_ANSWER_BYTES: usize = 4 * MAX_ANSWER_BYTES;

/// The bytes of answers held at once against one bound, shared by every
/// exchange of every client that holds a clone. An answer whose next bytes
/// do not fit is cut ([`FrontError::Full`]), counted as an error of class
/// `answers_full`; the answers already held, and the run, go on.
#[derive(Debug, Clone)]
pub struct AnswerBudget {
    held: Arc<AtomicUsize>,
    max: usize,
}

impl AnswerBudget {
    pub fn new(max: usize) -> Self {
        AnswerBudget { held: Arc::new(AtomicUsize::new(0)), max }
    }

    /// The one budget of this process ([`MAX_HELD_ANSWER_BYTES`]), shared
    /// by every front client.
    pub fn process() -> Self {
        static SHARED: OnceLock<AnswerBudget> = OnceLock::new();
        SHARED.get_or_init(|| AnswerBudget::new(MAX_HELD_ANSWER_BYTES)).clone()
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// An empty hold on this budget.
    pub(super) fn hold(&self) -> Held {
        Held { budget: self.clone(), bytes: 0 }
    }
}

/// What one answer holds of an [`AnswerBudget`], given back when dropped.
#[derive(Debug)]
pub struct Held {
    budget: AnswerBudget,
    bytes: usize,
}

impl Held {
    /// Holds `bytes` in all (more or fewer than now), if the budget has room.
    pub(super) fn resize(&mut self, bytes: usize) -> Result<(), FrontError> {
        if bytes <= self.bytes {
            self.budget.held.fetch_sub(self.bytes - bytes, Ordering::AcqRel);
            self.bytes = bytes;
            return Ok(());
        }
        let more = bytes - self.bytes;
        let max = self.budget.max;
        self.budget
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| (held + more <= max).then_some(held + more))
            .map_err(|held| FrontError::Full { held, max })?;
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// How one exchange on a connection came to nothing.
#[derive(Debug)]
enum Attempt {
    /// The connection ended before the request was written.
    Unsent,
    Failed(FrontError),
}

impl Attempt {
    fn into_error(self) -> FrontError {
        match self {
            Attempt::Unsent => FrontError::Closed,
            Attempt::Failed(e) => e,
        }
    }
}

/// Whether a failed exchange's request had gone out.
pub(super) enum Sent {
    No,
    Yes(hyper::Error),
    /// Sent, and answered with a body over [`MAX_ANSWER_BYTES`].
    TooLarge,
    /// Sent, and its answer cut: the harness held its whole [`AnswerBudget`].
    Full(FrontError),
}

/// An answer read whole: its body, bounded by [`MAX_ANSWER_BYTES`], and
/// when its last byte arrived.
/// How an exchange reads its answer, once the head has come: whole
/// ([`Whole`]) or item by item (`stream.rs`). A trait rather than an async
/// closure, so that the future is known to be `Send` for every borrow of
/// the stamp.
pub(super) trait ReadAnswer: Sync {
    type Output: Send;
    fn read<'a>(
        &'a self,
        resp: hyper::Response<hyper::body::Incoming>,
        rx: &'a RxStamp,
        start: Instant,
        held: Held,
    ) -> impl Future<Output = Result<Self::Output, Sent>> + Send + 'a;
}

/// The whole body at once.
pub(super) struct Whole;

impl ReadAnswer for Whole {
    type Output = FrontAnswer;
    fn read<'a>(
        &'a self,
        resp: hyper::Response<hyper::body::Incoming>,
        rx: &'a RxStamp,
        start: Instant,
        held: Held,
    ) -> impl Future<Output = Result<FrontAnswer, Sent>> + Send + 'a {
        read_whole(resp, rx, start, held)
    }
}

async fn read_whole(
    resp: hyper::Response<hyper::body::Incoming>,
    rx: &RxStamp,
    start: Instant,
    mut held: Held,
) -> Result<FrontAnswer, Sent> {
    let (parts, mut body) = resp.into_parts();
    // A declared length over the bound is refused before a byte is read.
    if hyper::body::Body::size_hint(&body).lower() > MAX_ANSWER_BYTES as u64 {
        return Err(Sent::TooLarge);
    }
    // Each piece is held against the budget before it is kept.
    let mut whole = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(Sent::Yes)?.into_data() else { continue };
        if whole.len() + data.len() > MAX_ANSWER_BYTES {
            return Err(Sent::TooLarge);
        }
        held.resize(whole.len() + data.len()).map_err(Sent::Full)?;
        whole.extend_from_slice(&data);
    }
    // A stamp from before this exchange began cannot be its answer's
    // (a stepped wall clock): the clock is taken instead.
    let stamp = rx.arrived().filter(|at| *at >= start);
    let server_timing = parts.headers.get("server-timing").cloned();
    Ok(FrontAnswer::new(parts.status, server_timing, whole.freeze(), stamp, held))
}

/// The answer to one POST, its body whole.
#[derive(Debug)]
pub struct FrontAnswer {
    pub status: StatusCode,
    /// Its `server-timing` header, the one header the harness reads.
    pub server_timing: Option<hyper::header::HeaderValue>,
    pub body: Bytes,
    /// When the answer's last byte arrived: the kernel's receive stamp, or
    /// the clock once the body was read where there was no stamp.
    pub arrived: Instant,
    /// Whether `arrived` is the kernel's stamp.
    pub kernel_stamped: bool,
    /// The body's bytes held against the [`AnswerBudget`] until it is dropped.
    _held: Held,
}

impl FrontAnswer {
    /// An answer read whole, arrived at the kernel's `stamp` of its last
    /// byte, or now where there is none.
    pub(super) fn new(
        status: StatusCode,
        server_timing: Option<hyper::header::HeaderValue>,
        body: Bytes,
        stamp: Option<Instant>,
        held: Held,
    ) -> Self {
        FrontAnswer {
            status,
            server_timing,
            body,
            arrived: stamp.unwrap_or_else(Instant::now),
            kernel_stamped: stamp.is_some(),
            _held: held,
        }
    }
}

/// POSTs JSON to one URL over kept-alive HTTP/1.1 connections.
pub struct FrontClient {
    url: String,
    /// What every answer being read holds, with every other client's.
    budget: AnswerBudget,
    /// `host:port` to connect to and to send as `Host`.
    authority: String,
    host: HeaderValue,
    path: Uri,
    /// The lean exchange's request up to its content length's digits.
    request_head: Vec<u8>,
    idle: Mutex<Vec<Conn>>,
    /// Whether reads are cut at line ends, each line stamped
    /// (`StampedTcp::lines`): a stream's items, one stamp each.
    line_stamps: bool,
    /// The epoll set its sockets are on, read when the dispatcher sends
    /// (`deferred.rs`); `None`: on the reactor, answers heard as they come.
    deferred: Option<Arc<Deferred>>,
}

impl Drop for FrontClient {
    fn drop(&mut self) {
        if let Some(d) = &self.deferred {
            d.close();
        }
    }
}

impl std::fmt::Debug for FrontClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FrontClient({})", self.url)
    }
}

impl FrontClient {
    /// A client for `url` (`http://host:port/path`), its answers held
    /// against the process's [`AnswerBudget`].
    pub fn new(url: &str) -> anyhow::Result<Self> {
        Self::with_budget(url, AnswerBudget::process())
    }

    /// [`FrontClient::new`] with answers held against `budget`.
    pub fn with_budget(url: &str, budget: AnswerBudget) -> anyhow::Result<Self> {
        let uri: Uri = url.parse().map_err(|e| anyhow::anyhow!("front URL {url:?}: {e}"))?;
        anyhow::ensure!(uri.scheme_str() == Some("http"), "front URL {url:?}: only http:// is spoken on the front hop");
        let host = uri.host().ok_or_else(|| anyhow::anyhow!("front URL {url:?} has no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        // An IPv6 host keeps its brackets in the authority.
        let authority = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let path: Uri = uri.path_and_query().map_or("/", |p| p.as_str()).parse()?;
        let request_head =
            format!("POST {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\ncontent-length: ")
                .into_bytes();
        Ok(FrontClient {
            request_head,
            url: url.to_owned(),
            budget,
            host: HeaderValue::from_str(&authority)?,
            authority,
            path,
            idle: Mutex::new(Vec::new()),
            line_stamps: false,
            deferred: None,
        })
    }

    /// This client, its connections stamping each line of an answer
    /// apart (a peek before every read): for NDJSON answers read item by
    /// item, so that each item has the stamp of the packet that completed it.
    pub fn stamping_lines(mut self) -> Self {
        self.line_stamps = true;
        self
    }

    /// This client, its sockets on an epoll set of their own, whose answers
    /// the open-loop dispatcher reads when it wakes to send
    /// (`deferred.rs`): one wake-up a request rather than two. Not for a
    /// client stamping lines (a thread of its own reads those).
    pub fn hearing_answers_at_sends(mut self) -> anyhow::Result<Self> {
        self.deferred = Some(Deferred::new()?);
        Ok(self)
    }

    /// The set its sockets are on, if it was made
    /// [`hearing_answers_at_sends`](Self::hearing_answers_at_sends).
    pub fn deferred(&self) -> Option<&Arc<Deferred>> {
        self.deferred.as_ref()
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Connections open and idle now.
    pub fn idle_connections(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Closes every idle connection and returns how many there were. A run
    /// calls it when an arm's turn ends and its next round gets new tiers:
    /// the pool would otherwise hold a connection per request its last
    /// round had in flight, to a caller it will not send to again, while
    /// the other arm runs (at 10,000 req/s past the knee, the two arms'
    /// pools together reached the open-files limit).
    pub fn release_idle(&self) -> usize {
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        idle.len()
    }

    /// POSTs `body` as JSON and returns the answer once its last byte has
    /// arrived. The connection goes back to the pool only after a whole
    /// exchange; a failed or abandoned one (a timeout drops this future) is
    /// closed.
    ///
    /// A kept-alive connection the server closed (its idle or header-read
    /// timeout) can end just after it was taken, before the request went out
    /// (seen at 10,000 req/s after a warm-up left thousands of connections
    /// idle): the exchange finds the close before it writes (`lean.rs`), or
    /// its first write is refused. The request goes out again on a new
    /// connection, as a pooled client (hyper-util's) does with a request that
    /// was never sent; the wait counts in its latency. A client stamping
    /// lines reads its answers with hyper's connection (`post_on_with`).
    pub async fn post_json(&self, body: String) -> Result<FrontAnswer, FrontError> {
        self.post_json_then(body, &mut || {}).await
    }

    /// [`post_json`](Self::post_json), running `sent` once the request is
    /// written and before its answer is waited on (a closed loop checks its
    /// last answer there: `dispatch.rs`); where no request went out, or a
    /// client stamping lines reads the answer, not at all.
    pub async fn post_json_then(
        &self,
        body: String,
        sent: &mut (dyn FnMut() + Send),
    ) -> Result<FrontAnswer, FrontError> {
        if self.line_stamps {
            return self.post_reading(body, Whole).await;
        }
        let mut request = Vec::with_capacity(self.request_head.len() + 24 + body.len());
        request.extend_from_slice(&self.request_head);
        request.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        request.extend_from_slice(b"\r\n\r\n");
        request.extend_from_slice(body.as_bytes());
        let mut c = match self.take_idle() {
            Some(Conn::Lean(c)) => c,
            _ => self.connect_lean().await?,
        };
        let mut held = self.budget.hold();
        let mut attempt = c.exchange(&request, Instant::now(), &mut |n| held.resize(n), sent).await;
        if matches!(attempt, Err(lean::Failure::Unsent)) {
            c = self.connect_lean().await?;
            attempt = c.exchange(&request, Instant::now(), &mut |n| held.resize(n), sent).await;
        }
        let a = attempt.map_err(|f| match f {
            lean::Failure::Unsent | lean::Failure::Closed => FrontError::Closed,
            lean::Failure::Io(e) => FrontError::Io(e),
            lean::Failure::Protocol(what) => FrontError::Protocol(what),
            lean::Failure::TooLarge => FrontError::TooLarge,
            lean::Failure::Hold(e) => e,
        })?;
        if a.keep {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(Conn::Lean(c));
        }
        Ok(FrontAnswer::new(a.status, a.server_timing, a.body, a.stamp, held))
    }

    /// [`post_json`](Self::post_json) with the answer read by `read` (the
    /// whole body, or a stream's items as they come: `stream.rs`).
    pub(super) async fn post_reading<T, R>(&self, body: String, read: R) -> Result<T, FrontError>
    where
        R: ReadAnswer<Output = T>,
    {
        let c = match self.take_idle() {
            Some(Conn::Hyper(c)) => *c,
            _ => self.connect().await?,
        };
        self.post_on_with(c, body, &read).await
    }

    /// The exchange on `c`, and once more on a new connection if `c` ended
    /// before the request went out.
    async fn post_on_with<T, R>(&self, mut c: HyperConn, body: String, read: &R) -> Result<T, FrontError>
    where
        R: ReadAnswer<Output = T>,
    {
        let body = Bytes::from(body);
        let mut attempt = self.exchange_with(&mut c, body.clone(), read).await;
        if matches!(attempt, Err(Attempt::Unsent)) {
            c = self.connect().await?;
            attempt = self.exchange_with(&mut c, body, read).await;
        }
        let (answer, keep) = attempt.map_err(Attempt::into_error)?;
        if keep {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(Conn::Hyper(Box::new(c)));
        }
        Ok(answer)
    }

    /// One exchange on `c`, its answer read by `read`: the answer and
    /// whether the connection can be kept, or why there is none.
    async fn exchange_with<T, R>(&self, c: &mut HyperConn, body: Bytes, read: &R) -> Result<(T, bool), Attempt>
    where
        R: ReadAnswer<Output = T>,
    {
        let mut req = Request::post(self.path.clone()).body(Full::new(body)).expect("a valid request");
        req.headers_mut().insert(HOST, self.host.clone());
        req.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        c.rx.clear();
        let start = Instant::now();
        let HyperConn { sender, conn, rx } = c;
        let exchange = async {
            // A connection that cannot take the request (closed) or hands it
            // back unsent has not sent it.
            sender.ready().await.map_err(|_| Sent::No)?;
            let resp = sender.try_send_request(req).await.map_err(|e| match e.message() {
                Some(_) => Sent::No,
                None => Sent::Yes(e.into_error()),
            })?;
            read.read(resp, rx, start, self.budget.hold()).await
        };
        // Poll the exchange and the connection together. The connection can
        // end in the same poll that delivers the answer (a server that
        // answers, then closes): the exchange is then polled once more, and
        // ends then or never (nothing drives it any more).
        tokio::pin!(exchange);
        let (answer, ended) = tokio::select! {
            biased;
            answer = &mut exchange => (Some(answer), None),
            e = &mut *conn => ((&mut exchange).now_or_never(), Some(e)),
        };
        let failed = |e| Err(Attempt::Failed(e));
        match (answer, ended) {
            (Some(Ok(a)), None) => Ok((a, true)),
            // Answered, then closed: nothing to keep.
            (Some(Ok(a)), Some(_)) => Ok((a, false)),
            (Some(Err(Sent::No)), _) => Err(Attempt::Unsent),
            (Some(Err(Sent::TooLarge)), _) => failed(FrontError::TooLarge),
            (Some(Err(Sent::Full(e))), _) => failed(e),
            (Some(Err(Sent::Yes(e))), Some(Err(first))) if e.is_canceled() => failed(FrontError::Http(first)),
            (Some(Err(Sent::Yes(e))), _) if e.is_canceled() => failed(FrontError::Closed),
            (Some(Err(Sent::Yes(e))), _) => failed(FrontError::Http(e)),
            (None, Some(Err(e))) => failed(FrontError::Http(e)),
            // Ended cleanly with our request pending: a client connection
            // ends cleanly only with no request on it, so ours never left.
            (None, _) => Err(Attempt::Unsent),
        }
    }

    /// The most recently used idle connection that is still open. Polling a
    /// connection once reads what arrived while it sat idle: a close ends it.
    fn take_idle(&self) -> Option<Conn> {
        loop {
            let mut c = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()?;
            let open = match &mut c {
                Conn::Hyper(h) => (&mut h.conn).now_or_never().is_none(),
                Conn::Lean(l) => !l.is_closed(),
            };
            if open {
                return Some(c);
            }
        }
    }

    /// A new connection's stamped socket.
    async fn connect_tcp(&self) -> Result<(StampedTcp, RxStamp), FrontError> {
        let connect_error = |e| FrontError::Connect(self.authority.clone(), e);
        let tcp = TcpStream::connect(&self.authority).await.map_err(connect_error)?;
        tcp.set_nodelay(true).map_err(connect_error)?;
        let stamped = match (&self.deferred, self.line_stamps) {
            (_, true) => StampedTcp::lines(tcp),
            (Some(set), false) => StampedTcp::deferred(tcp, set),
            (None, false) => StampedTcp::new(tcp),
        };
        stamped.map_err(connect_error)
    }

    async fn connect(&self) -> Result<HyperConn, FrontError> {
        let (tcp, rx) = self.connect_tcp().await?;
        let (sender, conn) = http1::Builder::new().handshake(TokioIo::new(tcp)).await?;
        Ok(HyperConn { sender, conn, rx })
    }

    async fn connect_lean(&self) -> Result<LeanConn, FrontError> {
        let (tcp, rx) = self.connect_tcp().await?;
        Ok(LeanConn::new(tcp, rx))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Answers `answers` requests per connection, then closes it; returns the
    /// URL and a count of connections accepted.
    async fn server(answers: usize) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        // Two `server-timing` headers: the first is the one read.
        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nServer-Timing: downstream;dur=1.5\r\n\
                       server-timing: other;dur=9\r\n\r\n{\"ok\":1}";
        serving(answer, answers).await
    }

    #[tokio::test]
    async fn connections_are_kept_alive_and_a_closed_one_is_not_reused() {
        let (url, accepted) = server(2).await;
        let client = FrontClient::new(&url).unwrap();
        for _ in 0..2 {
            let a = client.post_json("{}".into()).await.unwrap();
            assert_eq!(
                (a.status, &a.body[..], a.server_timing.as_ref().map(|v| v.as_bytes())),
                (StatusCode::OK, &b"{\"ok\":1}"[..], Some(&b"downstream;dur=1.5"[..]))
            );
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1, "two requests, one connection");
        // The server closed it after two answers: the next request opens a
        // new one rather than failing on the dead one.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        client.post_json("{}".into()).await.unwrap();
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(client.idle_connections(), 1);
    }

    /// A kept-alive connection the server has closed, taken before its close
    /// was seen: the request never leaves, and the exchange says so at once
    /// (it waited for the timeout before) so that it goes again on a new
    /// connection, which answers.
    #[tokio::test]
    async fn a_request_on_a_connection_closed_before_it_went_out_goes_again() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/call", listener.local_addr().unwrap());
        let client = FrontClient::new(&url).unwrap();
        let (stale, accepted) = tokio::join!(client.connect_lean(), listener.accept());
        let (mut stale, (first, _)) = (stale.unwrap(), accepted.unwrap());
        // Taken from the pool while still open (take_idle polls it once)...
        assert!(!stale.is_closed());
        // ...then closed by the server (a FIN, as its idle timeout does).
        drop(first);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let attempt = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            stale.exchange(
                b"POST /v1/call HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}",
                Instant::now(),
                &mut |_| Ok::<(), FrontError>(()),
                &mut || panic!("nothing was sent"),
            ),
        )
        .await
        .expect("the exchange ends at once, not at the timeout");
        assert!(matches!(attempt, Err(lean::Failure::Unsent)), "{:?}", attempt.map(|a| a.status));

        // post_json with that connection first in the pool (as if taken just
        // before the close): the request goes again and is answered.
        let (url, accepted) = server(1).await;
        let client = FrontClient::new(&url).unwrap();
        client.idle.lock().unwrap().push(Conn::Lean(stale));
        let answered = tokio::time::timeout(std::time::Duration::from_secs(5), client.post_json("{}".into()))
            .await
            .expect("no wait for the timeout")
            .expect("answered on a new connection");
        assert_eq!(answered.status, StatusCode::OK);
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// Answers each request (a POST to `/v1/call`) with `answer`, up to
    /// `answers` on a connection, then closes it; the URL and a count of
    /// connections accepted.
    async fn serving(
        answer: &'static [u8],
        answers: usize,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/call", listener.local_addr().unwrap());
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    for _ in 0..answers {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => assert!(String::from_utf8_lossy(&buf[..n]).starts_with("POST /v1/call HTTP/1.1")),
                        }
                        if tcp.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    /// The lean exchange reads each way an HTTP/1.1 answer can end, and
    /// keeps the connection only where another exchange can follow.
    #[tokio::test]
    async fn answers_are_read_by_length_chunks_or_close_and_kept_only_when_they_can_be() {
        // The case, the answer, whether the server closes after it, the
        // body read, whether the connection is kept.
        type Case = (&'static str, &'static [u8], bool, &'static [u8], bool);
        let cases: [Case; 9] = [
            ("length", b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\n{\"ok\":1}", false, b"{\"ok\":1}", true),
            (
                "chunked",
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\n{\"ok\r\n4\r\n\":1}\r\n0\r\n\r\n",
                false,
                b"{\"ok\":1}",
                true,
            ),
            (
                "chunked, a trailer",
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nx-t: 1\r\n\r\n",
                false,
                b"{}",
                true,
            ),
            (
                "100 continue first",
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}",
                false,
                b"{}",
                true,
            ),
            ("no content", b"HTTP/1.1 204 No Content\r\n\r\n", false, b"", true),
            (
                "connection: close",
                b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}",
                true,
                b"{}",
                false,
            ),
            ("HTTP/1.0", b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n{}", true, b"{}", false),
            ("to the close", b"HTTP/1.1 200 OK\r\n\r\n{}", true, b"{}", false),
            ("bytes after it", b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}junk", false, b"{}", false),
        ];
        for (name, answer, close, body, kept) in cases {
            let (url, accepted) = serving(answer, if close { 1 } else { usize::MAX }).await;
            let client = FrontClient::new(&url).unwrap();
            for i in 1..=2 {
                let a = client.post_json("{}".into()).await.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(&a.body[..], body, "{name}");
                assert_eq!(client.idle_connections(), usize::from(kept), "{name}");
                let opened = accepted.load(std::sync::atomic::Ordering::SeqCst);
                assert_eq!(opened, if kept { 1 } else { i }, "{name}: connections after {i} requests");
            }
        }
    }

    /// What is not an answer the lean exchange can read is refused, named,
    /// and never held: a head, a chunk's size line or its trailers past the
    /// head's bound (the server holding the connection open, not closing
    /// it), a chunk past the body's bound, a chunk without its line end.
    #[tokio::test]
    async fn answers_past_their_bounds_or_malformed_are_refused() {
        let long_head: &'static [u8] = Box::leak(
            format!("HTTP/1.1 200 OK\r\nx-long: {}\r\n\r\n", "a".repeat(super::super::lean::MAX_HEAD_BYTES))
                .into_bytes()
                .into_boxed_slice(),
        );
        let endless = |start: &str| -> &'static [u8] {
            let filler = "a".repeat(super::super::lean::MAX_HEAD_BYTES + 10);
            Box::leak(format!("{start}{filler}").into_bytes().into_boxed_slice())
        };
        let long_size = endless("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1;x=");
        let long_trailer = endless("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nx-t: ");
        let huge_chunk: &'static [u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffff\r\n";
        let bad_chunk: &'static [u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}xx0\r\n\r\n";
        let cases =
            [(long_head, true), (long_size, true), (long_trailer, true), (huge_chunk, false), (bad_chunk, true)];
        for (answer, protocol) in cases {
            let (url, _) = serving(answer, usize::MAX).await;
            let client = FrontClient::new(&url).unwrap();
            let got = tokio::time::timeout(std::time::Duration::from_secs(10), client.post_json("{}".into())).await;
            let got = got.expect("refused at once, not waited on");
            match protocol {
                true => assert!(matches!(got, Err(FrontError::Protocol(_))), "{got:?}"),
                false => assert!(matches!(got, Err(FrontError::TooLarge)), "{got:?}"),
            }
            assert_eq!(client.idle_connections(), 0);
        }
    }

    /// Released connections are closed, not just forgotten: the server reads
    /// the end of each, and the next request opens a new one.
    #[tokio::test]
    async fn released_idle_connections_are_closed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/call", listener.local_addr().unwrap());
        let closed = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        let seen = closed.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    while let Ok(n) = tcp.read(&mut buf).await {
                        if n == 0 {
                            seen.add_permits(1);
                            return;
                        }
                        let _ = tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").await;
                    }
                });
            }
        });
        let client = std::sync::Arc::new(FrontClient::new(&url).unwrap());
        let all = (0..3).map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.post_json("{}".into()).await.unwrap().status })
        });
        futures::future::join_all(all).await;
        let opened = client.idle_connections();
        assert!(opened >= 1);
        assert_eq!(client.release_idle(), opened);
        assert_eq!(client.idle_connections(), 0);
        let ends = tokio::time::timeout(std::time::Duration::from_secs(5), closed.acquire_many(opened as u32))
            .await
            .expect("the server saw every released connection end");
        ends.unwrap().forget();
        client.post_json("{}".into()).await.unwrap();
        assert_eq!(client.idle_connections(), 1);
    }

    #[tokio::test]
    async fn concurrent_requests_each_get_a_connection() {
        let (url, accepted) = server(100).await;
        let client = std::sync::Arc::new(FrontClient::new(&url).unwrap());
        let all = (0..4).map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.post_json("{}".into()).await.unwrap().status })
        });
        for s in futures::future::join_all(all).await {
            assert_eq!(s.unwrap(), StatusCode::OK);
        }
        let opened = accepted.load(std::sync::atomic::Ordering::SeqCst);
        assert!((1..=4).contains(&opened), "{opened}");
        assert_eq!(client.idle_connections(), opened);
    }

    /// The answer's arrival is when its bytes reached this machine's socket,
    /// not when the client got round to reading them: an answer that waits
    /// 60 ms in the socket while the client's thread is busy still arrives
    /// before the wait.
    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_arrives_when_its_bytes_do_not_when_they_are_read() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/call", listener.local_addr().unwrap());
        let (tx, answered) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut tcp, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            // Every request answered at once, until the client closes.
            while matches!(tcp.read(&mut buf), Ok(n) if n > 0) {
                tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").unwrap();
                let _ = tx.send(Instant::now());
            }
        });
        let client = FrontClient::new(&url).unwrap();
        // A first exchange opens the connection. The first socket of the
        // machine to ask for stamps turns them on through a deferred work
        // item (stamped.rs, `stamps_are_live`): on a fresh machine the first
        // answers may carry none, so exchanges go on until
        // one does. Then the next request goes out on its first poll, and
        // this (only) runtime thread is kept busy while its answer sits in
        // the socket.
        let mut stamped = false;
        for _ in 0..500 {
            stamped = client.post_json("{}".into()).await.unwrap().kernel_stamped;
            answered.recv().unwrap();
            if stamped {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert!(stamped, "this kernel gave no receive stamp on 500 answers");
        // A few tries at the measured exchange: on a host that steals the
        // cores one answer may come back unstamped; a kernel that stamps
        // nothing still fails, every try unstamped.
        let mut tries = 0;
        let (answer, read, written) = loop {
            let (answer, ()) = tokio::join!(client.post_json("{}".into()), async {
                std::thread::sleep(std::time::Duration::from_millis(60));
            });
            let read = Instant::now();
            let (answer, written) = (answer.unwrap(), answered.recv().unwrap());
            if answer.kernel_stamped {
                break (answer, read, written);
            }
            tries += 1;
            assert!(tries < 5, "this kernel gave no receive stamp on 5 answers in a row");
        };
        assert!(read - answer.arrived >= std::time::Duration::from_millis(50), "{:?}", read - answer.arrived);
        // Within a few ms of the server's write (the wall-to-monotonic
        // conversion and a busy machine's scheduling).
        let gap = if answer.arrived > written { answer.arrived - written } else { written - answer.arrived };
        assert!(gap < std::time::Duration::from_millis(10), "{gap:?}");
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connect_error_and_bad_urls_are_refused() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let client = FrontClient::new(&format!("http://127.0.0.1:{port}/v1/call")).unwrap();
        assert!(matches!(client.post_json("{}".into()).await, Err(FrontError::Connect(..))));
        assert!(FrontClient::new("https://127.0.0.1:1/v1/call").is_err());
        assert!(FrontClient::new("not a url").is_err());
    }

    /// A server on loopback that reads one request, writes `answer` and
    /// holds the connection open for `hold`.
    async fn answering(answer: &'static [u8], hold: std::time::Duration) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = tcp.read(&mut buf).await;
            let _ = tcp.write_all(answer).await;
            tokio::time::sleep(hold).await;
        });
        addr
    }

    #[tokio::test]
    async fn an_answer_that_is_not_http_is_an_http_error() {
        let addr = answering(b"SSH-2.0-OpenSSH\r\n", std::time::Duration::ZERO).await;
        let client = FrontClient::new(&format!("http://{addr}/v1/call")).unwrap();
        let answer = client.post_json("{}".into()).await;
        assert!(matches!(answer, Err(FrontError::Protocol(_))), "{answer:?}");
        assert_eq!(client.idle_connections(), 0);
    }

    /// A caller answering large and holding: each answer is under the
    /// per-answer bound, but together they would pass the harness's total.
    /// The answer that would pass it is cut at once, the one held goes on,
    /// and its bytes are given back when it ends.
    #[tokio::test]
    async fn answers_held_together_are_bounded_and_the_overflow_is_cut() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/call", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = tcp.read(&mut buf).await;
                    let _ = tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2097152\r\n\r\n").await;
                    let _ = tcp.write_all(&vec![b' '; 768 * 1024]).await;
                    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                });
            }
        });
        let budget = AnswerBudget::new(1 << 20);
        let client = std::sync::Arc::new(FrontClient::with_budget(&url, budget.clone()).unwrap());
        let first = tokio::spawn({
            let client = client.clone();
            async move { client.post_json("{}".into()).await }
        });
        let started = Instant::now();
        while budget.held() < 768 * 1024 {
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "held {}", budget.held());
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let second = tokio::time::timeout(std::time::Duration::from_secs(10), client.post_json("{}".into())).await;
        let second = second.expect("cut at once, not held");
        assert!(matches!(second, Err(FrontError::Full { max: 1048576, .. })), "{second:?}");
        assert!(!first.is_finished(), "the answer held is still being read");
        first.abort();
        let _ = first.await;
        assert_eq!(budget.held(), 0, "an answer given up gives its bytes back");
    }

    #[tokio::test]
    async fn an_answer_declaring_4_gb_is_refused_not_held() {
        // Held open: the client must not wait for (or hold) 4 GB.
        let four_gb = b"HTTP/1.1 200 OK\r\ncontent-length: 4294967296\r\n\r\n{";
        let addr = answering(four_gb, std::time::Duration::from_secs(30)).await;
        let client = FrontClient::new(&format!("http://{addr}/v1/call")).unwrap();
        let answer = tokio::time::timeout(std::time::Duration::from_secs(10), client.post_json("{}".into())).await;
        assert!(matches!(answer, Ok(Err(FrontError::TooLarge))), "{answer:?}");
    }
}

//! One HTTP/1.1 exchange whose answer is read whole, written straight on the
//! stamped socket: the request in one write, the answer's head parsed by
//! `httparse` (hyper's own parser) and its body read by its length, its
//! chunks or to the end.
//!
//! hyper's client connection took 14.7k of the generator's 47.3k
//! instructions a request, closed loop (bench/README.md, "Issue 56, seventh
//! pass"): a request and header map built for each exchange, a channel
//! between the request and the connection, a body channel for the answer.
//! The front hop asks for none of it: one POST of JSON, one answer read
//! whole. Streams (`stream.rs`), read item by item, keep hyper's.
//!
//! What hyper's connection did that matters here is kept: a kept-alive
//! connection the server closed is found before the request goes out
//! ([`LeanConn::is_closed`], then [`Attempt::Unsent`]: it goes again on a
//! new connection); an answer that says `connection: close`, is HTTP/1.0,
//! is read to its end, or leaves bytes after it, is not kept; every bound
//! stays (the head's, the body's [`MAX_ANSWER_BYTES`], and a hold on the
//! process's answer budget, which the caller gives as `hold`).
//!
//! It knows nothing of the client that uses it (`front.rs`): it answers
//! with an [`Answer`] or a [`Failure`], which the client turns into its own.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use hyper::StatusCode;
use hyper::header::HeaderValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::stamped::{RxStamp, StampedTcp};

/// The largest answer body read from the caller's front door: the largest
/// answer the contract allows (10,000 records of fan-out 10 as JSON) is tens
/// of megabytes; a body declared or sent beyond this is refused, not held.
pub const MAX_ANSWER_BYTES: usize = 256 << 20;

/// The most bytes an answer's head (status line and headers) may take.
pub const MAX_HEAD_BYTES: usize = 64 << 10;
/// The most headers an answer's head may hold.
const MAX_HEADERS: usize = 64;
/// The most read at once into the answer's buffer.
const READ_BYTES: usize = 64 << 10;

/// A kept-alive HTTP/1.1 connection, driven by the exchange that uses it.
#[derive(Debug)]
pub(super) struct LeanConn {
    io: StampedTcp,
    pub(super) rx: RxStamp,
    /// What has been read of the answer and not yet used.
    buf: BytesMut,
}

/// An answer read whole.
#[derive(Debug)]
pub(super) struct Answer {
    pub status: StatusCode,
    /// Its `server-timing` header: the one header the harness reads.
    pub server_timing: Option<HeaderValue>,
    pub body: Bytes,
    /// The kernel's receive stamp of its last byte, if it had one and it
    /// is not before the exchange began (a stepped wall clock).
    pub stamp: Option<Instant>,
    /// Whether the connection may carry another exchange.
    pub keep: bool,
}

/// Why an exchange has no answer; `E` is what the hold on the budget
/// refuses with.
#[derive(Debug)]
pub(super) enum Failure<E> {
    /// The request never reached the server: the connection was closed
    /// before it, or refused its first write.
    Unsent,
    /// The server closed the connection before the answer ended.
    Closed,
    Io(std::io::Error),
    /// Not an HTTP/1.1 answer this reads, or past the head's bound.
    Protocol(String),
    /// A body over [`MAX_ANSWER_BYTES`].
    TooLarge,
    /// The hold on the budget refused more.
    Hold(E),
}

/// How an answer's body ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Body {
    Empty,
    Length(usize),
    Chunked,
    /// Read until the server closes.
    ToEnd,
}

/// An answer's head, owned.
struct Head {
    len: usize,
    status: StatusCode,
    server_timing: Option<HeaderValue>,
    body: Body,
    /// Whether the connection may carry another exchange.
    keep: bool,
}

impl LeanConn {
    pub(super) fn new(io: StampedTcp, rx: RxStamp) -> Self {
        LeanConn { io, rx, buf: BytesMut::new() }
    }

    /// Whether the server has closed this idle connection (or sent bytes no
    /// request asked for): one read, polled once, never waited on.
    pub(super) fn is_closed(&mut self) -> bool {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        let mut byte = [0u8; 1];
        let mut read = ReadBuf::new(&mut byte);
        !matches!(Pin::new(&mut self.io).poll_read(&mut cx, &mut read), Poll::Pending)
    }

    /// Writes `request` and reads its answer whole, each piece of its body
    /// held first by `hold` (the bytes held in all); or why there is none.
    /// `sent` runs once the request is written, before the answer is
    /// waited on.
    pub(super) async fn exchange<E>(
        &mut self,
        request: &[u8],
        start: Instant,
        hold: &mut impl FnMut(usize) -> Result<(), E>,
        sent: &mut (dyn FnMut() + Send),
    ) -> Result<Answer, Failure<E>> {
        if self.is_closed() {
            return Err(Failure::Unsent);
        }
        self.rx.clear();
        let written = self.io.write(request).await.map_err(|_| Failure::Unsent)?;
        if written == 0 {
            return Err(Failure::Unsent);
        }
        self.io.write_all(&request[written..]).await.map_err(Failure::Io)?;
        sent();
        self.buf.clear();
        let head = loop {
            if let Some(head) = self.head()? {
                break head;
            }
            self.read_more(MAX_HEAD_BYTES).await?;
        };
        self.buf.advance(head.len);
        let (body, ended) = self.body(head.body, hold).await?;
        Ok(Answer {
            status: head.status,
            server_timing: head.server_timing,
            body: body.freeze(),
            stamp: self.rx.arrived().filter(|at| *at >= start),
            // Bytes past the answer (none asked for them) leave the connection unusable.
            keep: head.keep && !ended && self.buf.is_empty(),
        })
    }

    /// The answer's head, once the buffer holds it whole; an informational
    /// answer (1xx) before it is passed over.
    fn head<E>(&mut self) -> Result<Option<Head>, Failure<E>> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut headers);
            let len = match resp.parse(&self.buf) {
                Ok(httparse::Status::Complete(len)) => len,
                Ok(httparse::Status::Partial) if self.buf.len() >= MAX_HEAD_BYTES => {
                    return Err(protocol(format!("an answer's head over {MAX_HEAD_BYTES} bytes")));
                }
                Ok(httparse::Status::Partial) => return Ok(None),
                Err(e) => return Err(protocol(format!("the answer is not HTTP/1.1: {e}"))),
            };
            let code = resp.code.unwrap_or(0);
            if (100..200).contains(&code) && code != 101 {
                self.buf.advance(len);
                continue;
            }
            let status = StatusCode::from_u16(code).map_err(|e| protocol(e.to_string()))?;
            // httparse has checked every name and value; only the headers
            // that frame the body or the connection, and the one the harness
            // reads, are looked at (a map of them all cost 5-7% of the
            // generator's instructions a request under callgrind:
            // bench/README.md, issue 56, seventeenth pass).
            let (mut body, mut keep, mut server_timing) = (Body::ToEnd, resp.version == Some(1), None);
            for h in resp.headers.iter() {
                let is = |name: &str| h.name.eq_ignore_ascii_case(name);
                if is("content-length") && body != Body::Chunked {
                    let n = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<u64>().ok());
                    let n = n.ok_or_else(|| protocol("an unreadable content-length".into()))?;
                    if n > MAX_ANSWER_BYTES as u64 {
                        return Err(Failure::TooLarge);
                    }
                    body = Body::Length(n as usize);
                } else if is("transfer-encoding") {
                    body = if h.value.eq_ignore_ascii_case(b"chunked") { Body::Chunked } else { Body::ToEnd };
                } else if is("connection") && h.value.eq_ignore_ascii_case(b"close") {
                    keep = false;
                } else if is("server-timing") && server_timing.is_none() {
                    // The first, as `HeaderMap::get` (the hyper path) gives.
                    server_timing = Some(HeaderValue::from_bytes(h.value).map_err(|e| protocol(e.to_string()))?);
                }
            }
            if code == 204 || code == 304 {
                body = Body::Empty;
            }
            return Ok(Some(Head { len, status, server_timing, body, keep }));
        }
    }

    /// The body, and whether the server ended the connection to end it.
    async fn body<E>(
        &mut self,
        kind: Body,
        hold: &mut impl FnMut(usize) -> Result<(), E>,
    ) -> Result<(BytesMut, bool), Failure<E>> {
        match kind {
            Body::Empty => Ok((BytesMut::new(), false)),
            Body::Length(n) => {
                while self.buf.len() < n {
                    hold(self.buf.len()).map_err(Failure::Hold)?;
                    self.read_more(n).await?;
                }
                hold(n).map_err(Failure::Hold)?;
                Ok((self.buf.split_to(n), false))
            }
            Body::ToEnd => loop {
                hold(self.buf.len()).map_err(Failure::Hold)?;
                if self.buf.len() > MAX_ANSWER_BYTES {
                    return Err(Failure::TooLarge);
                }
                if self.read(MAX_ANSWER_BYTES + 1).await? == 0 {
                    return Ok((self.buf.split(), true));
                }
            },
            Body::Chunked => self.chunks(hold).await.map(|b| (b, false)),
        }
    }

    /// A chunked body, decoded as its chunks arrive.
    async fn chunks<E>(&mut self, hold: &mut impl FnMut(usize) -> Result<(), E>) -> Result<BytesMut, Failure<E>> {
        let mut body = BytesMut::new();
        loop {
            let (at, size) = match httparse::parse_chunk_size(&self.buf) {
                Ok(httparse::Status::Complete(found)) => found,
                Ok(httparse::Status::Partial) if self.buf.len() >= MAX_HEAD_BYTES => {
                    return Err(protocol(format!("a chunk's size line over {MAX_HEAD_BYTES} bytes")));
                }
                Ok(httparse::Status::Partial) => {
                    self.read_more(MAX_HEAD_BYTES).await?;
                    continue;
                }
                Err(_) => return Err(protocol("an unreadable chunk size".into())),
            };
            if size == 0 {
                // The last chunk: its trailers (none asked for) end at an empty line.
                loop {
                    if self.buf[at..].starts_with(b"\r\n") {
                        self.buf.advance(at + 2);
                        return Ok(body);
                    }
                    if let Some(end) = self.buf[at..].windows(4).position(|w| w == b"\r\n\r\n") {
                        self.buf.advance(at + end + 4);
                        return Ok(body);
                    }
                    if self.buf.len() - at >= MAX_HEAD_BYTES {
                        return Err(protocol(format!("an answer's trailers over {MAX_HEAD_BYTES} bytes")));
                    }
                    self.read_more(at + MAX_HEAD_BYTES).await?;
                }
            }
            if body.len() as u64 + size > MAX_ANSWER_BYTES as u64 {
                return Err(Failure::TooLarge);
            }
            let size = size as usize;
            hold(body.len() + size).map_err(Failure::Hold)?;
            while self.buf.len() < at + size + 2 {
                self.read_more(at + size + 2).await?;
            }
            if &self.buf[at + size..at + size + 2] != b"\r\n" {
                return Err(protocol("a chunk not ended by CRLF".into()));
            }
            body.extend_from_slice(&self.buf[at..at + size]);
            self.buf.advance(at + size + 2);
        }
    }

    /// One read into the buffer, more than `want` bytes never asked for;
    /// the count (0: the server closed).
    async fn read<E>(&mut self, want: usize) -> Result<usize, Failure<E>> {
        let room = want.saturating_sub(self.buf.len()).clamp(1, READ_BYTES);
        self.buf.reserve(room);
        let mut limited = (&mut self.io).take(room as u64);
        limited.read_buf(&mut self.buf).await.map_err(Failure::Io)
    }

    /// [`read`](Self::read), the server's close before the answer ends an error.
    async fn read_more<E>(&mut self, want: usize) -> Result<(), Failure<E>> {
        match self.read(want).await? {
            0 => Err(Failure::Closed),
            _ => Ok(()),
        }
    }
}

fn protocol<E>(what: String) -> Failure<E> {
    Failure::Protocol(what)
}

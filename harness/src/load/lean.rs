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
//! stays (the head's, the body's [`MAX_ANSWER_BYTES`], the process's
//! [`AnswerBudget`](super::front::AnswerBudget)).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, BytesMut};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::front::{Attempt, FrontAnswer, FrontError, Held, MAX_ANSWER_BYTES};
use super::stamped::{RxStamp, StampedTcp};

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
    headers: HeaderMap,
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

    /// Writes `request` and reads its answer whole: the answer and whether
    /// the connection can be kept, or why there is none. `Unsent` where the
    /// request never reached the server (closed before it, or refused at the
    /// first write).
    pub(super) async fn exchange(
        &mut self,
        request: &[u8],
        start: Instant,
        mut held: Held,
    ) -> Result<(FrontAnswer, bool), Attempt> {
        if self.is_closed() {
            return Err(Attempt::Unsent);
        }
        self.rx.clear();
        let written = self.io.write(request).await.map_err(|_| Attempt::Unsent)?;
        if written == 0 {
            return Err(Attempt::Unsent);
        }
        self.io.write_all(&request[written..]).await.map_err(failed)?;
        self.buf.clear();
        let head = loop {
            if let Some(head) = self.head()? {
                break head;
            }
            self.read_more(MAX_HEAD_BYTES).await?;
        };
        self.buf.advance(head.len);
        let (body, ended) = self.body(head.body, &mut held).await?;
        // Bytes past the answer (none asked for them) leave the connection unusable.
        let keep = head.keep && !ended && self.buf.is_empty();
        let stamp = self.rx.arrived().filter(|at| *at >= start);
        let answer = FrontAnswer::new(head.status, head.headers, body.freeze(), stamp, held);
        Ok((answer, keep))
    }

    /// The answer's head, once the buffer holds it whole; an informational
    /// answer (1xx) before it is passed over.
    fn head(&mut self) -> Result<Option<Head>, Attempt> {
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
            let mut map = HeaderMap::with_capacity(resp.headers.len());
            let (mut body, mut keep) = (Body::ToEnd, resp.version == Some(1));
            for h in resp.headers.iter() {
                let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|e| protocol(e.to_string()))?;
                let value = HeaderValue::from_bytes(h.value).map_err(|e| protocol(e.to_string()))?;
                if name == hyper::header::CONTENT_LENGTH && body != Body::Chunked {
                    let n = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<u64>().ok());
                    let n = n.ok_or_else(|| protocol("an unreadable content-length".into()))?;
                    if n > MAX_ANSWER_BYTES as u64 {
                        return Err(Attempt::Failed(FrontError::TooLarge));
                    }
                    body = Body::Length(n as usize);
                } else if name == hyper::header::TRANSFER_ENCODING {
                    body = if h.value.eq_ignore_ascii_case(b"chunked") { Body::Chunked } else { Body::ToEnd };
                } else if name == hyper::header::CONNECTION && h.value.eq_ignore_ascii_case(b"close") {
                    keep = false;
                }
                map.append(name, value);
            }
            if code == 204 || code == 304 {
                body = Body::Empty;
            }
            return Ok(Some(Head { len, status, headers: map, body, keep }));
        }
    }

    /// The body, and whether the server ended the connection to end it.
    async fn body(&mut self, kind: Body, held: &mut Held) -> Result<(BytesMut, bool), Attempt> {
        match kind {
            Body::Empty => Ok((BytesMut::new(), false)),
            Body::Length(n) => {
                while self.buf.len() < n {
                    held.resize(self.buf.len()).map_err(Attempt::Failed)?;
                    self.read_more(n).await?;
                }
                held.resize(n).map_err(Attempt::Failed)?;
                Ok((self.buf.split_to(n), false))
            }
            Body::ToEnd => loop {
                held.resize(self.buf.len()).map_err(Attempt::Failed)?;
                if self.buf.len() > MAX_ANSWER_BYTES {
                    return Err(Attempt::Failed(FrontError::TooLarge));
                }
                if self.read(MAX_ANSWER_BYTES + 1).await? == 0 {
                    return Ok((self.buf.split(), true));
                }
            },
            Body::Chunked => self.chunks(held).await.map(|b| (b, false)),
        }
    }

    /// A chunked body, decoded as its chunks arrive.
    async fn chunks(&mut self, held: &mut Held) -> Result<BytesMut, Attempt> {
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
                return Err(Attempt::Failed(FrontError::TooLarge));
            }
            let size = size as usize;
            held.resize(body.len() + size).map_err(Attempt::Failed)?;
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
    async fn read(&mut self, want: usize) -> Result<usize, Attempt> {
        let room = want.saturating_sub(self.buf.len()).clamp(1, READ_BYTES);
        self.buf.reserve(room);
        let mut limited = (&mut self.io).take(room as u64);
        limited.read_buf(&mut self.buf).await.map_err(failed)
    }

    /// [`read`](Self::read), the server's close before the answer ends an error.
    async fn read_more(&mut self, want: usize) -> Result<(), Attempt> {
        match self.read(want).await? {
            0 => Err(Attempt::Failed(FrontError::Closed)),
            _ => Ok(()),
        }
    }
}

fn failed(e: std::io::Error) -> Attempt {
    Attempt::Failed(FrontError::Io(e))
}

fn protocol(what: String) -> Attempt {
    Attempt::Failed(FrontError::Protocol(what))
}

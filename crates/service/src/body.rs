//! A response body wrapper that sees every frame go by and forwards
//! everything else untouched: its size (so a `Content-Length` stays a
//! `Content-Length`, and the wire bytes do not change) and its end.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// `body`, calling `seen` on every frame it yields; `seen` (and whatever it
/// owns) is dropped with the body: after it was sent, or when the peer went
/// away.
pub fn watch_frames<F>(body: Body, seen: F) -> Body
where
    F: FnMut(&Frame<Bytes>) + Send + Unpin + 'static,
{
    Body::new(Watched { inner: body, seen })
}

/// `body`, keeping `value` alive until the body is dropped.
pub fn hold_until_dropped<T: Send + Unpin + 'static>(body: Body, value: T) -> Body {
    watch_frames(body, move |_| {
        let _held = &value;
    })
}

/// A whole answer already in memory, as a body that keeps `value` alive
/// until it is dropped (sent, or the peer went away): what
/// [`hold_until_dropped`] does, in one body instead of one around another,
/// and with no extension map to carry `value` to it (callgrind, the paced
/// REST listener serving Connect: bench/README.md, issue 56). Its size is
/// exact, so the answer keeps its `Content-Length`.
pub fn bytes_holding<T: Send + Unpin + 'static>(bytes: impl Into<Bytes>, value: T) -> Body {
    let bytes: Bytes = bytes.into();
    Body::new(Holding { bytes: (!bytes.is_empty()).then_some(bytes), _value: value })
}

struct Holding<T> {
    bytes: Option<Bytes>,
    _value: T,
}

impl<T: Send + Unpin + 'static> http_body::Body for Holding<T> {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.get_mut().bytes.take().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.bytes.as_ref().map_or(0, |b| b.len() as u64))
    }
}

struct Watched<F> {
    inner: Body,
    seen: F,
}

impl<F> http_body::Body for Watched<F>
where
    F: FnMut(&Frame<Bytes>) + Send + Unpin + 'static,
{
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        // `Body` is Unpin and `F` is required to be.
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            (this.seen)(frame);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The request-body bytes one connection holds: every body's bytes count
/// from the frame that brought them until the body is dropped (read to the
/// end and decoded, or abandoned). Over the limit, the body that passed it
/// fails with RESOURCE_EXHAUSTED, which ends that request and frees what it
/// held; the connection's other requests go on.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionBodies {
    held: Arc<AtomicUsize>,
    max: usize,
}

impl ConnectionBodies {
    pub(crate) fn new(max: usize) -> Self {
        ConnectionBodies { held: Arc::new(AtomicUsize::new(0)), max }
    }

    /// `body`, counted against this connection's limit.
    pub(crate) fn count<B>(&self, body: B) -> Counted<B> {
        Counted { inner: body, bodies: self.clone(), mine: 0 }
    }
}

/// A request body counted against its connection's limit.
pub(crate) struct Counted<B> {
    inner: B,
    bodies: ConnectionBodies,
    mine: usize,
}

impl<B> http_body::Body for Counted<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let Poll::Ready(Some(Ok(frame))) = &polled else { return polled.map_err(Into::into) };
        let n = frame.data_ref().map_or(0, Bytes::len);
        this.mine += n;
        let held = this.bodies.held.fetch_add(n, Ordering::AcqRel) + n;
        if held > this.bodies.max {
            let reason = format!(
                "this connection's request bodies hold more than the {} bytes one connection may hold",
                this.bodies.max
            );
            return Poll::Ready(Some(Err(Box::new(tonic::Status::resource_exhausted(reason)))));
        }
        polled.map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for Counted<B> {
    fn drop(&mut self) {
        self.bodies.held.fetch_sub(self.mine, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn bytes_holding_gives_its_bytes_at_their_exact_size_and_holds_until_dropped() {
        let held = Arc::new(());
        let mut body = bytes_holding(b"answer".to_vec(), held.clone());
        assert_eq!(body.size_hint().exact(), Some(6));
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "answer");
        assert!(body.is_end_stream() && body.frame().await.is_none());
        assert_eq!(Arc::strong_count(&held), 2, "sent, not yet dropped: still held");
        drop(body);
        assert_eq!(Arc::strong_count(&held), 1);
        let empty = bytes_holding(Vec::new(), held.clone());
        assert!(empty.is_end_stream());
        assert_eq!(empty.size_hint().exact(), Some(0));
    }

    #[tokio::test]
    async fn frames_are_seen_and_the_size_is_kept() {
        let mut frames = 0;
        let body = watch_frames(Body::from("twelve bytes"), move |f| {
            frames += 1;
            assert_eq!(f.data_ref().map(|d| d.len()), Some(12), "frame {frames}");
        });
        assert_eq!(body.size_hint().exact(), Some(12));
        assert_eq!(body.collect().await.unwrap().to_bytes(), "twelve bytes");
    }

    #[tokio::test]
    async fn a_connection_holds_bodies_up_to_its_limit() {
        let bodies = ConnectionBodies::new(10);
        let first = bodies.count(Body::from("123456"));
        let (first, kept) = {
            let mut first = first;
            let frame = first.frame().await.unwrap().unwrap();
            (first, frame)
        };
        assert_eq!(kept.data_ref().map(|d| d.len()), Some(6));
        assert_eq!(bodies.held.load(Ordering::Acquire), 6, "held while the first body lives");
        let err = bodies.count(Body::from("12345")).collect().await.unwrap_err();
        assert!(err.to_string().contains("10 bytes one connection may hold"), "{err}");
        assert_eq!(bodies.held.load(Ordering::Acquire), 6, "the refused body gave its bytes back");
        drop(first);
        assert_eq!(bodies.count(Body::from("1234567890")).collect().await.unwrap().to_bytes(), "1234567890");
        assert_eq!(bodies.held.load(Ordering::Acquire), 0);
    }
}

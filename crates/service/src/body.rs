//! A response body wrapper that sees every frame go by and forwards
//! everything else untouched: its size (so a `Content-Length` stays a
//! `Content-Length`, and the wire bytes do not change) and its end.

use std::pin::Pin;
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use http_body_util::BodyExt;

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
}

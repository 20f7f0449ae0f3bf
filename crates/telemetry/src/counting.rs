//! A socket wrapper that counts wire bytes in both directions.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::Counters;

/// Wraps a connection and adds every byte read or written to [`Counters`].
///
/// Counting happens where the bytes cross the socket boundary (after TLS would
/// be, before any HTTP parsing), so the figures are the wire bytes of the
/// transport: headers, framing, HPACK, pings, everything. Vectored writes are
/// forwarded so the wrapper does not change how hyper writes.
#[derive(Debug)]
pub struct CountingStream<S> {
    inner: S,
    counters: Arc<Counters>,
}

impl<S> CountingStream<S> {
    /// Wraps `inner` and counts one more connection on `counters`; dropping the
    /// wrapper counts it closed.
    pub fn new(inner: S, counters: Arc<Counters>) -> Self {
        counters.connection_opened();
        CountingStream { inner, counters }
    }
}

impl<S> Drop for CountingStream<S> {
    fn drop(&mut self) {
        self.counters.connection_closed();
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CountingStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res {
            this.counters.add_bytes_in((buf.filled().len() - before) as u64);
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CountingStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let res = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = res {
            this.counters.add_bytes_out(n as u64);
        }
        res
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let res = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = res {
            this.counters.add_bytes_out(n as u64);
        }
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn counts_reads_and_vectored_writes() {
        let counters = Arc::new(Counters::new("t", &[]));
        let (a, mut b) = tokio::io::duplex(1024);
        let mut s = CountingStream::new(a, counters.clone());
        s.write_all(b"hello").await.unwrap();
        let n = s.write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cde")]).await.unwrap();
        b.write_all(b"xyz").await.unwrap();
        let mut got = [0u8; 3];
        s.read_exact(&mut got).await.unwrap();
        let snap = counters.snapshot();
        assert_eq!(snap.bytes_out, Some(5 + n as u64));
        assert_eq!(snap.bytes_in, Some(3));
        assert_eq!(snap.connections_open, Some(1));
        drop(s);
        assert_eq!(counters.snapshot().connections_open, Some(0));
    }
}

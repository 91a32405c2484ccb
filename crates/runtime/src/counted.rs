//! A stream wrapper that counts the bytes read and written as they pass,
//! so byte counters (the sidecar's `bytes_total`, the router's
//! `link_flow_bytes_total`) move during a long transfer and count
//! connections that end in an error too.
//!
//! Owns nothing but the two counts.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `S` with every byte read added to `read` and every byte written to
/// `written`.
#[derive(Debug)]
pub struct Counted<S> {
    inner: S,
    read: Counter,
    written: Counter,
}

impl<S> Counted<S> {
    /// Wraps `inner`; pass one counter twice to count both directions together.
    pub fn new(inner: S, read: Counter, written: Counter) -> Self {
        Counted {
            inner,
            read,
            written,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            self.read.inc_by((buf.filled().len() - before) as u64);
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            self.written.inc_by(n as u64);
        }
        poll
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
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn counts_each_direction_as_it_happens() {
        let (a, mut b) = tokio::io::duplex(64);
        let (read, written) = (Counter::default(), Counter::default());
        let mut counted = Counted::new(a, read.clone(), written.clone());
        counted.write_all(b"hello").await.unwrap();
        assert_eq!((read.get(), written.get()), (0, 5));
        b.write_all(b"abc").await.unwrap();
        let mut buf = [0u8; 3];
        counted.read_exact(&mut buf).await.unwrap();
        assert_eq!((read.get(), written.get()), (3, 5));
    }
}

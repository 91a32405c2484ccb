//! A stream wrapper that counts bytes as they pass.
//!
//! Owns nothing but the count: every successful read and write adds its
//! length to a Prometheus counter at once, so `bytes_total` moves while a
//! long transfer runs and includes connections that end in an error.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `S` with every byte read or written added to `counter`.
#[derive(Debug)]
pub struct Counted<S> {
    inner: S,
    counter: Counter,
}

impl<S> Counted<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, counter: Counter) -> Self {
        Counted { inner, counter }
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
            self.counter.inc_by((buf.filled().len() - before) as u64);
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
            self.counter.inc_by(n as u64);
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn counts_reads_and_writes_as_they_happen() {
        let (a, mut b) = tokio::io::duplex(64);
        let counter = Counter::default();
        let mut counted = Counted::new(a, counter.clone());
        counted.write_all(b"hello").await.unwrap();
        assert_eq!(counter.get(), 5);
        b.write_all(b"abc").await.unwrap();
        let mut buf = [0u8; 3];
        counted.read_exact(&mut buf).await.unwrap();
        assert_eq!(counter.get(), 8);
    }
}

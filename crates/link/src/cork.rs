//! Batching between yamux and TLS, and below TLS.
//!
//! yamux writes every frame as two writes (its 12-byte header, then the
//! body) and flushes after each frame; straight onto a TLS stream that is
//! one TLS record and one `sendmsg` per write, so a small flow frame cost
//! two records and two system calls. [`Corked`] sits between yamux and
//! TLS: small writes are copied into a buffer, a large write goes out
//! together with what is buffered (one vectored write, so header and body
//! share records), and a flush is put off by one scheduler turn (the task
//! wakes itself) so that the frames of all streams ready in this turn leave
//! in one write. A flush that comes with nothing written since the last
//! put-off flush is done at once, and `shutdown` drains the buffer first.
//!
//! Below TLS, rustls reads at most 4 KiB per call; [`buffered`] puts a
//! 64 KiB read buffer under it so one `recvmsg` feeds several records.
//!
//! Owns no protocol state; never interprets bytes.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, BufReader, ReadBuf};
use tokio::net::TcpStream;

/// Writes below this size are copied into the buffer; larger ones are
/// written at once (with the buffer in front).
const COPY_BELOW: usize = 4 * 1024;
/// The most bytes held back before they are written.
const BUFFER_LIMIT: usize = 64 * 1024;
/// The read buffer under TLS.
const READ_BUFFER: usize = 64 * 1024;

/// A link's TCP connection with a read buffer under TLS.
pub(crate) type LinkTcp = BufReader<TcpStream>;

/// Wraps a link's TCP connection in a [`READ_BUFFER`] read buffer.
pub(crate) fn buffered(tcp: TcpStream) -> LinkTcp {
    BufReader::with_capacity(READ_BUFFER, tcp)
}

/// Write batching over `T` (see the module docs). Reads pass through.
#[derive(Debug)]
pub(crate) struct Corked<T> {
    io: T,
    buf: Vec<u8>,
    /// A flush was put off and nothing was written since.
    flush_pending: bool,
}

impl<T: AsyncWrite + Unpin> Corked<T> {
    /// Wraps `io`.
    pub(crate) fn new(io: T) -> Self {
        Corked {
            io,
            buf: Vec::new(),
            flush_pending: false,
        }
    }

    /// Writes out the whole buffer.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.buf.is_empty() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.buf.drain(..n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Corked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Corked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if data.len() < COPY_BELOW && this.buf.len() + data.len() <= BUFFER_LIMIT {
            this.buf.extend_from_slice(data);
            this.flush_pending = false;
            return Poll::Ready(Ok(data.len()));
        }
        loop {
            if this.buf.is_empty() {
                let n = ready!(Pin::new(&mut this.io).poll_write(cx, data))?;
                this.flush_pending = false;
                return Poll::Ready(Ok(n));
            }
            let held = this.buf.len();
            let slices = [IoSlice::new(&this.buf), IoSlice::new(data)];
            let n = ready!(Pin::new(&mut this.io).poll_write_vectored(cx, &slices))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            this.buf.drain(..n.min(held));
            if n > held {
                this.flush_pending = false;
                return Poll::Ready(Ok(n - held));
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.flush_pending && !this.buf.is_empty() {
            // Put off by one turn: frames that other tasks queue before
            // this task runs again leave in the same write.
            this.flush_pending = true;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn small_and_large_writes_arrive_in_order_after_a_flush() {
        let (a, mut b) = tokio::io::duplex(1 << 20);
        let mut w = Corked::new(a);
        let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        w.write_all(b"head").await.unwrap();
        w.write_all(&big).await.unwrap();
        w.write_all(b"tail").await.unwrap();
        // Held back until flushed.
        w.flush().await.unwrap();
        w.flush().await.unwrap();
        let mut got = vec![0u8; 4 + big.len() + 4];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..4 + big.len()], &big[..]);
        assert_eq!(&got[4 + big.len()..], b"tail");
    }

    #[tokio::test]
    async fn shutdown_writes_what_is_buffered_then_ends_the_stream() {
        let (a, mut b) = tokio::io::duplex(1024);
        let mut w = Corked::new(a);
        w.write_all(b"last words").await.unwrap();
        w.shutdown().await.unwrap();
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"last words");
    }
}

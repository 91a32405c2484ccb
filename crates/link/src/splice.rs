//! Copying a flow's bytes both ways, with buffers that grow only for
//! flows that move data in bulk.
//!
//! `tokio::io::copy_bidirectional_with_sizes` allocates and zeroes both
//! buffers in full when a flow starts: 2 × 64 KiB per router per flow,
//! while most flows (one request, one answer) never fill 8 KiB. Here each
//! direction starts with [`START`] bytes and grows to [`MAX`] the first
//! time a read fills its buffer, so a bulk flow still reads and writes in
//! 64 KiB steps.
//!
//! Semantics are tokio's: each direction copies until its reader ends,
//! then flushes and shuts its writer down (a half-close passed on); the
//! splice ends when both directions ended, or at the first error.
//!
//! Owns only the copying; never decides where a flow goes.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A direction's first buffer.
const START: usize = 8 * 1024;
/// The largest a direction's buffer grows: one yamux data frame's body,
/// so a full read towards a link is one frame (64 KiB with its header).
const MAX: usize = crate::mux::FRAME_BODY;

/// One direction's state.
struct Half {
    buf: Vec<u8>,
    /// Bytes `pos..cap` are read and not written yet.
    pos: usize,
    cap: usize,
    read_done: bool,
    need_flush: bool,
    shut_down: bool,
    amt: u64,
}

impl Half {
    fn new() -> Self {
        Half {
            buf: Vec::new(),
            pos: 0,
            cap: 0,
            read_done: false,
            need_flush: false,
            shut_down: false,
            amt: 0,
        }
    }

    /// Reads into the free part of the buffer (allocated on first use).
    fn poll_fill<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
    ) -> Poll<io::Result<()>> {
        if self.buf.is_empty() {
            self.buf = vec![0; START];
        }
        let mut rb = ReadBuf::new(&mut self.buf[self.cap..]);
        ready!(Pin::new(reader).poll_read(cx, &mut rb))?;
        let n = rb.filled().len();
        if n == 0 {
            self.read_done = true;
        }
        self.cap += n;
        Poll::Ready(Ok(()))
    }

    /// Copies until the reader ended and the writer is shut down.
    fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        writer: &mut W,
    ) -> Poll<io::Result<u64>>
    where
        R: AsyncRead + Unpin + ?Sized,
        W: AsyncWrite + Unpin + ?Sized,
    {
        loop {
            if self.shut_down {
                return Poll::Ready(Ok(self.amt));
            }
            // A link stream is not a tokio resource: keep to the task's
            // budget so a busy flow cannot hold the worker thread.
            let coop = ready!(tokio::task::coop::poll_proceed(cx));
            if !self.read_done && (self.buf.is_empty() || self.cap < self.buf.len()) {
                match self.poll_fill(cx, reader) {
                    Poll::Ready(r) => r?,
                    // Write what was read before.
                    Poll::Pending if self.pos < self.cap => {}
                    Poll::Pending => {
                        if self.need_flush {
                            ready!(Pin::new(&mut *writer).poll_flush(cx))?;
                            self.need_flush = false;
                        }
                        return Poll::Pending;
                    }
                }
            }
            while self.pos < self.cap {
                let n =
                    ready!(Pin::new(&mut *writer).poll_write(cx, &self.buf[self.pos..self.cap]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "write zero byte into writer",
                    )));
                }
                self.pos += n;
                self.amt += n as u64;
                self.need_flush = true;
            }
            coop.made_progress();
            if self.cap == self.buf.len() && self.buf.len() < MAX {
                // A read filled the buffer: this flow moves data in bulk.
                self.buf.resize(MAX, 0);
            }
            self.pos = 0;
            self.cap = 0;
            if self.read_done {
                ready!(Pin::new(&mut *writer).poll_flush(cx))?;
                ready!(Pin::new(&mut *writer).poll_shutdown(cx))?;
                self.shut_down = true;
            }
        }
    }
}

/// Copies `a` to `b` and `b` to `a` until both directions ended, passing
/// each half-close on. Returns (bytes a to b, bytes b to a).
pub(crate) async fn bidirectional<A, B>(a: &mut A, b: &mut B) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let mut a_to_b = Half::new();
    let mut b_to_a = Half::new();
    poll_fn(|cx| {
        let ab = a_to_b.poll_copy(cx, a, b)?;
        let ba = b_to_a.poll_copy(cx, b, a)?;
        match (ab, ba) {
            (Poll::Ready(x), Poll::Ready(y)) => Poll::Ready(Ok((x, y))),
            _ => Poll::Pending,
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn bulk_and_small_data_cross_both_ways_with_half_close() {
        let (mut client, mut a) = tokio::io::duplex(16 * 1024);
        let (mut b, mut server) = tokio::io::duplex(16 * 1024);
        let splice = tokio::spawn(async move { bidirectional(&mut a, &mut b).await });
        let bulk: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = bulk.clone();
        let writer = tokio::spawn(async move {
            client.write_all(&sent).await.unwrap();
            client.shutdown().await.unwrap();
            let mut answer = Vec::new();
            client.read_to_end(&mut answer).await.unwrap();
            answer
        });
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, bulk, "the half-close arrived after every byte");
        server.write_all(b"ok").await.unwrap();
        server.shutdown().await.unwrap();
        assert_eq!(writer.await.unwrap(), b"ok");
        let (ab, ba) = splice.await.unwrap().unwrap();
        assert_eq!((ab, ba), (bulk.len() as u64, 2));
    }
}

//! Write coalescing for the xDS port's TCP connections.
//!
//! One HTTP/2 connection carries many ADS streams (a node's sidecars, or a
//! load generator's hundred). When a change reaches 100 streams of one
//! connection, each stream's response wakes the connection task, and
//! tokio's LIFO slot runs it right away: h2 writes that one frame, rustls
//! seals it as its own TLS record, and the kernel gets one `writev` per
//! response (10,113 writes for 10,000 responses in the benchmark; a sixth
//! of the control plane's CPU in a propagation round was in those writes).
//!
//! [`CoalescedWrites`] sits under TLS and holds written bytes until the
//! writer has flushed and then yielded to the scheduler once: the first
//! `poll_flush` with bytes held wakes its own task and returns `Pending`,
//! which puts the connection task at the back of the run queue, behind the
//! other streams' tasks the same change woke. By the time it runs again
//! their frames are queued too, and the next flush sends all of them in one
//! write. The delay is one pass of the run queue; nothing is held across an
//! idle scheduler. Bytes held are capped ([`HOLD_LIMIT`]), and the buffer is
//! released once sent, so an idle connection holds none.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// Bytes held before a write sends them without waiting for a flush.
pub(crate) const HOLD_LIMIT: usize = 64 * 1024;

/// An I/O object whose writes are sent in batches (see the module docs).
#[derive(Debug)]
pub(crate) struct CoalescedWrites<IO> {
    io: IO,
    /// Bytes written and not yet sent; `held[sent..]` is what is left.
    held: Vec<u8>,
    sent: usize,
    /// The flush yielded once since bytes were last sent.
    yielded: bool,
}

impl<IO> CoalescedWrites<IO> {
    /// Wraps `io`.
    pub(crate) fn new(io: IO) -> Self {
        Self {
            io,
            held: Vec::new(),
            sent: 0,
            yielded: false,
        }
    }

    fn holding(&self) -> usize {
        self.held.len() - self.sent
    }
}

impl<IO: AsyncWrite + Unpin> CoalescedWrites<IO> {
    /// Sends everything held; the buffer is released once it is empty.
    fn poll_send_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.held.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.held[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.held = Vec::new();
        self.sent = 0;
        self.yielded = false;
        Poll::Ready(Ok(()))
    }

    /// Makes room before a write: past [`HOLD_LIMIT`], what is held is
    /// sent first.
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.holding() >= HOLD_LIMIT {
            ready!(self.poll_send_held(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for CoalescedWrites<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for CoalescedWrites<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        this.held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        let mut n = 0;
        for buf in bufs {
            this.held.extend_from_slice(buf);
            n += buf.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.holding() > 0 {
            if !this.yielded {
                // Back of the run queue: the tasks woken by the same change
                // add their frames before this connection writes.
                this.yielded = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            ready!(this.poll_send_held(cx))?;
        }
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send_held(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

impl<IO: Connected> Connected for CoalescedWrites<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Records each write call it receives.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
        flushes: usize,
        shut: bool,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.get_mut().writes.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().flushes += 1;
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().shut = true;
            Poll::Ready(Ok(()))
        }
    }

    /// Counts wake-ups.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A waker that counts its wake-ups, and the counter.
    fn counting_waker() -> (Arc<Wakes>, std::task::Waker) {
        let wakes = Arc::new(Wakes::default());
        (wakes.clone(), wakes.into())
    }

    fn write(io: &mut CoalescedWrites<Recorder>, cx: &mut Context<'_>, bytes: &[u8]) {
        let n = Pin::new(io).poll_write(cx, bytes);
        assert!(matches!(n, Poll::Ready(Ok(len)) if len == bytes.len()));
    }

    #[test]
    fn writes_are_sent_together_on_the_flush_after_one_yield() {
        let (wakes, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut io = CoalescedWrites::new(Recorder::default());
        write(&mut io, &mut cx, b"one ");
        let vectored = [IoSlice::new(b"two "), IoSlice::new(b"three")];
        assert!(matches!(
            Pin::new(&mut io).poll_write_vectored(&mut cx, &vectored),
            Poll::Ready(Ok(9))
        ));
        assert!(io.io.writes.is_empty(), "nothing is sent before a flush");

        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_pending());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "the flush woke its task");
        assert!(io.io.writes.is_empty());

        write(&mut io, &mut cx, b" four");
        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_ready());
        assert_eq!(io.io.writes, vec![b"one two three four".to_vec()]);
        assert_eq!(io.io.flushes, 1);
        assert_eq!(io.held.capacity(), 0, "the buffer is released once sent");

        // The next batch yields again.
        write(&mut io, &mut cx, b"five");
        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_pending());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_flush_with_nothing_held_does_not_yield() {
        let (wakes, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut io = CoalescedWrites::new(Recorder::default());
        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_ready());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
        assert_eq!(io.io.flushes, 1);
    }

    #[test]
    fn past_the_limit_a_write_sends_what_is_held_first() {
        let (_, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut io = CoalescedWrites::new(Recorder::default());
        let chunk = vec![7u8; HOLD_LIMIT / 2];
        write(&mut io, &mut cx, &chunk);
        write(&mut io, &mut cx, &chunk);
        assert!(io.io.writes.is_empty());
        write(&mut io, &mut cx, b"tail");
        assert_eq!(io.io.writes.len(), 1);
        assert_eq!(io.io.writes[0].len(), HOLD_LIMIT);
        assert_eq!(io.holding(), 4);
    }

    #[test]
    fn shutdown_sends_what_is_held() {
        let (_, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut io = CoalescedWrites::new(Recorder::default());
        write(&mut io, &mut cx, b"goaway");
        assert!(Pin::new(&mut io).poll_shutdown(&mut cx).is_ready());
        assert_eq!(io.io.writes, vec![b"goaway".to_vec()]);
        assert!(io.io.shut);
    }

    #[tokio::test]
    async fn bytes_reach_the_peer_through_the_async_api() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut io = CoalescedWrites::new(near);
        io.write_all(b"hello ").await.unwrap();
        io.write_all(b"world").await.unwrap();
        io.flush().await.unwrap();
        let mut got = [0u8; 11];
        far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello world");
        far.write_all(b"reply").await.unwrap();
        let mut back = [0u8; 5];
        io.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"reply");
    }
}

//! Copying one proxied TCP connection both ways, with a bound on how long
//! it may sit idle and how long it may stay half-closed.
//!
//! Owns the copy of one connection and nothing else. Without these bounds
//! a connection whose client went away while the server never closed (or
//! the reverse) stayed half-closed forever, in CLOSE-WAIT and FIN-WAIT,
//! holding two sockets and two copy buffers; idle ones were never freed
//! either. The bounds are inactivity timeouts, as haproxy's `timeout
//! client-fin`/`server-fin` and Envoy's `tcp_proxy` `idle_timeout`: a
//! half-closed connection whose other direction is still sending is never
//! cut. The timer is checked once per period, so a connection is closed
//! between one and two periods after its last byte.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// Kuma's MeshTimeout default `idleTimeout` (Envoy's `tcp_proxy` default).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long a connection may stay half-closed with nothing moving.
pub const DEFAULT_HALF_CLOSED_TIMEOUT: Duration = Duration::from_secs(30);

/// The bounds of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpTimeouts {
    /// No byte in either direction for this long closes the connection.
    pub idle: Duration,
    /// Once one direction has ended, no byte in the other for this long
    /// closes the connection.
    pub half_closed: Duration,
}

impl Default for TcpTimeouts {
    fn default() -> Self {
        TcpTimeouts {
            idle: DEFAULT_IDLE_TIMEOUT,
            half_closed: DEFAULT_HALF_CLOSED_TIMEOUT,
        }
    }
}

/// How a copy ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyEnd {
    /// Both directions ended (or one failed).
    Closed,
    /// Nothing moved for [`TcpTimeouts::idle`].
    Idle,
    /// One direction had ended and the other moved nothing for
    /// [`TcpTimeouts::half_closed`].
    HalfClosed,
}

impl CopyEnd {
    /// The metrics label of a timeout.
    pub fn label(self) -> &'static str {
        match self {
            CopyEnd::Closed => "closed",
            CopyEnd::Idle => "idle",
            CopyEnd::HalfClosed => "half_closed",
        }
    }
}

/// What both sides' wrappers report: bytes read, and the first end of
/// stream.
#[derive(Debug, Default)]
struct Activity {
    bytes: AtomicU64,
    ended: AtomicBool,
    first_end: Notify,
}

/// A stream that reports what it reads to an [`Activity`].
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            let n = buf.filled().len() - before;
            if n > 0 {
                self.activity.bytes.fetch_add(n as u64, Ordering::Relaxed);
            } else if buf.remaining() > 0 && !self.activity.ended.swap(true, Ordering::Relaxed) {
                self.activity.first_end.notify_one();
            }
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Copies `a` to `b` and `b` to `a` (each end of stream passed on as a
/// write shutdown) until both end, one fails, or a bound of `timeouts`
/// passes; then both are dropped, which closes them.
pub async fn copy<A, B>(a: A, b: B, buffer: usize, timeouts: TcpTimeouts) -> io::Result<CopyEnd>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let activity = Arc::new(Activity::default());
    let mut a = Watched {
        inner: a,
        activity: activity.clone(),
    };
    let mut b = Watched {
        inner: b,
        activity: activity.clone(),
    };
    let copy = tokio::io::copy_bidirectional_with_sizes(&mut a, &mut b, buffer, buffer);
    tokio::select! {
        result = copy => result.map(|_| CopyEnd::Closed),
        end = inactivity(&activity, timeouts) => Ok(end),
    }
}

/// Resolves when nothing moved for the bound in force: `idle`, or
/// `half_closed` once a direction has ended.
async fn inactivity(activity: &Activity, timeouts: TcpTimeouts) -> CopyEnd {
    loop {
        let half = activity.ended.load(Ordering::Relaxed);
        let (period, end) = if half {
            (timeouts.half_closed, CopyEnd::HalfClosed)
        } else {
            (timeouts.idle, CopyEnd::Idle)
        };
        let before = activity.bytes.load(Ordering::Relaxed);
        tokio::select! {
            () = tokio::time::sleep(period) => {
                if activity.bytes.load(Ordering::Relaxed) == before {
                    return end;
                }
            }
            // The first end of stream switches to the half-closed bound.
            () = activity.first_end.notified(), if !half => {}
        }
    }
}

#[cfg(test)]
mod tests;

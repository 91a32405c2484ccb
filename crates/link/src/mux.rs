//! The yamux multiplexer over one TLS connection, driven by one task.
//!
//! yamux needs a single owner that keeps polling the connection; that task
//! also opens outbound streams on request (a command channel) and hands
//! inbound streams out on another channel. Owns the yamux `Config` (see
//! `docs/architecture.md` for the window choice). It never reads or writes
//! stream contents.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use futures::FutureExt as _;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt as _, TokioAsyncReadCompatExt as _};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// A yamux stream as a tokio `AsyncRead + AsyncWrite`; `shutdown` is a
/// half-close (yamux FIN), reading goes on until the peer's FIN.
pub type LinkStream = Compat<yamux::Stream>;

/// Most streams open at once on one link, either way.
pub const MAX_STREAMS: usize = 2048;

/// How long a graceful close may take before the connection is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

type OpenReply = oneshot::Sender<Result<yamux::Stream, yamux::ConnectionError>>;

/// The yamux configuration for links: each stream starts with yamux's
/// 256 KiB receive window and auto-tunes up to twice the measured
/// bandwidth-delay product; the connection's total receive window is
/// capped at [`MAX_STREAMS`] × 256 KiB (512 MiB), the least yamux allows
/// for that many streams. Frames are split at 16 KiB so a bulk flow
/// cannot hold the connection for long (`docs/architecture.md`).
fn config() -> yamux::Config {
    let mut cfg = yamux::Config::default();
    // Every stream may keep at least the default 256 KiB window.
    cfg.set_max_connection_receive_window(Some(MAX_STREAMS * yamux::DEFAULT_CREDIT as usize));
    cfg.set_max_num_streams(MAX_STREAMS);
    cfg
}

/// Opens streams on a running multiplexer; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct MuxOpener {
    tx: mpsc::Sender<OpenReply>,
}

impl MuxOpener {
    /// Opens a new outbound stream.
    pub(crate) async fn open(&self) -> Result<LinkStream, String> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(reply)
            .await
            .map_err(|_| "link closed".to_owned())?;
        match rx.await {
            Ok(Ok(stream)) => Ok(stream.compat()),
            Ok(Err(e)) => Err(format!("link failed: {e}")),
            Err(_) => Err("link closed".to_owned()),
        }
    }
}

/// A running multiplexer: the opener, the inbound streams and the driver
/// task (aborted when this is dropped).
pub(crate) struct Mux {
    pub(crate) opener: MuxOpener,
    pub(crate) inbound: mpsc::UnboundedReceiver<LinkStream>,
    pub(crate) driver: AbortOnDropHandle<Result<(), String>>,
}

/// Starts the driver task for `io`; `dialer` selects the yamux client mode.
/// Cancelling `close` closes the connection gracefully (GoAway).
pub(crate) fn start<T>(io: T, dialer: bool, close: CancellationToken) -> Mux
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mode = if dialer {
        yamux::Mode::Client
    } else {
        yamux::Mode::Server
    };
    let conn = yamux::Connection::new(io.compat(), config(), mode);
    let (tx, rx) = mpsc::channel(64);
    let (in_tx, inbound) = mpsc::unbounded_channel();
    let driver = AbortOnDropHandle::new(tokio::spawn(drive(conn, rx, in_tx, close)));
    Mux {
        opener: MuxOpener { tx },
        inbound,
        driver,
    }
}

async fn drive<T>(
    mut conn: yamux::Connection<T>,
    mut opens: mpsc::Receiver<OpenReply>,
    inbound: mpsc::UnboundedSender<LinkStream>,
    close: CancellationToken,
) -> Result<(), String>
where
    T: futures::AsyncRead + futures::AsyncWrite + Unpin,
{
    let mut pending: VecDeque<OpenReply> = VecDeque::new();
    let mut closed = pin!(close.cancelled());
    let outcome = poll_fn(|cx| {
        if closed.poll_unpin(cx).is_ready() {
            return Poll::Ready(None);
        }
        while let Poll::Ready(Some(reply)) = opens.poll_recv(cx) {
            pending.push_back(reply);
        }
        while !pending.is_empty() {
            match conn.poll_new_outbound(cx) {
                Poll::Ready(result) => {
                    let failed = result.as_ref().err().map(|e| e.to_string());
                    let reply = pending.pop_front().expect("checked non-empty");
                    let _ = reply.send(result);
                    if let Some(e) = failed {
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                Poll::Pending => break,
            }
        }
        loop {
            match conn.poll_next_inbound(cx) {
                Poll::Ready(Some(Ok(stream))) => {
                    // The receiver is gone only while the session ends.
                    let _ = inbound.send(stream.compat());
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.to_string()))),
                Poll::Ready(None) => return Poll::Ready(Some(Ok(()))),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await;
    match outcome {
        Some(result) => result,
        None => {
            let closing = poll_fn(|cx| conn.poll_close(cx));
            match tokio::time::timeout(CLOSE_TIMEOUT, closing).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("close timed out".into()),
            }
        }
    }
}

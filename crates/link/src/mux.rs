//! The yamux multiplexer over one TLS connection, driven by one task.
//!
//! yamux needs a single owner that keeps polling the connection; that task
//! also opens outbound streams on request (a command channel), hands the
//! control stream out on another channel, and runs the link's flows: the
//! future serving each inbound flow stream, and the splices of outbound
//! flows handed to it ([`MuxOpener::run`]), are polled by the driver
//! itself, so a flow's bytes move between its sockets and yamux without a
//! wake-up of another task (or thread). Owns the yamux `Config` (see
//! `docs/architecture.md` for the window choice). It never reads or writes
//! stream contents itself.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, StreamExt as _};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt as _, TokioAsyncReadCompatExt as _};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::connection_end::DriverError;
use crate::cork::Corked;

/// A yamux stream as a tokio `AsyncRead + AsyncWrite`; `shutdown` is a
/// half-close (yamux FIN), reading goes on until the peer's FIN.
pub type LinkStream = Compat<yamux::Stream>;

/// Most streams open at once on one link, either way.
pub const MAX_STREAMS: usize = 2048;

/// How long a graceful close may take before the connection is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A stream, the requested first bytes and how many of them the driver
/// queued.
type Opened = (yamux::Stream, Vec<u8>, usize);
type OpenReply = oneshot::Sender<Result<Opened, yamux::ConnectionError>>;

/// A flow run by the driver: serving an inbound flow stream, or the
/// splice of an outbound flow.
pub(crate) type FlowTask = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A request to open a stream and queue `first` on it.
struct OpenRequest {
    first: Vec<u8>,
    reply: OpenReply,
}

/// Receive window the streams of one link may grow into beyond yamux's
/// 256 KiB per stream (its auto-tuning doubles a stream's window while
/// the sender uses half of it in under two round trips).
const WINDOW_GROWTH: usize = 16 * 1024 * 1024;

/// A data frame's body: 64 KiB with yamux's 12-byte header, so one frame
/// is exactly four full TLS records.
pub(crate) const FRAME_BODY: usize = 64 * 1024 - 12;

/// The yamux configuration for links: each stream starts with yamux's
/// 256 KiB receive window and auto-tunes it (doubling) while it is the
/// bottleneck; the connection's total receive window is [`MAX_STREAMS`] ×
/// 256 KiB (the least yamux allows for that many streams) plus
/// [`WINDOW_GROWTH`] shared by the streams that grew. Data frames are
/// split at [`FRAME_BODY`], so a bulk flow holds the connection for one
/// 64 KiB frame at a time (`docs/architecture.md`).
fn config() -> yamux::Config {
    let mut cfg = yamux::Config::default();
    cfg.set_max_connection_receive_window(Some(
        MAX_STREAMS * yamux::DEFAULT_CREDIT as usize + WINDOW_GROWTH,
    ));
    cfg.set_max_num_streams(MAX_STREAMS);
    cfg.set_split_send_size(FRAME_BODY);
    cfg
}

/// Opens streams on a running multiplexer; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct MuxOpener {
    tx: mpsc::Sender<OpenRequest>,
    flows: mpsc::UnboundedSender<FlowTask>,
}

impl MuxOpener {
    /// Hands `flow` (the splice of a flow on this link) to the driver,
    /// which polls it with the connection; gives it back when the link
    /// has ended.
    pub(crate) fn run(&self, flow: FlowTask) -> Result<(), FlowTask> {
        self.flows.send(flow).map_err(|e| e.0)
    }

    /// Opens a new outbound stream.
    pub(crate) async fn open(&self) -> Result<LinkStream, String> {
        self.open_with(Vec::new()).await
    }

    /// Opens a new outbound stream whose first bytes are `first`. The
    /// driver queues them as it opens the stream, so the stream's first
    /// frame leaves in the same driver turn (one hand-off instead of two).
    pub(crate) async fn open_with(&self, first: Vec<u8>) -> Result<LinkStream, String> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(OpenRequest { first, reply })
            .await
            .map_err(|_| "link closed".to_owned())?;
        let (stream, first, written) = match rx.await {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) => return Err(format!("link failed: {e}")),
            Err(_) => return Err("link closed".to_owned()),
        };
        let mut stream = stream.compat();
        if written < first.len() {
            tokio::io::AsyncWriteExt::write_all(&mut stream, &first[written..])
                .await
                .map_err(|e| format!("link failed: {e}"))?;
        }
        Ok(stream)
    }
}

/// A running multiplexer: the opener, the inbound streams and the driver
/// task (aborted when this is dropped).
pub(crate) struct Mux {
    pub(crate) opener: MuxOpener,
    pub(crate) inbound: mpsc::UnboundedReceiver<LinkStream>,
    pub(crate) driver: AbortOnDropHandle<Result<(), DriverError>>,
}

/// Starts the driver task for `io`; `dialer` selects the yamux client mode.
/// Cancelling `close` closes the connection gracefully (GoAway).
///
/// The acceptor's first inbound stream (the control stream) goes to
/// [`Mux::inbound`]; every other inbound stream is handed to `flow`, and
/// the future it returns is run by the driver itself (see the module
/// docs). The driver's flows end with it.
pub(crate) fn start<T>(
    io: T,
    dialer: bool,
    close: CancellationToken,
    flow: impl FnMut(LinkStream) -> FlowTask + Send + 'static,
) -> Mux
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mode = if dialer {
        yamux::Mode::Client
    } else {
        yamux::Mode::Server
    };
    let conn = yamux::Connection::new(Corked::new(io).compat(), config(), mode);
    let (tx, rx) = mpsc::channel(64);
    let (in_tx, inbound) = mpsc::unbounded_channel();
    let (flows_tx, flows_rx) = mpsc::unbounded_channel();
    let inbound_to = Inbound {
        session: in_tx,
        control_pending: !dialer,
        flow,
        handed: flows_rx,
    };
    let driver = AbortOnDropHandle::new(tokio::spawn(drive(conn, rx, inbound_to, close)));
    Mux {
        opener: MuxOpener {
            tx,
            flows: flows_tx,
        },
        inbound,
        driver,
    }
}

/// Where the driver hands inbound streams: the acceptor's first one to
/// the session, the rest to `flow`; and the flows handed to the driver.
/// The session's channel closes when the driver ends.
struct Inbound<F> {
    session: mpsc::UnboundedSender<LinkStream>,
    control_pending: bool,
    flow: F,
    handed: mpsc::UnboundedReceiver<FlowTask>,
}

/// A flow's future as the driver runs it: a panic ends that flow only.
fn isolated(flow: FlowTask) -> impl Future<Output = ()> + Send {
    std::panic::AssertUnwindSafe(flow).catch_unwind().map(|r| {
        if r.is_err() {
            tracing::error!("a flow panicked; it was closed");
        }
    })
}

async fn drive<T, F>(
    mut conn: yamux::Connection<T>,
    mut opens: mpsc::Receiver<OpenRequest>,
    mut inbound: Inbound<F>,
    close: CancellationToken,
) -> Result<(), DriverError>
where
    T: futures::AsyncRead + futures::AsyncWrite + Unpin,
    F: FnMut(LinkStream) -> FlowTask,
{
    let mut pending: VecDeque<OpenRequest> = VecDeque::new();
    let mut flows = FuturesUnordered::new();
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
                    let failed = result.as_ref().err().map(DriverError::yamux);
                    let request = pending.pop_front().expect("checked non-empty");
                    let first = request.first;
                    let result = result.map(|mut stream| {
                        let written = queue_first(&mut stream, &first, cx);
                        (stream, first, written)
                    });
                    let _ = request.reply.send(result);
                    if let Some(e) = failed {
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                Poll::Pending => break,
            }
        }
        while let Poll::Ready(Some(flow)) = inbound.handed.poll_recv(cx) {
            flows.push(isolated(flow));
        }
        loop {
            match conn.poll_next_inbound(cx) {
                Poll::Ready(Some(Ok(stream))) if inbound.control_pending => {
                    inbound.control_pending = false;
                    // The receiver is gone only while the session ends.
                    let _ = inbound.session.send(stream.compat());
                }
                Poll::Ready(Some(Ok(stream))) => {
                    flows.push(isolated((inbound.flow)(stream.compat())));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(DriverError::yamux(&e)))),
                Poll::Ready(None) => return Poll::Ready(Some(Ok(()))),
                Poll::Pending => break,
            }
        }
        // The flows read what the connection just delivered and queue
        // their writes; the connection's channels wake this task for them.
        while let Poll::Ready(Some(())) = flows.poll_next_unpin(cx) {}
        Poll::Pending
    })
    .await;
    match outcome {
        Some(result) => result,
        None => {
            let closing = poll_fn(|cx| conn.poll_close(cx));
            match tokio::time::timeout(CLOSE_TIMEOUT, closing).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(DriverError::yamux(&e)),
                Err(_) => Err(DriverError::other("close timed out")),
            }
        }
    }
}

/// Queues `first` on a new stream without waiting; returns how many bytes
/// were taken (the opener writes the rest itself).
fn queue_first(stream: &mut yamux::Stream, first: &[u8], cx: &mut std::task::Context<'_>) -> usize {
    if first.is_empty() {
        return 0;
    }
    match futures::AsyncWrite::poll_write(std::pin::Pin::new(stream), cx, first) {
        Poll::Ready(Ok(n)) => n,
        _ => 0,
    }
}

//! HTTP/1 serving with limits against slow and idle clients, shared by the
//! REST API (`--api-addr`) and the grant server (`--grant-addr`).
//!
//! Each port gets, as Go's `http.Server` gives them:
//! - a **header-read timeout**: from the accept (through the TLS handshake,
//!   on the grant port) until the first request's header is complete, and
//!   on a kept-alive connection from the first byte of a later request;
//! - an **idle timeout**: how long a kept-alive connection may wait, with no
//!   request in flight and nothing sent, for its next request;
//! - a **connection cap**: a connection over it is closed at once;
//! - a **body-read timeout**: a request body whose next bytes do not arrive
//!   within the header-read timeout fails, the handler answers 400 and the
//!   connection closes (`timed_body.rs`).
//!
//! A request in flight whose body has arrived (a long-poll watch, a slow
//! handler) is never timed out here. Every close is counted in `meshlink_http_closed_connections_total`
//! by port and reason; `meshlink_http_connections` shows the open ones.
//! Shutdown stops accepting, closes idle connections and lets in-flight
//! requests finish (the control plane's drain timeout bounds the wait).

mod conn_state;
mod metrics;
mod timed_body;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Body;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use meshlink_runtime::Shutdown;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

pub(crate) use crate::config::HttpLimits as ConnLimits;
use conn_state::{ConnState, Tracked, Watched};
pub(crate) use metrics::{CloseReason, HttpConnMetrics};
pub(crate) use timed_body::TimedBody;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long the accept loop pauses after a failed accept (e.g. out of file
/// descriptors), so that it does not spin; axum's `serve` does the same.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// One port served by [`serve`]: its name in metrics and logs, its limits
/// and the shared metrics.
#[derive(Clone)]
pub(crate) struct Port {
    /// The `port` label and log name (`api`, `grant`).
    pub(crate) name: &'static str,
    /// The limits.
    pub(crate) limits: ConnLimits,
    /// Where closes are counted.
    pub(crate) metrics: HttpConnMetrics,
}

/// Serves HTTP/1 on `listener` until `shutdown`. `handshake` turns each
/// accepted TCP stream into the stream HTTP is spoken on (`None` drops the
/// connection; it logs why itself); it runs under the header-read timeout.
pub(crate) async fn serve<H, HF, IO, S, B>(
    listener: TcpListener,
    port: Port,
    shutdown: Shutdown,
    handshake: H,
    service: S,
) where
    H: Fn(TcpStream, SocketAddr) -> HF + Clone + Send + 'static,
    HF: Future<Output = Option<IO>> + Send,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<TimedBody>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send + 'static,
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let slots = Arc::new(Semaphore::new(port.limits.max_connections));
    let mut conns = JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            () = shutdown.wait() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(port = port.name, error = %e,
                        "accept failed; pausing 1s (out of file descriptors? raise `ulimit -n` or lower the connection cap)");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(port = port.name, %peer, max = port.limits.max_connections,
                "connection cap reached; closing the new connection");
            port.metrics.closed(port.name, CloseReason::OverLimit);
            continue;
        };
        let port = port.clone();
        let (handshake, service, sd) = (handshake.clone(), service.clone(), shutdown.clone());
        conns.spawn(async move {
            let _slot = slot;
            let _open = port.metrics.opened(port.name);
            connection(tcp, peer, &port, &sd, handshake, service).await;
        });
    }
    // Stopped accepting; every connection task sees the shutdown itself.
    while conns.join_next().await.is_some() {}
}

/// One connection, from the handshake to its close.
async fn connection<H, HF, IO, S, B>(
    tcp: TcpStream,
    peer: SocketAddr,
    port: &Port,
    shutdown: &Shutdown,
    handshake: H,
    service: S,
) where
    H: Fn(TcpStream, SocketAddr) -> HF,
    HF: Future<Output = Option<IO>>,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<TimedBody>, Response = Response<B>> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send + 'static,
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let state = Arc::new(ConnState::new());
    let watchdog = state.watchdog(port.limits);
    tokio::pin!(watchdog);
    let closed = |reason: CloseReason| {
        tracing::debug!(port = port.name, %peer, reason = reason.label(), "closing a slow or idle connection");
        port.metrics.closed(port.name, reason);
    };
    let io = tokio::select! {
        reason = &mut watchdog => return closed(reason),
        () = shutdown.wait() => return,
        io = handshake(tcp, peer) => match io {
            Some(io) => io,
            None => return,
        },
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog times the header; hyper's own timer is not needed.
    builder.header_read_timeout(None::<Duration>);
    let conn = builder.serve_connection(
        TokioIo::new(Watched::new(io, state.clone())),
        Tracked::new(service, state.clone(), port.clone()),
    );
    tokio::pin!(conn);
    let ended = tokio::select! {
        reason = &mut watchdog => return closed(reason),
        r = conn.as_mut() => r,
        () = shutdown.wait() => {
            // Idle connections close now; a request in flight finishes.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = ended {
        tracing::debug!(port = port.name, %peer, error = %e, "connection ended with an error");
    }
}

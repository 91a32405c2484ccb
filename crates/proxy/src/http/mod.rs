//! The L7 data path (issue 34): HTTP/1.1 and HTTP/2 listeners that route
//! every request by the RDS routes of the current configuration.
//!
//! - [`serve`] runs one downstream connection (plain from the local app
//!   outbound, mTLS from another sidecar inbound) with hyper's
//!   auto-detecting server, and sends GOAWAY (HTTP/2) or closes idle
//!   keep-alive (HTTP/1.1) when the proxy drains.
//! - [`forward`] handles each request: authorization, route
//!   ([`route_select`]), tries with timeouts and retries ([`retry`]), the
//!   replayable body ([`replay`]), pooled upstream connections ([`pool`]).
//! - [`timed`] bounds streams (idle, longest life) and connections
//!   (idle, longest life) after the response headers;
//! - [`fault`] injects the listener's faults (abort, delay, response
//!   bandwidth) after RBAC and the local rate limit;
//! - [`respond`] and [`redirect`] write the proxy's own answers;
//!   [`headers`] the header changes; [`metrics`] the golden metrics.

use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::drain::ConnectionDrain;
use crate::model::http::HttpListener;

pub mod access_log;
pub mod budget;
pub mod fault;
pub mod forward;
pub mod headers;
pub mod kept_conn;
pub mod metrics;
pub mod mirror;
pub mod one_shot;
pub mod otlp_encode;
pub mod pool;
pub mod redirect;
pub mod replay;
pub mod respond;
pub mod retry;
pub mod route_select;
pub mod timed;
pub mod trace;
pub mod trace_context;
pub mod trace_export;
pub mod upgrade;

/// Most concurrent streams a downstream HTTP/2 connection may open.
pub const MAX_CONCURRENT_STREAMS: u32 = 1024;
/// The largest request head accepted (HTTP/1.1 buffer, HTTP/2 header
/// list); a larger one is answered 431.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Serves HTTP on one downstream connection until it closes, the peer
/// goes idle for the listener's idle timeout, or the drain ends it.
pub async fn serve<S>(
    stream: S,
    http: &HttpListener,
    ctx: Arc<forward::ConnectionContext>,
    drain: &ConnectionDrain,
) -> Result<(), meshlink_runtime::ProxyError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .max_buf_size(MAX_HEADER_BYTES.max(8192))
        .header_read_timeout(
            http.request_headers_timeout
                .or(Some(Duration::from_secs(60))),
        );
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(pool::STREAM_WINDOW)
        .initial_connection_window_size(pool::CONNECTION_WINDOW)
        .adaptive_window(false)
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10));
    let activity = ctx.activity.clone();
    let service = service_fn(move |request| forward::handle(ctx.clone(), request));
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let idle = async {
        match http.idle_timeout {
            Some(idle) => activity.idle_for(idle).await,
            None => std::future::pending().await,
        }
    };
    let too_old = async {
        match http.max_connection_duration {
            Some(max) => tokio::time::sleep(max).await,
            None => std::future::pending().await,
        }
    };
    // Draining, an idle connection and an old one all end the same way:
    // GOAWAY (HTTP/2) or close once idle (HTTP/1.1), in-flight requests
    // finish.
    let end = async {
        tokio::select! {
            () = drain.draining() => {}
            () = idle => {}
            () = too_old => {}
        }
    };
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = end => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    result.map_err(|e| {
        meshlink_runtime::ProxyError::downstream(
            meshlink_runtime::ErrorKind::Io,
            format!("HTTP connection ended: {e}"),
        )
    })
}

//! One proxied connection, inbound or outbound.
//!
//! - **Inbound:** TLS handshake with the current server config (client
//!   certificate required), the peer's SPIFFE ID, RBAC, then a TCP
//!   connection to the local application.
//! - **Outbound:** pick an endpoint of the destination cluster, connect
//!   (timeout, another endpoint on failure, passive ejection), mTLS
//!   handshake verifying the destination's SPIFFE ID, then copy bytes.
//!
//! - **HTTP** (either direction): mTLS inbound as above, then
//!   [`crate::http::serve`], which routes each request.
//!
//! Owns nothing beyond the connection: a TCP connection reads the
//! `Dataplane` view current at accept time and keeps it, so a rotation
//! never affects an open connection; an HTTP connection reads the view
//! per request (a route change reaches the next request). It never panics on peer input; every failure is
//! counted and logged at debug level with the peer address.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use meshlink_runtime::{ErrorKind, ProxyError, Side};

use crate::apps::AppHealth;
use crate::counted::Counted;
use crate::dataplane::{ClusterRuntime, Dataplane};
use crate::drain::{ConnectionDrain, Ended};
use crate::lb::Event;
use crate::metrics::{ClusterLabels, ListenerLabels, NameLabels, ProxyMetrics};
use crate::model::{Authorization, Direction, ListenerProtocol, ListenerSpec, authorize};
use crate::tcp_copy::{self, CopyEnd, TcpTimeouts};

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Copy buffer per direction: one full TLS record's plaintext, so bulk
/// transfers are written as full records (tokio's default is 8 KiB). Two
/// per connection, allocated when the connection starts.
const COPY_BUFFER: usize = 16 * 1024;
/// Most endpoints one outbound connection tries.
const MAX_CONNECT_ATTEMPTS: usize = 3;

/// The listener's spec and the data-path view as they change: an HTTP
/// connection reads them per request.
#[derive(Debug, Clone)]
pub struct Live {
    /// The listener's current spec.
    pub spec: watch::Receiver<Arc<ListenerSpec>>,
    /// The current data-path view.
    pub view: watch::Receiver<Arc<Dataplane>>,
}

/// An accepted connection, its bytes counted for its listener.
type Downstream = Counted<TcpStream>;

/// A connection as its listener accepted it.
#[derive(Debug)]
pub struct Accepted {
    /// The socket.
    pub stream: TcpStream,
    /// Who connected.
    pub peer: SocketAddr,
    /// Where it was going before iptables redirected it to a capture
    /// listener, when that listener's own chain handles it (an
    /// `ORIGINAL_DST` cluster connects there).
    pub original_dst: Option<SocketAddr>,
}

/// Handles one accepted connection to completion.
pub async fn handle(
    accepted: Accepted,
    live: Live,
    metrics: Arc<ProxyMetrics>,
    drain: ConnectionDrain,
    apps: AppHealth,
) {
    let Accepted {
        stream,
        peer,
        original_dst,
    } = accepted;
    let spec = live.spec.borrow().clone();
    let view = live.view.borrow().clone();
    if let Some(limit) = &spec.connection_rate_limit
        && !limit.admit(tokio::time::Instant::now())
    {
        // Envoy's network local_ratelimit closes the connection as it
        // opens, before any byte is read: no handshake, no RBAC, no app.
        metrics
            .connections_rate_limited
            .get_or_create(&NameLabels {
                listener: spec.name.clone(),
            })
            .inc();
        tracing::debug!(listener = %spec.name, %peer, "connection closed by the local rate limit");
        return;
    }
    let _ = stream.set_nodelay(true);
    let direction = spec.direction;
    metrics
        .connections
        .get_or_create(&ListenerLabels {
            listener: spec.name.clone(),
            direction: direction.as_str().to_owned(),
        })
        .inc();
    let active = metrics
        .connections_active
        .get_or_create(&ProxyMetrics::direction(direction))
        .clone();
    active.inc();
    let listener = NameLabels {
        listener: spec.name.clone(),
    };
    let listener_active = metrics
        .listener_connections_active
        .get_or_create(&listener)
        .clone();
    listener_active.inc();
    let stream = Counted::new(
        stream,
        metrics.listener_rx_bytes.get_or_create(&listener).clone(),
        metrics.listener_tx_bytes.get_or_create(&listener).clone(),
    );
    let work = async {
        match (&spec.protocol, direction) {
            (ListenerProtocol::Http(_), _) => {
                http_connection(stream, peer, &spec, &view, live, &metrics, &drain).await
            }
            (ListenerProtocol::Tcp { .. }, Direction::Inbound) => {
                inbound(stream, &spec, &view, original_dst, &metrics, &apps).await
            }
            (ListenerProtocol::Tcp { .. }, Direction::Outbound) => {
                outbound(stream, &spec, &view, original_dst, &metrics).await
            }
        }
    };
    let result = match drain.until_deadline(work).await {
        Ended::Done(result) => result,
        Ended::Cut => Err(ProxyError::internal(
            ErrorKind::Shutdown,
            "closed at the drain deadline",
        )),
    };
    active.dec();
    listener_active.dec();
    if let Err(why) = result {
        tracing::debug!(listener = %spec.name, %peer, retryable = why.retryable(), "connection ended: {why}");
    }
}

/// An HTTP listener's connection: mTLS first inbound (the peer's SPIFFE
/// ID is what authorization reads), then HTTP until the connection ends.
async fn http_connection(
    stream: Downstream,
    peer: SocketAddr,
    spec: &ListenerSpec,
    view: &Dataplane,
    live: Live,
    metrics: &Arc<ProxyMetrics>,
    drain: &ConnectionDrain,
) -> Result<(), ProxyError> {
    let ListenerProtocol::Http(http) = &spec.protocol else {
        return Err(ProxyError::internal(
            ErrorKind::Internal,
            "not an HTTP listener",
        ));
    };
    let context = |peer_id| {
        Arc::new(crate::http::forward::ConnectionContext {
            spec: live.spec.clone(),
            view: live.view.clone(),
            peer,
            peer_id,
            metrics: metrics.clone(),
            activity: Arc::default(),
            forwarded_for: Default::default(),
        })
    };
    let Some(tls) = &spec.tls else {
        return crate::http::serve(stream, http, context(None), drain).await;
    };
    let (tls_stream, peer_id) = accept_mtls(stream, spec, tls, view, metrics).await?;
    if !spec.rbac_per_request {
        authorize_connection(spec, peer_id.as_deref(), metrics)?;
    }
    crate::http::serve(tls_stream, http, context(peer_id), drain).await
}

fn cluster<'a>(
    view: &'a Dataplane,
    spec: &ListenerSpec,
) -> Result<&'a Arc<ClusterRuntime>, ProxyError> {
    let name = match &spec.protocol {
        ListenerProtocol::Tcp { weighted, .. } if !weighted.is_empty() => {
            crate::http::route_select::pick_backend(weighted, rand::random())
                .map_or("", |b| b.cluster.as_str())
        }
        _ => spec.tcp_cluster().unwrap_or_default(),
    };
    view.clusters.get(name).ok_or_else(|| {
        ProxyError::internal(
            ErrorKind::NotReady,
            format!("cluster {name:?} is not ready"),
        )
    })
}

async fn inbound(
    stream: Downstream,
    spec: &ListenerSpec,
    view: &Dataplane,
    original_dst: Option<SocketAddr>,
    metrics: &ProxyMetrics,
    apps: &AppHealth,
) -> Result<(), ProxyError> {
    let cluster = cluster(view, spec)?;
    let Some(tls) = &spec.tls else {
        let (upstream, _connection) = connect(cluster, spec, original_dst, metrics)
            .await
            .inspect_err(|why| app_down(spec, None, why, metrics, apps))?;
        return copy(
            stream,
            upstream,
            Direction::Inbound,
            tcp_timeouts(spec),
            metrics,
        )
        .await;
    };
    let (tls_stream, peer_id) = accept_mtls(stream, spec, tls, view, metrics).await?;
    authorize_connection(spec, peer_id.as_deref(), metrics)?;
    let (upstream, _connection) = connect(cluster, spec, original_dst, metrics)
        .await
        .inspect_err(|why| app_down(spec, peer_id.as_deref(), why, metrics, apps))?;
    copy(
        tls_stream,
        upstream,
        Direction::Inbound,
        tcp_timeouts(spec),
        metrics,
    )
    .await
}

/// The server side of an inbound mTLS handshake, and the peer's SPIFFE ID.
async fn accept_mtls(
    stream: Downstream,
    spec: &ListenerSpec,
    tls: &crate::model::DownstreamTls,
    view: &Dataplane,
    metrics: &ProxyMetrics,
) -> Result<(tokio_rustls::server::TlsStream<Downstream>, Option<String>), ProxyError> {
    let server = view.servers.get(&tls.server_key()).ok_or_else(|| {
        ProxyError::internal(
            ErrorKind::NotReady,
            format!("listener {}: no TLS server config yet", spec.name),
        )
    })?;
    let accept = TlsAcceptor::from(server.clone()).accept(stream);
    let tls_stream = handshake(accept, Direction::Inbound, HANDSHAKE_TIMEOUT, metrics).await?;
    let peer_id = tls_stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(meshlink_identity::peer_spiffe_id)
        .map(|id| id.to_string());
    Ok((tls_stream, peer_id))
}

/// RBAC for a whole connection: a denial is counted, logged and ends it.
fn authorize_connection(
    spec: &ListenerSpec,
    peer_id: Option<&str>,
    metrics: &ProxyMetrics,
) -> Result<(), ProxyError> {
    let Authorization::Denied(why) = authorize(&spec.rbac, peer_id) else {
        return Ok(());
    };
    metrics.rbac_denied_on(&spec.name);
    tracing::info!(listener = %spec.name, peer = ?peer_id, "RBAC denied the connection: {why}");
    Err(ProxyError::downstream(
        ErrorKind::Denied,
        format!("RBAC denied {peer_id:?}: {why}"),
    ))
}

/// Logs that the local application refused an inbound connection (the
/// client sees the same empty reply as for an RBAC denial, so this is
/// logged at the same level), rate-limited: the first at once, then at most
/// one line per [`crate::metrics::APP_DOWN_LOG_INTERVAL`] with the count;
/// and has the application monitor probe it now ([`AppHealth::refused`]),
/// which reports it to the control plane.
fn app_down(
    spec: &ListenerSpec,
    peer: Option<&str>,
    why: &ProxyError,
    metrics: &ProxyMetrics,
    apps: &AppHealth,
) {
    apps.refused(&spec.name);
    if let Some(count) = metrics.app_down_log.hit() {
        tracing::info!(
            listener = %spec.name,
            peer = ?peer,
            count,
            "the local application refused the connection (app down?), not RBAC: {why}"
        );
    }
}

async fn outbound(
    stream: Downstream,
    spec: &ListenerSpec,
    view: &Dataplane,
    original_dst: Option<SocketAddr>,
    metrics: &ProxyMetrics,
) -> Result<(), ProxyError> {
    let cluster = cluster(view, spec)?;
    let (upstream, _connection) = connect(cluster, spec, original_dst, metrics).await?;
    let Some(client) = &cluster.tls else {
        return copy(
            stream,
            upstream,
            Direction::Outbound,
            tcp_timeouts(spec),
            metrics,
        )
        .await;
    };
    let name = crate::dataplane::server_name(&cluster.spec);
    let connect = TlsConnector::from(client.clone()).connect(name, upstream);
    // As Envoy's `connect_timeout`: with TLS it covers the session set-up
    // too, so a destination that accepts TCP and never answers the
    // ClientHello (a plain app on a mesh port) fails in that time.
    let timeout = cluster.spec.connect_timeout;
    let tls_stream = handshake(connect, Direction::Outbound, timeout, metrics).await?;
    copy(
        stream,
        tls_stream,
        Direction::Outbound,
        tcp_timeouts(spec),
        metrics,
    )
    .await
}

/// Runs a TLS handshake within `timeout` ([`HANDSHAKE_TIMEOUT`] for a
/// calling sidecar, the cluster's connect timeout for a destination),
/// counting a failure by reason (classified from rustls's typed error).
async fn handshake<S>(
    tls: impl std::future::Future<Output = std::io::Result<S>>,
    direction: Direction,
    timeout: std::time::Duration,
    metrics: &ProxyMetrics,
) -> Result<S, ProxyError> {
    let side = peer_side(direction);
    let e = match tokio::time::timeout(timeout, tls).await {
        Ok(Ok(s)) => return Ok(s),
        Ok(Err(e)) => ProxyError::handshake(side, &e),
        Err(_) => ProxyError::new(ErrorKind::HandshakeTimeout, side, "TLS handshake timed out"),
    };
    metrics.handshake_failed(direction, e.label());
    Err(e)
}

/// Which side the TLS peer of a connection is: the calling sidecar
/// inbound, the destination outbound.
fn peer_side(direction: Direction) -> Side {
    match direction {
        Direction::Inbound => Side::Downstream,
        Direction::Outbound => Side::Upstream,
    }
}

/// Connects to an endpoint of `cluster` for a connection of listener
/// `spec`, making its `max_connect_attempts` (MeshRetry's `tcp`), else
/// [`MAX_CONNECT_ATTEMPTS`], attempts over the endpoints in the
/// balancer's order (again from the first when there are fewer). The
/// cluster's circuit breaker admits it first: a place among its
/// `max_connections`, and while connecting one among its
/// `max_pending_requests` (Envoy's limits for TCP); the connection's
/// place is held until the returned slot drops. An `ORIGINAL_DST`
/// cluster connects to the connection's `original_dst` instead.
async fn connect(
    cluster: &ClusterRuntime,
    spec: &ListenerSpec,
    original_dst: Option<SocketAddr>,
    metrics: &ProxyMetrics,
) -> Result<(TcpStream, crate::circuit::Slot), ProxyError> {
    let admit = |limit| {
        crate::http::pool::admit(&cluster.circuit, limit)
            .inspect_err(|_| metrics.overflowed(&cluster.spec.name, limit))
    };
    let connection = admit(meshlink_runtime::Limit::MaxConnections)?;
    let _pending = admit(meshlink_runtime::Limit::MaxPendingRequests)?;
    if cluster.spec.discovery == crate::model::Discovery::OriginalDst {
        let stream = connect_original_dst(cluster, original_dst, metrics).await?;
        return Ok((stream, connection));
    }
    Ok((attempt_connects(cluster, spec, metrics).await?, connection))
}

/// A pass-through connection to where a redirected connection was going.
async fn connect_original_dst(
    cluster: &ClusterRuntime,
    original_dst: Option<SocketAddr>,
    metrics: &ProxyMetrics,
) -> Result<TcpStream, ProxyError> {
    let Some(dst) = original_dst else {
        return Err(ProxyError::internal(
            ErrorKind::NoEndpoints,
            format!(
                "cluster {:?} passes connections through to their original destination, and \
                 this one has none (it was not redirected to a capture listener)",
                cluster.spec.name
            ),
        ));
    };
    let attempt = tokio::time::timeout(cluster.spec.connect_timeout, TcpStream::connect(dst)).await;
    let (kind, why) = match attempt {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            return Ok(s);
        }
        Ok(Err(e)) => (ErrorKind::ConnectFailed, format!("{dst}: {e}")),
        Err(_) => (
            ErrorKind::ConnectTimeout,
            format!("{dst}: connect timed out"),
        ),
    };
    metrics
        .upstream_connect_failures
        .get_or_create(&ClusterLabels {
            cluster: cluster.spec.name.clone(),
        })
        .inc();
    Err(ProxyError::upstream(
        kind,
        format!("the original destination refused: {why}"),
    ))
}

/// [`connect`]'s attempts.
async fn attempt_connects(
    cluster: &ClusterRuntime,
    spec: &ListenerSpec,
    metrics: &ProxyMetrics,
) -> Result<TcpStream, ProxyError> {
    let attempts = match &spec.protocol {
        ListenerProtocol::Tcp {
            max_connect_attempts: Some(n),
            ..
        } => *n as usize,
        _ => MAX_CONNECT_ATTEMPTS,
    };
    let order = cluster.balancer.attempt_order(tokio::time::Instant::now());
    if order.is_empty() {
        metrics
            .upstream_none_healthy
            .get_or_create(&ClusterLabels {
                cluster: cluster.spec.name.clone(),
            })
            .inc();
        return Err(ProxyError::upstream(
            ErrorKind::NoEndpoints,
            format!("cluster {:?} has no endpoints", cluster.spec.name),
        ));
    }
    let labels = ClusterLabels {
        cluster: cluster.spec.name.clone(),
    };
    let (mut last, mut kind) = (String::new(), ErrorKind::ConnectFailed);
    for endpoint in order.iter().cycle().take(attempts) {
        let _guard = endpoint.start();
        let attempt = tokio::time::timeout(
            cluster.spec.connect_timeout,
            TcpStream::connect(endpoint.addr),
        )
        .await;
        match attempt {
            Ok(Ok(s)) => {
                record(cluster, endpoint, Event::Connected { last: true }, metrics);
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => {
                (last, kind) = (format!("{}: {e}", endpoint.addr), ErrorKind::ConnectFailed)
            }
            Err(_) => {
                last = format!("{}: connect timed out", endpoint.addr);
                kind = ErrorKind::ConnectTimeout;
            }
        }
        metrics
            .upstream_connect_failures
            .get_or_create(&labels)
            .inc();
        let event = match kind {
            ErrorKind::ConnectTimeout => Event::TimedOut,
            _ => Event::ConnectFailed,
        };
        record(cluster, endpoint, event, metrics);
    }
    Err(ProxyError::upstream(
        kind,
        format!(
            "no endpoint of {:?} accepted a connection (last: {last})",
            cluster.spec.name
        ),
    ))
}

/// Feeds `event` to the cluster's outlier detection, counting and
/// logging the ejections it makes.
fn record(
    cluster: &ClusterRuntime,
    endpoint: &crate::lb::Endpoint,
    event: Event,
    metrics: &ProxyMetrics,
) {
    let now = tokio::time::Instant::now();
    for (addr, detector) in cluster.balancer.record(endpoint, event, now) {
        metrics.ejected(&cluster.spec.name, detector);
        tracing::warn!(cluster = %cluster.spec.name, endpoint = %addr, detector = detector.as_str(), "endpoint ejected");
    }
}

/// A TCP listener's bounds: its `idle_timeout` (zero: none; a year
/// stands for "never") or the built-in one, and the half-closed bound.
fn tcp_timeouts(spec: &ListenerSpec) -> TcpTimeouts {
    const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);
    let mut t = TcpTimeouts::default();
    if let ListenerProtocol::Tcp {
        idle_timeout: Some(idle),
        ..
    } = &spec.protocol
    {
        t.idle = if idle.is_zero() { NEVER } else { *idle };
    }
    t
}

async fn copy<A, B>(
    a: A,
    b: B,
    direction: Direction,
    timeouts: TcpTimeouts,
    metrics: &ProxyMetrics,
) -> Result<(), ProxyError>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    // Counting the downstream side counts both directions once each.
    let counter = metrics
        .bytes
        .get_or_create(&ProxyMetrics::direction(direction))
        .clone();
    let a = Counted::new(a, counter.clone(), counter);
    let end = tcp_copy::copy(a, b, COPY_BUFFER, timeouts)
        .await
        .map_err(|e| ProxyError::internal(ErrorKind::Io, format!("copy failed: {e}")))?;
    if end != CopyEnd::Closed {
        metrics.tcp_timed_out(direction, end.label());
        return Err(ProxyError::internal(
            ErrorKind::Timeout,
            format!("closed: nothing moved for too long ({})", end.label()),
        ));
    }
    Ok(())
}

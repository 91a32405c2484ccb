//! Upstream HTTP connections of one cluster, per endpoint: HTTP/2
//! connections carrying up to [`STREAMS_PER_CONNECTION`] requests each
//! (the least busy one takes the next request; another is dialed when all
//! are full), or idle HTTP/1.1 connections reused one request at a time.
//!
//! Owns the connections and their dialing: TCP connect with the
//! cluster's timeout, then mTLS verifying the destination's SPIFFE ID
//! (ALPN `h2`) when the cluster originates TLS. The balancer, not the
//! pool, picks the endpoint; the pool never picks one itself, so every
//! request is balanced. A pool lives in its cluster's runtime and is
//! dropped with it; open connections then finish their requests.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use meshlink_runtime::{ErrorKind, Limit, ProxyError, Side};

use crate::circuit::{Circuit, Slot};

use super::replay::ReplayBody;

/// Flow-control windows of upstream HTTP/2 connections: explicit, and
/// the connection's larger than a stream's so one stream cannot stall
/// the others (equal windows can deadlock).
pub const STREAM_WINDOW: u32 = 1024 * 1024;
/// See [`STREAM_WINDOW`].
pub const CONNECTION_WINDOW: u32 = 4 * 1024 * 1024;
/// Requests one upstream HTTP/2 connection carries at once before the
/// pool dials another to the same endpoint (the sidecars' own servers
/// allow 1,024 streams per connection). Spreading streams over several
/// connections also spreads their frames and TLS over the runtime's
/// workers, where one connection is one task.
pub const STREAMS_PER_CONNECTION: usize = 100;
/// How often a pending request looks for a connection again when no
/// place was given back meanwhile (see [`Pool::sender`]).
const PENDING_RECHECK: Duration = Duration::from_millis(20);
/// HTTP/1.1 connections kept per endpoint for reuse. Every connection
/// goes back to the pool as soon as its request is sent (it is reused once
/// its response has ended), so this bounds the connections kept, busy or
/// idle: under more concurrent requests than this, each extra one dials
/// and closes a connection of its own (the first `bench/http-pair.sh`
/// run, with 64 here and 100 streams in flight, spent 2.5 % of the
/// proxies' CPU in connect, close and socket calls).
const MAX_IDLE_HTTP1: usize = 1024;

/// How a pool reaches its endpoints.
#[derive(Debug, Clone)]
pub struct Dialer {
    /// TLS to originate (with the identity and expected SPIFFE IDs), if
    /// the cluster has any.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Speak HTTP/2 (else HTTP/1.1).
    pub http2: bool,
    /// The cluster's circuit breaker: `max_connections` bounds the
    /// connections dialed, `max_pending_requests` the requests waiting
    /// for one.
    pub circuit: Arc<crate::circuit::Circuit>,
}

/// A sender for one request on an upstream connection.
pub enum Sender {
    /// A stream on one of the endpoint's HTTP/2 connections, and its
    /// place there (keep it until the response has ended).
    Http2(http2::SendRequest<ReplayBody>, StreamSlot),
    /// An HTTP/1.1 connection of its own until the response ends.
    Http1(http1::SendRequest<ReplayBody>),
}

/// One upstream HTTP/2 connection and the requests it carries now.
struct Http2Conn {
    send: http2::SendRequest<ReplayBody>,
    streams: Arc<AtomicUsize>,
}

/// The HTTP/2 connections to one endpoint; the async lock is held while
/// dialing so that concurrent requests share one dial.
type Http2Slot = Arc<tokio::sync::Mutex<Vec<Http2Conn>>>;

/// A request's place on an upstream HTTP/2 connection, freed when the
/// last clone drops (it travels in the response's extensions and then
/// with its body).
#[derive(Debug, Clone)]
pub struct StreamSlot {
    _taken: Arc<Taken>,
}

/// A stream's place; giving it back may let a pending request in.
#[derive(Debug)]
struct Taken(Arc<AtomicUsize>, Arc<Circuit>);

impl Drop for Taken {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
        if self.1.connections_full() {
            self.1.freed().notify_waiters();
        }
    }
}

impl StreamSlot {
    fn take(streams: &Arc<AtomicUsize>, circuit: &Arc<Circuit>) -> StreamSlot {
        streams.fetch_add(1, Ordering::Relaxed);
        StreamSlot {
            _taken: Arc::new(Taken(streams.clone(), circuit.clone())),
        }
    }
}

/// A place under `limit`, or the overflow error a client is answered.
pub(crate) fn admit(circuit: &Circuit, limit: Limit) -> Result<Slot, ProxyError> {
    circuit.admit(limit).map_err(|limit| {
        ProxyError::upstream(
            ErrorKind::Overflow(limit),
            format!("the cluster's {} is reached", limit.as_str()),
        )
    })
}

/// The pool of one cluster.
pub struct Pool {
    /// The cluster's retry budget.
    pub budget: super::budget::RetryBudget,
    dialer: Dialer,
    /// The cluster's TLS offering ALPN `http/1.1` only (upgrades).
    upgrade_tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    http2: Mutex<HashMap<SocketAddr, Http2Slot>>,
    http1: Mutex<HashMap<SocketAddr, Vec<http1::SendRequest<ReplayBody>>>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("http2", &self.dialer.http2)
            .finish()
    }
}

impl Pool {
    /// An empty pool.
    pub fn new(dialer: Dialer) -> Pool {
        let upgrade_tls = dialer.tls.as_ref().map(|(config, name)| {
            let mut http1 = ClientConfig::clone(config);
            http1.alpn_protocols = vec![b"http/1.1".to_vec()];
            (Arc::new(http1), name.clone())
        });
        Pool {
            budget: super::budget::RetryBudget::default(),
            dialer,
            upgrade_tls,
            http2: Mutex::default(),
            http1: Mutex::default(),
        }
    }

    /// Whether requests go out as HTTP/2.
    pub fn is_http2(&self) -> bool {
        self.dialer.http2
    }

    /// A sender on a connection to `addr`: the live HTTP/2 connection or
    /// an idle HTTP/1.1 one, else a new connection. A request that needs a
    /// new connection is pending until it has one: refused when
    /// `max_pending_requests` are already waiting, and waiting while the
    /// cluster has `max_connections`.
    pub async fn sender(&self, addr: SocketAddr) -> Result<Sender, ProxyError> {
        let mut pending = None;
        loop {
            let freed = self.dialer.circuit.freed().notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(sender) = self.try_sender(addr, &mut pending).await? {
                return Ok(sender);
            }
            // Woken when a place is given back; an HTTP/1.1 connection
            // becomes reusable a moment after its response ended (its
            // connection task marks it), so look again after a while too.
            let _ = tokio::time::timeout(PENDING_RECHECK, freed).await;
        }
    }

    /// A place for a new connection; first a pending place for the
    /// request (held in `pending` until it has a connection). `None`: the
    /// cluster has `max_connections` open.
    fn connection_slot(&self, pending: &mut Option<Slot>) -> Result<Option<Slot>, ProxyError> {
        if pending.is_none() {
            *pending = Some(admit(&self.dialer.circuit, Limit::MaxPendingRequests)?);
        }
        Ok(self.dialer.circuit.admit(Limit::MaxConnections).ok())
    }

    /// [`Pool::sender`]'s one attempt: `None` when it must wait.
    async fn try_sender(
        &self,
        addr: SocketAddr,
        pending: &mut Option<Slot>,
    ) -> Result<Option<Sender>, ProxyError> {
        if self.dialer.http2 {
            let slot = self
                .http2
                .lock()
                .expect("pool lock")
                .entry(addr)
                .or_default()
                .clone();
            // Held while dialing, so concurrent requests share one dial.
            let mut conns = slot.lock().await;
            conns.retain(|c| !c.send.is_closed());
            let least_busy = conns
                .iter()
                .map(|c| (c.streams.load(Ordering::Relaxed), c))
                .filter(|(n, _)| *n < STREAMS_PER_CONNECTION)
                .min_by_key(|(n, _)| *n)
                .map(|(_, c)| c);
            if let Some(c) = least_busy {
                let slot = StreamSlot::take(&c.streams, &self.dialer.circuit);
                return Ok(Some(Sender::Http2(c.send.clone(), slot)));
            }
            let Some(connection) = self.connection_slot(pending)? else {
                return Ok(None);
            };
            let send = self.dial_http2(addr, connection).await?;
            let streams = Arc::new(AtomicUsize::new(0));
            let taken = StreamSlot::take(&streams, &self.dialer.circuit);
            conns.push(Http2Conn {
                send: send.clone(),
                streams,
            });
            return Ok(Some(Sender::Http2(send, taken)));
        }
        let idle = {
            let mut pool = self.http1.lock().expect("pool lock");
            let list = pool.entry(addr).or_default();
            list.retain(|s| !s.is_closed());
            list.iter()
                .position(|s| s.is_ready())
                .map(|i| list.swap_remove(i))
        };
        if let Some(send) = idle {
            return Ok(Some(Sender::Http1(send)));
        }
        let Some(connection) = self.connection_slot(pending)? else {
            return Ok(None);
        };
        Ok(Some(Sender::Http1(
            self.dial_http1(addr, connection).await?,
        )))
    }

    /// The open HTTP/2 connections to `addr`.
    #[cfg(test)]
    async fn http2_connections(&self, addr: SocketAddr) -> usize {
        let slot = self.http2.lock().expect("pool lock").get(&addr).cloned();
        match slot {
            Some(slot) => slot
                .lock()
                .await
                .iter()
                .filter(|c| !c.send.is_closed())
                .count(),
            None => 0,
        }
    }

    /// Gives an HTTP/1.1 sender back once its request is sent; it is
    /// reused when its response has ended.
    pub fn give_back(&self, addr: SocketAddr, send: http1::SendRequest<ReplayBody>) {
        let mut pool = self.http1.lock().expect("pool lock");
        let list = pool.entry(addr).or_default();
        if list.len() < MAX_IDLE_HTTP1 {
            list.push(send);
        }
    }

    async fn dial_http2(
        &self,
        addr: SocketAddr,
        connection: Slot,
    ) -> Result<http2::SendRequest<ReplayBody>, ProxyError> {
        let io = self.dial(addr).await?;
        let (send, conn) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .adaptive_window(false)
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10))
            .handshake(io)
            .await
            .map_err(|e| {
                ProxyError::upstream(
                    ErrorKind::Reset,
                    format!("HTTP/2 handshake with {addr}: {e}"),
                )
            })?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%addr, "upstream HTTP/2 connection ended: {e}");
            }
            drop(connection);
        });
        Ok(send)
    }

    /// A new HTTP/1.1 connection of its own for an upgrade (HTTP/1.1 over
    /// mTLS too: ALPN `http/1.1`), never pooled.
    pub async fn dial_upgrade(
        &self,
        addr: SocketAddr,
    ) -> Result<http1::SendRequest<ReplayBody>, ProxyError> {
        let connection = admit(&self.dialer.circuit, Limit::MaxConnections)?;
        self.dial_http1_with(addr, self.upgrade_tls.as_ref(), connection)
            .await
    }

    async fn dial_http1(
        &self,
        addr: SocketAddr,
        connection: Slot,
    ) -> Result<http1::SendRequest<ReplayBody>, ProxyError> {
        self.dial_http1_with(addr, self.dialer.tls.as_ref(), connection)
            .await
    }

    /// An HTTP/1.1 connection (upgrades allowed) over TCP, then `tls`.
    async fn dial_http1_with(
        &self,
        addr: SocketAddr,
        tls: Option<&(Arc<ClientConfig>, ServerName<'static>)>,
        connection: Slot,
    ) -> Result<http1::SendRequest<ReplayBody>, ProxyError> {
        let io = self.dial_with(addr, tls).await?;
        let (send, conn) = http1::Builder::new().handshake(io).await.map_err(|e| {
            ProxyError::upstream(
                ErrorKind::ConnectFailed,
                format!("HTTP/1.1 connection to {addr}: {e}"),
            )
        })?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(%addr, "upstream HTTP/1.1 connection ended: {e}");
            }
            drop(connection);
        });
        Ok(send)
    }

    /// TCP, then TLS when the cluster originates it.
    async fn dial(&self, addr: SocketAddr) -> Result<TokioIo<Conn>, ProxyError> {
        self.dial_with(addr, self.dialer.tls.as_ref()).await
    }

    /// TCP, then TLS with `tls` if given.
    async fn dial_with(
        &self,
        addr: SocketAddr,
        tls: Option<&(Arc<ClientConfig>, ServerName<'static>)>,
    ) -> Result<TokioIo<Conn>, ProxyError> {
        connect(addr, self.dialer.connect_timeout, tls)
            .await
            .map(TokioIo::new)
    }
}

/// A connection to `addr`: TCP, then, with `tls`, the mTLS handshake
/// verifying the peer's SPIFFE ID, both within `connect_timeout` (Envoy's
/// rule: with TLS the connect timeout covers the session set-up, so a
/// destination that accepts TCP and never answers the ClientHello, such
/// as a plain app on a mesh port, fails in that time). What every
/// upstream connection of a cluster, and its health checks, go through.
pub async fn connect(
    addr: SocketAddr,
    connect_timeout: Duration,
    tls: Option<&(Arc<ClientConfig>, ServerName<'static>)>,
) -> Result<Conn, ProxyError> {
    let deadline = tokio::time::Instant::now() + connect_timeout;
    let tcp = match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(ProxyError::upstream(
                ErrorKind::ConnectFailed,
                format!("{addr}: {e}"),
            ));
        }
        Err(_) => {
            return Err(ProxyError::upstream(
                ErrorKind::ConnectTimeout,
                format!("{addr}: connect timed out"),
            ));
        }
    };
    let _ = tcp.set_nodelay(true);
    let Some((config, name)) = tls else {
        return Ok(Conn::Left(tcp));
    };
    let connect = TlsConnector::from(config.clone()).connect(name.clone(), tcp);
    match tokio::time::timeout_at(deadline, connect).await {
        Ok(Ok(tls)) => Ok(Conn::Right(Box::new(tls))),
        Ok(Err(e)) => Err(ProxyError::handshake(Side::Upstream, &e)),
        Err(_) => Err(ProxyError::upstream(
            ErrorKind::HandshakeTimeout,
            format!(
                "{addr}: TLS handshake not done within the connect timeout ({})",
                humantime::format_duration(connect_timeout)
            ),
        )),
    }
}

/// An upstream connection: plain TCP (the local application) or mTLS
/// (another sidecar).
pub type Conn =
    tokio_util::either::Either<TcpStream, Box<tokio_rustls::client::TlsStream<TcpStream>>>;

#[cfg(test)]
mod tests;

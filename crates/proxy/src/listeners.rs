//! The listener manager: binds the listeners whose references have all
//! arrived and keeps the others warming (I2).
//!
//! Owns the set of bound sockets. On every configuration or identity
//! change it builds a new [`Dataplane`], publishes it, binds listeners
//! that became ready, and closes listeners that were removed or moved.
//! A listener that was serving keeps serving its last good view if a
//! later update leaves a reference missing. A bind failure (address in
//! use) is a warming reason retried with backoff, never an exit. On drain
//! it closes every listener at once; connections are tracked elsewhere.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::apps::AppHealth;
use crate::capture::{self, Dispatch, Entry, ListenerTable};
use crate::connection;
use crate::dataplane::Dataplane;
use crate::drain::ConnectionDrain;
use crate::identity::WorkloadIdentity;
use crate::metrics::ProxyMetrics;
use crate::model::{ListenerSpec, ProxyConfig};

/// How long to wait before retrying a failed bind.
const BIND_RETRY: Duration = Duration::from_secs(1);

/// What each listener is doing, for readiness and `/config_dump`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ListenerStates {
    /// Listener name → `None` when serving, or why it is warming.
    pub warming: BTreeMap<String, Option<String>>,
}

/// Shared [`ListenerStates`].
pub type SharedListenerStates = Arc<Mutex<ListenerStates>>;

struct Bound {
    address: SocketAddr,
    /// Whether it has a socket and an accept loop (else a capture
    /// listener hands it connections).
    socket: bool,
    spec: watch::Sender<Arc<ListenerSpec>>,
    stop: CancellationToken,
}

/// Inputs of the manager.
#[derive(Debug)]
pub struct ListenerManager {
    /// Accepted configuration.
    pub config: watch::Receiver<Arc<ProxyConfig>>,
    /// Current identity.
    pub identity: watch::Receiver<Option<Arc<WorkloadIdentity>>>,
    /// Where the built view is published for connection handlers.
    pub dataplane: watch::Sender<Arc<Dataplane>>,
    /// Listener states for readiness.
    pub states: SharedListenerStates,
    /// Tracks every connection task (drain waits on it).
    pub connections: TaskTracker,
    /// The drain signals every connection is handed.
    pub drain: ConnectionDrain,
    /// Metrics.
    pub metrics: Arc<ProxyMetrics>,
    /// Told when an inbound cannot reach its local application.
    pub apps: AppHealth,
    /// Every listener by address, for the capture listeners (replaced on
    /// every reconcile).
    pub table: ListenerTable,
}

impl ListenerManager {
    /// Runs until `stop_accepting` fires, then closes every listener.
    pub async fn run(mut self, stop_accepting: CancellationToken) {
        let mut bound: HashMap<String, Bound> = HashMap::new();
        loop {
            let config = self.config.borrow_and_update().clone();
            let identity = self.identity.borrow_and_update().clone();
            let previous = self.dataplane.borrow().clone();
            let view = Arc::new(Dataplane::build(config.clone(), identity, Some(&previous)));
            for cluster in view.clusters.keys() {
                self.metrics.cluster_known(cluster);
            }
            self.dataplane.send_replace(view.clone());
            let failed_bind = self.reconcile(&config, &view, &mut bound, &stop_accepting);
            let retry_at = failed_bind.then(|| tokio::time::Instant::now() + BIND_RETRY);
            let retry = async {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop_accepting.cancelled() => break,
                r = self.config.changed() => if r.is_err() { break },
                r = self.identity.changed() => if r.is_err() { break },
                () = retry => {}
            }
        }
        for (_, b) in bound.drain() {
            b.stop.cancel();
        }
        self.metrics.listeners_active.set(0);
    }

    /// Binds, updates and closes listeners; returns true if a bind failed.
    fn reconcile(
        &self,
        config: &ProxyConfig,
        view: &Dataplane,
        bound: &mut HashMap<String, Bound>,
        stop_accepting: &CancellationToken,
    ) -> bool {
        let mut states = BTreeMap::new();
        let mut failed_bind = false;
        bound.retain(|name, b| {
            let keep = config
                .listeners
                .get(name)
                .is_some_and(|l| l.value.address == b.address && l.value.bind == b.socket);
            if !keep {
                tracing::info!(listener = %name, "listener removed; closing it (open connections continue)");
                b.stop.cancel();
            }
            keep
        });
        for (name, listener) in &config.listeners {
            let spec = listener.value.clone();
            if !spec.bind && !bound.contains_key(name) {
                // Not bound: a capture listener hands it connections.
                if let Some(why) = view.warming_reason(&spec) {
                    states.insert(name.clone(), Some(why));
                    continue;
                }
                let (tx, _) = watch::channel(spec.clone());
                tracing::info!(listener = %name, address = %spec.address, "listener active (not bound: reached through a capture listener)");
                bound.insert(
                    name.clone(),
                    Bound {
                        address: spec.address,
                        socket: false,
                        spec: tx,
                        stop: stop_accepting.child_token(),
                    },
                );
                states.insert(name.clone(), None);
                continue;
            }
            if let Some(b) = bound.get(name) {
                // Serving: take the new spec; a missing reference now
                // fails new connections visibly instead of closing the port.
                b.spec.send_if_modified(|s| {
                    let changed = **s != *spec;
                    *s = spec.clone();
                    changed
                });
                states.insert(name.clone(), None);
                continue;
            }
            if let Some(why) = view.warming_reason(&spec) {
                states.insert(name.clone(), Some(why));
                continue;
            }
            match bind(spec.address) {
                Ok(socket) => {
                    let (tx, rx) = watch::channel(spec.clone());
                    let stop = stop_accepting.child_token();
                    tracing::info!(listener = %name, address = %spec.address, "listener active");
                    let ctx = AcceptContext {
                        table: self.table.clone(),
                        spec: rx,
                        dataplane: self.dataplane.subscribe(),
                        connections: self.connections.clone(),
                        drain: self.drain.clone(),
                        metrics: self.metrics.clone(),
                        apps: self.apps.clone(),
                    };
                    self.connections
                        .spawn(accept_loop(socket, ctx, stop.clone()));
                    bound.insert(
                        name.clone(),
                        Bound {
                            address: spec.address,
                            socket: true,
                            spec: tx,
                            stop,
                        },
                    );
                    states.insert(name.clone(), None);
                }
                Err(e) => {
                    failed_bind = true;
                    states.insert(
                        name.clone(),
                        Some(format!("cannot bind {}: {e}; retrying", spec.address)),
                    );
                }
            }
        }
        self.table.replace(
            config
                .listeners
                .iter()
                .map(|(name, l)| {
                    let entry = match (bound.get(name), states.get(name)) {
                        (Some(b), _) => Entry::Ready(b.spec.subscribe()),
                        (None, Some(Some(why))) => Entry::Warming(why.clone()),
                        (None, _) => Entry::Warming("not bound yet".to_owned()),
                    };
                    ((l.value.address, l.value.direction), entry)
                })
                .collect(),
        );
        let warming = states.values().filter(|s| s.is_some()).count();
        self.metrics
            .listeners_active
            .set((states.len() - warming) as i64);
        self.metrics.listeners_warming.set(warming as i64);
        self.states.lock().expect("listener states lock").warming = states;
        failed_bind
    }
}

/// Binds a listening socket on `addr`. An IPv6 socket is IPv6 only
/// (`IPV6_V6ONLY`, Envoy's default without `ipv4_compat`), so a
/// dual-stack proxy's `[::]:15001` and `0.0.0.0:15001` are two sockets,
/// each receiving its own family.
fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

/// What an accept loop hands each connection.
#[derive(Debug, Clone)]
pub struct AcceptContext {
    /// The listener's current spec.
    pub spec: watch::Receiver<Arc<ListenerSpec>>,
    /// The current data-path view.
    pub dataplane: watch::Receiver<Arc<Dataplane>>,
    /// Connection tracker.
    pub connections: TaskTracker,
    /// The drain signals handed to each connection.
    pub drain: ConnectionDrain,
    /// Metrics.
    pub metrics: Arc<ProxyMetrics>,
    /// Told when an inbound cannot reach its local application.
    pub apps: AppHealth,
    /// Every listener by address (for a capture listener's handoffs).
    pub table: ListenerTable,
}

async fn accept_loop(socket: TcpListener, ctx: AcceptContext, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            a = socket.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                let own = ctx.spec.borrow().clone();
                let (spec, original_dst) = if own.original_dst {
                    match capture::dispatch(&stream, &own, &ctx.table) {
                        Dispatch::Handoff(spec) => (spec, None),
                        Dispatch::Own(dst) => (ctx.spec.clone(), Some(dst)),
                        Dispatch::Refuse(why) => {
                            ctx.metrics.capture_refused(&own.name);
                            tracing::debug!(listener = %own.name, %peer, "captured connection refused: {why}");
                            capture::reset(stream);
                            continue;
                        }
                    }
                } else {
                    (ctx.spec.clone(), None)
                };
                let live = connection::Live {
                    spec,
                    view: ctx.dataplane.clone(),
                };
                let metrics = ctx.metrics.clone();
                let drain = ctx.drain.clone();
                let apps = ctx.apps.clone();
                ctx.connections.spawn(connection::handle(
                    connection::Accepted {
                        stream,
                        peer,
                        original_dst,
                    },
                    live,
                    metrics,
                    drain,
                    apps,
                ));
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bind;

    /// A dual-stack transparent proxy binds `0.0.0.0:15001` and
    /// `[::]:15001`: without `IPV6_V6ONLY` the second bind would fail
    /// (`[::]` also claims IPv4 where `bindv6only` is 0, Linux's default).
    #[tokio::test]
    async fn ipv4_and_ipv6_listeners_share_a_port() {
        let v4 = bind("0.0.0.0:0".parse().unwrap()).expect("bind 0.0.0.0");
        let port = v4.local_addr().unwrap().port();
        let v6 = bind(std::net::SocketAddr::from((
            std::net::Ipv6Addr::UNSPECIFIED,
            port,
        )))
        .expect("[::] on the same port as 0.0.0.0");
        // Each takes its own family.
        let c4 = tokio::net::TcpStream::connect(("127.0.0.1", port));
        let c6 = tokio::net::TcpStream::connect(("::1", port));
        let (c4, c6) = tokio::join!(c4, c6);
        let (c4, c6) = (c4.expect("IPv4 connect"), c6.expect("IPv6 connect"));
        let (a4, _) = v4.accept().await.expect("IPv4 accept");
        let (a6, _) = v6.accept().await.expect("IPv6 accept");
        assert_eq!(a4.peer_addr().unwrap(), c4.local_addr().unwrap());
        assert_eq!(a6.peer_addr().unwrap(), c6.local_addr().unwrap());
    }
}

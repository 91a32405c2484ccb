//! State shared by a router's tasks: identity, credentials, connectors,
//! the connections to neighbours, the route table and the status channel.
//!
//! Each piece has one writer: `Router::apply` writes credentials and
//! connectors; sessions add and remove their own neighbour connection
//! (compare-and-delete by connection id) and recompute the direct route
//! table. The peer list is behind a short synchronous lock never held
//! across an await; everything else is a `watch` channel.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::credentials::LinkCredential;
use crate::metrics::LinkMetrics;
use crate::mux::MuxOpener;
use crate::routes::{Neighbour, RouteTable};
use crate::status::{BindStatus, LinkState, LinkStatus, RouterStatus};
use crate::wire::ControlMessage;

/// A routing-protocol message received from a neighbour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutingMessage {
    /// The neighbour's router id.
    pub from: String,
    /// The routing module's payload.
    pub payload: serde_json::Value,
}

/// One established connection to a neighbour.
#[derive(Clone, Debug)]
pub(crate) struct PeerConn {
    pub(crate) conn: u64,
    pub(crate) router: String,
    pub(crate) cost: u32,
    pub(crate) routing_keys: Vec<String>,
    pub(crate) opener: MuxOpener,
    pub(crate) control: mpsc::Sender<ControlMessage>,
}

/// Which status map a bind status goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum BindKind {
    Role,
    Listener,
}

/// Local connector targets by routing key.
pub(crate) type ConnectorTargets = BTreeMap<String, Vec<(String, u16)>>;

pub(crate) struct Core {
    pub(crate) id: String,
    pub(crate) site: String,
    pub(crate) metrics: Arc<LinkMetrics>,
    pub(crate) status: watch::Sender<RouterStatus>,
    pub(crate) credentials: watch::Sender<BTreeMap<String, Arc<LinkCredential>>>,
    pub(crate) connectors: watch::Sender<Arc<ConnectorTargets>>,
    pub(crate) routes: watch::Sender<Arc<RouteTable>>,
    pub(crate) routing_inbox: mpsc::UnboundedSender<RoutingMessage>,
    /// Sessions, flows and accept loops; drained on shutdown.
    pub(crate) tasks: TaskTracker,
    pub(crate) shutdown: CancellationToken,
    peers: std::sync::Mutex<Vec<PeerConn>>,
    bind_owners: std::sync::Mutex<std::collections::HashMap<(BindKind, String), u64>>,
    next_id: AtomicU64,
    connector_turn: AtomicUsize,
}

// === impl Core ===

impl Core {
    pub(crate) fn new(
        id: String,
        site: String,
        metrics: Arc<LinkMetrics>,
        routing_inbox: mpsc::UnboundedSender<RoutingMessage>,
    ) -> Self {
        Core {
            id,
            site,
            metrics,
            status: watch::Sender::new(RouterStatus::default()),
            credentials: watch::Sender::new(BTreeMap::new()),
            connectors: watch::Sender::new(Arc::new(BTreeMap::new())),
            routes: watch::Sender::new(Arc::new(RouteTable::default())),
            routing_inbox,
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            peers: std::sync::Mutex::new(Vec::new()),
            bind_owners: std::sync::Mutex::new(std::collections::HashMap::new()),
            next_id: AtomicU64::new(1),
            connector_turn: AtomicUsize::new(0),
        }
    }

    /// A process-unique id for a connection or a flow.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Routing keys with a local connector, sorted.
    pub(crate) fn local_keys(&self) -> Vec<String> {
        self.connectors.borrow().keys().cloned().collect()
    }

    /// The next local target for `routing_key`, round robin.
    pub(crate) fn connector_target(&self, routing_key: &str) -> Option<(String, u16)> {
        let targets = self.connectors.borrow();
        let list = targets.get(routing_key)?;
        let turn = self.connector_turn.fetch_add(1, Ordering::Relaxed);
        list.get(turn % list.len().max(1)).cloned()
    }

    /// Edits link `name`'s status entry on behalf of owner `generation`
    /// (a link task or an accepted connection; newer ids win). An entry
    /// held by a newer owner is left alone; an older one is replaced. Keeps
    /// `meshlink_link_up{link}` in step with the entry.
    pub(crate) fn update_link(
        &self,
        name: &str,
        generation: u64,
        init: impl FnOnce() -> LinkStatus,
        edit: impl FnOnce(&mut LinkStatus),
    ) {
        let mut up = None;
        self.status.send_if_modified(|s| {
            match s.links.get(name) {
                Some(current) if current.generation > generation => return false,
                Some(current) if current.generation < generation => {
                    s.links.remove(name);
                }
                _ => {}
            }
            let entry = s.links.entry(name.to_owned()).or_insert_with(|| {
                let mut fresh = init();
                fresh.generation = generation;
                fresh
            });
            edit(entry);
            up = Some(entry.state == LinkState::Up);
            true
        });
        if let Some(up) = up {
            self.metrics
                .up
                .get_or_create(&self.metrics.link(name))
                .set(i64::from(up));
        }
    }

    /// Removes link `name`'s status entry if owner `generation` holds it.
    pub(crate) fn remove_link(&self, name: &str, generation: u64) {
        let removed = self.status.send_if_modified(|s| {
            if s.links
                .get(name)
                .is_some_and(|l| l.generation == generation)
            {
                s.links.remove(name);
                true
            } else {
                false
            }
        });
        if removed {
            self.metrics.up.remove(&self.metrics.link(name));
        }
    }

    /// Sets a role's or listener's bind status on behalf of `generation`
    /// (`None` removes it); a newer owner's entry is left alone.
    pub(crate) fn update_bind(
        &self,
        kind: BindKind,
        name: &str,
        generation: u64,
        status: Option<BindStatus>,
    ) {
        let mut owners = self.bind_owners.lock().expect("bind owner lock poisoned");
        let key = (kind, name.to_owned());
        let owner = owners.get(&key).copied().unwrap_or(0);
        if owner > generation || (status.is_none() && owner != generation) {
            return;
        }
        match &status {
            Some(_) => owners.insert(key, generation),
            None => owners.remove(&key),
        };
        self.status.send_modify(|s| {
            let map = match kind {
                BindKind::Role => &mut s.roles,
                BindKind::Listener => &mut s.listeners,
            };
            match status {
                Some(st) => map.insert(name.to_owned(), st),
                None => map.remove(name),
            };
        });
    }

    /// Adds a neighbour connection (or replaces its advertised keys).
    pub(crate) fn upsert_peer(&self, peer: PeerConn) {
        {
            let mut peers = self.peers.lock().expect("peer lock poisoned");
            match peers.iter_mut().find(|p| p.conn == peer.conn) {
                Some(p) => *p = peer,
                None => peers.push(peer),
            }
        }
        self.recompute_routes();
    }

    /// Removes the neighbour connection `conn`, if it is still there.
    pub(crate) fn remove_peer(&self, conn: u64) {
        let removed = {
            let mut peers = self.peers.lock().expect("peer lock poisoned");
            let before = peers.len();
            peers.retain(|p| p.conn != conn);
            before != peers.len()
        };
        if removed {
            self.recompute_routes();
        }
    }

    /// The cheapest connection to neighbour `router`.
    pub(crate) fn peer(&self, router: &str) -> Option<PeerConn> {
        let peers = self.peers.lock().expect("peer lock poisoned");
        peers
            .iter()
            .filter(|p| p.router == router)
            .min_by_key(|p| (p.cost, p.conn))
            .cloned()
    }

    /// Rebuilds the direct route table from the neighbours and the local
    /// connectors; publishes and counts it only when it changed.
    pub(crate) fn recompute_routes(&self) {
        let neighbours = {
            let peers = self.peers.lock().expect("peer lock poisoned");
            let mut by_router: BTreeMap<&str, Neighbour> = BTreeMap::new();
            for p in peers.iter() {
                let n = by_router.entry(&p.router).or_insert_with(|| Neighbour {
                    router: p.router.clone(),
                    cost: p.cost,
                    routing_keys: Vec::new(),
                });
                n.cost = n.cost.min(p.cost);
                n.routing_keys.extend(p.routing_keys.iter().cloned());
            }
            by_router.into_values().collect::<Vec<_>>()
        };
        let table = RouteTable::direct(&self.id, &self.local_keys(), &neighbours);
        let changed = self.routes.send_if_modified(|current| {
            if **current == table {
                false
            } else {
                *current = Arc::new(table);
                true
            }
        });
        if changed {
            self.metrics.route_changes.inc();
        }
    }
}

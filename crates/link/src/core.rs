//! State shared by a router's tasks: identity, credentials, connectors,
//! the routing state (with the connections to neighbours) and the status
//! channel.
//!
//! Each piece has one writer: `Router::apply` writes credentials and
//! connectors; sessions add and remove their own neighbour connection in
//! the routing state (by connection id); status entries are written by
//! their owner's generation. Locks guard short synchronous sections only;
//! everything else is a `watch` channel.
//!
//! Why a restarted link never loses its status to the old task's cleanup:
//! generations come from one counter, so a newer owner's id is larger. A
//! write is applied only if no newer owner holds the entry (and replaces
//! an older owner's entry whole); a removal is applied only by the owner
//! that holds it. Whatever the interleaving, the entry ends up as the
//! newest owner left it, and an owner that ended removed exactly its own
//! entry (`tests::every_interleaving_leaves_the_newest_owners_entry`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::credentials::LinkCredential;
use crate::link_state::Routing;
use crate::metrics::LinkMetrics;
use crate::status::{BindStatus, LinkState, LinkStatus, RouterStatus};

/// Which status map a bind status goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum BindKind {
    Role,
    Listener,
}

/// Local connector targets by routing key.
pub(crate) type ConnectorTargets = BTreeMap<String, Vec<LocalTarget>>;

/// One target of one of this router's connectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LocalTarget {
    /// The connector's name.
    pub(crate) connector: String,
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl LocalTarget {
    /// `host:port` (an IPv6 address in brackets), as status names it.
    pub(crate) fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

pub(crate) struct Core {
    pub(crate) id: String,
    pub(crate) site: String,
    /// An edge router never carries transit flows.
    pub(crate) edge: bool,
    pub(crate) metrics: Arc<LinkMetrics>,
    pub(crate) status: watch::Sender<RouterStatus>,
    pub(crate) credentials: watch::Sender<BTreeMap<String, Arc<LinkCredential>>>,
    pub(crate) connectors: watch::Sender<Arc<ConnectorTargets>>,
    pub(crate) routing: Routing,
    /// Sessions, flows and accept loops; drained on shutdown.
    pub(crate) tasks: TaskTracker,
    pub(crate) shutdown: CancellationToken,
    /// [`crate::RouterConfig::require_router_identity`], read at each accept.
    pub(crate) require_router_identity: AtomicBool,
    /// The mesh ingress's table (SNI → key), swapped by `Router::apply`.
    pub(crate) mesh_ingress: watch::Sender<Arc<crate::mesh_ingress::Table>>,
    /// Rate limit of the mesh ingress's refusal log.
    pub(crate) mesh_ingress_log: crate::mesh_ingress::RefusalLog,
    /// Traffic figures by routing key (`traffic.rs`).
    pub(crate) traffic: crate::traffic::TrafficTable,
    /// Bytes by link (`traffic.rs`).
    pub(crate) link_traffic: crate::traffic::LinkTrafficTable,
    bind_owners: std::sync::Mutex<std::collections::HashMap<(BindKind, String), u64>>,
    next_id: AtomicU64,
    connector_turn: AtomicUsize,
}

// === impl Core ===

impl Core {
    pub(crate) fn new(
        id: String,
        site: String,
        edge: bool,
        metrics: Arc<LinkMetrics>,
        routing: Routing,
    ) -> Self {
        Core {
            id,
            site,
            edge,
            metrics,
            status: watch::Sender::new(RouterStatus::default()),
            credentials: watch::Sender::new(BTreeMap::new()),
            connectors: watch::Sender::new(Arc::new(BTreeMap::new())),
            routing,
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            require_router_identity: AtomicBool::new(false),
            mesh_ingress: watch::Sender::new(Arc::default()),
            mesh_ingress_log: Default::default(),
            traffic: Default::default(),
            link_traffic: Default::default(),
            bind_owners: std::sync::Mutex::new(std::collections::HashMap::new()),
            next_id: AtomicU64::new(1),
            connector_turn: AtomicUsize::new(0),
        }
    }

    /// A process-unique id for a connection or a flow.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The next local target for `routing_key`, round robin.
    pub(crate) fn connector_target(&self, routing_key: &str) -> Option<LocalTarget> {
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
            // Before watchers are woken, so the metric never lags the status.
            let up = i64::from(entry.state == LinkState::Up);
            self.metrics
                .up
                .get_or_create(&self.metrics.link(name))
                .set(up);
            true
        });
    }

    /// Removes link `name`'s status entry if owner `generation` holds it.
    pub(crate) fn remove_link(&self, name: &str, generation: u64) {
        self.status.send_if_modified(|s| {
            if s.links
                .get(name)
                .is_some_and(|l| l.generation == generation)
            {
                s.links.remove(name);
                self.metrics.up.remove(&self.metrics.link(name));
                true
            } else {
                false
            }
        });
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::RouterInfo;
    use crate::status::Direction;

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Write(u64, LinkState),
        Remove(u64),
    }

    fn core() -> Core {
        let metrics = Arc::new(LinkMetrics::default());
        let routing =
            Routing::new(RouterInfo::new("r", "site", false), 1, metrics.clone()).unwrap();
        Core::new("r".into(), "site".into(), false, metrics, routing)
    }

    /// Every order of `a` and `b` that keeps each one's own order.
    fn interleavings(a: &[Op], b: &[Op]) -> Vec<Vec<Op>> {
        if a.is_empty() || b.is_empty() {
            return vec![[a, b].concat()];
        }
        let mut out = Vec::new();
        for mut rest in interleavings(&a[1..], b) {
            rest.insert(0, a[0]);
            out.push(rest);
        }
        for mut rest in interleavings(a, &b[1..]) {
            rest.insert(0, b[0]);
            out.push(rest);
        }
        out
    }

    #[test]
    fn every_interleaving_leaves_the_newest_owners_entry() {
        use LinkState::{Down, Up};
        let old = [Op::Write(1, Up), Op::Write(1, Down), Op::Remove(1)];
        // The new owner stays, or ends too.
        for (new, expected) in [
            (vec![Op::Write(2, Up)], Some(Up)),
            (vec![Op::Write(2, Up), Op::Remove(2)], None),
        ] {
            let orders = interleavings(&old, &new);
            assert_eq!(orders.len(), if new.len() == 1 { 4 } else { 10 });
            for order in orders {
                let core = core();
                for op in &order {
                    match *op {
                        Op::Write(g, state) => core.update_link(
                            "l",
                            g,
                            || LinkStatus::new(Direction::Dialled, 1),
                            |s| s.state = state,
                        ),
                        Op::Remove(g) => core.remove_link("l", g),
                    }
                }
                let status = core.status.borrow().clone();
                let got = status.links.get("l").map(|l| (l.generation, l.state));
                assert_eq!(got, expected.map(|s| (2, s)), "{order:?}");
                let gauge = core.metrics.up.get_or_create(&core.metrics.link("l")).get();
                assert_eq!(gauge, i64::from(expected == Some(Up)), "{order:?}");
            }
        }
    }
}

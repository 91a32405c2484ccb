//! State shared by a router's tasks: identity, credentials, connectors,
//! the routing state (with the connections to neighbours) and the status
//! channel.
//!
//! Each piece has one writer: `Router::apply` writes credentials and
//! connectors; sessions add and remove their own neighbour connection in
//! the routing state (by connection id); status entries are written by
//! their owner's generation. Locks guard short synchronous sections only;
//! everything else is a `watch` channel.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
pub(crate) type ConnectorTargets = BTreeMap<String, Vec<(String, u16)>>;

pub(crate) struct Core {
    pub(crate) id: String,
    pub(crate) site: String,
    pub(crate) metrics: Arc<LinkMetrics>,
    pub(crate) status: watch::Sender<RouterStatus>,
    pub(crate) credentials: watch::Sender<BTreeMap<String, Arc<LinkCredential>>>,
    pub(crate) connectors: watch::Sender<Arc<ConnectorTargets>>,
    pub(crate) routing: Routing,
    /// Sessions, flows and accept loops; drained on shutdown.
    pub(crate) tasks: TaskTracker,
    pub(crate) shutdown: CancellationToken,
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
        routing: Routing,
    ) -> Self {
        Core {
            id,
            site,
            metrics,
            status: watch::Sender::new(RouterStatus::default()),
            credentials: watch::Sender::new(BTreeMap::new()),
            connectors: watch::Sender::new(Arc::new(BTreeMap::new())),
            routing,
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
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

//! The router reconciler: keeps the site's [`SiteView`], translates it into
//! the router's [`RouterConfig`] and publishes it to the router's stream
//! owner.
//!
//! # What it owns
//!
//! One task ([`RouterHub::spawn_on`]) holding the view (loaded once from a
//! [`SiteSource`], then patched by each changed object), the owners of the
//! connected router streams, and the last configuration. A change to a
//! Site, RouterAccess, Link, Listener, Connector or Secret recomputes the
//! router only (never a sidecar); a Dataplane change recomputes it only if
//! a Connector selects Dataplanes. Recomputing waits [`DEBOUNCE`] so a
//! burst of writes is one push, and nothing is published when the
//! versions did not change.
//!
//! # Invariant I1 here
//!
//! Every publish is `publish_as(key, owner)` with the owner recorded at
//! connect time; `Disconnected` acts only if the recorded owner is the
//! sender, as in the sidecar hub.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::identities::HeldIdentity;
use super::translate::{RouterConfig, translate_router};
use super::view::{SiteChange, SiteView};
use crate::ads::ProxyState;
use crate::hub::{IssuedIdentity, MeshTrust, SourceError};
use crate::owner::{OwnerId, OwnerRegistry, ProxyKey};
use crate::translate::Snapshot;

/// Quiet time after a change before recomputing.
pub const DEBOUNCE: Duration = Duration::from_millis(25);

/// How long to wait before retrying a failed load of the site's view.
pub(super) const RELOAD_RETRY: Duration = Duration::from_secs(1);

/// Loads everything the router of this control plane's site depends on.
#[tonic::async_trait]
pub trait SiteSource: Send + Sync + 'static {
    /// The whole view, read from the store.
    async fn load(&self) -> Result<SiteView, SourceError>;

    /// The trust material of `mesh`, or `None` if mTLS is off (or the
    /// source has no CA: the mesh ingress is then withheld).
    async fn mesh_trust(&self, _mesh: &str) -> Result<Option<MeshTrust>, SourceError> {
        Ok(None)
    }

    /// Issues the router's certificate and key in `mesh` for SPIFFE ID
    /// `spiffe_id`, valid from `now` (Envoy-style: the control plane
    /// generates the key; see docs/architecture.md).
    async fn issue_router_identity(
        &self,
        mesh: &str,
        spiffe_id: &str,
        _now: std::time::SystemTime,
    ) -> Result<IssuedIdentity, SourceError> {
        Err(SourceError(format!(
            "this control plane cannot issue {spiffe_id} in mesh {mesh:?}"
        )))
    }
}

enum Event {
    Connected { key: ProxyKey, owner: OwnerId },
    Disconnected { key: ProxyKey, owner: OwnerId },
    Changed(Box<SiteChange>, Instant),
    Reload,
    Trust,
    Sync(oneshot::Sender<()>),
}

/// A handle to the router reconciler. Cheap to clone.
#[derive(Clone)]
pub struct RouterHub {
    tx: mpsc::UnboundedSender<Event>,
    config: watch::Receiver<Arc<RouterConfig>>,
}

impl std::fmt::Debug for RouterHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterHub").finish_non_exhaustive()
    }
}

// === impl RouterHub ===

impl RouterHub {
    /// Starts the reconciler on `tasks`; it runs until `cancel` fires.
    pub fn spawn_on<S: SiteSource>(
        tasks: &TaskTracker,
        source: Arc<S>,
        registry: OwnerRegistry<ProxyState>,
        cancel: CancellationToken,
    ) -> RouterHub {
        let (tx, rx) = mpsc::unbounded_channel();
        let (config_tx, config) = watch::channel(Arc::new(RouterConfig::default()));
        let task = Reconciler {
            source,
            registry,
            view: SiteView::default(),
            routers: BTreeMap::new(),
            config: config_tx,
            published: BTreeMap::new(),
            pending: None,
            identities: BTreeMap::new(),
            renew_at: None,
        };
        tasks.spawn(task.run(rx, cancel));
        RouterHub { tx, config }
    }

    /// The router stream that owns `key` (as `owner`) received its first
    /// request.
    pub fn connected(&self, key: ProxyKey, owner: OwnerId) {
        let _ = self.tx.send(Event::Connected { key, owner });
    }

    /// The router stream that owned `key` ended.
    pub fn disconnected(&self, key: ProxyKey, owner: OwnerId) {
        let _ = self.tx.send(Event::Disconnected { key, owner });
    }

    /// An object of the site changed in the store.
    pub fn changed(&self, change: SiteChange) {
        let _ = self
            .tx
            .send(Event::Changed(Box::new(change), Instant::now()));
    }

    /// The change feed had a gap: re-load the view.
    pub fn reload(&self) {
        let _ = self.tx.send(Event::Reload);
    }

    /// A mesh's CA material changed: re-check the router's mesh identities.
    pub fn trust_changed(&self) {
        let _ = self.tx.send(Event::Trust);
    }

    /// Resolves once every event sent before it was handled and the
    /// configuration recomputed (for tests and status).
    pub async fn sync(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Event::Sync(done)).is_ok() {
            let _ = wait.await;
        }
    }

    /// The latest configuration (what is sent, withheld and selected),
    /// whether or not a router is connected.
    pub fn config(&self) -> watch::Receiver<Arc<RouterConfig>> {
        self.config.clone()
    }
}

struct Reconciler<S> {
    source: Arc<S>,
    registry: OwnerRegistry<ProxyState>,
    view: SiteView,
    /// Connected routers: key → owner.
    routers: BTreeMap<ProxyKey, OwnerId>,
    config: watch::Sender<Arc<RouterConfig>>,
    /// Snapshot last published per router key.
    published: BTreeMap<ProxyKey, Arc<ProxyState>>,
    /// When the oldest unapplied change arrived.
    pending: Option<Instant>,
    /// The router's identity per mesh.
    identities: BTreeMap<String, HeldIdentity>,
    /// When the earliest of them is due for renewal.
    renew_at: Option<Instant>,
}

impl<S: SiteSource> Reconciler<S> {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Event>, cancel: CancellationToken) {
        self.load(&cancel).await;
        loop {
            let deadline = self.pending.map(|first| first + DEBOUNCE);
            tokio::select! {
                () = cancel.cancelled() => return,
                ev = rx.recv() => match ev {
                    None => return,
                    Some(ev) => self.on_event(ev, &cancel).await,
                },
                () = sleep_until(deadline) => self.recompute().await,
                () = sleep_until(self.renew_at) => self.recompute().await,
            }
        }
    }

    async fn load(&mut self, cancel: &CancellationToken) {
        loop {
            match self.source.load().await {
                Ok(view) => {
                    // Changes that arrive meanwhile wait in the channel and
                    // are applied after, older ones skipped by revision.
                    self.view = view;
                    self.recompute().await;
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot load the site's router resources; retrying");
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(RELOAD_RETRY) => {}
                    }
                }
            }
        }
    }

    async fn on_event(&mut self, ev: Event, cancel: &CancellationToken) {
        match ev {
            Event::Connected { key, owner } => {
                if self.registry.owner(&key) != Some(owner) {
                    return;
                }
                self.routers.insert(key.clone(), owner);
                self.published.remove(&key);
                self.publish(&key, owner, Instant::now());
            }
            Event::Disconnected { key, owner } => {
                if self.routers.get(&key) == Some(&owner) {
                    self.routers.remove(&key);
                    self.published.remove(&key);
                }
            }
            Event::Changed(change, at) => {
                let dataplane = match &*change {
                    SiteChange::Resource(u) => dataplane_of(u),
                    SiteChange::Secret { .. } => None,
                };
                // A Dataplane matters to a selecting Connector, or to the
                // mesh ingress when it has (or had) a routing-key outbound.
                let relevant = dataplane.is_none_or(|(mesh, name, uses)| {
                    let held = self.view.dataplanes.get(&(mesh, name));
                    self.view.selects_dataplanes()
                        || uses
                        || held.is_some_and(super::SelectableDataplane::uses_network)
                });
                if self.view.apply(*change) && relevant {
                    self.pending.get_or_insert(at);
                }
            }
            Event::Reload => self.load(cancel).await,
            Event::Trust => {
                self.pending.get_or_insert_with(Instant::now);
            }
            Event::Sync(done) => {
                if self.pending.is_some() {
                    self.recompute().await;
                }
                let _ = done.send(());
            }
        }
    }

    async fn recompute(&mut self) {
        let at = self.pending.take().unwrap_or_else(Instant::now);
        self.renew_at =
            super::identities::refresh(&*self.source, &mut self.view, &mut self.identities).await;
        let config = translate_router(&self.view);
        let same = **self.config.borrow() == config;
        if !same {
            self.config.send_replace(Arc::new(config));
        }
        let routers: Vec<(ProxyKey, OwnerId)> =
            self.routers.iter().map(|(k, o)| (k.clone(), *o)).collect();
        for (key, owner) in routers {
            self.publish(&key, owner, at);
        }
    }

    /// Publishes the configuration to one router, unless it already has
    /// these versions. A router whose token names another site than this
    /// control plane's gets an empty snapshot.
    fn publish(&mut self, key: &ProxyKey, owner: OwnerId, at: Instant) {
        let config = self.config.borrow().clone();
        let snapshot = if config.site.as_deref() == Some(key.name.as_str()) {
            config.snapshot.clone()
        } else {
            if config.site.is_some() {
                tracing::warn!(router = %key, site = ?config.site, "a router token names another site than this control plane's; it gets no configuration");
            }
            Snapshot::new()
        };
        if self
            .published
            .get(key)
            .is_some_and(|p| p.snapshot.same_versions(&snapshot))
        {
            return;
        }
        let state = Arc::new(ProxyState {
            snapshot,
            identity: None,
            renew_at: None,
            changed_at: at,
        });
        if self.registry.publish_as(key, owner, state.clone()).is_ok() {
            self.published.insert(key.clone(), state);
        } else {
            self.routers.remove(key);
            self.published.remove(key);
        }
    }
}

/// `(mesh, name, has a routing-key outbound)` of a changed Dataplane.
fn dataplane_of(u: &crate::hub::Update) -> Option<(String, String, bool)> {
    let r = match u {
        crate::hub::Update::Upserted(r) | crate::hub::Update::Deleted(r) => r,
    };
    (r.kind() == meshlink_api::Kind::Dataplane).then(|| {
        let mesh = r.metadata.mesh.clone().unwrap_or_default();
        (mesh, r.name().to_owned(), SiteView::uses_network(r))
    })
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

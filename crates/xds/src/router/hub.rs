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

use super::translate::{RouterConfig, translate_router};
use super::view::{SiteChange, SiteView};
use crate::ads::ProxyState;
use crate::hub::SourceError;
use crate::owner::{OwnerId, OwnerRegistry, ProxyKey};
use crate::translate::Snapshot;

/// Quiet time after a change before recomputing.
pub const DEBOUNCE: Duration = Duration::from_millis(25);

/// How long to wait before retrying a failed load of the site's view.
const RELOAD_RETRY: Duration = Duration::from_secs(1);

/// Loads everything the router of this control plane's site depends on.
#[tonic::async_trait]
pub trait SiteSource: Send + Sync + 'static {
    /// The whole view, read from the store.
    async fn load(&self) -> Result<SiteView, SourceError>;
}

enum Event {
    Connected { key: ProxyKey, owner: OwnerId },
    Disconnected { key: ProxyKey, owner: OwnerId },
    Changed(Box<SiteChange>, Instant),
    Reload,
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
                () = sleep_until(deadline) => self.recompute(),
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
                    self.recompute();
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
                let dataplane = matches!(&*change, SiteChange::Resource(u) if is_dataplane(u));
                let selects = self.view.selects_dataplanes();
                if self.view.apply(*change) && (!dataplane || selects) {
                    self.pending.get_or_insert(at);
                }
            }
            Event::Reload => self.load(cancel).await,
            Event::Sync(done) => {
                if self.pending.is_some() {
                    self.recompute();
                }
                let _ = done.send(());
            }
        }
    }

    fn recompute(&mut self) {
        let at = self.pending.take().unwrap_or_else(Instant::now);
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

fn is_dataplane(u: &crate::hub::Update) -> bool {
    let r = match u {
        crate::hub::Update::Upserted(r) | crate::hub::Update::Deleted(r) => r,
    };
    r.kind() == meshlink_api::Kind::Dataplane
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

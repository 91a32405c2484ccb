//! The reconciler: turns store changes, connects and renewal requests into
//! per-proxy [`ProxyState`]s published to stream owners.
//!
//! # What it owns
//!
//! One task ([`Hub::spawn`]) that keeps, per connected proxy, the owner it
//! publishes to, the client kind, and the last state it published; and per
//! mesh, the current [`MeshView`] and trust material. Store changes arrive as
//! [`Hub::mesh_changed`]; they are debounced for [`DEBOUNCE`] (capped at
//! [`MAX_DELAY`] after the first change) and then only the proxies of the
//! changed meshes are recomputed. A safety resync every [`RESYNC_EVERY`]
//! recomputes everything; because versions are content hashes it publishes
//! nothing when nothing changed. There is no per-proxy polling.
//!
//! # Invariant I1 here
//!
//! The reconciler never acts for a proxy without proving ownership: every
//! publish is [`OwnerRegistry::publish_as`] with the owner id recorded at
//! connect time, a `Connected` from a stream that no longer owns its key is
//! ignored, and `Disconnected`/`Renew` only act if the recorded owner is the
//! sender. Events may arrive in any order relative to registry changes; the
//! registry is the source of truth and the hub only ever follows it.
//!
//! Identity certificates (Envoy clients) are cached per proxy key across
//! reconnects and re-issued when the CA changed, the SPIFFE ID changed, or
//! the owner's renewal timer fired (at 50% ± 10% of the lifetime).

mod source;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use meshlink_identity::{WallClock, random_jitter, renewal_time_from};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use source::{IdentityInfo, IssuedIdentity, MeshSource, MeshTrust, SourceError};

use crate::ads::ProxyState;
use crate::owner::{OwnerId, OwnerRegistry, ProxyKey};
use crate::translate::{ClientKind, MeshView, ProxyContext, SecretsInput, Snapshot, translate};

/// Quiet time after a store change before recomputing: long enough to batch
/// a burst of writes (an `apply` of many resources), short enough to be
/// invisible next to a proxy's own reaction time.
pub const DEBOUNCE: Duration = Duration::from_millis(25);

/// Upper bound on how long a change waits while writes keep arriving.
pub const MAX_DELAY: Duration = Duration::from_millis(100);

/// Period of the safety resync (publishes nothing when nothing changed).
pub const RESYNC_EVERY: Duration = Duration::from_secs(30);

/// Events handled back to back before the loop looks at its timers again.
const MAX_BATCH: usize = 100_000;

/// How long to wait before retrying a mesh whose source call failed.
const RETRY_AFTER: Duration = Duration::from_secs(1);

enum Event {
    Connected {
        key: ProxyKey,
        owner: OwnerId,
        client: ClientKind,
    },
    Disconnected {
        key: ProxyKey,
        owner: OwnerId,
    },
    Renew {
        key: ProxyKey,
        owner: OwnerId,
    },
    MeshChanged {
        mesh: String,
        at: Instant,
    },
    Sync {
        resync: bool,
        done: oneshot::Sender<()>,
    },
}

/// A handle to the reconciler task. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Hub {
    tx: mpsc::UnboundedSender<Event>,
}

// === impl Hub ===

impl Hub {
    /// Starts the reconciler. It runs until `cancel` fires or every handle
    /// is dropped.
    pub fn spawn<S: MeshSource>(
        source: Arc<S>,
        registry: OwnerRegistry<ProxyState>,
        clock: WallClock,
        cancel: CancellationToken,
    ) -> Hub {
        Self::spawn_on(&TaskTracker::new(), source, registry, clock, cancel)
    }

    /// Like [`Hub::spawn`], with the reconciler task owned by `tasks`, so a
    /// shutdown can wait for it to end.
    pub fn spawn_on<S: MeshSource>(
        tasks: &TaskTracker,
        source: Arc<S>,
        registry: OwnerRegistry<ProxyState>,
        clock: WallClock,
        cancel: CancellationToken,
    ) -> Hub {
        let (tx, rx) = mpsc::unbounded_channel();
        let reconciler = Reconciler {
            source,
            registry,
            clock,
            proxies: HashMap::new(),
            identities: HashMap::new(),
            meshes: HashMap::new(),
            dirty: HashMap::new(),
            deadline: None,
        };
        tasks.spawn(reconciler.run(rx, cancel));
        Hub { tx }
    }

    /// A stream that owns `key` (as `owner`) received its first request.
    pub fn connected(&self, key: ProxyKey, owner: OwnerId, client: ClientKind) {
        let _ = self.tx.send(Event::Connected { key, owner, client });
    }

    /// A stream that owned `key` ended.
    pub fn disconnected(&self, key: ProxyKey, owner: OwnerId) {
        let _ = self.tx.send(Event::Disconnected { key, owner });
    }

    /// The owner's renewal timer fired: re-issue its identity.
    pub fn renew(&self, key: ProxyKey, owner: OwnerId) {
        let _ = self.tx.send(Event::Renew { key, owner });
    }

    /// Something in `mesh` changed in the store (resources or CA state).
    pub fn mesh_changed(&self, mesh: impl Into<String>) {
        let _ = self.tx.send(Event::MeshChanged {
            mesh: mesh.into(),
            at: Instant::now(),
        });
    }

    /// Resolves once every event sent before it was handled and pending
    /// changes were recomputed. With `resync`, recomputes every mesh first
    /// (a "reconcile tick"). For tests and orderly shutdown.
    pub async fn sync(&self, resync: bool) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Event::Sync { resync, done }).is_ok() {
            let _ = wait.await;
        }
    }
}

struct Entry {
    owner: OwnerId,
    client: ClientKind,
    last: Option<Arc<ProxyState>>,
}

struct CachedIdentity {
    issued: IssuedIdentity,
    renew_at: SystemTime,
}

#[derive(Default)]
struct MeshCtx {
    view: Option<Arc<MeshView>>,
    trust: Option<MeshTrust>,
}

struct Reconciler<S> {
    source: Arc<S>,
    registry: OwnerRegistry<ProxyState>,
    clock: WallClock,
    /// mesh → proxy name → entry.
    proxies: HashMap<String, HashMap<String, Entry>>,
    identities: HashMap<ProxyKey, CachedIdentity>,
    meshes: HashMap<String, MeshCtx>,
    /// Meshes to recompute, with when their first pending change was seen.
    dirty: HashMap<String, Instant>,
    deadline: Option<Instant>,
}

impl<S: MeshSource> Reconciler<S> {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Event>, cancel: CancellationToken) {
        let mut resync = tokio::time::interval_at(Instant::now() + RESYNC_EVERY, RESYNC_EVERY);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                ev = rx.recv() => match ev {
                    Some(ev) => {
                        self.handle(ev).await;
                        // Coalesce a burst (a bulk apply queues one event per
                        // write) before the debounce deadline can fire, so it
                        // costs one recompute instead of one per event.
                        for _ in 0..MAX_BATCH {
                            match rx.try_recv() {
                                Ok(ev) => self.handle(ev).await,
                                Err(_) => break,
                            }
                        }
                    }
                    None => return,
                },
                () = sleep_until(self.deadline.unwrap_or_else(Instant::now)), if self.deadline.is_some() => {
                    self.flush().await;
                }
                _ = resync.tick() => {
                    self.mark_all_dirty(Instant::now());
                    self.flush().await;
                }
            }
        }
    }

    async fn handle(&mut self, ev: Event) {
        match ev {
            Event::Connected { key, owner, client } => {
                if self.registry.owner(&key) != Some(owner) {
                    tracing::debug!(proxy = %key, %owner, "connect from a stream that was taken over; ignored");
                    return;
                }
                let entry = Entry {
                    owner,
                    client,
                    last: None,
                };
                self.proxies
                    .entry(key.mesh.clone())
                    .or_default()
                    .insert(key.name.clone(), entry);
                if !self.meshes.contains_key(&key.mesh) && !self.reload(&key.mesh).await {
                    self.mark_dirty(key.mesh.clone(), Instant::now() + RETRY_AFTER);
                }
                self.recompute(&key, Instant::now(), false).await;
            }
            Event::Disconnected { key, owner } => {
                if let Some(mesh) = self.proxies.get_mut(&key.mesh)
                    && mesh.get(&key.name).is_some_and(|e| e.owner == owner)
                {
                    mesh.remove(&key.name);
                }
            }
            Event::Renew { key, owner } => {
                let owns = self
                    .proxies
                    .get(&key.mesh)
                    .and_then(|m| m.get(&key.name))
                    .is_some_and(|e| e.owner == owner);
                if owns {
                    self.recompute(&key, Instant::now(), true).await;
                }
            }
            Event::MeshChanged { mesh, at } => {
                self.dirty.entry(mesh).or_insert(at);
                let oldest = self.dirty.values().min().copied().unwrap_or(at);
                self.deadline = Some((Instant::now() + DEBOUNCE).min(oldest + MAX_DELAY));
            }
            Event::Sync { resync, done } => {
                if resync {
                    self.mark_all_dirty(Instant::now());
                }
                if !self.dirty.is_empty() {
                    self.flush().await;
                }
                let _ = done.send(());
            }
        }
    }

    /// Recomputes `mesh` no later than `deadline` (used for retries).
    fn mark_dirty(&mut self, mesh: String, deadline: Instant) {
        self.dirty.entry(mesh).or_insert_with(Instant::now);
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
    }

    fn mark_all_dirty(&mut self, at: Instant) {
        let meshes: HashSet<String> = self
            .proxies
            .keys()
            .chain(self.meshes.keys())
            .cloned()
            .collect();
        for mesh in meshes {
            self.dirty.entry(mesh).or_insert(at);
        }
    }

    /// Recomputes every proxy of every dirty mesh.
    async fn flush(&mut self) {
        self.deadline = None;
        let dirty: Vec<(String, Instant)> = self.dirty.drain().collect();
        for (mesh, since) in dirty {
            if !self.reload(&mesh).await {
                self.mark_dirty(mesh, Instant::now() + RETRY_AFTER);
                continue;
            }
            let names: Vec<String> = self
                .proxies
                .get(&mesh)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            for name in names {
                let key = ProxyKey::new(mesh.clone(), name);
                self.recompute(&key, since, false).await;
            }
            if self.proxies.get(&mesh).is_none_or(|m| m.is_empty()) {
                self.proxies.remove(&mesh);
            }
        }
    }

    /// Loads the view and trust of `mesh`. Returns false (and keeps the old
    /// ones) if the source failed.
    async fn reload(&mut self, mesh: &str) -> bool {
        let view = match self.source.view(mesh).await {
            Ok(v) => v.map(Arc::new),
            Err(e) => {
                tracing::warn!(mesh, error = %e, "cannot load mesh; keeping the last view and retrying");
                return false;
            }
        };
        let trust = match &view {
            Some(v) if v.mtls_enabled() => match self.source.trust(mesh).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(mesh, error = %e, "cannot load the mesh CA; keeping the last trust bundle and retrying");
                    return false;
                }
            },
            _ => None,
        };
        self.meshes.insert(mesh.to_owned(), MeshCtx { view, trust });
        true
    }

    /// Recomputes one proxy's state and publishes it if anything changed.
    async fn recompute(&mut self, key: &ProxyKey, changed_at: Instant, renew: bool) {
        let Some(entry) = self.proxies.get(&key.mesh).and_then(|m| m.get(&key.name)) else {
            return;
        };
        let (owner, client) = (entry.owner, entry.client);
        let ctx = self.meshes.get(&key.mesh);
        let view = ctx.and_then(|c| c.view.clone());
        let trust = ctx.and_then(|c| c.trust.clone());
        let mut secrets = SecretsInput::default();
        let mut identity = None;
        let mut renew_at = None;
        if let (Some(view), Some(trust)) = (&view, &trust) {
            if client != ClientKind::Grpc {
                secrets.trust_bundle_pem = Some(trust.bundle_pem.clone());
            }
            let service = view
                .dataplane(&key.name)
                .and_then(|dp| dp.services().first().map(|s| s.to_string()));
            if let (ClientKind::Envoy, Some(service)) = (client, service) {
                let expected = crate::translate::names::spiffe_id(view.trust_domain(), &service);
                self.ensure_identity(key, &service, &expected, trust, renew)
                    .await;
                if let Some(c) = self.identities.get(key) {
                    secrets.identity = Some((c.issued.chain_pem.clone(), c.issued.key_pem.clone()));
                    identity = Some(c.issued.info.clone());
                    renew_at = Some(c.renew_at);
                }
            }
        }
        let snapshot = match &view {
            Some(view) => {
                let ctx = ProxyContext {
                    mesh: key.mesh.clone(),
                    name: key.name.clone(),
                    client,
                    secrets,
                };
                translate(&ctx, view)
            }
            None => Snapshot::new(),
        };
        let Some(entry) = self
            .proxies
            .get_mut(&key.mesh)
            .and_then(|m| m.get_mut(&key.name))
        else {
            return;
        };
        if let Some(last) = &entry.last
            && last.snapshot.same_versions(&snapshot)
            && last.identity == identity
        {
            return;
        }
        let state = Arc::new(ProxyState {
            snapshot,
            identity,
            renew_at,
            changed_at,
        });
        match self.registry.publish_as(key, owner, state.clone()) {
            Ok(()) => entry.last = Some(state),
            Err(e) => {
                // The stream lost the key; its successor's connect follows.
                tracing::debug!(error = %e, "not publishing to a former owner");
                if let Some(m) = self.proxies.get_mut(&key.mesh) {
                    m.remove(&key.name);
                }
            }
        }
    }

    /// Makes sure the cached identity of `key` is current: issued by the
    /// current CA, for `expected`, and not due for renewal.
    async fn ensure_identity(
        &mut self,
        key: &ProxyKey,
        service: &str,
        expected: &str,
        trust: &MeshTrust,
        renew: bool,
    ) {
        let now = self.clock.now();
        let current = self.identities.get(key).is_some_and(|c| {
            c.issued.info.ca_fingerprint == trust.ca_fingerprint
                && c.issued.info.spiffe_id == expected
                && now < c.renew_at
        });
        if current && !renew {
            return;
        }
        match self.source.issue(key, service, now).await {
            Ok(issued) => {
                let renew_at = renewal_time_from(
                    now,
                    issued.info.not_before,
                    issued.info.not_after,
                    random_jitter(),
                );
                tracing::debug!(proxy = %key, serial = %issued.info.serial, "issued identity certificate");
                self.identities
                    .insert(key.clone(), CachedIdentity { issued, renew_at });
            }
            Err(e) => {
                tracing::warn!(proxy = %key, error = %e, "cannot issue identity certificate; keeping the current one and retrying on the next change");
            }
        }
    }
}

//! The reconciler: turns store changes, connects and renewal requests into
//! per-proxy [`ProxyState`]s published to stream owners.
//!
//! # What it owns
//!
//! One task ([`Hub::spawn`]) that keeps, per connected proxy, the owner it
//! publishes to, the client kind, and the last state it published; and per
//! mesh, a cached [`MeshView`](crate::translate::MeshView), its trust
//! material, the shared encoded resources ([`Memo`](crate::translate::Memo))
//! and an index of which proxies reference which service.
//!
//! # Incremental reconciliation
//!
//! Store changes arrive as the changed objects ([`Hub::resource_changed`]).
//! The hub patches its cached view at once and works out which connected
//! proxies the change can affect: a Dataplane's own proxy and the proxies
//! with an outbound to a service whose endpoints changed; for a
//! MeshTrafficPermission, the proxies with an inbound it targets (by tags,
//! or by the Dataplane's name, labels and inbound port; a Dataplane whose
//! labels changed recomputes its own proxy); for a
//! Mesh spec change (mTLS, trust domain) or a trust change, every proxy of
//! the mesh. A write that changes no spec (status-only), a change in a mesh
//! with no connected proxy, and CA bookkeeping cost no per-proxy work. Only
//! those proxies are recomputed, after a debounce of [`DEBOUNCE`] (capped at
//! [`MAX_DELAY`]); [`HubMetrics`] counts them. The store is listed only when
//! a mesh is first used, after a feed gap ([`Hub::reload_all`]), on
//! [`Hub::mesh_changed`], and by the safety resync every [`RESYNC_EVERY`];
//! a listing is applied as a diff against the cached view, so it too only
//! recomputes what differs. CA changes ([`Hub::trust_changed`]) reload the
//! trust material and recompute only if the bundle or issuing CA changed.
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
//! # Identities and eviction
//!
//! Identity certificates (Envoy clients) are cached per proxy key across
//! reconnects, with their SDS Secret encoded once per issuance, and
//! re-issued when the CA changed, the SPIFFE ID changed, or the owner's
//! renewal timer fired (at 50% ± 10% of the lifetime). When the Mesh's
//! certificate lifetime is lowered below what a cached certificate has
//! left, its renewal time moves to a point within the first 20% of the new
//! lifetime (`meshlink_identity::lowered_lifetime_delay`), which the owner's
//! timer then follows: the mesh's Envoys get certificates of the new
//! lifetime spread over that window, not all in one hub pass. meshlink-proxy
//! clients that list the identity policy feature get the lifetime itself
//! (an SDS Secret shared by the mesh) and renew by the same rule. A cached
//! identity
//! (a private key) is dropped when its Dataplane is deleted or its proxy
//! has been disconnected for [`EVICT_AFTER`]; a mesh's cache is dropped
//! when no proxy of it is connected and the Mesh was deleted or
//! [`EVICT_AFTER`] passed.

mod patch;
mod reconciler;
mod source;

use std::sync::Arc;
use std::time::Duration;

use meshlink_api::Resource;
use meshlink_identity::WallClock;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use source::{IdentityInfo, IssuedIdentity, MeshSource, MeshTrust, SourceError};

use crate::ads::ProxyState;
use crate::owner::{OwnerId, OwnerRegistry, ProxyKey};
use crate::translate::ClientKind;

/// Quiet time after a store change before recomputing: long enough to batch
/// a burst of writes (an `apply` of many resources), short enough to be
/// invisible next to a proxy's own reaction time.
pub const DEBOUNCE: Duration = Duration::from_millis(25);

/// Upper bound on how long a change waits while writes keep arriving.
pub const MAX_DELAY: Duration = Duration::from_millis(100);

/// Period of the safety resync: re-lists every mesh in use and recomputes
/// the proxies whose inputs differ from the cached view.
pub const RESYNC_EVERY: Duration = Duration::from_secs(30);

/// How long a disconnected proxy's identity (and an unused mesh's cache)
/// is kept for a reconnect before it is dropped.
pub const EVICT_AFTER: Duration = Duration::from_secs(60);

/// A changed store object, as the change feed carries it.
#[derive(Debug, Clone)]
pub enum Update {
    /// The object was created or updated; this is its new state.
    Upserted(Resource),
    /// The object was deleted; this is its last state.
    Deleted(Resource),
}

/// Sizes of the hub's maps and its work counter, for tests and inspection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HubStats {
    /// Connected proxies the hub publishes to.
    pub proxies: usize,
    /// Cached identities (certificate and private key) by proxy key.
    pub identities: usize,
    /// Meshes with a cached view.
    pub meshes: usize,
    /// Disconnected proxies waiting out [`EVICT_AFTER`].
    pub disconnected: usize,
    /// Proxies recomputed since start (the metric's value).
    pub recomputed: u64,
}

/// The hub's metrics. Cheap to clone (clones share values).
#[derive(Clone, Debug, Default)]
pub struct HubMetrics {
    recomputed: Counter,
    patched: Counter,
}

// === impl HubMetrics ===

impl HubMetrics {
    /// Registers the metrics in `registry` (unprefixed; the control plane
    /// registers them under `meshlink_xds_`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "recomputed_proxies",
            "Proxy configurations recomputed (translated) by the hub: on connect, renewal, and for each proxy a change can affect",
            self.recomputed.clone(),
        );
        registry.register(
            "patched_proxies",
            "Of the recomputed proxies, those whose only change was the endpoints of services they call: their last configuration was patched with the shared load assignment instead of translated again",
            self.patched.clone(),
        );
    }

    /// Proxies recomputed so far.
    pub fn recomputed(&self) -> u64 {
        self.recomputed.get()
    }

    pub(crate) fn inc_recomputed(&self) {
        self.recomputed.inc();
    }

    /// Proxies patched (endpoint-only changes) so far.
    pub fn patched(&self) -> u64 {
        self.patched.get()
    }

    pub(crate) fn inc_patched(&self) {
        self.patched.inc();
    }
}

enum Event {
    Connected {
        key: ProxyKey,
        owner: OwnerId,
        client: ClientKind,
        identity_policy: bool,
    },
    Disconnected {
        key: ProxyKey,
        owner: OwnerId,
    },
    Renew {
        key: ProxyKey,
        owner: OwnerId,
    },
    Changed {
        mesh: String,
        update: Box<Update>,
        at: Instant,
    },
    TrustChanged {
        mesh: String,
        at: Instant,
    },
    Relist {
        mesh: Option<String>,
        at: Instant,
    },
    Sync {
        resync: bool,
        done: oneshot::Sender<()>,
    },
    Stats {
        reply: oneshot::Sender<HubStats>,
    },
}

/// A handle to the reconciler task. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Hub {
    tx: mpsc::UnboundedSender<Event>,
    metrics: HubMetrics,
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
        let metrics = HubMetrics::default();
        let reconciler = reconciler::Reconciler::new(source, registry, clock, metrics.clone());
        tasks.spawn(reconciler.run(rx, cancel));
        Hub { tx, metrics }
    }

    /// The hub's metrics (register them once in the control plane's registry).
    pub fn metrics(&self) -> &HubMetrics {
        &self.metrics
    }

    /// A stream that owns `key` (as `owner`) received its first request.
    /// `identity_policy`: the client listed the identity policy feature
    /// (`meshlink_proto::identity_policy`), so a meshlink-proxy is sent the
    /// mesh's current certificate lifetime.
    pub fn connected(
        &self,
        key: ProxyKey,
        owner: OwnerId,
        client: ClientKind,
        identity_policy: bool,
    ) {
        let _ = self.tx.send(Event::Connected {
            key,
            owner,
            client,
            identity_policy,
        });
    }

    /// A stream that owned `key` ended.
    pub fn disconnected(&self, key: ProxyKey, owner: OwnerId) {
        let _ = self.tx.send(Event::Disconnected { key, owner });
    }

    /// The owner's renewal timer fired: re-issue its identity.
    pub fn renew(&self, key: ProxyKey, owner: OwnerId) {
        let _ = self.tx.send(Event::Renew { key, owner });
    }

    /// A Mesh, Dataplane or MeshTrafficPermission of `mesh` changed in the
    /// store (for a Mesh, `mesh` is its name). Other kinds are ignored.
    pub fn resource_changed(&self, mesh: impl Into<String>, update: Update) {
        let _ = self.tx.send(Event::Changed {
            mesh: mesh.into(),
            update: Box::new(update),
            at: Instant::now(),
        });
    }

    /// The CA material of `mesh` changed in the store: reload the trust
    /// bundle, and recompute the mesh only if it (or the issuing CA) differs.
    pub fn trust_changed(&self, mesh: impl Into<String>) {
        let _ = self.tx.send(Event::TrustChanged {
            mesh: mesh.into(),
            at: Instant::now(),
        });
    }

    /// Re-list `mesh` from the source (view and trust), recomputing what
    /// differs from the cached view.
    pub fn mesh_changed(&self, mesh: impl Into<String>) {
        let _ = self.tx.send(Event::Relist {
            mesh: Some(mesh.into()),
            at: Instant::now(),
        });
    }

    /// The change feed had a gap: re-list every cached mesh.
    pub fn reload_all(&self) {
        let _ = self.tx.send(Event::Relist {
            mesh: None,
            at: Instant::now(),
        });
    }

    /// Resolves once every event sent before it was handled and pending
    /// changes were recomputed. With `resync`, re-lists every mesh first
    /// (a "reconcile tick"). For tests and orderly shutdown.
    pub async fn sync(&self, resync: bool) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Event::Sync { resync, done }).is_ok() {
            let _ = wait.await;
        }
    }

    /// The sizes of the hub's maps, after every event sent before it was
    /// handled (`None` once the hub stopped).
    pub async fn stats(&self) -> Option<HubStats> {
        let (reply, wait) = oneshot::channel();
        self.tx.send(Event::Stats { reply }).ok()?;
        wait.await.ok()
    }
}

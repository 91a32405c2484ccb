//! Dataplane status (DESIGN §5), stalled-rotation detection, certificate
//! metrics, MeshTrafficPermission `Valid`, MeshService status (the
//! Dataplanes it selects and its `ProtocolAgreed` condition;
//! `mesh_service.rs`), the Dataplanes' `ProtocolAgreed` condition for
//! tag-based services (`protocol.rs`), their `DuplicateHolder` condition
//! (two processes holding one identity, `holders.rs`), and eviction of
//! stream reports.
//!
//! # What it owns
//!
//! One task ([`run`]) owns the in-memory [`model::Proxy`] of every known
//! Dataplane. Its inputs:
//! - stream views from the xDS inspector (open, close, SDS certificate,
//!   outstanding NACK), queued by [`StatusHandle::stream_observer`];
//! - issuance events from Certify, queued by
//!   [`StatusHandle::issuance_observer`];
//! - the sidecars' DataplaneHealth reports (`app_reachable.rs`);
//! - the store's change feed (Dataplane created/deleted, Mesh mTLS,
//!   MeshTrafficPermission changes).
//!
//! Writes are coalesced: events only mark a Dataplane dirty, and once a
//! second the dirty ones are written (a bounded number at a time) in one
//! store transaction after one multi-get, so a connect storm costs at most
//! one status write per proxy per second and one commit per second, never
//! one per event. A status equal to the one this task last wrote is not
//! written (nor read) again. Status writes never touch spec. Every second the task
//! also re-evaluates expiry and stalled rotations from memory, updates the
//! metrics, and writes the Mesh's `CertificateRotationStalled` condition
//! when it changes (merging only that condition, with CAS and retry).

pub(crate) mod app_reachable;
mod holders;
mod mesh_service;
mod mesh_service_protocol;
mod metrics;
mod model;
mod observe;
pub mod owners;
mod protocol;
#[cfg(test)]
mod tests;
pub(crate) mod unhealthy_endpoints;
pub(crate) mod writer;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use meshlink_api::spec::{MeshServicesMode, MeshSpec};
use meshlink_api::{Kind, Resource};
use meshlink_runtime::{MetricsRegistry, Shutdown};
use meshlink_store::{Change, ChangeType};
use meshlink_xds::ads::{Inspector, StreamObserver, StreamView};
use meshlink_xds::owner::ProxyKey;
use tokio::sync::mpsc;

use crate::identity::issuance::{Issuance, IssuanceObserver};
use crate::resources::{ResourceError, ResourceService};
use metrics::StatusMetrics;
use model::Proxy;

/// How often dirty statuses are flushed and timers evaluated.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// How long a disconnected proxy's stream report is kept for `inspect`.
pub const REPORT_GRACE: Duration = Duration::from_secs(3600);

/// Dataplane writes per flush; the rest stay dirty for the next one, so a
/// storm never keeps the task from its timers for long.
const MAX_WRITES_PER_FLUSH: usize = 2000;

/// `ProtocolAgreed` writes per flush (each is a read and a write); the
/// rest wait for the next one.
const MAX_PROTOCOL_WRITES_PER_FLUSH: usize = 200;

/// Why a status write failed.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The resource service refused or the store failed.
    #[error(transparent)]
    Resource(#[from] ResourceError),
    /// Other writers kept changing the resource.
    #[error("{0}")]
    Contended(String),
    /// A batch write failed as a whole (every item in it is retried).
    #[error("the store failed: {0}")]
    Store(String),
}

enum Event {
    Stream(StreamView),
    Issued(Issuance),
    App(app_reachable::AppEvent),
}

/// Queues events for the status task. Cheap to clone.
#[derive(Clone, Debug)]
pub struct StatusHandle {
    tx: mpsc::UnboundedSender<Event>,
}

/// The receiving side, handed to [`run`].
pub struct StatusInbox {
    rx: mpsc::UnboundedReceiver<Event>,
}

/// A handle and the inbox its events go to.
pub fn channel() -> (StatusHandle, StatusInbox) {
    // Unbounded: observers run inside the inspector's lock and Certify's
    // response path and must never wait; each event is a few hundred bytes
    // and the task drains them without I/O.
    let (tx, rx) = mpsc::unbounded_channel();
    (StatusHandle { tx }, StatusInbox { rx })
}

impl StatusHandle {
    /// The observer to give the xDS [`Inspector`].
    pub fn stream_observer(&self) -> StreamObserver {
        let tx = self.tx.clone();
        Arc::new(move |v| {
            let _ = tx.send(Event::Stream(v));
        })
    }

    /// The observer to add to Certify's issuance hooks.
    pub fn issuance_observer(&self) -> IssuanceObserver {
        let tx = self.tx.clone();
        Arc::new(move |e: &Issuance| {
            let _ = tx.send(Event::Issued(e.clone()));
        })
    }
}

/// What the task needs.
pub struct StatusParts {
    /// Where statuses are written.
    pub resources: ResourceService,
    /// The stream reports (evicted from here).
    pub inspector: Inspector,
    /// This instance's name, as stream views carry it.
    pub instance: String,
    /// The store revision the feed is followed from.
    pub start_revision: u64,
    /// Metrics registry.
    pub registry: MetricsRegistry,
    /// Whether this replica leads: only the leader writes the Mesh's
    /// `CertificateRotationStalled` (every replica computes the same
    /// mesh-wide set from the store).
    pub leadership: crate::replicas::Leadership,
}

#[derive(Default)]
struct MeshInfo {
    mtls: bool,
    backend: Option<String>,
    /// The stalled set last written (`None`: nothing written yet).
    written: Option<Vec<String>>,
}

struct State {
    resources: ResourceService,
    inspector: Inspector,
    instance: String,
    leadership: crate::replicas::Leadership,
    metrics: StatusMetrics,
    proxies: HashMap<ProxyKey, Proxy>,
    meshes: HashMap<String, MeshInfo>,
    mtps: HashSet<(String, String)>,
    mesh_services: mesh_service::MeshServiceStatuses,
    protocols: protocol::ServiceProtocols,
    holders: holders::Holders,
    last_evict: tokio::time::Instant,
}

/// Runs the status task until `shutdown`.
pub async fn run(parts: StatusParts, inbox: StatusInbox, shutdown: Shutdown) {
    let StatusParts {
        resources,
        inspector,
        instance,
        start_revision,
        registry,
        leadership,
    } = parts;
    let mut rx = inbox.rx;
    let mut st = State {
        metrics: StatusMetrics::new(&registry),
        resources,
        inspector,
        instance,
        leadership,
        proxies: HashMap::new(),
        meshes: HashMap::new(),
        mtps: HashSet::new(),
        mesh_services: Default::default(),
        protocols: Default::default(),
        holders: Default::default(),
        last_evict: tokio::time::Instant::now(),
    };
    let mut after = start_revision;
    while let Err(e) = st.load().await {
        tracing::warn!(error = %e, "status: cannot read the store; retrying");
        tokio::select! {
            () = shutdown.wait() => return,
            () = tokio::time::sleep(FLUSH_EVERY) => {}
        }
    }
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut feed = st.resources.store().watch(after);
    loop {
        tokio::select! {
            () = shutdown.wait() => return,
            Some(ev) = rx.recv() => st.on_event(ev),
            next = feed.next() => match next {
                Some(Ok(change)) => {
                    after = change.revision;
                    st.on_change(change);
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "status: change feed interrupted; resuming");
                    if let Some(from) = meshlink_store::resync_revision(st.resources.store().as_ref(), &e).await {
                        match st.resync().await {
                            Ok(()) => after = from,
                            Err(e) => tracing::warn!(error = %e, "status: cannot re-read the store after falling behind the change feed; retrying"),
                        }
                    }
                    feed = st.resources.store().watch(after);
                }
                None => feed = st.resources.store().watch(after),
            },
            _ = tick.tick() => st.flush().await,
        }
    }
}

fn key_of_change(c: &Change) -> (Option<Kind>, String, String) {
    let k = &c.object.key;
    (k.kind.parse().ok(), k.mesh.clone(), k.name.clone())
}

/// Whether the Mesh is in `meshServices.mode: Exclusive`.
fn exclusive(spec: Option<&MeshSpec>) -> bool {
    spec.is_some_and(|s| s.mesh_services_mode() == MeshServicesMode::Exclusive)
}

fn mesh_info(spec: Option<&MeshSpec>) -> (bool, Option<String>) {
    let backend = spec
        .and_then(|s| s.enabled_backend())
        .map(|b| b.name.clone());
    (backend.is_some(), backend)
}

// === impl State ===

impl State {
    /// Reads every Mesh, Dataplane and MeshTrafficPermission once.
    async fn load(&mut self) -> Result<(), ResourceError> {
        let now = SystemTime::now();
        for m in self.resources.list(Kind::Mesh, None, None).await? {
            let (mtls, backend) = mesh_info(m.spec.as_mesh());
            self.protocols
                .set_exclusive(m.name(), exclusive(m.spec.as_mesh()));
            self.meshes.insert(
                m.name().to_owned(),
                MeshInfo {
                    mtls,
                    backend,
                    written: None,
                },
            );
        }
        // Page by page: with 10,000 Dataplanes a single list held every
        // row and decoded resource at once (about 100 MiB at start-up).
        let (instance, proxies, protocols, holders) = (
            &self.instance,
            &mut self.proxies,
            &mut self.protocols,
            &mut self.holders,
        );
        self.resources
            .for_each(Kind::Dataplane, None, |d| {
                let key = ProxyKey::new(d.mesh().unwrap_or_default(), d.name());
                let stored = d.status.details.as_dataplane();
                let mut p = Proxy::from_stored(stored, instance, now);
                if d.condition("Ready").is_none() {
                    p.dirty = true;
                }
                if let Some(spec) = d.spec.as_dataplane() {
                    protocols.upsert(&key, spec);
                    p.app.set_declared(spec);
                }
                protocols.stored(&key, d.condition(protocol::CONDITION));
                holders.stored(&key, d.condition(holders::DUPLICATE_HOLDER), instance);
                proxies.entry(key).or_insert(p);
            })
            .await?;
        for r in self
            .resources
            .list(Kind::MeshTrafficPermission, None, None)
            .await?
        {
            self.mtps
                .insert((r.mesh().unwrap_or_default().to_owned(), r.name().to_owned()));
        }
        for r in self.resources.list(Kind::MeshService, None, None).await? {
            self.mesh_services
                .mesh_service_seen(r.mesh().unwrap_or_default());
        }
        Ok(())
    }

    /// After this task fell behind the change feed's window (it was
    /// compacted): reads everything again, and has the next flush re-read
    /// every proxy's stored status (one deleted meanwhile is forgotten
    /// then, as after any write that finds it gone).
    async fn resync(&mut self) -> Result<(), ResourceError> {
        self.meshes.clear();
        self.mtps.clear();
        self.load().await?;
        for p in self.proxies.values_mut() {
            p.dirty = true;
            p.written = None;
        }
        Ok(())
    }

    fn on_event(&mut self, ev: Event) {
        let now = SystemTime::now();
        match ev {
            // Routers are no Dataplanes; their status comes from RouterStatus.
            Event::Stream(v) if v.key.is_router() => {}
            Event::Stream(v) => {
                let backend = self.meshes.get(&v.key.mesh).and_then(|m| m.backend.clone());
                let p = self.proxies.entry(v.key.clone()).or_default();
                let was_online = p.online;
                if p.apply_view(&v, backend.as_deref(), now) {
                    self.metrics.close("superseded");
                }
                if let Some(shown) = self.holders.on_view(&v, now) {
                    p.apply_issuance(&shown);
                }
                if p.online != was_online {
                    self.mesh_services.dataplane_changed(&v.key.mesh);
                }
                self.sync_expiry(&v.key);
            }
            Event::Issued(e) => {
                let key = ProxyKey::new(e.mesh.clone(), e.dataplane.clone());
                // While two processes hold the identity, the status keeps
                // the first one's certificate (holders.rs).
                if let Some(shown) = self.holders.on_issued(&key, &e, now) {
                    self.proxies
                        .entry(key.clone())
                        .or_default()
                        .apply_issuance(&shown);
                }
                self.sync_expiry(&key);
            }
            Event::App(e) => {
                app_reachable::on_event(&mut self.proxies, e);
            }
        }
    }

    /// Folds a Dataplane's stored status (written by any replica) into its
    /// proxy ([`observe`]).
    fn observe(&mut self, key: &ProxyKey, stored: &meshlink_api::spec::DataplaneStatus) {
        let Some(p) = self.proxies.get_mut(key) else {
            return;
        };
        if p.observe_stored(stored) {
            if p.connected_here() {
                // Its Ready may have said NoCertificate.
                p.dirty = true;
            }
            self.sync_expiry(key);
        }
    }

    fn sync_expiry(&self, key: &ProxyKey) {
        let not_after = self
            .proxies
            .get(key)
            .filter(|p| p.connected_here())
            .and_then(|p| p.cert.as_ref())
            .map(|c| c.not_after);
        self.metrics.expiry(&key.mesh, &key.name, not_after);
    }

    fn on_change(&mut self, c: Change) {
        let (kind, mesh, name) = key_of_change(&c);
        match kind {
            Some(Kind::MeshService) => self.mesh_services.mesh_service_seen(&mesh),
            Some(Kind::Dataplane) => self.mesh_services.dataplane_changed(&mesh),
            _ => {}
        }
        if kind == Some(Kind::Dataplane) {
            let key = ProxyKey::new(mesh.as_str(), name.as_str());
            if c.change_type == ChangeType::Deleted {
                self.protocols.remove(&key);
            } else if let Ok(r) = Resource::from_json_unvalidated(c.object.body.clone()) {
                if let Some(spec) = r.spec.as_dataplane() {
                    self.protocols.upsert(&key, spec);
                    app_reachable::spec_changed(&mut self.proxies, &key, spec);
                }
                if let Some(stored) = r.status.details.as_dataplane() {
                    self.observe(&key, stored);
                }
            }
        }
        match (kind, c.change_type) {
            (Some(Kind::Dataplane), ChangeType::Deleted) => {
                let key = ProxyKey::new(mesh, name);
                self.holders.remove(&key);
                self.proxies.remove(&key);
                self.inspector.forget(&key);
                self.metrics.expiry(&key.mesh, &key.name, None);
            }
            (Some(Kind::Dataplane), ChangeType::Created) => {
                let key = ProxyKey::new(mesh, name);
                self.proxies.entry(key).or_default().dirty = true;
            }
            (Some(Kind::Dataplane), ChangeType::Updated) => {
                // Someone else's write (spec apply, another control plane):
                // the next status write must read and merge again.
                if let Some(p) = self.proxies.get_mut(&ProxyKey::new(mesh, name))
                    && p.written.is_some_and(|(_, rev)| rev != c.revision)
                {
                    p.written = None;
                    // A proxy with a stream open here is re-asserted after
                    // anyone else's write (an unchanged status costs a
                    // read, no write), so a stale write of its connection
                    // fields never stands, and a stream standing by takes
                    // the connection back once the newer one elsewhere
                    // was written offline.
                    if p.stream_open_here() {
                        p.dirty = true;
                    }
                }
            }
            (Some(Kind::Mesh), ChangeType::Deleted) => {
                self.meshes.remove(&name);
                self.metrics.stalled(&name, None);
            }
            (Some(Kind::Mesh), _) => {
                let parsed = Resource::from_json_unvalidated(c.object.body).ok();
                let spec = parsed.as_ref().and_then(|r| r.spec.as_mesh());
                self.protocols.set_exclusive(&name, exclusive(spec));
                let (mtls, backend) = mesh_info(spec);
                let info = self.meshes.entry(name.clone()).or_default();
                let flipped = info.mtls != mtls;
                info.mtls = mtls;
                info.backend = backend;
                if flipped {
                    for (k, p) in &mut self.proxies {
                        if k.mesh == name {
                            p.dirty = true;
                        }
                    }
                }
            }
            (Some(Kind::MeshTrafficPermission), ChangeType::Deleted) => {
                self.mtps.remove(&(mesh, name));
            }
            (Some(Kind::MeshTrafficPermission), _) => {
                // Our own write comes back here too; the merge then finds
                // nothing to change and writes nothing.
                self.mtps.insert((mesh, name));
            }
            _ => {}
        }
    }

    /// Once a second: expiry and stalls from memory, metrics, then the
    /// writes.
    async fn flush(&mut self) {
        let now = SystemTime::now();
        for (key, shown) in self.holders.expire(now) {
            if let Some(p) = self.proxies.get_mut(&key) {
                p.apply_issuance(&shown);
            }
        }
        self.evaluate(now);
        self.write_dataplanes(now).await;
        self.write_meshes(now).await;
        self.write_mtps().await;
        self.write_mesh_services().await;
        self.write_protocols().await;
        self.holders
            .write(&self.resources, &self.instance, now)
            .await;
        if self.last_evict.elapsed() >= Duration::from_secs(60) {
            self.last_evict = tokio::time::Instant::now();
            let before = now
                .checked_sub(REPORT_GRACE)
                .unwrap_or(SystemTime::UNIX_EPOCH);
            self.inspector.evict_disconnected(before);
        }
        let dirty = self.proxies.values().filter(|p| p.dirty).count();
        self.metrics
            .sizes(self.proxies.len(), self.inspector.len(), dirty);
    }

    /// Marks proxies whose certificate expired dirty, and warns once per
    /// stalled certificate.
    fn evaluate(&mut self, now: SystemTime) {
        for (key, p) in &mut self.proxies {
            let mtls = self.meshes.get(&key.mesh).is_some_and(|m| m.mtls);
            if p.online
                && mtls
                && p.cert.as_ref().is_some_and(|c| c.not_after <= now)
                && p.written_reason != Some("CertificateExpired")
            {
                p.dirty = true;
            }
            // Logged by the replica holding the stream only.
            if p.stalled(mtls, now)
                && p.connected_here()
                && let Some(c) = &p.cert
                && p.warned_serial.as_ref() != Some(&c.serial)
            {
                tracing::warn!(mesh = %key.mesh, dataplane = %key.name, serial = %c.serial,
                    expires = %humantime::format_rfc3339_seconds(c.not_after),
                    "certificate rotation stalled: the proxy is past 80% of its certificate's lifetime and has not renewed");
                p.warned_serial = Some(c.serial.clone());
            }
        }
    }

    /// Writes the dirty Dataplanes' statuses: one multi-get and one batch
    /// per flush. A proxy whose status is what this task last wrote (same
    /// digest, and nobody wrote the Dataplane since) is skipped without a
    /// read.
    async fn write_dataplanes(&mut self, now: SystemTime) {
        let mut batch = Vec::new();
        for (key, p) in &mut self.proxies {
            if !p.dirty || p.disconnect_pending(now) {
                continue;
            }
            if batch.len() == MAX_WRITES_PER_FLUSH {
                break;
            }
            p.dirty = false;
            let mtls = self.meshes.get(&key.mesh).is_some_and(|m| m.mtls);
            let ready = p.ready_condition(mtls, now);
            p.written_reason = Some(p.ready(mtls, now).1);
            let status = p.status();
            let app = p.app.condition();
            let digest = app_reachable::digest(writer::digest(&status, &ready), app.as_ref());
            if p.written.is_some_and(|(d, _)| d == digest) {
                if std::mem::take(&mut p.pending_close) {
                    self.metrics.close("unchanged");
                }
                continue;
            }
            batch.push((
                digest,
                writer::DataplaneUpdate {
                    key: key.clone(),
                    status,
                    ready,
                    presence: p.presence(),
                    app,
                },
            ));
        }
        if batch.is_empty() {
            return;
        }
        let (digests, updates): (Vec<u64>, Vec<writer::DataplaneUpdate>) =
            batch.into_iter().unzip();
        let results = writer::merge_dataplanes(&self.resources, &updates, &self.instance).await;
        for ((u, digest), r) in updates.into_iter().zip(digests).zip(results) {
            let key = u.key;
            match r {
                Ok(merged) => {
                    if let Some(p) = self.proxies.get_mut(&key) {
                        if std::mem::take(&mut p.pending_close) {
                            self.metrics
                                .close(if merged.owner { "written" } else { "yielded" });
                        }
                        p.written = Some((digest, merged.revision));
                        if merged.owner {
                            p.generation = merged.generation;
                            p.standby = false;
                        } else if p.stream_open_here() {
                            // Another replica holds a newer stream: leave
                            // the connection to it while it lasts.
                            tracing::debug!(proxy = %key, "status: a newer stream of this proxy on another replica holds its connection; standing by");
                            p.standby = true;
                        } else if p.ours {
                            p.ours = false;
                        }
                    }
                }
                Err(StatusError::Resource(ResourceError::NotFound(_))) => {
                    // Deleted (the feed will say so too): forget it.
                    self.proxies.remove(&key);
                    self.inspector.forget(&key);
                    self.metrics.expiry(&key.mesh, &key.name, None);
                }
                Err(e) => {
                    if matches!(e, StatusError::Resource(ResourceError::Conflict(_))) {
                        tracing::debug!(proxy = %key, "status: Dataplane changed since it was read; merging again on the next flush");
                    } else {
                        tracing::warn!(proxy = %key, error = %e, "status: cannot write Dataplane status; retrying");
                    }
                    if let Some(p) = self.proxies.get_mut(&key) {
                        p.dirty = true;
                        p.written = None;
                    }
                }
            }
        }
    }

    async fn write_meshes(&mut self, now: SystemTime) {
        let mut stalled: HashMap<&str, BTreeSet<String>> = HashMap::new();
        for (key, p) in &self.proxies {
            let mtls = self.meshes.get(&key.mesh).is_some_and(|m| m.mtls);
            if p.stalled(mtls, now) {
                stalled
                    .entry(&key.mesh)
                    .or_default()
                    .insert(key.name.clone());
            }
        }
        let mut writes = Vec::new();
        for (name, info) in &self.meshes {
            let names: Vec<String> = stalled
                .get(name.as_str())
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default();
            self.metrics.stalled(name, Some(names.len()));
            if !self.leadership.is_leader() {
                continue;
            }
            if info.written.as_ref() != Some(&names) {
                writes.push((name.clone(), names));
            }
        }
        for (mesh, names) in writes {
            let c = writer::stalled_condition(&names);
            let r = writer::merge(&self.resources, Kind::Mesh, None, &mesh, |r| {
                r.set_condition(c.clone())
            })
            .await;
            match r {
                Ok(_) => {
                    if let Some(info) = self.meshes.get_mut(&mesh) {
                        info.written = Some(names);
                    }
                }
                Err(StatusError::Resource(ResourceError::NotFound(_))) => {
                    self.meshes.remove(&mesh);
                    self.metrics.stalled(&mesh, None);
                }
                Err(e) => {
                    tracing::warn!(%mesh, error = %e, "status: cannot write the Mesh's CertificateRotationStalled condition; retrying")
                }
            }
        }
    }

    /// Writes the Dataplanes' `ProtocolAgreed` conditions that changed:
    /// set while their service's inbounds disagree, removed once they
    /// agree. Merges only that condition.
    async fn write_protocols(&mut self) {
        let mut writes = 0;
        for key in self.protocols.take_work() {
            let want = self.protocols.condition(&key);
            let message = want.as_ref().map(|c| c.message.clone());
            if self.protocols.written(&key) == message.as_deref() {
                continue;
            }
            if writes == MAX_PROTOCOL_WRITES_PER_FLUSH {
                self.protocols.retry(key);
                continue;
            }
            writes += 1;
            let r = writer::merge(
                &self.resources,
                Kind::Dataplane,
                Some(&key.mesh),
                &key.name,
                |r| match &want {
                    Some(c) => r.set_condition(c.clone()),
                    None => r
                        .status
                        .conditions
                        .retain(|c| c.type_ != protocol::CONDITION),
                },
            )
            .await;
            match r {
                Ok(_) => self.protocols.wrote(&key, message),
                Err(StatusError::Resource(ResourceError::NotFound(_))) => {}
                Err(e) => {
                    tracing::warn!(proxy = %key, error = %e, "status: cannot write the Dataplane's ProtocolAgreed condition; retrying");
                    self.protocols.retry(key);
                }
            }
        }
    }

    async fn write_mtps(&mut self) {
        for (mesh, name) in std::mem::take(&mut self.mtps) {
            let r = writer::merge(
                &self.resources,
                Kind::MeshTrafficPermission,
                Some(&mesh),
                &name,
                |r| {
                    let c = writer::mtp_valid(r);
                    r.set_condition(c);
                },
            )
            .await;
            match r {
                Ok(_) | Err(StatusError::Resource(ResourceError::NotFound(_))) => {}
                Err(e) => {
                    tracing::warn!(%mesh, %name, error = %e, "status: cannot write MeshTrafficPermission Valid; retrying");
                    self.mtps.insert((mesh, name));
                }
            }
        }
    }
}

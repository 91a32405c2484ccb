//! The mesh CA controller: the only writer of `internal.MeshCAState`, and
//! the owner of rotation progress.
//!
//! One task per control plane. It
//! - keeps every mesh's CAs created (builtin: create-once; provided:
//!   validated, re-read when the Mesh or a Secret in its mesh changes) and
//!   its rotation record current, writing the record as a
//!   compare-and-swap on its revision (re-read and recompute on conflict),
//!   so control planes sharing PostgreSQL converge on one state and never
//!   lose an update;
//! - answers issuers' reconcile requests ([`super::CaHandle::load`]);
//! - tracks, in a [`RotationTracker`], which dataplanes hold an unexpired
//!   certificate from which CA. Its inputs: issuance events from this
//!   control plane (the handle's channel), `internal.IssuedCert` changes on
//!   the change feed (other control planes), and one list of the stored
//!   records at start-up. It never re-lists them;
//! - persists this control plane's issuances as `internal.IssuedCert`,
//!   coalesced per dataplane and written once a second by a writer task, so
//!   rotation progress survives a restart and reaches other control planes;
//! - ends a rotation when no dataplane holds an unexpired certificate from
//!   the previous CA and [`ROTATION_SETTLE`] has passed (issuances another
//!   control plane has not flushed yet still count);
//! - writes a Mesh's status (`Ready`, `CARotation`) at most once a second.
//!
//! It never regenerates an existing CA.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use meshlink_api::{Condition, ConditionStatus, Kind};
use meshlink_identity::{CaRoot, WallClock};
use meshlink_runtime::Shutdown;
use meshlink_store::{BatchWrite, ChangeType, ListQuery, ObjectKey, Store};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::ca_handle::{CaHandle, Issuance, Reconciled, Request};
use super::mesh_ca::{self, CaState, IssuedRecord, MeshCaError};
use super::rotation::RotationTracker;
use super::secrets::{ISSUED_CERT, MESH_CA_STATE};
use crate::resources::{ResourceError, ResourceService};

/// How often progress is evaluated, issuances are flushed and a Mesh status
/// may be written.
pub const TICK: Duration = Duration::from_secs(1);
/// The shortest a rotation lasts.
pub const ROTATION_SETTLE: Duration = Duration::from_secs(3);
/// Conflicting state writes tolerated in one reconcile before giving up
/// (the next change or request retries).
const CAS_ATTEMPTS: usize = 8;

/// What the controller knows about one mesh.
#[derive(Default)]
struct MeshEntry {
    /// The stored state as last read or written.
    state: Option<CaState>,
    /// The Mesh revision of this controller's last status write (its own
    /// status write comes back on the feed and needs no reconcile).
    status_revision: Option<u64>,
    /// The `Ready` condition of the last reconcile.
    ready: Option<Condition>,
    /// The last status write.
    written: Option<Instant>,
    /// The status needs a refresh (progress changed, or a write was deferred).
    dirty: bool,
}

/// The controller task; build with [`new`], then [`Controller::run`].
pub struct Controller {
    resources: ResourceService,
    store: Arc<dyn Store>,
    clock: WallClock,
    rx: mpsc::UnboundedReceiver<Request>,
    tracker: RotationTracker,
    meshes: HashMap<String, MeshEntry>,
    pending: BTreeMap<(String, String), IssuedRecord>,
    /// Only the leader ends a rotation (a singleton job, DESIGN §issue 11).
    leadership: crate::replicas::Leadership,
}

/// A controller and the handle issuers use to reach it. `clock` is the
/// control plane's one wall clock for certificate times.
/// Only the replica that holds `leadership` ends rotations.
pub fn new(
    resources: ResourceService,
    clock: WallClock,
    leadership: crate::replicas::Leadership,
) -> (CaHandle, Controller) {
    let (tx, rx) = mpsc::unbounded_channel();
    let store = resources.store().clone();
    let c = Controller {
        resources,
        store,
        clock,
        rx,
        tracker: RotationTracker::default(),
        meshes: HashMap::new(),
        pending: BTreeMap::new(),
        leadership,
    };
    (CaHandle::new(tx, clock), c)
}

fn cond(t: &str, ok: bool, reason: &str, message: String) -> Condition {
    let s = if ok {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    Condition::now(t, s, reason, message)
}

impl Controller {
    /// Runs until shutdown; then flushes the issuances not yet stored.
    pub async fn run(mut self, shutdown: Shutdown) {
        let mut after = loop {
            match self.store.current_revision().await {
                Ok(r) => break r,
                Err(e) => {
                    tracing::warn!(error = %e, "mesh CA controller: store unavailable; retrying");
                    tokio::select! {
                        _ = shutdown.wait() => return,
                        _ = tokio::time::sleep(TICK) => {}
                    }
                }
            }
        };
        let (writer_tx, writer_rx) = mpsc::unbounded_channel();
        let mut writer = JoinSet::new();
        writer.spawn(write_issued(self.store.clone(), writer_rx));
        self.seed().await;
        self.reconcile_all().await;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        'outer: loop {
            let mut feed = self.store.watch(after);
            loop {
                tokio::select! {
                    _ = shutdown.wait() => break 'outer,
                    Some(req) = self.rx.recv() => self.handle(req).await,
                    _ = tick.tick() => {
                        if !self.pending.is_empty() {
                            let batch = std::mem::take(&mut self.pending);
                            let _ = writer_tx.send(batch);
                        }
                        self.on_tick().await;
                    }
                    next = feed.next() => match next {
                        Some(Ok(change)) => {
                            after = change.revision;
                            self.on_change(change).await;
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "mesh CA controller: change feed interrupted; resuming");
                            if let Some(from) = meshlink_store::resync_revision(self.store.as_ref(), &e).await {
                                // Behind the feed's window: read it all again.
                                after = from;
                                self.resync().await;
                            }
                            break;
                        }
                        None => break,
                    }
                }
            }
            tokio::select! {
                _ = shutdown.wait() => break 'outer,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
        if !self.pending.is_empty() {
            let _ = writer_tx.send(std::mem::take(&mut self.pending));
        }
        drop(writer_tx);
        let _ = tokio::time::timeout(Duration::from_secs(5), writer.join_next()).await;
    }

    /// Seeds the tracker from the stored issuance records: once, at start.
    async fn seed(&mut self) {
        // A page at a time: there is one record per dataplane.
        let mut q = ListQuery {
            kind: ISSUED_CERT.to_string(),
            limit: Some(crate::resources::WALK_PAGE),
            ..ListQuery::default()
        };
        loop {
            match self.store.list_page(&q).await {
                Ok(page) => {
                    for o in page.objects {
                        if let Ok(rec) = serde_json::from_value::<IssuedRecord>(o.body) {
                            self.tracker.record(&o.key.mesh, &o.key.name, &rec);
                        }
                    }
                    match page.next {
                        Some(next) => q.after = Some(next),
                        None => return,
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "mesh CA controller: cannot read issued certificates; rotation progress starts incomplete");
                    return;
                }
            }
        }
    }

    /// After falling behind the change feed's window (it was compacted):
    /// forgets the meshes deleted meanwhile, re-reads the issuance records
    /// and reconciles every mesh, as at start.
    async fn resync(&mut self) {
        if let Ok(ms) = self.resources.list(Kind::Mesh, None, None).await {
            let live: std::collections::HashSet<&str> = ms.iter().map(|m| m.name()).collect();
            let gone: Vec<String> = self
                .meshes
                .keys()
                .filter(|m| !live.contains(m.as_str()))
                .cloned()
                .collect();
            for m in gone {
                self.tracker.remove_mesh(&m);
                self.meshes.remove(&m);
            }
        }
        self.seed().await;
        self.reconcile_all().await;
    }

    async fn reconcile_all(&mut self) {
        let names: Vec<String> = match self.resources.list(Kind::Mesh, None, None).await {
            Ok(ms) => ms.iter().map(|m| m.name().to_string()).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "mesh CA controller: cannot list meshes");
                return;
            }
        };
        for m in names {
            self.reconcile(&m).await;
        }
    }

    async fn handle(&mut self, first: Request) {
        // Drain what is queued, so a burst of requests for one mesh costs
        // one reconcile.
        let mut waiters: BTreeMap<String, Vec<oneshot::Sender<Reconciled>>> = BTreeMap::new();
        let mut next = Some(first);
        let mut n = 0;
        while let Some(req) = next.take() {
            match req {
                Request::Reconcile { mesh, done } => waiters.entry(mesh).or_default().push(done),
                Request::Issued(i) => self.issued(i),
                Request::Progress { mesh, reply } => {
                    let _ = reply.send(self.progress(&mesh).map(|(n, _)| n));
                }
            }
            n += 1;
            if n < 4096 {
                next = self.rx.try_recv().ok();
            }
        }
        for (mesh, done) in waiters {
            let outcome = self.reconcile(&mesh).await;
            for d in done {
                let _ = d.send(outcome.clone());
            }
        }
    }

    fn issued(&mut self, i: Issuance) {
        if self.tracker.record(&i.mesh, &i.dataplane, &i.record) {
            self.mark_dirty(&i.mesh);
        }
        self.pending.insert((i.mesh, i.dataplane), i.record);
    }

    fn mark_dirty(&mut self, mesh: &str) {
        if let Some(e) = self.meshes.get_mut(mesh)
            && e.state.as_ref().is_some_and(|s| s.previous.is_some())
        {
            e.dirty = true;
        }
    }

    /// Proxies on the previous CA and their earliest expiry, if rotating.
    fn progress(&mut self, mesh: &str) -> Option<(usize, Option<u64>)> {
        let prev = self.meshes.get(mesh)?.state.as_ref()?.previous.as_ref()?;
        let fp = prev.fingerprint.clone();
        let now = mesh_ca::unix_seconds(self.clock.now());
        Some(self.tracker.holders(mesh, &fp, now))
    }

    async fn on_change(&mut self, change: meshlink_store::Change) {
        let key = &change.object.key;
        let deleted = change.change_type == ChangeType::Deleted;
        match key.kind.as_str() {
            "Mesh" if deleted => {
                self.tracker.remove_mesh(&key.name);
                self.meshes.remove(&key.name);
            }
            "Mesh" => {
                let own_status = self
                    .meshes
                    .get(&key.name)
                    .is_some_and(|e| e.status_revision == Some(change.revision));
                if !own_status {
                    let name = key.name.clone();
                    self.reconcile(&name).await;
                }
            }
            MESH_CA_STATE if !deleted => {
                let stored = serde_json::from_value::<CaState>(change.object.body.clone()).ok();
                let ours = self.meshes.get(&key.mesh).and_then(|e| e.state.as_ref());
                if stored.is_none() || stored.as_ref() != ours {
                    let mesh = key.mesh.clone();
                    self.reconcile(&mesh).await;
                }
            }
            ISSUED_CERT if !deleted => {
                if let Ok(rec) = serde_json::from_value::<IssuedRecord>(change.object.body.clone())
                    && self.tracker.record(&key.mesh, &key.name, &rec)
                {
                    let mesh = key.mesh.clone();
                    self.mark_dirty(&mesh);
                }
            }
            // A Secret in a mesh may hold that mesh's provided CA
            // (`secret:`): re-read it, as a changed inline CA is.
            "Secret" if !key.mesh.is_empty() => {
                let mesh = key.mesh.clone();
                self.reconcile(&mesh).await;
            }
            "Dataplane" if deleted && self.tracker.remove(&key.mesh, &key.name) => {
                let mesh = key.mesh.clone();
                self.mark_dirty(&mesh);
            }
            _ => {}
        }
    }

    /// Every second: end rotations nobody is left on, and refresh the
    /// status of meshes whose progress changed.
    async fn on_tick(&mut self) {
        let now = mesh_ca::unix_seconds(self.clock.now());
        let rotating: Vec<String> = self
            .meshes
            .iter()
            .filter(|(_, e)| e.dirty || e.state.as_ref().is_some_and(|s| s.previous.is_some()))
            .map(|(m, _)| m.clone())
            .collect();
        for mesh in rotating {
            let Some(entry) = self.meshes.get(&mesh) else {
                continue;
            };
            let started = entry
                .state
                .as_ref()
                .and_then(|s| s.rotation_started)
                .unwrap_or(0);
            let settled = now >= started + ROTATION_SETTLE.as_secs();
            match self.progress(&mesh) {
                Some((0, _)) if settled => {
                    self.reconcile(&mesh).await;
                }
                _ => {
                    if self.meshes.get(&mesh).is_some_and(|e| e.dirty) {
                        self.write_status(&mesh).await;
                    }
                }
            }
        }
    }

    /// Ensures the mesh's CAs, moves its state on (CAS) and writes status.
    async fn reconcile(&mut self, name: &str) -> Reconciled {
        let mesh = match self.resources.get(Kind::Mesh, None, name).await {
            Ok(m) => m,
            Err(ResourceError::NotFound(_)) => {
                self.meshes.remove(name);
                return Reconciled::Done;
            }
            Err(e) => return Reconciled::Failed(e.to_string()),
        };
        let store = self.store.clone();
        let (outcome, ready) = match mesh_ca::ensure_cas(store.as_ref(), &mesh, self.clock.now())
            .await
        {
            Ok((ca, backend)) => match self.advance(&mesh, &backend, &CaRoot::of(&ca)).await {
                Ok(()) => {
                    let fp = &ca.fingerprint()[..16];
                    let lifetime = mesh
                        .spec
                        .as_mesh()
                        .map(|s| s.dp_cert_lifetime_as_written())
                        .unwrap_or_default();
                    let ready = cond(
                        "Ready",
                        true,
                        "CAReady",
                        format!(
                            "mTLS backend {backend} ready; CA fingerprint {fp}…; workload certificates live {lifetime}"
                        ),
                    );
                    (Reconciled::Done, ready)
                }
                Err(e) => return Reconciled::Failed(e),
            },
            Err(MeshCaError::MtlsDisabled(_)) => {
                let ready = cond(
                    "Ready",
                    true,
                    "MTLSDisabled",
                    "mTLS is off: traffic is neither encrypted nor authorized".into(),
                );
                (Reconciled::MtlsDisabled, ready)
            }
            Err(MeshCaError::Invalid {
                backend, reason, ..
            }) => {
                let msg = format!("mesh {name:?} backend {backend:?}: {reason}");
                let ready = cond("Ready", false, "CAInvalid", msg);
                (Reconciled::Invalid { backend, reason }, ready)
            }
            Err(e) => {
                tracing::warn!(mesh = name, error = %e, "mesh CA controller: store error");
                return Reconciled::Failed(e.to_string());
            }
        };
        let entry = self.meshes.entry(name.to_string()).or_default();
        entry.ready = Some(ready);
        if !matches!(outcome, Reconciled::Done) {
            entry.state = None;
        }
        self.write_status(name).await;
        outcome
    }

    /// Moves the stored state of `mesh` on to enable `root`, as a CAS.
    async fn advance(
        &mut self,
        resource: &meshlink_api::Resource,
        backend: &str,
        root: &CaRoot,
    ) -> Result<(), String> {
        let mesh = resource.name();
        let mesh_revision = resource
            .resource_version()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let store = self.store.clone();
        for _ in 0..CAS_ATTEMPTS {
            let stored = mesh_ca::read_state(store.as_ref(), mesh)
                .await
                .map_err(|e| e.to_string())?;
            let now = mesh_ca::unix_seconds(self.clock.now());
            let on_previous = match stored.as_ref().and_then(|(s, _)| s.previous.as_ref()) {
                // Ending a rotation is the leader's job: for any other
                // replica someone is always left on the previous CA.
                Some(_) if !self.leadership.is_leader() => usize::MAX,
                Some(prev) => self.tracker.holders(mesh, &prev.fingerprint, now).0,
                None => 0,
            };
            let current = stored.as_ref().map(|(s, _)| s);
            let seen = mesh_ca::Observed {
                backend,
                root,
                mesh_revision,
                on_previous,
                now,
            };
            let next = mesh_ca::next_state(current, seen, ROTATION_SETTLE);
            let state = match next {
                None => current.cloned(),
                Some(next) => {
                    let expected = stored.as_ref().map(|(_, rev)| *rev);
                    if !mesh_ca::write_state(store.as_ref(), mesh, &next, expected)
                        .await
                        .map_err(|e| e.to_string())?
                    {
                        continue;
                    }
                    if next.previous.is_none() && current.is_some_and(|c| c.previous.is_some()) {
                        tracing::info!(
                            mesh,
                            backend,
                            "CA rotation complete: no dataplane holds a certificate from the previous CA"
                        );
                    }
                    Some(next)
                }
            };
            let entry = self.meshes.entry(mesh.to_string()).or_default();
            if entry.state != state {
                entry.dirty = true;
            }
            entry.state = state;
            return Ok(());
        }
        Err(format!(
            "the CA state of mesh {mesh:?} kept changing under {CAS_ATTEMPTS} attempts; retrying on the next change"
        ))
    }

    /// Writes the mesh's conditions, at most once per [`TICK`]; a write due
    /// earlier is deferred to the next tick.
    async fn write_status(&mut self, name: &str) {
        let progress = self.progress(name);
        let Some(entry) = self.meshes.get_mut(name) else {
            return;
        };
        if entry.written.is_some_and(|w| w.elapsed() < TICK) {
            entry.dirty = true;
            return;
        }
        entry.dirty = false;
        let Some(ready) = entry.ready.clone() else {
            return;
        };
        let rotation = match (&entry.state, progress) {
            (Some(s), Some((n, _))) if s.previous.is_some() => {
                let old = &s.previous.as_ref().expect("rotating").fingerprint;
                cond(
                    "CARotation",
                    true,
                    "Rotating",
                    format!(
                        "rotating to {}: {n} dataplane(s) still hold certificates from CA {}…; the trust bundle carries both roots until they renew or expire",
                        s.enabled_backend,
                        &old[..16.min(old.len())]
                    ),
                )
            }
            (Some(s), _) => cond(
                "CARotation",
                false,
                "Stable",
                format!("trust bundle holds the {} CA only", s.enabled_backend),
            ),
            (None, _) if ready.reason == "MTLSDisabled" => {
                cond("CARotation", false, "Stable", "no CA in use".into())
            }
            (None, _) => cond("CARotation", false, "Stable", "no usable CA".into()),
        };
        let mesh = match self.resources.get(Kind::Mesh, None, name).await {
            Ok(m) => m,
            Err(_) => return,
        };
        let mut next = mesh.clone();
        next.set_condition(ready);
        next.set_condition(rotation);
        if next.status == mesh.status {
            return;
        }
        if let Some(e) = self.meshes.get_mut(name) {
            e.written = Some(Instant::now());
        }
        let expected = mesh.resource_version().and_then(|v| v.parse().ok());
        match self
            .resources
            .set_status(Kind::Mesh, None, mesh.name(), next.status, expected)
            .await
        {
            Ok(r) => {
                if let Some(e) = self.meshes.get_mut(name) {
                    e.status_revision = r.resource_version().and_then(|v| v.parse().ok());
                }
            }
            Err(ResourceError::NotFound(_)) => {}
            Err(ResourceError::Conflict(_)) => {
                if let Some(e) = self.meshes.get_mut(name) {
                    e.dirty = true;
                }
            }
            Err(e) => {
                tracing::warn!(mesh = name, error = %e, "mesh CA controller: cannot write status")
            }
        }
    }
}

/// Issuance records per store transaction.
const ISSUED_PER_BATCH: usize = 1000;

/// Stores batches of issuance records: one record per dataplane per batch,
/// all of a batch in one store transaction (`Store::write_batch`, a `Put`
/// each: the latest issuance wins).
async fn write_issued(
    store: Arc<dyn Store>,
    mut rx: mpsc::UnboundedReceiver<BTreeMap<(String, String), IssuedRecord>>,
) {
    while let Some(mut batch) = rx.recv().await {
        // Merge batches that queued up while the last one was written.
        while let Ok(more) = rx.try_recv() {
            batch.extend(more);
        }
        let writes: Vec<BatchWrite> = batch
            .into_iter()
            .map(|((mesh, dp), rec)| BatchWrite::Put {
                key: ObjectKey::new(ISSUED_CERT, &mesh, &dp),
                labels: BTreeMap::new(),
                body: serde_json::to_value(&rec).expect("issued records serialize"),
            })
            .collect();
        for chunk in writes.chunks(ISSUED_PER_BATCH) {
            match store.write_batch(chunk).await {
                Ok(results) => {
                    for (w, r) in chunk.iter().zip(results) {
                        if let Err(e) = r {
                            tracing::warn!(record = %w.key(), error = %e, "cannot store issued certificate record");
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(records = chunk.len(), error = %e, "cannot store issued certificate records");
                }
            }
        }
    }
}

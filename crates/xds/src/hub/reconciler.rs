//! The hub's task: handles events, patches mesh caches, recomputes the
//! affected proxies after a debounce, issues identities, and evicts state
//! of proxies and meshes that are gone.
//!
//! Owns every map the hub keeps (see the `hub` module doc). It must never
//! publish without the owner id recorded at connect time (I1), nor hold a
//! lock across an await (there are none: the task owns its state).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use meshlink_identity::renewal::MAX_JITTER;
use meshlink_identity::{
    WallClock, lowered_lifetime_delay, outlives_lifetime, random_jitter, renewal_time_from,
};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::patch::{Affected, MeshCtx};
use super::{
    DEBOUNCE, EVICT_AFTER, Event, HubMetrics, HubStats, IdentityInfo, MAX_DELAY, MeshSource,
    MeshTrust, RESYNC_EVERY,
};
use crate::ads::ProxyState;
use crate::owner::{OwnerId, OwnerRegistry, ProxyKey};
use crate::translate::{
    ClientKind, ENDPOINT_TYPE, EncodedSecrets, ProxyContext, SecretsInput, Snapshot, TypeSet,
    Versioned, service_load_assignment, translate_shared,
};

/// Events handled back to back before the loop looks at its timers again.
const MAX_BATCH: usize = 100_000;

/// How long to wait before retrying a mesh whose source call failed.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

struct Entry {
    owner: OwnerId,
    client: ClientKind,
    /// The client takes the identity policy Secret.
    identity_policy: bool,
    last: Option<Arc<ProxyState>>,
}

/// A proxy's identity as the hub keeps it: the public facts and the SDS
/// Secret encoded once per issuance (the PEM strings are not kept twice).
struct CachedIdentity {
    info: Arc<IdentityInfo>,
    renew_at: SystemTime,
    /// The identity Secret, encoded once per issuance.
    secret: (String, Arc<Versioned>),
}

/// What a proxy's Envoy identity must be: its service, SPIFFE ID, issuing
/// CA and (with mTLS on) the mesh's current certificate lifetime.
struct Wanted<'a> {
    service: &'a str,
    spiffe_id: &'a str,
    ca_fingerprint: &'a str,
    lifetime: Option<std::time::Duration>,
}

/// Load-assignment sets patched in one flush, by the old set's address:
/// the old set (held, so the address cannot be reused while it keys the
/// map) and the patched set.
type PatchedSets = HashMap<usize, (Arc<TypeSet>, Arc<TypeSet>)>;

/// What a mesh is waiting for at the next flush.
struct Pending {
    since: Instant,
    affected: Affected,
    trust: bool,
    relist: bool,
}

pub(super) struct Reconciler<S> {
    source: Arc<S>,
    registry: OwnerRegistry<ProxyState>,
    clock: WallClock,
    metrics: HubMetrics,
    /// mesh → proxy name → entry.
    proxies: HashMap<String, HashMap<String, Entry>>,
    identities: HashMap<ProxyKey, CachedIdentity>,
    /// Disconnected proxies whose identity is kept until `EVICT_AFTER`.
    gone: HashMap<ProxyKey, Instant>,
    meshes: HashMap<String, MeshCtx>,
    pending: HashMap<String, Pending>,
    deadline: Option<Instant>,
}

impl<S: MeshSource> Reconciler<S> {
    pub(super) fn new(
        source: Arc<S>,
        registry: OwnerRegistry<ProxyState>,
        clock: WallClock,
        metrics: HubMetrics,
    ) -> Self {
        Self {
            source,
            registry,
            clock,
            metrics,
            proxies: HashMap::new(),
            identities: HashMap::new(),
            gone: HashMap::new(),
            meshes: HashMap::new(),
            pending: HashMap::new(),
            deadline: None,
        }
    }

    pub(super) async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Event>,
        cancel: CancellationToken,
    ) {
        let mut resync = tokio::time::interval_at(Instant::now() + RESYNC_EVERY, RESYNC_EVERY);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let sweep_every = EVICT_AFTER / 4;
        let mut sweep = tokio::time::interval_at(Instant::now() + sweep_every, sweep_every);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                ev = rx.recv() => match ev {
                    Some(ev) => {
                        self.handle(ev).await;
                        // Coalesce a burst (a bulk apply queues one event per
                        // write) before the debounce deadline can fire.
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
                    self.relist_all(Instant::now());
                    self.flush().await;
                }
                _ = sweep.tick() => self.evict(Instant::now()),
            }
        }
    }

    async fn handle(&mut self, ev: Event) {
        match ev {
            Event::Connected {
                key,
                owner,
                client,
                identity_policy,
            } => self.connect(key, owner, client, identity_policy).await,
            Event::Disconnected { key, owner } => self.disconnect(&key, owner),
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
            Event::Changed { mesh, update, at } => {
                let update = *update;
                if let super::Update::Deleted(r) = &update
                    && r.spec.as_dataplane().is_some()
                {
                    // Its private key must not outlive the Dataplane.
                    let key = ProxyKey::new(mesh.clone(), r.name());
                    self.identities.remove(&key);
                    self.gone.remove(&key);
                }
                let mesh_deleted =
                    matches!(&update, super::Update::Deleted(r) if r.spec.as_mesh().is_some());
                let Some(ctx) = self.meshes.get_mut(&mesh) else {
                    return; // nobody connected: loaded on first connect
                };
                let mut relist = false;
                let affected = ctx.apply(update, &mut relist);
                if mesh_deleted && ctx.connected() == 0 {
                    self.meshes.remove(&mesh);
                    self.pending.remove(&mesh);
                    return;
                }
                self.schedule(mesh, at, affected, false, relist, None);
            }
            Event::TrustChanged { mesh, at } => {
                if self.meshes.contains_key(&mesh) {
                    self.schedule(mesh, at, Affected::default(), true, false, None);
                }
            }
            Event::Relist {
                mesh: Some(mesh),
                at,
            } => {
                if self.meshes.contains_key(&mesh) {
                    self.schedule(mesh, at, Affected::default(), true, true, None);
                }
            }
            Event::Relist { mesh: None, at } => self.relist_all(at),
            Event::Sync { resync, done } => {
                if resync {
                    self.relist_all(Instant::now());
                }
                if !self.pending.is_empty() {
                    self.flush().await;
                }
                let _ = done.send(());
            }
            Event::Stats { reply } => {
                let _ = reply.send(self.stats());
            }
        }
    }

    fn stats(&self) -> HubStats {
        HubStats {
            proxies: self.proxies.values().map(HashMap::len).sum(),
            identities: self.identities.len(),
            meshes: self.meshes.len(),
            disconnected: self.gone.len(),
            recomputed: self.metrics.recomputed(),
        }
    }

    async fn connect(
        &mut self,
        key: ProxyKey,
        owner: OwnerId,
        client: ClientKind,
        identity_policy: bool,
    ) {
        if self.registry.owner(&key) != Some(owner) {
            tracing::debug!(proxy = %key, %owner, "connect from a stream that was taken over; ignored");
            return;
        }
        let entry = Entry {
            owner,
            client,
            identity_policy: identity_policy && client == ClientKind::MeshlinkProxy,
            last: None,
        };
        self.proxies
            .entry(key.mesh.clone())
            .or_default()
            .insert(key.name.clone(), entry);
        self.gone.remove(&key);
        if !self.meshes.contains_key(&key.mesh) {
            self.meshes.insert(key.mesh.clone(), MeshCtx::default());
            let now = Instant::now();
            if self.relist(&key.mesh).await.is_none() {
                self.schedule(
                    key.mesh.clone(),
                    now,
                    Affected::all(),
                    true,
                    true,
                    Some(now + RETRY_AFTER),
                );
            }
        }
        if let Some(ctx) = self.meshes.get_mut(&key.mesh) {
            ctx.index(&key.name);
        }
        self.recompute(&key, Instant::now(), false).await;
    }

    fn disconnect(&mut self, key: &ProxyKey, owner: OwnerId) {
        let Some(mesh) = self.proxies.get_mut(&key.mesh) else {
            return;
        };
        if !mesh.get(&key.name).is_some_and(|e| e.owner == owner) {
            return;
        }
        mesh.remove(&key.name);
        if mesh.is_empty() {
            self.proxies.remove(&key.mesh);
        }
        let now = Instant::now();
        if let Some(ctx) = self.meshes.get_mut(&key.mesh) {
            ctx.unindex(&key.name, now);
        }
        if self.identities.contains_key(key) {
            self.gone.insert(key.clone(), now);
        }
    }

    /// Records work for `mesh` at the next flush, no later than `deadline`
    /// (default: the debounce).
    fn schedule(
        &mut self,
        mesh: String,
        at: Instant,
        affected: Affected,
        trust: bool,
        relist: bool,
        deadline: Option<Instant>,
    ) {
        if affected.is_empty() && !trust && !relist {
            return;
        }
        let p = self.pending.entry(mesh).or_insert(Pending {
            since: at,
            affected: Affected::default(),
            trust: false,
            relist: false,
        });
        p.affected.merge(affected);
        p.trust |= trust;
        p.relist |= relist;
        let oldest = self.pending.values().map(|p| p.since).min().unwrap_or(at);
        let next = deadline.unwrap_or_else(|| (Instant::now() + DEBOUNCE).min(oldest + MAX_DELAY));
        self.deadline = Some(self.deadline.map_or(next, |d| d.min(next)));
    }

    fn relist_all(&mut self, at: Instant) {
        let meshes: Vec<String> = self.meshes.keys().cloned().collect();
        for mesh in meshes {
            self.schedule(mesh, at, Affected::default(), true, true, None);
        }
    }

    /// Recomputes the proxies every pending change affects.
    async fn flush(&mut self) {
        self.deadline = None;
        let pending: Vec<(String, Pending)> = self.pending.drain().collect();
        for (mesh, mut p) in pending {
            if !self.meshes.contains_key(&mesh) {
                continue;
            }
            if p.relist {
                match self.relist(&mesh).await {
                    Some(a) => p.affected.merge(a),
                    None => {
                        let retry = Some(Instant::now() + RETRY_AFTER);
                        self.schedule(mesh, p.since, p.affected, true, true, retry);
                        continue;
                    }
                }
            } else if p.trust {
                match self.reload_trust(&mesh).await {
                    Some(a) => p.affected.merge(a),
                    None => {
                        let retry = Some(Instant::now() + RETRY_AFTER);
                        self.schedule(mesh, p.since, p.affected, true, false, retry);
                        continue;
                    }
                }
            }
            let connected: Vec<String> = match self.proxies.get(&mesh) {
                Some(m) if p.affected.all => m.keys().cloned().collect(),
                Some(m) => p
                    .affected
                    .names
                    .iter()
                    .filter(|n| m.contains_key(*n))
                    .cloned()
                    .collect(),
                None => Vec::new(),
            };
            let patch: Vec<String> = match (self.proxies.get(&mesh), self.meshes.get(&mesh)) {
                (Some(m), Some(ctx)) if !p.affected.all => {
                    let mut names: Vec<String> = p
                        .affected
                        .services
                        .iter()
                        .flat_map(|s| ctx.referencing(s))
                        .filter(|n| m.contains_key(*n) && !p.affected.names.contains(*n))
                        .cloned()
                        .collect();
                    names.sort_unstable();
                    names.dedup();
                    names
                }
                _ => Vec::new(),
            };
            for name in connected {
                let key = ProxyKey::new(mesh.clone(), name);
                self.recompute(&key, p.since, false).await;
            }
            // Proxies that held the same (interned) load-assignment set get
            // the same patched set: it is built once per distinct set.
            let mut patched = PatchedSets::new();
            for name in patch {
                let key = ProxyKey::new(mesh.clone(), name);
                if !self.patch_endpoints(&key, &p.affected.services, p.since, &mut patched) {
                    self.recompute(&key, p.since, false).await;
                }
            }
        }
    }

    /// Replaces, in `key`'s last published snapshot, the load assignment
    /// of each of `services` it references, sharing everything else: the
    /// proxy is not translated again, and its stream compares only the
    /// endpoint type. Returns `false` (the caller then recomputes) when
    /// nothing was published yet, or the proxy's identity is due.
    fn patch_endpoints(
        &mut self,
        key: &ProxyKey,
        services: &std::collections::BTreeSet<String>,
        changed_at: Instant,
        patched: &mut PatchedSets,
    ) -> bool {
        let Some(entry) = self.proxies.get(&key.mesh).and_then(|m| m.get(&key.name)) else {
            return true;
        };
        let (owner, Some(last)) = (entry.owner, entry.last.clone()) else {
            return false;
        };
        if entry.client == ClientKind::Envoy
            && let Some(c) = self.identities.get(key)
            && self.clock.now() >= c.renew_at
        {
            return false;
        }
        let Some(ctx) = self.meshes.get_mut(&key.mesh) else {
            return false;
        };
        let Some(view) = ctx.view.as_ref() else {
            return false;
        };
        self.metrics.inc_recomputed();
        self.metrics.inc_patched();
        let old_set = last.snapshot.set(ENDPOINT_TYPE).cloned();
        if let Some(old) = &old_set
            && let Some((_, new)) = patched.get(&Arc::as_ptr(old).addr())
        {
            // Another proxy held this very set: same services, same patch.
            if Arc::ptr_eq(old, new) {
                return true;
            }
            let snapshot = last.snapshot.with_set(ENDPOINT_TYPE, new.clone());
            self.publish_patched(key, owner, &last, snapshot, changed_at);
            return true;
        }
        let mut snapshot = last.snapshot.clone();
        for service in services {
            if !ctx.references(service, &key.name) {
                continue;
            }
            let name = crate::translate::names::service_cluster(service);
            let Some(old) = snapshot.resources(ENDPOINT_TYPE).get(&name) else {
                return false;
            };
            let cla = service_load_assignment(view, &mut ctx.memo, service);
            if old.version != cla.version {
                snapshot = snapshot.with_resource(&name, cla);
            }
        }
        if let Some(old) = old_set {
            let new = if last.snapshot.same_versions(&snapshot) {
                old.clone()
            } else {
                ctx.endpoint_sets.intern(&mut snapshot, ENDPOINT_TYPE);
                snapshot
                    .set(ENDPOINT_TYPE)
                    .cloned()
                    .unwrap_or_else(|| old.clone())
            };
            patched.insert(Arc::as_ptr(&old).addr(), (old, new));
        }
        if last.snapshot.same_versions(&snapshot) {
            return true;
        }
        self.publish_patched(key, owner, &last, snapshot, changed_at);
        true
    }

    /// Publishes `snapshot`, an endpoint patch of `last`, with `last`'s
    /// identity.
    fn publish_patched(
        &mut self,
        key: &ProxyKey,
        owner: OwnerId,
        last: &ProxyState,
        snapshot: Snapshot,
        changed_at: Instant,
    ) {
        let state = Arc::new(ProxyState {
            snapshot,
            identity: last.identity.clone(),
            renew_at: last.renew_at,
            changed_at,
        });
        self.publish(key, owner, state);
    }

    /// Lists `mesh` from the source and applies it as a diff (trust
    /// included); returns who the differences affect, or `None` (keeping
    /// the cache) if the source failed.
    async fn relist(&mut self, mesh: &str) -> Option<Affected> {
        let fresh = match self.source.view(mesh).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(mesh, error = %e, "cannot load mesh; keeping the last view and retrying");
                return None;
            }
        };
        let mut affected = self.meshes.get_mut(mesh)?.relisted(fresh);
        affected.merge(self.reload_trust(mesh).await?);
        Some(affected)
    }

    /// Reloads the trust of `mesh`; every proxy is affected if it changed.
    /// `None` if the source failed.
    async fn reload_trust(&mut self, mesh: &str) -> Option<Affected> {
        let mtls = self
            .meshes
            .get(mesh)
            .and_then(|c| c.view.as_ref())
            .is_some_and(|v| v.mtls_enabled());
        let trust: Option<MeshTrust> = if mtls {
            match self.source.trust(mesh).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(mesh, error = %e, "cannot load the mesh CA; keeping the last trust bundle and retrying");
                    return None;
                }
            }
        } else {
            None
        };
        let ctx = self.meshes.get_mut(mesh)?;
        Some(if ctx.set_trust(mesh, trust) {
            Affected::all()
        } else {
            Affected::default()
        })
    }

    /// Drops identities of proxies gone for `EVICT_AFTER` and caches of
    /// meshes unused for as long.
    fn evict(&mut self, now: Instant) {
        let expired: Vec<ProxyKey> = self
            .gone
            .iter()
            .filter(|(_, since)| now.saturating_duration_since(**since) >= EVICT_AFTER)
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            self.gone.remove(&key);
            self.identities.remove(&key);
        }
        let proxies = &self.proxies;
        let pending = &mut self.pending;
        self.meshes.retain(|mesh, ctx| {
            let idle = ctx.connected() == 0
                && !proxies.contains_key(mesh)
                && ctx
                    .idle_since
                    .is_none_or(|s| now.saturating_duration_since(s) >= EVICT_AFTER);
            if idle {
                pending.remove(mesh);
            }
            !idle
        });
    }

    /// Recomputes one proxy's state and publishes it if anything changed.
    async fn recompute(&mut self, key: &ProxyKey, changed_at: Instant, renew: bool) {
        let Some(entry) = self.proxies.get(&key.mesh).and_then(|m| m.get(&key.name)) else {
            return;
        };
        let (owner, client, wants_policy) = (entry.owner, entry.client, entry.identity_policy);
        self.metrics.inc_recomputed();
        let mut encoded = EncodedSecrets::default();
        let mut identity = None;
        let mut renew_at = None;
        let policy = if wants_policy {
            self.meshes
                .get_mut(&key.mesh)
                .and_then(|c| c.identity_policy_secret(&key.mesh))
        } else {
            None
        };
        let ctx = self.meshes.get(&key.mesh);
        let view_and_ca =
            ctx.and_then(|c| Some((c.view.as_ref()?, c.trust.as_ref()?.ca_fingerprint.clone())));
        if let Some((view, ca_fingerprint)) = view_and_ca {
            if client != ClientKind::Grpc {
                encoded.trust_bundle = ctx.and_then(|c| c.trust_secret.clone());
            }
            encoded.identity_policy = policy;
            let service = view
                .dataplane(&key.name)
                .and_then(|dp| dp.identity_service(&key.name).map(str::to_owned));
            let lifetime = view.certificate_lifetime();
            if let (ClientKind::Envoy, Some(service)) = (client, service) {
                let expected = crate::translate::names::spiffe_id(view.trust_domain(), &service);
                let wanted = Wanted {
                    service: &service,
                    spiffe_id: &expected,
                    ca_fingerprint: &ca_fingerprint,
                    lifetime,
                };
                self.ensure_identity(key, &wanted, renew).await;
                if let Some(c) = self.identities.get(key) {
                    encoded.identity = Some(c.secret.clone());
                    identity = Some(c.info.clone());
                    renew_at = Some(c.renew_at);
                }
            }
        }
        let snapshot = match self.meshes.get_mut(&key.mesh) {
            Some(ctx) => match ctx.view.as_ref() {
                Some(view) => {
                    let proxy = ProxyContext {
                        mesh: key.mesh.clone(),
                        name: key.name.clone(),
                        client,
                        secrets: SecretsInput::default(),
                    };
                    let mut snapshot = translate_shared(&proxy, view, &mut ctx.memo, &encoded);
                    ctx.endpoint_sets.intern(&mut snapshot, ENDPOINT_TYPE);
                    snapshot
                }
                None => Snapshot::new(),
            },
            None => Snapshot::new(),
        };
        let Some(entry) = self
            .proxies
            .get_mut(&key.mesh)
            .and_then(|m| m.get_mut(&key.name))
        else {
            return;
        };
        let mut snapshot = snapshot;
        if let Some(last) = &entry.last
            && snapshot.share_unchanged(&last.snapshot)
            && last.identity == identity
            && last.renew_at == renew_at
        {
            return;
        }
        let state = Arc::new(ProxyState {
            snapshot,
            identity,
            renew_at,
            changed_at,
        });
        self.publish(key, owner, state);
    }

    /// Publishes `state` to `key`'s owner; forgets the proxy if `owner`
    /// no longer owns the key (I1).
    fn publish(&mut self, key: &ProxyKey, owner: OwnerId, state: Arc<ProxyState>) {
        let Some(entry) = self
            .proxies
            .get_mut(&key.mesh)
            .and_then(|m| m.get_mut(&key.name))
        else {
            return;
        };
        match self.registry.publish_as(key, owner, state.clone()) {
            Ok(()) => entry.last = Some(state),
            Err(e) => {
                // The stream lost the key; its successor's connect follows.
                tracing::debug!(error = %e, "not publishing to a former owner");
                if let Some(m) = self.proxies.get_mut(&key.mesh) {
                    m.remove(&key.name);
                    if m.is_empty() {
                        self.proxies.remove(&key.mesh);
                    }
                }
                let now = Instant::now();
                if let Some(ctx) = self.meshes.get_mut(&key.mesh) {
                    ctx.unindex(&key.name, now);
                }
                if self.identities.contains_key(key) {
                    self.gone.insert(key.clone(), now);
                }
            }
        }
    }

    /// Makes sure the cached identity of `key` is current: issued by the
    /// current CA, for the wanted SPIFFE ID, and not due for renewal. One
    /// that outlives a lowered lifetime is kept, and its renewal moved to a
    /// jittered point in the first 20% of the new lifetime (once: a later
    /// recompute does not draw again), which the owner's timer follows.
    async fn ensure_identity(&mut self, key: &ProxyKey, wanted: &Wanted<'_>, renew: bool) {
        let now = self.clock.now();
        let current = self.identities.get(key).is_some_and(|c| {
            c.info.ca_fingerprint == wanted.ca_fingerprint
                && c.info.spiffe_id == wanted.spiffe_id
                && now < c.renew_at
        });
        if current && !renew {
            if let (Some(lifetime), Some(c)) = (wanted.lifetime, self.identities.get_mut(key))
                && outlives_lifetime(c.info.not_before, c.info.not_after, now, lifetime)
                && c.renew_at > now + lowered_lifetime_delay(lifetime, MAX_JITTER)
            {
                c.renew_at = now + lowered_lifetime_delay(lifetime, random_jitter());
                tracing::info!(proxy = %key, serial = %c.info.serial,
                    lifetime = %humantime::format_duration(lifetime),
                    renew_at = %humantime::format_rfc3339_seconds(c.renew_at),
                    "the mesh's certificate lifetime was lowered below what this certificate has left; renewing it early");
            }
            return;
        }
        let service = wanted.service;
        match self.source.issue(key, service, now).await {
            Ok(issued) => {
                let renew_at = renewal_time_from(
                    now,
                    issued.info.not_before,
                    issued.info.not_after,
                    random_jitter(),
                );
                tracing::debug!(proxy = %key, serial = %issued.info.serial, "issued identity certificate");
                let secret = EncodedSecrets::identity(service, &issued.chain_pem, &issued.key_pem);
                self.identities.insert(
                    key.clone(),
                    CachedIdentity {
                        info: Arc::new(issued.info),
                        renew_at,
                        secret,
                    },
                );
            }
            Err(e) => {
                tracing::warn!(proxy = %key, error = %e, "cannot issue identity certificate; keeping the current one and retrying on the next change");
            }
        }
    }
}

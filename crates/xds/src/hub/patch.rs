//! One mesh as the hub caches it, and what a change to it affects.
//!
//! Owns [`MeshCtx`]: the cached view patched from the change feed, the
//! trust material and its encoded Secret, the shared resource memo, and
//! the index service → connected proxies with an outbound to it. Patching
//! returns the [`Affected`] proxies; it must never translate, publish or do
//! I/O (the reconciler does, for the proxies returned).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use meshlink_api::Resource;
use meshlink_api::spec::{DataplaneSpec, InboundTarget, Tags, TargetRef};
use tokio::time::Instant;

use super::{MeshTrust, Update};
use crate::translate::{
    Backend, EncodedSecrets, Memo, MeshView, Protocol, SetInterner, Versioned, ViewDataplane,
    declared_protocols, endpoint_contributions, keeps_policy, mesh_service_outbounds, names,
    route_backends, routes_to_subsets_of, uses_subset_sources,
};

/// The proxies a change can affect.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Affected {
    /// Every proxy of the mesh.
    pub(super) all: bool,
    /// These proxies (by Dataplane name; not necessarily connected).
    pub(super) names: HashSet<String>,
    /// Services whose endpoints changed: the proxies with an outbound to
    /// one of them (and not in `names`) only need its load assignment
    /// replaced, not a translation.
    pub(super) services: BTreeSet<String>,
}

// === impl Affected ===

impl Affected {
    pub(super) fn all() -> Self {
        Self {
            all: true,
            names: HashSet::new(),
            services: BTreeSet::new(),
        }
    }

    pub(super) fn merge(&mut self, other: Affected) {
        self.all |= other.all;
        if !self.all {
            self.names.extend(other.names);
            self.services.extend(other.services);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        !self.all && self.names.is_empty() && self.services.is_empty()
    }
}

/// What the hub caches for one mesh.
#[derive(Default)]
pub(super) struct MeshCtx {
    /// `None`: the Mesh does not exist (or was never loaded).
    pub(super) view: Option<MeshView>,
    pub(super) trust: Option<MeshTrust>,
    /// The trust-bundle Secret, encoded once per bundle.
    pub(super) trust_secret: Option<(String, Arc<Versioned>)>,
    /// The identity policy Secret and the lifetime it says, encoded once
    /// per lifetime.
    policy_secret: Option<(std::time::Duration, (String, Arc<Versioned>))>,
    pub(super) memo: Memo,
    /// Makes the equal load-assignment sets of the mesh's proxies one
    /// shared set, so an endpoint change patches each distinct set once.
    pub(super) endpoint_sets: SetInterner,
    /// service → connected proxies with an outbound to it.
    refs: HashMap<String, HashSet<String>>,
    /// Connected proxy → the services it is indexed under, sorted (a
    /// boxed slice: a proxy calls a few services, and a set's node was
    /// ~280 bytes per proxy).
    outbounds: HashMap<String, Box<[String]>>,
    /// Since when no proxy of the mesh is connected.
    pub(super) idle_since: Option<Instant>,
}

/// The destinations Dataplane `name` reaches: its outbounds' services and
/// MeshServices, and the backends its MeshHTTPRoutes may send to.
fn outbound_services(view: Option<&MeshView>, name: &str) -> BTreeSet<String> {
    let dp = view.and_then(|v| v.dataplane(name));
    let mut out: BTreeSet<String> = dp
        .into_iter()
        .flat_map(|dp| &dp.networking.outbound)
        .filter_map(|o| o.service().map(str::to_owned))
        .collect();
    if let Some(dp) = dp {
        out.extend(
            mesh_service_outbounds(dp)
                .into_iter()
                .map(|(n, _)| mesh_service_ref(&n)),
        );
    }
    if let (Some(view), Some(dp)) = (view, dp) {
        out.extend(
            crate::translate::transparent_destinations(view, dp)
                .into_iter()
                .map(|d| match d {
                    Backend::MeshService(n, _) => mesh_service_ref(&n),
                    Backend::Service(s) | Backend::Subset(s, _) => s,
                }),
        );
    }
    if let Some(view) = view {
        out.extend(route_backends(view, name).into_iter().map(|b| match b {
            Backend::Service(s) => s,
            Backend::MeshService(n, _) => mesh_service_ref(&n),
            Backend::Subset(s, _) => s,
        }));
    }
    out
}

/// Dataplane `name` has transparent proxying (its VIP and address
/// listeners follow the mesh's VIPs and endpoints).
fn is_transparent(view: &MeshView, name: &str) -> bool {
    view.dataplane(name)
        .is_some_and(|d| d.networking.transparent_proxying.is_some())
}

/// The key of MeshService `name` in the index of referenced destinations
/// (beside `kuma.io/service` names, which cannot contain a NUL).
fn mesh_service_ref(name: &str) -> String {
    format!("\0MeshService/{name}")
}

fn inbound_tags(dp: Option<&DataplaneSpec>) -> Vec<&Tags> {
    dp.into_iter()
        .flat_map(|dp| {
            let gateway = dp.gateway().map(|g| &g.tags);
            dp.networking.inbound.iter().map(|i| &i.tags).chain(gateway)
        })
        .collect()
}

/// `(kuma.io/service, tags)` of every inbound of `dp` that names a service.
fn service_tags(dp: Option<&DataplaneSpec>) -> BTreeSet<(&str, &Tags)> {
    dp.into_iter()
        .flat_map(|dp| &dp.networking.inbound)
        .filter_map(|i| Some((i.service()?, &i.tags)))
        .collect()
}

fn inbound_ports_and_tags(dp: Option<&DataplaneSpec>) -> Vec<(u16, Option<&str>, &Tags)> {
    dp.into_iter()
        .flat_map(|dp| &dp.networking.inbound)
        .map(|i| (i.port.get(), i.name.as_deref(), &i.tags))
        .collect()
}

/// Whether `new` is an older write than `old` (both from the store).
fn is_older(new: &Resource, old_version: Option<&str>) -> bool {
    let rev = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok());
    matches!((rev(new.resource_version()), rev(old_version)), (Some(n), Some(o)) if n < o)
}

// === impl MeshCtx ===

impl MeshCtx {
    /// Number of connected proxies indexed.
    pub(super) fn connected(&self) -> usize {
        self.outbounds.len()
    }

    /// Indexes connected proxy `name` under the services its Dataplane
    /// reaches (call again whenever the Dataplane may have changed).
    pub(super) fn index(&mut self, name: &str) {
        let new: Box<[String]> = outbound_services(self.view.as_ref(), name)
            .into_iter()
            .collect();
        let old = self.outbounds.insert(name.to_owned(), new.clone());
        for s in old.iter().flatten().filter(|s| !new.contains(*s)) {
            if let Some(set) = self.refs.get_mut(s) {
                set.remove(name);
                if set.is_empty() {
                    self.refs.remove(s);
                }
            }
        }
        for s in new {
            self.refs.entry(s).or_default().insert(name.to_owned());
        }
        self.idle_since = None;
    }

    /// Connected proxies with an outbound to `service`.
    pub(super) fn referencing(&self, service: &str) -> impl Iterator<Item = &String> {
        self.refs.get(service).into_iter().flatten()
    }

    /// Whether connected proxy `name` has an outbound to `service`.
    pub(super) fn references(&self, service: &str, name: &str) -> bool {
        self.refs.get(service).is_some_and(|s| s.contains(name))
    }

    /// Removes disconnected proxy `name` from the index.
    pub(super) fn unindex(&mut self, name: &str, now: Instant) {
        for s in self.outbounds.remove(name).into_iter().flatten() {
            if let Some(set) = self.refs.get_mut(&s) {
                set.remove(name);
                if set.is_empty() {
                    self.refs.remove(&s);
                }
            }
        }
        if self.outbounds.is_empty() {
            self.idle_since.get_or_insert(now);
        }
    }

    fn reindex_all(&mut self) {
        let names: Vec<String> = self.outbounds.keys().cloned().collect();
        self.refs.clear();
        for name in names {
            self.index(&name);
        }
    }

    /// The identity policy Secret of the mesh (its current certificate
    /// lifetime), encoded once per lifetime; `None` with mTLS off.
    pub(super) fn identity_policy_secret(
        &mut self,
        mesh: &str,
    ) -> Option<(String, Arc<Versioned>)> {
        let lifetime = self.view.as_ref()?.certificate_lifetime()?;
        if self
            .policy_secret
            .as_ref()
            .is_none_or(|(l, _)| *l != lifetime)
        {
            self.policy_secret = Some((lifetime, EncodedSecrets::identity_policy(mesh, lifetime)));
        }
        self.policy_secret.as_ref().map(|(_, s)| s.clone())
    }

    /// The trust-bundle Secret for `trust`, encoded once per bundle.
    pub(super) fn set_trust(&mut self, mesh: &str, trust: Option<MeshTrust>) -> bool {
        if trust == self.trust {
            return false;
        }
        self.trust_secret = trust
            .as_ref()
            .map(|t| EncodedSecrets::trust_bundle(mesh, &t.bundle_pem));
        self.trust = trust;
        true
    }

    /// Applies one changed object and returns who it affects. `relist`
    /// is set when the change needs a fresh listing (a Mesh appeared).
    pub(super) fn apply(&mut self, update: Update, relist: &mut bool) -> Affected {
        let (resource, deleted) = match update {
            Update::Upserted(r) => (r, false),
            Update::Deleted(r) => (r, true),
        };
        if resource.spec.as_mesh().is_some() {
            return self.apply_mesh(resource, deleted, relist);
        }
        let Some(view) = self.view.as_mut() else {
            // No Mesh: nothing to patch; its creation re-lists.
            return Affected::default();
        };
        let name = resource.name().to_owned();
        if resource.spec.as_dataplane().is_some() {
            if !deleted
                && is_older(
                    &resource,
                    view.dataplane_resource(&name)
                        .and_then(ViewDataplane::resource_version),
                )
            {
                return Affected::default();
            }
            // The services the old or new version declares a protocol
            // for, with their agreed protocol before the change.
            let declared = view
                .dataplane(&name)
                .map(declared_protocols)
                .unwrap_or_default()
                .into_iter()
                .chain(
                    resource
                        .spec
                        .as_dataplane()
                        .map(declared_protocols)
                        .unwrap_or_default(),
                )
                .map(|(s, _)| s)
                .collect::<BTreeSet<String>>();
            let before: Vec<(String, Protocol)> = declared
                .into_iter()
                .map(|s| {
                    let p = view.protocol_index().agreed(&s);
                    (s, p)
                })
                .collect();
            let old = if deleted {
                view.remove_dataplane(&name)
            } else {
                view.upsert_dataplane(resource)
            };
            let mut affected = self.dataplane_changed(&name, old);
            affected.merge(self.protocols_changed(before));
            affected
        } else if resource.spec.as_mesh_service().is_some() {
            if !deleted
                && is_older(
                    &resource,
                    view.mesh_service_resource(&name)
                        .and_then(Resource::resource_version),
                )
            {
                return Affected::default();
            }
            let old = if deleted {
                view.remove_mesh_service(&name)
            } else {
                view.upsert_mesh_service(resource)
            };
            let new = view.mesh_service_resource(&name).cloned();
            if old.as_ref().map(|r| &r.spec) == new.as_ref().map(|r| &r.spec) {
                return Affected::default();
            }
            self.mesh_service_changed([old.as_ref(), new.as_ref()])
        } else if resource.spec.as_mesh_traffic_permission().is_some() {
            if !deleted
                && is_older(
                    &resource,
                    view.permission(&name).and_then(Resource::resource_version),
                )
            {
                return Affected::default();
            }
            let old = if deleted {
                view.remove_permission(&name)
            } else {
                view.upsert_permission(resource)
            };
            let new = self
                .view
                .as_ref()
                .and_then(|v| v.permission(&name))
                .cloned();
            self.permission_changed(old.as_ref(), new.as_ref())
        } else if keeps_policy(resource.kind()) {
            let kind = resource.kind();
            if !deleted
                && is_older(
                    &resource,
                    view.policy(kind, &name)
                        .and_then(Resource::resource_version),
                )
            {
                return Affected::default();
            }
            let old = if deleted {
                view.remove_policy(kind, &name)
            } else {
                view.upsert_policy(resource)
            };
            let new = view.policy(kind, &name);
            let facts = |r: &Resource| (r.spec.clone(), r.labels().clone());
            if old.as_ref().map(facts) == new.map(facts) {
                return Affected::default();
            }
            // Routes, timeouts and retries of any proxy may change, and
            // with them the backends a proxy is indexed under.
            self.reindex_all();
            Affected::all()
        } else {
            Affected::default()
        }
    }

    /// The proxies calling a service whose agreed protocol is no longer
    /// the one in `before` (their listener changes between TCP and HTTP).
    fn protocols_changed(&self, before: Vec<(String, Protocol)>) -> Affected {
        let mut affected = Affected::default();
        let Some(view) = self.view.as_ref() else {
            return affected;
        };
        for (service, p) in before {
            if view.protocol_index().agreed(&service) != p {
                affected.names.extend(self.referencing(&service).cloned());
            }
        }
        affected
    }

    fn apply_mesh(&mut self, mesh: Resource, deleted: bool, relist: &mut bool) -> Affected {
        if deleted {
            if self.view.take().is_none() {
                return Affected::default();
            }
            self.trust = None;
            self.trust_secret = None;
            self.memo.clear();
            self.reindex_all();
            return Affected::all();
        }
        let Some(view) = self.view.as_mut() else {
            *relist = true;
            return Affected::default();
        };
        if is_older(&mesh, view.mesh().resource_version()) {
            return Affected::default();
        }
        let old = view.set_mesh(mesh);
        if old.spec == view.mesh().spec {
            if old.status.details.as_mesh() != view.vips() {
                // VIPs assigned or released: the transparent proxies'
                // names, virtual listeners and the destinations they
                // reach. Other proxies read no VIP.
                return self.transparent_proxies_changed();
            }
            return Affected::default();
        }
        // mTLS or the trust domain may have changed: everything shared is
        // stale, and the trust material must be reloaded.
        self.memo.clear();
        *relist = true;
        Affected::all()
    }

    /// The connected proxies whose Dataplane has transparent proxying,
    /// indexed again (the destinations they reach follow the VIPs).
    fn transparent_proxies_changed(&mut self) -> Affected {
        let Some(view) = self.view.as_ref() else {
            return Affected::default();
        };
        let names: HashSet<String> = self
            .outbounds
            .keys()
            .filter(|n| is_transparent(view, n))
            .cloned()
            .collect();
        for name in &names {
            self.index(name);
        }
        Affected {
            names,
            ..Affected::default()
        }
    }

    /// MeshService versions changed: forgets their ports' shared resources
    /// and returns the proxies with an outbound to them.
    fn mesh_service_changed<'a>(
        &mut self,
        versions: impl IntoIterator<Item = Option<&'a Resource>>,
    ) -> Affected {
        let mut affected = Affected::default();
        for r in versions.into_iter().flatten() {
            let Some(ms) = r.spec.as_mesh_service() else {
                continue;
            };
            for p in &ms.ports {
                self.memo
                    .forget_destination(&names::mesh_service_cluster(r.name(), p.port.get()));
            }
            affected.names.extend(
                self.refs
                    .get(&mesh_service_ref(r.name()))
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
        }
        affected
    }

    /// The MeshServices of the view that select Dataplane `r` (as given,
    /// which need not be the view's version).
    fn selecting(&self, r: Option<&Resource>) -> Vec<Resource> {
        let (Some(view), Some(r)) = (self.view.as_ref(), r) else {
            return Vec::new();
        };
        let Some(dp) = r.spec.as_dataplane() else {
            return Vec::new();
        };
        view.mesh_services()
            .filter(|m| {
                m.spec
                    .as_mesh_service()
                    .is_some_and(|ms| ms.selects(r.name(), r.labels(), dp))
            })
            .cloned()
            .collect()
    }

    /// Dataplane `name` changed from `old` to what the view now holds.
    fn dataplane_changed(&mut self, name: &str, old: Option<Resource>) -> Affected {
        let Some(view) = self.view.as_ref() else {
            return Affected::default();
        };
        let changed = old.as_ref().map(|r| (r.spec.as_dataplane(), r.labels()))
            != view
                .dataplane_resource(name)
                .map(|r| (Some(&r.spec), r.labels()));
        // MeshServices selecting it before or after: their endpoints and
        // accepted identities may change.
        let mut selecting = Vec::new();
        if changed {
            selecting = self.selecting(old.as_ref());
            let new = self
                .view
                .as_ref()
                .and_then(|v| v.dataplane_resource(name))
                .map(ViewDataplane::to_resource);
            selecting.extend(self.selecting(new.as_ref()));
        }
        let by_mesh_services = self.mesh_service_changed(selecting.iter().map(Some));
        let mut affected = self.dataplane_changed_tags(name, old);
        affected.merge(by_mesh_services);
        affected
    }

    /// [`Self::dataplane_changed`] for `kuma.io/service` destinations and
    /// permissions.
    fn dataplane_changed_tags(&mut self, name: &str, old: Option<Resource>) -> Affected {
        let Some(view) = self.view.as_ref() else {
            return Affected::default();
        };
        let old_labels = old.as_ref().map(Resource::labels);
        let new_labels = view.dataplane_resource(name).map(ViewDataplane::labels);
        let old = old.as_ref().and_then(|r| r.spec.as_dataplane());
        let new = view.dataplane(name);
        if old == new && old_labels == new_labels {
            // Labels matter too: a permission's targetRef may select by them.
            return Affected::default();
        }
        let mut affected = Affected::default();
        affected.names.insert(name.to_owned());
        let before = old.map(endpoint_contributions).unwrap_or_default();
        let after = new.map(endpoint_contributions).unwrap_or_default();
        let mut services: BTreeSet<String> = before
            .symmetric_difference(&after)
            .map(|(s, _, _)| s.clone())
            .collect();
        // A transparent proxy has a listener on each endpoint address of
        // the services it reaches: an endpoint that comes or goes (a
        // Dataplane added, moved, or its inbound ready again) changes its
        // listeners, not only its load assignments, so it is translated
        // again instead of patched.
        for service in &services {
            let reaching = self.refs.get(service).into_iter().flatten();
            affected
                .names
                .extend(reaching.filter(|n| is_transparent(view, n)).cloned());
        }
        // A MeshServiceSubset backend selects a service's inbounds by their
        // other tags: a tag change moves endpoints between subsets.
        let (tags_before, tags_after) = (service_tags(old), service_tags(new));
        services.extend(
            tags_before
                .symmetric_difference(&tags_after)
                .map(|(s, _)| *s)
                .filter(|s| routes_to_subsets_of(view, s))
                .map(str::to_owned),
        );
        for s in services {
            self.memo.forget_service(&s);
            affected.services.insert(s);
        }
        if inbound_tags(old) != inbound_tags(new) && uses_subset_sources(view) {
            // A MeshSubset source selects services by inbound tags: the
            // proxies such permissions target may gain or lose a principal.
            self.memo.forget_permissions();
            let targets: Vec<TargetRef> = view
                .permissions()
                .iter()
                .filter_map(|r| r.spec.as_mesh_traffic_permission())
                .map(|m| m.effective_target_ref())
                .collect();
            affected.merge(self.targeted(&targets));
        }
        if self.outbounds.contains_key(name) {
            self.index(name);
        }
        affected
    }

    fn permission_changed(&mut self, old: Option<&Resource>, new: Option<&Resource>) -> Affected {
        let old = old.and_then(|r| r.spec.as_mesh_traffic_permission());
        let new = new.and_then(|r| r.spec.as_mesh_traffic_permission());
        if old == new {
            return Affected::default();
        }
        self.memo.forget_permissions();
        if !self.view.as_ref().is_some_and(MeshView::mtls_enabled) {
            // Without mTLS no RBAC is emitted.
            return Affected::default();
        }
        let targets: Vec<TargetRef> = old
            .into_iter()
            .chain(new)
            .map(|m| m.effective_target_ref())
            .collect();
        self.targeted(&targets)
    }

    /// Connected proxies with an inbound one of `targets` selects (by
    /// tags, or by Dataplane name, labels and inbound port).
    fn targeted(&self, targets: &[TargetRef]) -> Affected {
        let mut affected = Affected::default();
        let Some(view) = self.view.as_ref() else {
            return affected;
        };
        for name in self.outbounds.keys() {
            let Some(dp) = view.dataplane_resource(name) else {
                continue;
            };
            let labels = dp.labels();
            let hit = inbound_ports_and_tags(Some(&dp.spec)).into_iter().any(
                |(port, inbound_name, tags)| {
                    let inbound = InboundTarget {
                        dataplane: name,
                        labels,
                        port,
                        name: inbound_name,
                        tags,
                    };
                    targets.iter().any(|t| t.selects(&inbound))
                },
            );
            if hit {
                affected.names.insert(name.clone());
            }
        }
        affected
    }

    /// Applies a fresh listing as a diff against the cached view; returns
    /// who the differences affect.
    pub(super) fn relisted(&mut self, fresh: Option<MeshView>) -> Affected {
        let (Some(view), Some(fresh)) = (self.view.as_ref(), fresh.as_ref()) else {
            let changed = self.view.is_some() || fresh.is_some();
            self.view = fresh;
            self.memo.clear();
            self.reindex_all();
            return if changed {
                Affected::all()
            } else {
                Affected::default()
            };
        };
        if view.mesh().spec != fresh.mesh().spec
            || view.network() != fresh.network()
            || view.mesh_ingress() != fresh.mesh_ingress()
        {
            self.view = Some(fresh.clone());
            self.memo.clear();
            self.reindex_all();
            return Affected::all();
        }
        let mut updates = Vec::new();
        for r in fresh.dataplanes() {
            let same = view
                .dataplane_resource(r.name())
                .is_some_and(|o| o.spec == r.spec && o.labels() == r.labels());
            if !same {
                updates.push(Update::Upserted(r.to_resource()));
            }
        }
        for r in view.dataplanes() {
            if fresh.dataplane_resource(r.name()).is_none() {
                updates.push(Update::Deleted(r.to_resource()));
            }
        }
        for r in fresh.mesh_services() {
            if view
                .mesh_service_resource(r.name())
                .is_none_or(|o| o.spec != r.spec)
            {
                updates.push(Update::Upserted(r.clone()));
            }
        }
        for r in view.mesh_services() {
            if fresh.mesh_service_resource(r.name()).is_none() {
                updates.push(Update::Deleted(r.clone()));
            }
        }
        for r in fresh.permissions() {
            if view.permission(r.name()).is_none_or(|o| o.spec != r.spec) {
                updates.push(Update::Upserted(r.clone()));
            }
        }
        for r in view.permissions() {
            if fresh.permission(r.name()).is_none() {
                updates.push(Update::Deleted(r.clone()));
            }
        }
        for p in fresh.policies() {
            let r = &p.resource;
            if view
                .policy(r.kind(), r.name())
                .is_none_or(|o| o.spec != r.spec || o.labels() != r.labels())
            {
                updates.push(Update::Upserted(r.clone()));
            }
        }
        for p in view.policies() {
            let r = &p.resource;
            if fresh.policy(r.kind(), r.name()).is_none() {
                updates.push(Update::Deleted(r.clone()));
            }
        }
        let mut affected = Affected::default();
        let mut relist = false;
        for u in updates {
            // An object the feed already brought newer is skipped.
            affected.merge(self.apply(u, &mut relist));
        }
        affected
    }
}

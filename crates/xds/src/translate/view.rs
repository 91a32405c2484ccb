//! The translator's input: one mesh as the store has it (Mesh, Dataplanes,
//! MeshTrafficPermissions, MeshServices, and the L7 policies MeshHTTPRoute,
//! MeshTimeout and MeshRetry), indexed for what translation looks up per
//! proxy and patchable one object at a time.
//!
//! Owns the indexes (dataplanes by name, endpoints and protocols by
//! service) and keeps
//! them consistent under patches. It must never do I/O or decide who is
//! affected by a patch: the hub does that from what a patch returns.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use meshlink_api::spec::{
    DataplaneSpec, DataplaneStatus, InboundHealth, MeshServiceSpec, MeshServicesMode, MeshSpec,
    Spec,
};
use meshlink_api::{Kind, Metadata, Resource};

use super::policies::ViewPolicy;
use super::protocol::ProtocolIndex;

/// What the translator sees of one mesh; the control plane fills it from
/// the store and the hub patches it from the change feed. Order of the
/// input does not matter.
///
/// Shared by every proxy of the mesh, so it indexes what translation looks
/// up per proxy: dataplanes by name and endpoints by service (both would
/// otherwise be linear scans, making a mesh-wide recompute quadratic).
#[derive(Debug, Clone)]
pub struct MeshView {
    mesh: Resource,
    dataplanes: Vec<ViewDataplane>,
    permissions: Vec<Resource>,
    /// MeshServices by name.
    mesh_services: BTreeMap<String, Resource>,
    by_name: HashMap<String, usize>,
    /// service → endpoint → number of inbounds that contribute it (two
    /// dataplanes may share an address and port).
    endpoints: HashMap<String, BTreeMap<(String, u16), usize>>,
    /// service → protocols its inbounds declare.
    protocols: ProtocolIndex,
    /// MeshHTTPRoutes, MeshTimeouts and MeshRetries.
    policies: Vec<ViewPolicy>,
    /// The multi-site network as a mesh outbound reaches it: routing key →
    /// the `(address, port)` of this site's router Listeners for the key.
    network: std::sync::Arc<NetworkListeners>,
    /// This site's router mesh ingress, `(host, port)`, once the router
    /// reported it bound (mTLS meshes reach routing keys through it).
    ingress: Option<RouterIngress>,
    /// The DNS domain of mesh service names (`<service>.<domain>`).
    dns_domain: std::sync::Arc<str>,
}

/// The default DNS domain of mesh service names (Kuma's).
pub(super) const DEFAULT_DNS_DOMAIN: &str = "mesh";

/// A Dataplane as the view keeps it: its metadata and spec. Translation
/// reads nothing else, and a whole `Resource` is 584 bytes inline (its
/// status and the room for every other kind's spec) where this is 232:
/// the view holds one per Dataplane of a mesh with a connected proxy.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewDataplane {
    /// Name, mesh, labels, version.
    pub metadata: Metadata,
    /// What the user declared, with each inbound's `health` as the mesh
    /// sees it ([`effective_health`]).
    pub spec: DataplaneSpec,
}

/// Folds the one status fact translation reads into `spec`: an inbound
/// whose application the Dataplane's status lists as unreachable
/// (`status.unreachableApps`, reported by its sidecar) is not ready, as if
/// it said `health: {ready: false}`. This is what Kuma's health discovery
/// does to `inbound.health`; here the declared spec stays as written and
/// only the view's copy changes. Every endpoint rule then reads one
/// field, [`meshlink_api::spec::Inbound::is_ready`].
pub fn effective_health(spec: &mut DataplaneSpec, status: Option<&DataplaneStatus>) {
    let Some(status) = status else {
        return;
    };
    for app in &status.unreachable_apps {
        for inbound in &mut spec.networking.inbound {
            if inbound.port.get() == app.port {
                inbound.health = Some(InboundHealth { ready: false });
            }
        }
    }
}

impl ViewDataplane {
    /// `r`'s metadata and spec (with [`effective_health`]), if it is a
    /// Dataplane.
    fn of(r: Resource) -> Option<Self> {
        match r.spec {
            Spec::Dataplane(mut spec) => {
                effective_health(&mut spec, r.status.details.as_dataplane());
                Some(Self {
                    metadata: r.metadata,
                    spec,
                })
            }
            _ => None,
        }
    }

    /// The Dataplane's name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The Dataplane's labels.
    pub fn labels(&self) -> &std::collections::BTreeMap<String, String> {
        &self.metadata.labels
    }

    /// The store revision of its last write, if known.
    pub fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }

    /// As a resource (with an empty status).
    pub fn to_resource(&self) -> Resource {
        self.clone().into_resource()
    }

    /// Into a resource (with an empty status).
    pub fn into_resource(self) -> Resource {
        Resource::new(self.metadata, Spec::Dataplane(self.spec))
    }
}

/// This site's router mesh ingress as a sidecar dials it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterIngress {
    /// The site's name (the router's SPIFFE ID names it).
    pub site: String,
    /// A host the sidecars reach the ingress on.
    pub host: String,
    /// The ingress port.
    pub port: u16,
}

/// Routing key → `(address, port)` of this site's router Listeners for it
/// (sorted), for Dataplane outbounds with a `routingKey`.
pub type NetworkListeners = BTreeMap<String, Vec<(String, u16)>>;

/// `(service, address, port)` of every ready inbound of a Dataplane
/// ([`meshlink_api::spec::Inbound::is_ready`]): what it contributes to
/// the endpoints of the services it serves.
pub fn endpoint_contributions(dp: &DataplaneSpec) -> BTreeSet<(String, String, u16)> {
    dp.networking
        .inbound
        .iter()
        .filter(|i| i.is_ready())
        .filter_map(|i| {
            let service = i.service()?;
            Some((
                service.to_owned(),
                i.effective_address(&dp.networking.address).to_owned(),
                i.port.get(),
            ))
        })
        .collect()
}

// === impl MeshView ===

impl MeshView {
    /// Builds the view of `mesh` from its Dataplanes and
    /// MeshTrafficPermissions (resources of other kinds are ignored).
    pub fn new(mesh: Resource, dataplanes: Vec<Resource>, permissions: Vec<Resource>) -> Self {
        let mut view = Self {
            mesh,
            dataplanes: Vec::with_capacity(dataplanes.len()),
            permissions: Vec::new(),
            mesh_services: BTreeMap::new(),
            by_name: HashMap::with_capacity(dataplanes.len()),
            endpoints: HashMap::new(),
            protocols: ProtocolIndex::default(),
            policies: Vec::new(),
            network: Default::default(),
            ingress: None,
            dns_domain: std::sync::Arc::from(DEFAULT_DNS_DOMAIN),
        };
        for r in dataplanes {
            view.upsert_dataplane(r);
        }
        view.with_permissions(permissions)
    }

    /// The same view with its MeshTrafficPermissions replaced.
    pub fn with_permissions(mut self, permissions: Vec<Resource>) -> Self {
        self.permissions = permissions
            .into_iter()
            .filter(|r| r.spec.as_mesh_traffic_permission().is_some())
            .collect();
        self
    }

    /// The same view with its L7 policies (MeshHTTPRoute, MeshTimeout,
    /// MeshRetry) replaced; resources of other kinds are ignored.
    pub fn with_policies(mut self, policies: Vec<Resource>) -> Self {
        self.policies = policies.into_iter().filter_map(ViewPolicy::of).collect();
        self
    }

    /// The L7 policy of `kind` named `name`.
    pub fn policy(&self, kind: Kind, name: &str) -> Option<&Resource> {
        self.policies
            .iter()
            .map(|p| &p.resource)
            .find(|r| r.kind() == kind && r.name() == name)
    }

    /// Adds or replaces an L7 policy (ignored unless the view keeps its
    /// kind); returns the previous one.
    pub fn upsert_policy(&mut self, r: Resource) -> Option<Resource> {
        let p = ViewPolicy::of(r)?;
        let (kind, name) = (p.resource.kind(), p.resource.name().to_owned());
        match self
            .policies
            .iter()
            .position(|q| q.resource.kind() == kind && q.resource.name() == name)
        {
            Some(i) => Some(std::mem::replace(&mut self.policies[i], p).resource),
            None => {
                self.policies.push(p);
                None
            }
        }
    }

    /// Removes the L7 policy of `kind` named `name`; returns it.
    pub fn remove_policy(&mut self, kind: Kind, name: &str) -> Option<Resource> {
        let i = self
            .policies
            .iter()
            .position(|q| q.resource.kind() == kind && q.resource.name() == name)?;
        Some(self.policies.swap_remove(i).resource)
    }

    /// The L7 policies, in no particular order.
    pub(crate) fn policies(&self) -> &[ViewPolicy] {
        &self.policies
    }

    /// The protocols each service's inbounds declare.
    pub(crate) fn protocol_index(&self) -> &ProtocolIndex {
        &self.protocols
    }

    /// The same view with its MeshServices replaced (resources of other
    /// kinds are ignored).
    pub fn with_mesh_services(mut self, mesh_services: Vec<Resource>) -> Self {
        self.mesh_services = mesh_services
            .into_iter()
            .filter(|r| r.spec.as_mesh_service().is_some())
            .map(|r| (r.name().to_owned(), r))
            .collect();
        self
    }

    /// Every MeshService of the mesh, by name.
    pub fn mesh_services(&self) -> impl Iterator<Item = &Resource> {
        self.mesh_services.values()
    }

    /// The MeshService resource named `name`.
    pub fn mesh_service_resource(&self, name: &str) -> Option<&Resource> {
        self.mesh_services.get(name)
    }

    /// The MeshService named `name`.
    pub fn mesh_service(&self, name: &str) -> Option<&MeshServiceSpec> {
        self.mesh_services.get(name)?.spec.as_mesh_service()
    }

    /// Adds or replaces a MeshService (ignored unless it is one); returns
    /// the previous one.
    pub fn upsert_mesh_service(&mut self, r: Resource) -> Option<Resource> {
        r.spec.as_mesh_service()?;
        self.mesh_services.insert(r.name().to_owned(), r)
    }

    /// Removes the MeshService `name`; returns it.
    pub fn remove_mesh_service(&mut self, name: &str) -> Option<Resource> {
        self.mesh_services.remove(name)
    }

    /// The Mesh's `meshServices.mode` (default `Disabled`).
    pub fn mesh_services_mode(&self) -> MeshServicesMode {
        self.mesh_spec()
            .map_or(MeshServicesMode::Disabled, MeshSpec::mesh_services_mode)
    }

    /// Whether `kuma.io/service` tags define destinations (every mode but
    /// `Exclusive`).
    pub fn tag_destinations(&self) -> bool {
        self.mesh_services_mode() != MeshServicesMode::Exclusive
    }

    /// The same view with this site's router Listeners by routing key.
    pub fn with_network(mut self, network: std::sync::Arc<NetworkListeners>) -> Self {
        self.network = network;
        self
    }

    /// This site's router Listeners by routing key.
    pub fn network(&self) -> &NetworkListeners {
        &self.network
    }

    /// The same view with this site's router mesh ingress.
    pub fn with_mesh_ingress(mut self, ingress: Option<RouterIngress>) -> Self {
        self.ingress = ingress;
        self
    }

    /// This site's router mesh ingress, if the router reported it bound.
    pub fn mesh_ingress(&self) -> Option<&RouterIngress> {
        self.ingress.as_ref()
    }

    /// The Mesh resource.
    pub fn mesh(&self) -> &Resource {
        &self.mesh
    }

    /// Every Dataplane of the mesh (in no particular order).
    pub fn dataplanes(&self) -> &[ViewDataplane] {
        &self.dataplanes
    }

    /// Every MeshTrafficPermission of the mesh (in no particular order).
    pub fn permissions(&self) -> &[Resource] {
        &self.permissions
    }

    /// The same view with mesh service names under `domain`.
    pub fn with_dns_domain(mut self, domain: &str) -> Self {
        self.dns_domain = std::sync::Arc::from(domain);
        self
    }

    /// The DNS domain of mesh service names (`<service>.<domain>`).
    pub fn dns_domain(&self) -> &str {
        &self.dns_domain
    }

    /// The virtual IPs the control plane assigned (the Mesh's status):
    /// by `kuma.io/service`, and by MeshService.
    pub fn vips(&self) -> Option<&meshlink_api::spec::MeshStatus> {
        self.mesh.status.details.as_mesh()
    }

    /// Whether some Dataplane's inbound declares `service` (ready or not).
    pub(crate) fn declares(&self, service: &str) -> bool {
        self.protocols.knows(service)
    }

    /// The mesh name.
    pub fn mesh_name(&self) -> &str {
        self.mesh.name()
    }

    fn mesh_spec(&self) -> Option<&MeshSpec> {
        self.mesh.spec.as_mesh()
    }

    /// The trust domain of the mesh (default: the mesh name).
    pub fn trust_domain(&self) -> &str {
        match self.mesh_spec() {
            Some(m) => m.trust_domain(self.mesh.name()),
            None => self.mesh.name(),
        }
    }

    /// Whether mTLS is on (an enabled CA backend exists).
    pub fn mtls_enabled(&self) -> bool {
        self.mesh_spec()
            .and_then(MeshSpec::enabled_backend)
            .is_some()
    }

    /// The lifetime of the workload certificates the mesh issues now (its
    /// enabled backend's `dpCert.rotation.expiration`); `None` with mTLS
    /// off.
    pub fn certificate_lifetime(&self) -> Option<std::time::Duration> {
        self.mesh_spec()
            .filter(|m| m.enabled_backend().is_some())
            .map(MeshSpec::dp_cert_lifetime)
    }

    /// The Dataplane named `name`.
    pub fn dataplane(&self, name: &str) -> Option<&DataplaneSpec> {
        Some(&self.dataplane_resource(name)?.spec)
    }

    /// The Dataplane named `name`, with its metadata.
    pub fn dataplane_resource(&self, name: &str) -> Option<&ViewDataplane> {
        let i = *self.by_name.get(name)?;
        self.dataplanes.get(i)
    }

    /// The MeshTrafficPermission named `name`.
    pub fn permission(&self, name: &str) -> Option<&Resource> {
        self.permissions.iter().find(|r| r.name() == name)
    }

    /// Number of Dataplanes in the view.
    pub fn dataplane_count(&self) -> usize {
        self.by_name.len()
    }

    /// `(address, port)` of every inbound tagged with `service`, sorted.
    pub(crate) fn endpoints_of(&self, service: &str) -> impl Iterator<Item = &(String, u16)> {
        self.endpoints
            .get(service)
            .into_iter()
            .flat_map(|m| m.keys())
    }

    /// Every Dataplane's name and spec.
    pub(crate) fn dataplane_specs(&self) -> impl Iterator<Item = (&str, &DataplaneSpec)> {
        self.dataplanes.iter().map(|r| (r.name(), &r.spec))
    }

    /// Replaces the Mesh resource; returns the previous one.
    pub fn set_mesh(&mut self, mesh: Resource) -> Resource {
        std::mem::replace(&mut self.mesh, mesh)
    }

    /// Adds or replaces a Dataplane (ignored unless it is one); returns
    /// the previous one. The view keeps its metadata and spec, not its
    /// status ([`ViewDataplane`]): translation reads none of it, and the
    /// status of every connected proxy (connection, certificate,
    /// conditions) is rewritten as it connects, so keeping it cost the hub
    /// about a KiB per proxy.
    pub fn upsert_dataplane(&mut self, r: Resource) -> Option<Resource> {
        let r = ViewDataplane::of(r)?;
        self.add_endpoints(&r.spec);
        self.protocols.add(&r.spec);
        match self.by_name.get(r.name()) {
            Some(&i) => {
                let old = std::mem::replace(&mut self.dataplanes[i], r);
                self.remove_endpoints(&endpoint_contributions(&old.spec));
                self.protocols.remove(&old.spec);
                Some(old.into_resource())
            }
            None => {
                self.by_name
                    .insert(r.name().to_owned(), self.dataplanes.len());
                self.dataplanes.push(r);
                None
            }
        }
    }

    /// Removes the Dataplane `name`; returns it.
    pub fn remove_dataplane(&mut self, name: &str) -> Option<Resource> {
        let i = self.by_name.remove(name)?;
        let old = self.dataplanes.swap_remove(i);
        if let Some(moved) = self.dataplanes.get(i) {
            self.by_name.insert(moved.name().to_owned(), i);
        }
        self.remove_endpoints(&endpoint_contributions(&old.spec));
        self.protocols.remove(&old.spec);
        Some(old.into_resource())
    }

    /// Adds or replaces a MeshTrafficPermission (ignored unless it is
    /// one); returns the previous one.
    pub fn upsert_permission(&mut self, r: Resource) -> Option<Resource> {
        r.spec.as_mesh_traffic_permission()?;
        match self.permissions.iter().position(|p| p.name() == r.name()) {
            Some(i) => Some(std::mem::replace(&mut self.permissions[i], r)),
            None => {
                self.permissions.push(r);
                None
            }
        }
    }

    /// Removes the MeshTrafficPermission `name`; returns it.
    pub fn remove_permission(&mut self, name: &str) -> Option<Resource> {
        let i = self.permissions.iter().position(|p| p.name() == name)?;
        Some(self.permissions.swap_remove(i))
    }

    fn add_endpoints(&mut self, dp: &DataplaneSpec) {
        for (service, address, port) in endpoint_contributions(dp) {
            *self
                .endpoints
                .entry(service)
                .or_default()
                .entry((address, port))
                .or_default() += 1;
        }
    }

    fn remove_endpoints(&mut self, contributions: &BTreeSet<(String, String, u16)>) {
        for (service, address, port) in contributions {
            let Some(m) = self.endpoints.get_mut(service) else {
                continue;
            };
            let key = (address.clone(), *port);
            if let Some(n) = m.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&key);
                }
            }
            if m.is_empty() {
                self.endpoints.remove(service);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dp(name: &str, address: &str, service: &str, port: u16) -> Resource {
        Resource::from_json(json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "Dataplane",
            "metadata": {"name": name, "mesh": "m"},
            "spec": {"networking": {"address": address, "inbound": [
                {"port": port, "tags": {"kuma.io/service": service}}
            ]}},
        }))
        .expect("valid dataplane")
    }

    fn mesh() -> Resource {
        Resource::from_json(json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "Mesh",
            "metadata": {"name": "m"},
            "spec": {},
        }))
        .expect("valid mesh")
    }

    fn endpoints(v: &MeshView, service: &str) -> Vec<(String, u16)> {
        v.endpoints_of(service).cloned().collect()
    }

    #[test]
    fn patches_keep_the_indexes_equal_to_a_fresh_build() {
        let mut v = MeshView::new(
            mesh(),
            vec![
                dp("a", "10.0.0.1", "x", 80),
                dp("b", "10.0.0.1", "x", 80),
                dp("c", "10.0.0.3", "y", 80),
            ],
            Vec::new(),
        );
        // Two dataplanes share an endpoint: removing one keeps it.
        assert!(v.remove_dataplane("a").is_some());
        assert_eq!(endpoints(&v, "x"), vec![("10.0.0.1".to_owned(), 80)]);
        // A move replaces the endpoint; a service change moves it across.
        v.upsert_dataplane(dp("b", "10.0.0.2", "x", 80));
        v.upsert_dataplane(dp("c", "10.0.0.3", "x", 81));
        let fresh = MeshView::new(
            mesh(),
            vec![dp("b", "10.0.0.2", "x", 80), dp("c", "10.0.0.3", "x", 81)],
            Vec::new(),
        );
        for service in ["x", "y"] {
            assert_eq!(
                endpoints(&v, service),
                endpoints(&fresh, service),
                "{service}"
            );
        }
        assert_eq!(v.dataplane_count(), 2);
        assert!(v.dataplane("c").is_some() && v.dataplane("a").is_none());
        assert!(endpoints(&v, "y").is_empty());
    }

    #[test]
    fn the_view_keeps_a_dataplanes_spec_and_metadata_not_its_status() {
        let mut with_status = dp("a", "10.0.0.1", "x", 80).to_json();
        with_status["status"] = json!({"online": true, "controlPlaneInstance": "cp-1"});
        let with_status = Resource::from_json(with_status).expect("valid status");
        assert_ne!(
            with_status.status,
            Default::default(),
            "the input has a status"
        );
        let mut v = MeshView::new(mesh(), vec![with_status.clone()], Vec::new());
        v.upsert_dataplane(with_status.clone());
        let kept = v.dataplane_resource("a").unwrap().to_resource();
        assert_eq!(kept.spec, with_status.spec);
        assert_eq!(kept.metadata, with_status.metadata);
        assert_eq!(kept.status, Default::default());
    }
}

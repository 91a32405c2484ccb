//! The reconciler's view of the store and the mesh CAs
//! ([`MeshSource`] for meshlink-cp).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use meshlink_api::Kind;
use meshlink_identity::SpiffeId;
use meshlink_xds::hub::{IdentityInfo, IssuedIdentity, MeshSource, MeshTrust, SourceError};
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::{MeshView, NetworkListeners, RouterIngress};

use crate::identity::CaHandle;
use crate::identity::mesh_ca::{MeshCaError, MeshIdentity};
use crate::resources::{ResourceError, ResourceService};

/// Reads meshes from the store and issues identities from their CAs.
pub(crate) struct StoreSource {
    resources: ResourceService,
    /// Reads the CA state (never writes it) and takes issuance events.
    ca: CaHandle,
    /// The last CA state loaded per mesh by [`MeshSource::trust`].
    identities: Mutex<HashMap<String, Arc<MeshIdentity>>>,
    /// `--dns-domain`, for the views.
    dns_domain: String,
}

impl StoreSource {
    /// The trust material of `mesh` (`None`: mTLS off or no such mesh).
    pub(crate) async fn mesh_trust(&self, mesh: &str) -> Result<Option<MeshTrust>, SourceError> {
        <Self as MeshSource>::trust(self, mesh).await
    }

    /// Issues the site router's certificate and key in `mesh` for
    /// `spiffe_id` (a path of the mesh's trust domain), valid from `now`.
    pub(crate) async fn issue_router(
        &self,
        mesh: &str,
        spiffe_id: &str,
        now: SystemTime,
    ) -> Result<IssuedIdentity, SourceError> {
        let identity = self.load_identity(mesh).await?.ok_or_else(|| {
            SourceError(format!("mesh {mesh:?} has mTLS disabled or does not exist"))
        })?;
        let id =
            SpiffeId::parse(spiffe_id).map_err(|e| SourceError(format!("{spiffe_id}: {e}")))?;
        let (cert, key_pem) = identity
            .ca
            .issue_with_key(&id, identity.lifetime, now)
            .map_err(|e| SourceError(format!("cannot issue for {id}: {e}")))?;
        Ok(issued(cert, key_pem))
    }

    pub(crate) fn new(resources: ResourceService, ca: CaHandle, dns_domain: String) -> Self {
        Self {
            resources,
            ca,
            dns_domain,
            identities: Mutex::new(HashMap::new()),
        }
    }

    async fn load_identity(&self, mesh: &str) -> Result<Option<Arc<MeshIdentity>>, SourceError> {
        let resource = match self.resources.get(Kind::Mesh, None, mesh).await {
            Ok(r) => r,
            Err(ResourceError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(SourceError(e.to_string())),
        };
        let identity = match self.ca.load(&self.resources, &resource).await {
            Ok(i) => Arc::new(i),
            Err(MeshCaError::MtlsDisabled(_)) => {
                self.lock().remove(mesh);
                return Ok(None);
            }
            Err(e) => return Err(SourceError(e.to_string())),
        };
        self.lock().insert(mesh.to_owned(), identity.clone());
        Ok(Some(identity))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<MeshIdentity>>> {
        self.identities
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// This site's router Listeners by routing key, for Dataplane outbounds to
/// a routing key. Only a Listener whose `host` is an IP address is a
/// target: for a name the router binds its `--bind-host`, which the control
/// plane does not know.
fn network_listeners(listeners: &[meshlink_api::Resource]) -> NetworkListeners {
    let mut out = NetworkListeners::new();
    for l in listeners {
        let Some(spec) = l.spec.as_listener() else {
            continue;
        };
        if spec.host.parse::<std::net::IpAddr>().is_ok() {
            out.entry(spec.routing_key.clone())
                .or_default()
                .push((spec.host.clone(), spec.port.get()));
        }
    }
    for targets in out.values_mut() {
        targets.sort();
    }
    out
}

/// `(site name, "host:port")` of a stored Site's `status.meshIngress`.
pub(crate) fn site_ingress(body: &serde_json::Value) -> Option<(String, String)> {
    let name = body["metadata"]["name"].as_str()?;
    let addr = body["status"]["meshIngress"].as_str()?;
    Some((name.to_owned(), addr.to_owned()))
}

/// The router's mesh ingress as the Sites list it (one Site per control
/// plane).
fn router_ingress(sites: &[meshlink_api::Resource]) -> Option<RouterIngress> {
    sites.iter().find_map(|s| {
        let addr = s.status.details.as_site()?.mesh_ingress.as_deref()?;
        let addr: std::net::SocketAddr = addr.parse().ok()?;
        Some(RouterIngress {
            site: s.name().to_owned(),
            host: addr.ip().to_string(),
            port: addr.port(),
        })
    })
}

fn source_error(e: ResourceError) -> SourceError {
    SourceError(e.to_string())
}

#[tonic::async_trait]
impl MeshSource for StoreSource {
    async fn view(&self, mesh: &str) -> Result<Option<MeshView>, SourceError> {
        let resource = match self.resources.get(Kind::Mesh, None, mesh).await {
            Ok(r) => r,
            Err(ResourceError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(source_error(e)),
        };
        // Page by page: only the decoded Dataplanes are kept, not every
        // store row of the mesh at once.
        let mut dataplanes = Vec::new();
        self.resources
            .for_each(Kind::Dataplane, Some(mesh), |d| dataplanes.push(d))
            .await
            .map_err(source_error)?;
        let permissions = self
            .resources
            .list(Kind::MeshTrafficPermission, Some(mesh), None)
            .await
            .map_err(source_error)?;
        let mesh_services = self
            .resources
            .list(Kind::MeshService, Some(mesh), None)
            .await
            .map_err(source_error)?;
        // The routing and L7 policies the translator reads.
        let mut policies = Vec::new();
        for kind in [
            Kind::MeshHTTPRoute,
            Kind::MeshTCPRoute,
            Kind::MeshTimeout,
            Kind::MeshRetry,
            Kind::MeshRateLimit,
            Kind::MeshAccessLog,
            Kind::MeshLoadBalancingStrategy,
            Kind::MeshHealthCheck,
            Kind::MeshFaultInjection,
            Kind::MeshCircuitBreaker,
            Kind::MeshTrace,
        ] {
            policies.extend(
                self.resources
                    .list(kind, Some(mesh), None)
                    .await
                    .map_err(source_error)?,
            );
        }
        let listeners = self
            .resources
            .list(Kind::Listener, None, None)
            .await
            .map_err(source_error)?;
        let sites = self
            .resources
            .list(Kind::Site, None, None)
            .await
            .map_err(source_error)?;
        Ok(Some(
            MeshView::new(resource, dataplanes, permissions)
                .with_mesh_services(mesh_services)
                .with_policies(policies)
                .with_network(Arc::new(network_listeners(&listeners)))
                .with_mesh_ingress(router_ingress(&sites))
                .with_dns_domain(&self.dns_domain),
        ))
    }

    async fn trust(&self, mesh: &str) -> Result<Option<MeshTrust>, SourceError> {
        Ok(self.load_identity(mesh).await?.map(|i| MeshTrust {
            bundle_pem: i.bundle().roots_pem.join(""),
            ca_fingerprint: i.ca.fingerprint(),
        }))
    }

    async fn issue(
        &self,
        key: &ProxyKey,
        service: &str,
        now: SystemTime,
    ) -> Result<IssuedIdentity, SourceError> {
        let cached = self.lock().get(&key.mesh).cloned();
        let identity = match cached {
            Some(i) => i,
            None => self.load_identity(&key.mesh).await?.ok_or_else(|| {
                SourceError(format!(
                    "mesh {:?} has mTLS disabled or does not exist",
                    key.mesh
                ))
            })?,
        };
        let id = SpiffeId::new(&identity.trust_domain, service)
            .map_err(|e| SourceError(format!("service {service:?}: {e}")))?;
        let (cert, key_pem) = identity
            .ca
            .issue_with_key(&id, identity.lifetime, now)
            .map_err(|e| SourceError(format!("cannot issue for {id}: {e}")))?;
        // Rotation progress: an event to the CA controller, which stores
        // it coalesced; the hub never waits for a store write.
        self.ca.issued(&key.mesh, &key.name, &cert);
        Ok(issued(cert, key_pem))
    }
}

fn issued(cert: meshlink_identity::IssuedCert, key_pem: String) -> IssuedIdentity {
    let mut chain_pem = cert.cert_pem.clone();
    for c in &cert.chain_pem {
        chain_pem.push_str(c);
    }
    IssuedIdentity {
        chain_pem,
        key_pem,
        info: IdentityInfo {
            serial: cert.serial_hex,
            spiffe_id: cert.spiffe_id,
            ca_fingerprint: cert.ca_fingerprint,
            not_before: cert.not_before,
            not_after: cert.not_after,
        },
    }
}

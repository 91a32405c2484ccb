//! The reconciler's view of the store and the mesh CAs
//! ([`MeshSource`] for meshlink-cp).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use meshlink_api::Kind;
use meshlink_identity::SpiffeId;
use meshlink_xds::hub::{IdentityInfo, IssuedIdentity, MeshSource, MeshTrust, SourceError};
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::MeshView;

use crate::identity::mesh_ca::{self, IssuedRecord, MeshCaError, MeshIdentity};
use crate::resources::{ResourceError, ResourceService};

/// Reads meshes from the store and issues identities from their CAs.
pub(crate) struct StoreSource {
    resources: ResourceService,
    /// The last CA state loaded per mesh by [`MeshSource::trust`].
    identities: Mutex<HashMap<String, Arc<MeshIdentity>>>,
    /// Owns the background record writes, so shutdown waits for them.
    tasks: tokio_util::task::TaskTracker,
}

impl StoreSource {
    pub(crate) fn new(resources: ResourceService, tasks: tokio_util::task::TaskTracker) -> Self {
        Self {
            resources,
            identities: Mutex::new(HashMap::new()),
            tasks,
        }
    }

    async fn load_identity(&self, mesh: &str) -> Result<Option<Arc<MeshIdentity>>, SourceError> {
        let resource = match self.resources.get(Kind::Mesh, None, mesh).await {
            Ok(r) => r,
            Err(ResourceError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(SourceError(e.to_string())),
        };
        let store = self.resources.store().as_ref();
        let identity = match mesh_ca::ensure(store, &resource).await {
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
        let dataplanes = self
            .resources
            .list(Kind::Dataplane, Some(mesh), None)
            .await
            .map_err(source_error)?;
        let permissions = self
            .resources
            .list(Kind::MeshTrafficPermission, Some(mesh), None)
            .await
            .map_err(source_error)?;
        Ok(Some(MeshView::new(resource, dataplanes, permissions)))
    }

    async fn trust(&self, mesh: &str) -> Result<Option<MeshTrust>, SourceError> {
        Ok(self.load_identity(mesh).await?.map(|i| MeshTrust {
            bundle_pem: i.rotation.bundle.roots_pem.join(""),
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
        let record = IssuedRecord {
            ca_fingerprint: cert.ca_fingerprint.clone(),
            serial: cert.serial_hex.clone(),
            spiffe_id: cert.spiffe_id.clone(),
            not_after: mesh_ca::unix_seconds(cert.not_after),
        };
        // Rotation bookkeeping only; the reconciler must not wait for a
        // store write per certificate.
        let store = self.resources.store().clone();
        let (mesh, name) = (key.mesh.clone(), key.name.clone());
        self.tasks.spawn(async move {
            if let Err(e) = mesh_ca::record_issued(store.as_ref(), &mesh, &name, &record).await {
                tracing::warn!(mesh, dataplane = name, error = %e, "cannot record issued certificate");
            }
        });
        let mut chain_pem = cert.cert_pem.clone();
        for c in &cert.chain_pem {
            chain_pem.push_str(c);
        }
        Ok(IssuedIdentity {
            chain_pem,
            key_pem,
            info: IdentityInfo {
                serial: cert.serial_hex,
                spiffe_id: cert.spiffe_id,
                ca_fingerprint: cert.ca_fingerprint,
                not_before: cert.not_before,
                not_after: cert.not_after,
            },
        })
    }
}

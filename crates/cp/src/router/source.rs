//! The router reconciler's view of the store ([`SiteSource`] for
//! meshlink-cp), and how a stored `Secret` becomes [`TlsMaterial`].
//!
//! Secrets are read from their stored JSON (`data` base64, or `stringData`
//! as text, at the top level or under `spec`), so this module depends only
//! on the Secret's Kubernetes shape, not on the API crate's type for it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use meshlink_api::Kind;
use meshlink_store::{ListQuery, Object};
use meshlink_xds::hub::{IssuedIdentity, MeshTrust, SourceError};
use meshlink_xds::router::{SiteSource, SiteView, TlsMaterial};
use serde_json::Value;

use crate::resources::ResourceService;

/// The store kind of Secrets.
pub(crate) const SECRET_KIND: &str = "Secret";

/// Reads a site's router resources from the store.
pub(crate) struct StoreSiteSource {
    pub(crate) resources: ResourceService,
    /// The mesh CAs, for the router's mesh ingress certificates (`None`:
    /// no ingress is ever configured).
    pub(crate) meshes: Option<std::sync::Arc<crate::ads::StoreSource>>,
}

#[tonic::async_trait]
impl SiteSource for StoreSiteSource {
    async fn load(&self) -> Result<SiteView, SourceError> {
        let err = |e: crate::resources::ResourceError| SourceError(e.to_string());
        let mut view = SiteView::default();
        for kind in [
            Kind::Site,
            Kind::Mesh,
            Kind::RouterAccess,
            Kind::Link,
            Kind::Listener,
            Kind::MultiKeyListener,
            Kind::Connector,
        ] {
            for r in self.resources.list(kind, None, None).await.map_err(err)? {
                view.upsert(r);
            }
        }
        // A page at a time: the view keeps only what selectors read.
        self.resources
            .for_each(Kind::Dataplane, None, |r| {
                view.upsert(r);
            })
            .await
            .map_err(err)?;
        let secrets = self
            .resources
            .store()
            .list(&ListQuery {
                kind: SECRET_KIND.to_owned(),
                ..Default::default()
            })
            .await
            .map_err(|e| SourceError(e.to_string()))?;
        for obj in secrets {
            let Object {
                key,
                body,
                revision,
                ..
            } = obj;
            // Kuma's mesh-scoped Secrets are never router credentials.
            if !key.mesh.is_empty() {
                continue;
            }
            view.upsert_secret(key.name, tls_material(&body), revision);
        }
        Ok(view)
    }

    async fn mesh_trust(&self, mesh: &str) -> Result<Option<MeshTrust>, SourceError> {
        match &self.meshes {
            Some(m) => m.mesh_trust(mesh).await,
            None => Ok(None),
        }
    }

    async fn issue_router_identity(
        &self,
        mesh: &str,
        spiffe_id: &str,
        now: std::time::SystemTime,
    ) -> Result<IssuedIdentity, SourceError> {
        match &self.meshes {
            Some(m) => m.issue_router(mesh, spiffe_id, now).await,
            None => Err(SourceError("no mesh CA source".into())),
        }
    }
}

/// The TLS material of a stored Secret: `tls.crt`, `tls.key` and `ca.crt`
/// from `data` (base64) or `stringData` (text); missing entries are empty
/// (the translator names them). A redacted or undecodable value counts as
/// missing.
pub(crate) fn tls_material(body: &Value) -> TlsMaterial {
    let field = |name: &str| -> String {
        let scopes = [body, &body["spec"]];
        for scope in scopes {
            if let Some(s) = scope["stringData"][name].as_str() {
                return s.to_owned();
            }
            if let Some(s) = scope["data"][name].as_str() {
                if s.contains("-----BEGIN") {
                    return s.to_owned();
                }
                let compact: String = s.split_whitespace().collect();
                if let Ok(bytes) = STANDARD.decode(compact)
                    && let Ok(text) = String::from_utf8(bytes)
                {
                    return text;
                }
            }
        }
        String::new()
    };
    TlsMaterial {
        cert_chain_pem: field("tls.crt"),
        private_key_pem: field("tls.key"),
        ca_pem: field("ca.crt"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_base64_data_and_string_data_at_either_level() {
        let b64 = STANDARD.encode("-----BEGIN CERTIFICATE-----\nx\n");
        let top = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": b64, "tls.key": STANDARD.encode("k")},
            "stringData": {"ca.crt": "ca"}});
        let m = tls_material(&top);
        assert!(m.cert_chain_pem.starts_with("-----BEGIN CERTIFICATE"));
        assert_eq!((m.private_key_pem.as_str(), m.ca_pem.as_str()), ("k", "ca"));
        let nested = json!({"spec": {"data": {"ca.crt": STANDARD.encode("root")}}});
        let m = tls_material(&nested);
        assert_eq!(m.ca_pem, "root");
        assert!(m.cert_chain_pem.is_empty() && m.private_key_pem.is_empty());
    }

    #[tokio::test]
    async fn a_kuma_mesh_secret_never_shadows_a_tls_secret_of_the_same_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = meshlink_store::SqliteStore::open(&dir.path().join("store.db"))
            .await
            .unwrap();
        let resources = ResourceService::new(std::sync::Arc::new(store));
        let tls = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Secret",
            "metadata": {"name": "creds"},
            "spec": {"type": "kubernetes.io/tls", "data": {"tls.key": STANDARD.encode("k")}}});
        let kuma = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Secret",
            "metadata": {"name": "creds", "mesh": "m"},
            "spec": {"type": "system.kuma.io/secret", "data": {"value": STANDARD.encode("v")}}});
        for body in [tls, kuma] {
            let r = meshlink_api::Resource::from_json_unvalidated(body).unwrap();
            let key = crate::resources::key_of(r.kind(), r.mesh(), r.name());
            resources
                .store()
                .create(&key, r.labels(), &r.to_json())
                .await
                .unwrap();
        }
        let view = StoreSiteSource {
            resources,
            meshes: None,
        }
        .load()
        .await
        .unwrap();
        assert_eq!(view.secrets.len(), 1);
        assert_eq!(view.secrets["creds"].1.private_key_pem, "k");
    }
}

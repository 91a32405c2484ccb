//! The router's certificate in each mesh that needs a mesh ingress: issued
//! by the control plane from the mesh CA (through the [`SiteSource`]),
//! renewed at its renewal time, re-issued when the CA, the trust bundle or
//! the expected SPIFFE ID changes or when the mesh's certificate lifetime
//! drops below what the certificate has left (as a sidecar renews early,
//! issue 35 §2), dropped when the mesh no longer needs an ingress. Used by the router reconciler before each translation.

use std::collections::BTreeMap;
use std::time::SystemTime;

use tokio::time::Instant;

use super::hub::{RELOAD_RETRY, SiteSource};
use super::mesh_ingress::{MeshRouterIdentity, ingress_needs};
use super::view::SiteView;
use crate::hub::{IssuedIdentity, MeshTrust};
use crate::translate::names;

/// The router's identity in one mesh and when to renew it.
pub(super) struct HeldIdentity {
    identity: MeshRouterIdentity,
    ca_fingerprint: String,
    renew_at: SystemTime,
    not_before: SystemTime,
    not_after: SystemTime,
}

/// Keeps `held` current for every mesh of `view` that needs an ingress,
/// puts the identities into `view.mesh_identities`, and returns when to
/// run again (the earliest renewal; within a second after a failure,
/// which is logged).
pub(super) async fn refresh<S: SiteSource + ?Sized>(
    source: &S,
    view: &mut SiteView,
    held: &mut BTreeMap<String, HeldIdentity>,
) -> Option<Instant> {
    let site = view.site.as_ref().map(|s| s.name().to_owned());
    let needs = match &site {
        Some(_) => ingress_needs(view),
        None => BTreeMap::new(),
    };
    held.retain(|mesh, _| needs.contains_key(mesh));
    let now = SystemTime::now();
    let mut retry = false;
    for (mesh, need) in &needs {
        let site = site.as_deref().unwrap_or_default();
        let expected = names::router_spiffe_id(&need.trust_domain, site);
        let trust = match source.mesh_trust(mesh).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                held.remove(mesh);
                continue;
            }
            Err(e) => {
                tracing::warn!(mesh, error = %e, "cannot read the mesh CA for the router's mesh ingress; retrying");
                retry = true;
                continue;
            }
        };
        let current = held.get(mesh).is_some_and(|h| {
            h.identity.spiffe_id == expected
                && h.ca_fingerprint == trust.ca_fingerprint
                && h.identity.bundle_pem == trust.bundle_pem
                && now < h.renew_at
                && !meshlink_identity::outlives_lifetime(
                    h.not_before,
                    h.not_after,
                    now,
                    need.lifetime,
                )
        });
        if current {
            continue;
        }
        match source.issue_router_identity(mesh, &expected, now).await {
            Ok(issued) => {
                tracing::info!(mesh, spiffe_id = %expected, serial = %issued.info.serial, "issued the router's mesh ingress certificate");
                held.insert(mesh.clone(), hold(issued, trust, expected, now));
            }
            Err(e) => {
                tracing::warn!(mesh, error = %e, "cannot issue the router's mesh ingress certificate; retrying");
                retry = true;
            }
        }
    }
    view.mesh_identities = held
        .iter()
        .map(|(m, h)| (m.clone(), h.identity.clone()))
        .collect();
    let next = held.values().map(|h| h.renew_at).min().map(|at| {
        let wait = at.duration_since(now).unwrap_or_default();
        Instant::now() + wait
    });
    if retry {
        let soon = Instant::now() + RELOAD_RETRY;
        return Some(next.map_or(soon, |r| r.min(soon)));
    }
    next
}

fn hold(
    issued: IssuedIdentity,
    trust: MeshTrust,
    spiffe_id: String,
    now: SystemTime,
) -> HeldIdentity {
    let renew_at = meshlink_identity::renewal_time_from(
        now,
        issued.info.not_before,
        issued.info.not_after,
        meshlink_identity::random_jitter(),
    );
    HeldIdentity {
        not_before: issued.info.not_before,
        not_after: issued.info.not_after,
        identity: MeshRouterIdentity {
            chain_pem: issued.chain_pem,
            key_pem: issued.key_pem,
            bundle_pem: trust.bundle_pem,
            spiffe_id,
        },
        ca_fingerprint: trust.ca_fingerprint,
        renew_at,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use meshlink_api::Resource;
    use serde_json::json;

    use super::*;
    use crate::hub::{IdentityInfo, SourceError};
    use crate::router::SiteSource;

    /// Issues placeholder certificates valid from `now` (less the CA's
    /// 60 s backdating) for the lifetime set, counting them.
    #[derive(Default)]
    struct Issuer {
        issued: Mutex<Vec<Duration>>,
        lifetime: Mutex<Duration>,
    }

    #[tonic::async_trait]
    impl SiteSource for Issuer {
        async fn load(&self) -> Result<SiteView, SourceError> {
            Ok(SiteView::default())
        }

        async fn mesh_trust(&self, _mesh: &str) -> Result<Option<MeshTrust>, SourceError> {
            Ok(Some(MeshTrust {
                bundle_pem: "root".into(),
                ca_fingerprint: "ca-1".into(),
            }))
        }

        async fn issue_router_identity(
            &self,
            _mesh: &str,
            spiffe_id: &str,
            now: SystemTime,
        ) -> Result<IssuedIdentity, SourceError> {
            let lifetime = *self.lifetime.lock().unwrap();
            self.issued.lock().unwrap().push(lifetime);
            Ok(IssuedIdentity {
                chain_pem: "cert".into(),
                key_pem: "key".into(),
                info: IdentityInfo {
                    serial: "01".into(),
                    spiffe_id: spiffe_id.into(),
                    ca_fingerprint: "ca-1".into(),
                    not_before: now - Duration::from_secs(60),
                    not_after: now + lifetime,
                },
            })
        }
    }

    fn view(lifetime: &str) -> SiteView {
        let mut v = SiteView::default();
        for r in [
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Site",
                "metadata": {"name": "north"}, "spec": {}}),
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
                "metadata": {"name": "default"},
                "spec": {"mtls": {"enabledBackend": "ca-1", "backends": [{"name": "ca-1",
                    "type": "builtin", "dpCert": {"rotation": {"expiration": lifetime}}}]}}}),
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
                "metadata": {"name": "web-1", "mesh": "default"},
                "spec": {"networking": {"address": "10.0.0.1",
                    "inbound": [{"port": 8080, "tags": {"kuma.io/service": "web"}}],
                    "outbound": [{"port": 15000, "routingKey": "backend"}]}}}),
        ] {
            v.upsert(Resource::from_json(r).unwrap());
        }
        v
    }

    #[tokio::test]
    async fn a_lowered_mesh_lifetime_reissues_the_routers_certificate_once() {
        let source = Issuer::default();
        let mut held = BTreeMap::new();
        *source.lifetime.lock().unwrap() = Duration::from_secs(24 * 3600);
        let mut v = view("24h");
        refresh(&source, &mut v, &mut held).await;
        refresh(&source, &mut v, &mut held).await;
        assert_eq!(
            source.issued.lock().unwrap().len(),
            1,
            "a current certificate is kept"
        );

        // The mesh now issues 30 s certificates: the 24 h one has more left.
        *source.lifetime.lock().unwrap() = Duration::from_secs(30);
        let mut v = view("30s");
        let next = refresh(&source, &mut v, &mut held).await;
        assert_eq!(
            *source.issued.lock().unwrap(),
            vec![Duration::from_secs(24 * 3600), Duration::from_secs(30)]
        );
        assert!(v.mesh_identities.contains_key("default"));
        let next = next.expect("a renewal is scheduled");
        assert!(
            next <= Instant::now() + Duration::from_secs(30),
            "renewed within the new lifetime"
        );
        // The new certificate fits the lifetime: nothing more is issued.
        refresh(&source, &mut v, &mut held).await;
        assert_eq!(source.issued.lock().unwrap().len(), 2);
    }
}

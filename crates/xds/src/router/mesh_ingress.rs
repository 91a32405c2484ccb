//! The router's mesh ingress (issue 10 §5, "Mesh to network"): which
//! meshes need one, which routing keys it serves and who may use each, and
//! its `meshlink.v1.MeshIngress` resources with their SDS Secrets.
//!
//! A mesh with mTLS on in which some Dataplane has an outbound with a
//! `routingKey` gets one ingress. Authorization is default-deny: only the
//! SPIFFE IDs of the Dataplanes that declare an outbound to a key may open
//! flows to it. The router's certificate in that mesh is issued by the
//! control plane ([`MeshRouterIdentity`], filled in by the hub); without
//! it the ingress is withheld (I2). Pure: no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet};

use meshlink_api::spec::Spec;

use super::translate::{Withheld, ca_secret_name, certificate_secret_name, sds_pair};
use super::view::{SiteView, TlsMaterial};
use crate::certify as pb;
use crate::translate::{Snapshot, names};

/// The router's identity in one mesh, as the control plane issued it.
#[derive(Clone, PartialEq, Eq)]
pub struct MeshRouterIdentity {
    /// Leaf then intermediates, PEM.
    pub chain_pem: String,
    /// The private key, PEM. Never logged.
    pub key_pem: String,
    /// Every root of the mesh's trust bundle, PEM.
    pub bundle_pem: String,
    /// The SPIFFE ID the certificate carries.
    pub spiffe_id: String,
}

impl std::fmt::Debug for MeshRouterIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshRouterIdentity")
            .field("spiffe_id", &self.spiffe_id)
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// What one mesh's ingress serves: routing key → SPIFFE IDs allowed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IngressNeed {
    /// The mesh's trust domain.
    pub trust_domain: String,
    /// The certificate lifetime the mesh issues now.
    pub lifetime: std::time::Duration,
    /// Routing key → the SPIFFE IDs of the Dataplanes with an outbound to it.
    pub keys: BTreeMap<String, BTreeSet<String>>,
}

/// The meshes (mTLS on) whose Dataplanes have outbounds to routing keys,
/// by mesh name.
pub fn ingress_needs(view: &SiteView) -> BTreeMap<String, IngressNeed> {
    let mut out: BTreeMap<String, IngressNeed> = BTreeMap::new();
    for ((mesh, _), dp) in &view.dataplanes {
        let Some(Spec::Mesh(m)) = view.meshes.get(mesh).map(|r| &r.spec) else {
            continue;
        };
        if m.enabled_backend().is_none() {
            continue;
        }
        let Some(service) = dp.identity_service.as_deref() else {
            continue;
        };
        let trust_domain = m.trust_domain(mesh);
        let id = names::spiffe_id(trust_domain, service);
        for key in &dp.routing_keys {
            let need = out.entry(mesh.clone()).or_default();
            need.trust_domain = trust_domain.to_owned();
            need.lifetime = m.dp_cert_lifetime();
            need.keys
                .entry(key.to_owned())
                .or_default()
                .insert(id.clone());
        }
    }
    out
}

/// Adds the MeshIngress resources (and their Secrets) of `site`'s router,
/// or says in `withheld` what is missing.
pub(super) fn translate(
    view: &SiteView,
    site: &str,
    snapshot: &mut Snapshot,
    withheld: &mut Vec<Withheld>,
) {
    for (mesh, need) in ingress_needs(view) {
        let expected = names::router_spiffe_id(&need.trust_domain, site);
        let Some(identity) = view
            .mesh_identities
            .get(&mesh)
            .filter(|i| i.spiffe_id == expected)
        else {
            withheld.push(Withheld {
                kind: "MeshIngress",
                name: mesh.clone(),
                reason: format!(
                    "the router's certificate in mesh {mesh:?} ({expected}) is not issued yet; \
                     the control plane issues it from the mesh CA"
                ),
            });
            continue;
        };
        let credentials = names::router_mesh_credentials(&mesh);
        let material = TlsMaterial {
            cert_chain_pem: identity.chain_pem.clone(),
            private_key_pem: identity.key_pem.clone(),
            ca_pem: identity.bundle_pem.clone(),
        };
        let (cert, ca) = sds_pair(&credentials, &material);
        debug_assert_eq!(cert.name, certificate_secret_name(&credentials));
        debug_assert_eq!(ca.name, ca_secret_name(&credentials));
        snapshot.insert(cert.name.clone(), &cert);
        snapshot.insert(ca.name.clone(), &ca);
        let keys = need
            .keys
            .into_iter()
            .map(|(routing_key, allowed)| pb::MeshIngressKey {
                sni: names::network_sni(&routing_key),
                routing_key,
                allowed: allowed.into_iter().collect(),
            })
            .collect();
        snapshot.insert(
            mesh.clone(),
            &pb::MeshIngress {
                name: mesh,
                spiffe_id: expected,
                tls_credentials: credentials,
                keys,
            },
        );
    }
}

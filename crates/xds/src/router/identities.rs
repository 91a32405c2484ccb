//! The router's certificate in each mesh that needs a mesh ingress: issued
//! by the control plane from the mesh CA (through the [`SiteSource`]),
//! renewed at its renewal time, re-issued when the CA, the trust bundle or
//! the expected SPIFFE ID changes, dropped when the mesh no longer needs
//! an ingress. Used by the router reconciler before each translation.

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

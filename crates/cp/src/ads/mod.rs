//! The control plane's side of xDS: the store-backed [`MeshSource`], proxy
//! authentication, the sidecars' DataplaneHealth RPC (`dataplane_health.rs`),
//! and the task that feeds the reconciler the changed objects from the
//! store's change feed.
//!
//! [`MeshSource`]: meshlink_xds::hub::MeshSource

mod auth;
mod dataplane_health;
mod source;

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use meshlink_api::{Kind, Resource};
use meshlink_runtime::Shutdown;
use meshlink_store::{Change, ChangeType, Store};
use meshlink_xds::hub::{Hub, Update};
use meshlink_xds::router::{RouterHub, SiteChange};

pub(crate) use auth::ProxyAuth;
pub(crate) use dataplane_health::DataplaneHealthService;
pub(crate) use source::StoreSource;

use crate::identity::secrets::{MESH_CA, MESH_CA_STATE};

/// The reconcilers the change feed drives.
pub(crate) struct Reconcilers {
    /// Sidecars and proxyless clients.
    pub(crate) hub: Hub,
    /// The site's router.
    pub(crate) routers: RouterHub,
    /// Per Listener, the part sidecars depend on (routing key, host, port)
    /// as last seen in the feed: only a change of it re-lists the meshes,
    /// not the router status written into the Listener.
    pub(crate) listeners: HashMap<String, Option<(String, String, u16)>>,
    /// The Site's `status.meshIngress` as last seen in the feed: only a
    /// change of it re-lists the meshes.
    pub(crate) ingress: Option<(String, String)>,
}

/// What a Dataplane outbound to a routing key depends on in a Listener.
fn listener_target(body: &serde_json::Value) -> Option<(String, String, u16)> {
    let spec = &body["spec"];
    Some((
        spec["routingKey"].as_str()?.to_owned(),
        spec["host"].as_str()?.to_owned(),
        u16::try_from(spec["port"].as_u64()?).ok()?,
    ))
}

/// Whether objects of `kind` configure the site's router.
fn router_kind(kind: &str) -> bool {
    matches!(
        kind,
        "Site"
            | "Mesh"
            | "RouterAccess"
            | "Link"
            | "Listener"
            | "MultiKeyListener"
            | "Connector"
            | "Dataplane"
    )
}

/// Passes a router-relevant change (a Secret's TLS material, or one of the
/// [`router_kind`] objects) to the router reconciler.
fn pass_to_routers(routers: &RouterHub, change: &Change) {
    let key = &change.object.key;
    if key.kind == crate::router::source::SECRET_KIND {
        // Kuma's mesh-scoped Secrets are never router credentials.
        if !key.mesh.is_empty() {
            return;
        }
        let material = match change.change_type {
            ChangeType::Deleted => None,
            _ => Some(crate::router::source::tls_material(&change.object.body)),
        };
        routers.changed(SiteChange::Secret {
            name: key.name.clone(),
            material,
            revision: change.revision,
        });
        return;
    }
    if !router_kind(&key.kind) {
        return;
    }
    match Resource::from_json_unvalidated(change.object.body.clone()) {
        Ok(mut r) => {
            r.set_resource_version(Some(change.revision.to_string()));
            routers.changed(SiteChange::Resource(Box::new(match change.change_type {
                ChangeType::Deleted => Update::Deleted(r),
                ChangeType::Created | ChangeType::Updated => Update::Upserted(r),
            })));
        }
        Err(errs) => {
            tracing::warn!(object = %key, errors = ?errs, "cannot decode a changed object; re-loading the router's view");
            routers.reload();
        }
    }
}

/// Passes one store change to the reconcilers: router resources to the
/// router reconciler; Mesh, Dataplane, MeshTrafficPermission and MeshService objects as
/// they are to the hub (it decides what a change affects), CA material as
/// a trust change. Everything else, including `internal.IssuedCert`
/// bookkeeping, affects no proxy.
fn pass_on(to: &mut Reconcilers, change: Change) {
    pass_to_routers(&to.routers, &change);
    let hub = &to.hub;
    let key = &change.object.key;
    let mesh = match key.kind.as_str() {
        // Dataplane outbounds to a routing key target this site's
        // Listeners; their targets change rarely, so every mesh is
        // re-listed when one does (status writes do not count).
        "Listener" => {
            let target = match change.change_type {
                ChangeType::Deleted => None,
                _ => listener_target(&change.object.body),
            };
            let known = to.listeners.insert(key.name.clone(), target.clone());
            if known != Some(target) {
                hub.reload_all();
            }
            return;
        }
        // Mesh sidecars reach routing keys through the router's mesh
        // ingress, whose address the router reports into the Site status.
        "Site" => {
            let ingress = match change.change_type {
                ChangeType::Deleted => None,
                _ => source::site_ingress(&change.object.body),
            };
            if to.ingress != ingress {
                to.ingress = ingress;
                hub.reload_all();
            }
            return;
        }
        "Mesh" => key.name.clone(),
        // Every mesh-scoped kind (Dataplane, MeshTrafficPermission,
        // MeshService and the Kuma policies) touches its mesh's view.
        k if Kind::ALL
            .iter()
            .any(|kind| kind.is_mesh_scoped() && kind.as_str() == k) =>
        {
            key.mesh.clone()
        }
        k if k == MESH_CA || k == MESH_CA_STATE => {
            hub.trust_changed(key.mesh.clone());
            to.routers.trust_changed();
            return;
        }
        _ => return,
    };
    let object = change.object;
    let described = object.key.to_string();
    match Resource::from_json_unvalidated(object.body) {
        Ok(mut r) => {
            r.set_resource_version(Some(change.revision.to_string()));
            let update = match change.change_type {
                ChangeType::Deleted => Update::Deleted(r),
                ChangeType::Created | ChangeType::Updated => Update::Upserted(r),
            };
            hub.resource_changed(mesh, update);
        }
        Err(errs) => {
            // Cannot happen for objects the API validated; re-list rather
            // than guess.
            tracing::warn!(object = described, errors = ?errs, "cannot decode a changed object; re-listing its mesh");
            hub.mesh_changed(mesh);
        }
    }
}

/// Follows the store's change feed from revision `after` and feeds the
/// changed objects to the hub. Writes by other control planes sharing a
/// PostgreSQL store arrive here too. After a gap (the feed failed or
/// ended, or compaction left this follower behind its window) the hub
/// re-lists every mesh it caches.
pub(crate) async fn follow_changes(
    store: Arc<dyn Store>,
    mut after: u64,
    mut to: Reconcilers,
    shutdown: Shutdown,
) -> Result<(), crate::CpError> {
    loop {
        let mut feed = store.watch(after);
        loop {
            tokio::select! {
                () = shutdown.wait() => return Ok(()),
                next = feed.next() => match next {
                    Some(Ok(change)) => {
                        after = change.revision;
                        pass_on(&mut to, change);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "xDS change feed interrupted; resuming and re-listing");
                        // Behind the feed's window: the re-list below is
                        // the full resync; follow on after it.
                        if let Some(from) = meshlink_store::resync_revision(store.as_ref(), &e).await {
                            after = from;
                        }
                        break;
                    }
                    None => break,
                }
            }
        }
        to.hub.reload_all();
        to.routers.reload();
        tokio::select! {
            () = shutdown.wait() => return Ok(()),
            () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
    }
}

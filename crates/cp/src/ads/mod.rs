//! The control plane's side of xDS: the store-backed [`MeshSource`], proxy
//! authentication, and the task that feeds the reconciler the changed
//! objects from the store's change feed.
//!
//! [`MeshSource`]: meshlink_xds::hub::MeshSource

mod auth;
mod source;

use std::sync::Arc;

use futures::StreamExt;
use meshlink_api::Resource;
use meshlink_runtime::Shutdown;
use meshlink_store::{Change, ChangeType, Store};
use meshlink_xds::hub::{Hub, Update};

pub(crate) use auth::ProxyAuth;
pub(crate) use source::StoreSource;

use crate::identity::secrets::{MESH_CA, MESH_CA_STATE};

/// Passes one store change to the hub: Mesh, Dataplane and
/// MeshTrafficPermission objects as they are (the hub decides what a change
/// affects), CA material as a trust change. Everything else, including
/// `internal.IssuedCert` bookkeeping, affects no proxy.
fn pass_on(hub: &Hub, change: Change) {
    let key = &change.object.key;
    let mesh = match key.kind.as_str() {
        "Mesh" => key.name.clone(),
        "Dataplane" | "MeshTrafficPermission" => key.mesh.clone(),
        k if k == MESH_CA || k == MESH_CA_STATE => {
            hub.trust_changed(key.mesh.clone());
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
/// ended) the hub re-lists every mesh it caches.
pub(crate) async fn follow_changes(
    store: Arc<dyn Store>,
    mut after: u64,
    hub: Hub,
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
                        pass_on(&hub, change);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "xDS change feed interrupted; resuming and re-listing");
                        break;
                    }
                    None => break,
                }
            }
        }
        hub.reload_all();
        tokio::select! {
            () = shutdown.wait() => return Ok(()),
            () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
    }
}

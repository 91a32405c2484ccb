//! The control plane's side of xDS: the store-backed [`MeshSource`], proxy
//! authentication, and the task that tells the reconciler which meshes
//! changed.
//!
//! [`MeshSource`]: meshlink_xds::hub::MeshSource

mod auth;
mod source;

use std::sync::Arc;

use futures::StreamExt;
use meshlink_runtime::Shutdown;
use meshlink_store::Store;
use meshlink_xds::hub::Hub;

pub(crate) use auth::ProxyAuth;
pub(crate) use source::StoreSource;

use crate::identity::secrets::{MESH_CA, MESH_CA_STATE};

/// The mesh a store object belongs to, if its change can affect any
/// proxy's configuration.
fn affected_mesh(key: &meshlink_store::ObjectKey) -> Option<&str> {
    match key.kind.as_str() {
        "Mesh" => Some(&key.name),
        "Dataplane" | "MeshTrafficPermission" => Some(&key.mesh),
        k if k == MESH_CA || k == MESH_CA_STATE => Some(&key.mesh),
        _ => None,
    }
}

/// Follows the store's change feed from revision `after` and tells the hub
/// which meshes changed. Writes by other control planes sharing a
/// PostgreSQL store arrive here too.
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
                        if let Some(mesh) = affected_mesh(&change.object.key) {
                            hub.mesh_changed(mesh);
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "xDS change feed interrupted; resuming");
                        break;
                    }
                    None => break,
                }
            }
        }
        tokio::select! {
            () = shutdown.wait() => return Ok(()),
            () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
    }
}

//! The mesh identity controller: keeps every mesh's CA created and its
//! status (`Ready`, `CARotation`) current.
//!
//! It follows the store's change feed (its own and other control planes'
//! writes) and reconciles a mesh when the Mesh, its CA state or its issued
//! certificates change. While a rotation is in progress it also wakes at the
//! earliest expiry of a certificate from the old CA, since an expiry ends a
//! rotation without any write. It never regenerates an existing CA.

use std::collections::BTreeSet;
use std::time::SystemTime;

use futures::StreamExt;
use meshlink_api::{Condition, ConditionStatus, Kind, Resource};
use meshlink_identity::RotationPhase;
use meshlink_runtime::Shutdown;

use super::mesh_ca::{self, MeshCaError};
use super::secrets::{ISSUED_CERT, MESH_CA_STATE};
use crate::resources::{ResourceError, ResourceService};

/// Runs until shutdown.
pub async fn run(resources: ResourceService, shutdown: Shutdown) {
    let store = resources.store().clone();
    let mut after = loop {
        match store.current_revision().await {
            Ok(r) => break r,
            Err(e) => {
                tracing::warn!(error = %e, "mesh controller: store unavailable; retrying");
                tokio::select! {
                    _ = shutdown.wait() => return,
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                }
            }
        }
    };
    let mut deadline = reconcile_all(&resources).await;
    loop {
        let mut feed = store.watch(after);
        loop {
            let wake = async {
                match deadline {
                    Some(t) => {
                        let d = t.duration_since(SystemTime::now()).unwrap_or_default();
                        tokio::time::sleep(d).await
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown.wait() => return,
                _ = wake => deadline = reconcile_all(&resources).await,
                next = feed.next() => match next {
                    Some(Ok(change)) => {
                        after = change.revision;
                        let key = &change.object.key;
                        let mesh = match key.kind.as_str() {
                            "Mesh" => Some(key.name.clone()),
                            ISSUED_CERT | MESH_CA_STATE => Some(key.mesh.clone()),
                            _ => None,
                        };
                        if let Some(m) = mesh
                            && let Some(d) = reconcile(&resources, &m).await
                        {
                            deadline = Some(deadline.map_or(d, |x| x.min(d)));
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "mesh controller: change feed interrupted; resuming");
                        break;
                    }
                    None => break,
                }
            }
        }
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
    }
}

async fn reconcile_all(resources: &ResourceService) -> Option<SystemTime> {
    let names: BTreeSet<String> = match resources.list(Kind::Mesh, None, None).await {
        Ok(ms) => ms.iter().map(|m| m.name().to_string()).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "mesh controller: cannot list meshes");
            return None;
        }
    };
    let mut deadline = None;
    for m in names {
        if let Some(d) = reconcile(resources, &m).await {
            deadline = Some(deadline.map_or(d, |x: SystemTime| x.min(d)));
        }
    }
    deadline
}

fn cond(t: &str, ok: bool, reason: &str, message: String) -> Condition {
    let s = if ok {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    Condition::now(t, s, reason, message)
}

/// Ensures the mesh's CAs and writes its status. Returns when it next needs
/// a look (an old-CA certificate expiry during rotation).
async fn reconcile(resources: &ResourceService, name: &str) -> Option<SystemTime> {
    let mesh = match resources.get(Kind::Mesh, None, name).await {
        Ok(m) => m,
        Err(ResourceError::NotFound(_)) => return None,
        Err(e) => {
            tracing::warn!(mesh = name, error = %e, "mesh controller: cannot read mesh");
            return None;
        }
    };
    let (ready, rotation, deadline) = match mesh_ca::ensure(resources.store().as_ref(), &mesh).await
    {
        Ok(id) => {
            let fp = &id.ca.fingerprint()[..16];
            let ready = cond(
                "Ready",
                true,
                "CAReady",
                format!(
                    "mTLS backend {} ready; CA fingerprint {fp}…; workload certificates live {}",
                    id.backend,
                    humantime::format_duration(id.lifetime)
                ),
            );
            let rotation = match &id.rotation.phase {
                RotationPhase::Stable => cond(
                    "CARotation",
                    false,
                    "Stable",
                    format!("trust bundle holds the {} CA only", id.backend),
                ),
                RotationPhase::Rotating {
                    old,
                    proxies_on_old,
                    ..
                } => cond(
                    "CARotation",
                    true,
                    "Rotating",
                    format!(
                        "rotating to {}: {proxies_on_old} dataplane(s) still hold certificates from CA {}…; the trust bundle carries both roots until they renew or expire",
                        id.backend,
                        &old[..16.min(old.len())]
                    ),
                ),
            };
            (ready, rotation, id.rotation_deadline)
        }
        Err(MeshCaError::MtlsDisabled(_)) => (
            cond(
                "Ready",
                true,
                "MTLSDisabled",
                "mTLS is off: traffic is neither encrypted nor authorized".into(),
            ),
            cond("CARotation", false, "Stable", "no CA in use".into()),
            None,
        ),
        Err(e @ MeshCaError::Invalid { .. }) => (
            cond("Ready", false, "CAInvalid", e.to_string()),
            cond("CARotation", false, "Stable", "no usable CA".into()),
            None,
        ),
        Err(e @ MeshCaError::Store(_)) => {
            tracing::warn!(mesh = name, error = %e, "mesh controller: store error");
            return None;
        }
    };
    write_status(resources, &mesh, [ready, rotation]).await;
    deadline
}

async fn write_status(resources: &ResourceService, mesh: &Resource, conds: [Condition; 2]) {
    let mut next = mesh.clone();
    for c in conds {
        next.set_condition(c);
    }
    if next.status == mesh.status {
        return;
    }
    let expected = mesh.resource_version().and_then(|v| v.parse().ok());
    match resources
        .set_status(Kind::Mesh, None, mesh.name(), next.status, expected)
        .await
    {
        Ok(_) | Err(ResourceError::Conflict(_)) | Err(ResourceError::NotFound(_)) => {}
        Err(e) => {
            tracing::warn!(mesh = mesh.name(), error = %e, "mesh controller: cannot write status")
        }
    }
}

//! MeshService status: which Dataplanes each MeshService selects now, and
//! how many of their proxies are connected (Kuma's `dataplaneProxies`),
//! and its `ProtocolAgreed` condition (`mesh_service_protocol.rs`).
//!
//! Owns [`MeshServiceStatuses`], the part of the status task's state that
//! tracks meshes with MeshServices. A mesh is recomputed (one listing of
//! its Dataplanes and MeshServices) at the next flush after a Dataplane or
//! MeshService of it changed or one of its proxies connected or
//! disconnected; a status is written only when it differs from what this
//! task last wrote. Meshes without MeshServices cost nothing. No VIPs or
//! hostnames are assigned, so the status lists none.

use std::collections::{HashMap, HashSet};

use meshlink_api::spec::{DataplaneProxies, MeshServiceStatus, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Kind, Resource};
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::MeshView;

use super::protocol::CONDITION;
use super::{State, StatusError, mesh_service_protocol, writer};
use crate::resources::ResourceError;

/// What the status task keeps for MeshService status.
#[derive(Default)]
pub(super) struct MeshServiceStatuses {
    /// Meshes with at least one MeshService.
    meshes: HashSet<String>,
    /// Meshes to recompute at the next flush.
    dirty: HashSet<String>,
    /// The status last written per (mesh, MeshService).
    written: HashMap<(String, String), Written>,
}

// === impl MeshServiceStatuses ===

impl MeshServiceStatuses {
    /// A MeshService of `mesh` was listed or created.
    pub(super) fn mesh_service_seen(&mut self, mesh: &str) {
        self.meshes.insert(mesh.to_owned());
        self.dirty.insert(mesh.to_owned());
    }

    /// A Dataplane of `mesh` changed, or its proxy (dis)connected.
    pub(super) fn dataplane_changed(&mut self, mesh: &str) {
        if self.meshes.contains(mesh) {
            self.dirty.insert(mesh.to_owned());
        }
    }
}

/// What this task wrote to a MeshService: its status fields and its
/// `ProtocolAgreed` condition without the transition time.
type Written = (MeshServiceStatus, Option<(ConditionStatus, String, String)>);

/// `c` without its transition time, to compare.
fn shape(c: Option<&Condition>) -> Option<(ConditionStatus, String, String)> {
    c.map(|c| (c.status, c.reason.clone(), c.message.clone()))
}

/// The status of `ms`: the Dataplanes it selects among `dataplanes`, and
/// how many of them `connected` says are online.
fn status_of(
    ms: &Resource,
    dataplanes: &[Resource],
    connected: impl Fn(&str) -> bool,
) -> Option<MeshServiceStatus> {
    let spec = ms.spec.as_mesh_service()?;
    let mut names: Vec<String> = dataplanes
        .iter()
        .filter(|d| {
            d.spec
                .as_dataplane()
                .is_some_and(|dp| spec.selects(d.name(), d.labels(), dp))
        })
        .map(|d| d.name().to_owned())
        .collect();
    names.sort();
    let total = names.len() as u64;
    let online = names.iter().filter(|n| connected(n)).count() as u64;
    names.truncate(MeshServiceStatus::MAX_NAMES);
    Some(MeshServiceStatus {
        dataplane_proxies: Some(DataplaneProxies {
            connected: online,
            total,
        }),
        dataplanes: names,
    })
}

// === impl State ===

impl State {
    /// Recomputes the MeshServices of every dirty mesh and writes the
    /// statuses that changed.
    pub(super) async fn write_mesh_services(&mut self) {
        for mesh in std::mem::take(&mut self.mesh_services.dirty) {
            if let Err(e) = self.write_mesh_services_of(&mesh).await {
                tracing::warn!(%mesh, error = %e, "status: cannot write MeshService status; retrying");
                self.mesh_services.dirty.insert(mesh);
            }
        }
    }

    async fn write_mesh_services_of(&mut self, mesh: &str) -> Result<(), StatusError> {
        let services = self
            .resources
            .list(Kind::MeshService, Some(mesh), None)
            .await?;
        if services.is_empty() {
            self.mesh_services.meshes.remove(mesh);
            self.mesh_services.written.retain(|(m, _), _| m != mesh);
            return Ok(());
        }
        let dataplanes = self
            .resources
            .list(Kind::Dataplane, Some(mesh), None)
            .await?;
        let mesh_resource = match self.resources.get(Kind::Mesh, None, mesh).await {
            Ok(m) => m,
            // The mesh went away with its MeshServices.
            Err(ResourceError::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let view = MeshView::new(mesh_resource, dataplanes.clone(), Vec::new())
            .with_mesh_services(services.clone());
        let connected = |name: &str| {
            self.proxies
                .get(&ProxyKey::new(mesh, name))
                .is_some_and(|p| p.online)
        };
        let mut writes = Vec::new();
        for ms in &services {
            let Some(status) = status_of(ms, &dataplanes, connected) else {
                continue;
            };
            let agreed = mesh_service_protocol::condition(&view, ms);
            let want: Written = (status, shape(agreed.as_ref()));
            let key = (mesh.to_owned(), ms.name().to_owned());
            let stored_fields = match &ms.status.details {
                StatusDetails::MeshService(s) => Some(s),
                _ => None,
            };
            let stored = stored_fields == Some(&want.0) && shape(ms.condition(CONDITION)) == want.1;
            if self.mesh_services.written.get(&key) != Some(&want) || !stored {
                writes.push((key, want, agreed));
            }
        }
        for ((mesh, name), want, agreed) in writes {
            let details = StatusDetails::MeshService(want.0.clone());
            let r = writer::merge(
                &self.resources,
                Kind::MeshService,
                Some(&mesh),
                &name,
                |r| {
                    r.status.details = details.clone();
                    if let Some(c) = &agreed {
                        r.set_condition(c.clone());
                    }
                },
            )
            .await;
            match r {
                Ok(_) | Err(StatusError::Resource(ResourceError::NotFound(_))) => {
                    self.mesh_services.written.insert((mesh, name), want);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn r(v: serde_json::Value) -> Resource {
        Resource::from_json(v).expect("valid")
    }

    #[test]
    fn status_lists_the_selected_dataplanes_and_counts_the_connected() {
        let ms = r(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "MeshService",
            "metadata": {"name": "db", "mesh": "m"},
            "spec": {"selector": {"dataplaneTags": {"kuma.io/service": "db"}},
                     "ports": [{"port": 5432}]},
        }));
        let dp = |name: &str, service: &str| {
            r(json!({
                "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
                "metadata": {"name": name, "mesh": "m"},
                "spec": {"networking": {"address": "10.0.0.1",
                    "inbound": [{"port": 5432, "tags": {"kuma.io/service": service}}]}},
            }))
        };
        let dps = [dp("db-2", "db"), dp("web-1", "web"), dp("db-1", "db")];
        let status = status_of(&ms, &dps, |n| n == "db-2").expect("a MeshService");
        assert_eq!(status.dataplanes, ["db-1", "db-2"]);
        assert_eq!(
            status.dataplane_proxies,
            Some(DataplaneProxies {
                connected: 1,
                total: 2
            })
        );
    }
}

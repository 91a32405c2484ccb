//! `status` of a Mesh: the virtual IPs the control plane assigned to its
//! destinations for transparent proxying. Server-owned (the VIP
//! allocator writes it; nobody else does).
//!
//! A VIP stays with its destination while the destination exists, across
//! control-plane restarts and replicas (it is stored here); the
//! translator sends a sidecar the names of the destinations that exist
//! now, so a deleted destination stops resolving whether or not its entry
//! was removed yet.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `status` of a Mesh.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshStatus {
    /// `kuma.io/service` name → its virtual IP (`<service>.mesh`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vips: BTreeMap<String, String>,
    /// MeshService name → its virtual IP (its hostname).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mesh_service_vips: BTreeMap<String, String>,
}

impl MeshStatus {
    /// Every assigned address, of both maps.
    pub fn addresses(&self) -> impl Iterator<Item = &str> {
        self.vips
            .values()
            .chain(self.mesh_service_vips.values())
            .map(String::as_str)
    }
}

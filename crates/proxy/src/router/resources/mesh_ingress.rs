//! The router's `meshlink.v1.MeshIngress` resources: their validation and
//! their mapping to the link crate's [`MeshIngressConfig`] (one port for
//! every mesh, on `--bind-host:--mesh-port`).

use std::collections::BTreeMap;

use meshlink_link::{CredentialPem, MeshIngressConfig, MeshIngressKey, MeshIngressMesh};
use meshlink_proto::certify as pb;

use super::invalid;
use crate::model::Versioned;
use crate::xds::validate::Invalid;

/// Refuses a MeshIngress without its Secret's name, or with a key that
/// has no SNI or routing key.
pub(super) fn check(m: pb::MeshIngress) -> Result<pb::MeshIngress, Invalid> {
    if m.tls_credentials.is_empty() {
        return Err(invalid(
            "tls_credentials",
            "is empty; name the router's mesh certificate Secret",
        ));
    }
    for (i, k) in m.keys.iter().enumerate() {
        if k.sni.is_empty() {
            return Err(invalid(&format!("keys[{i}].sni"), "is empty"));
        }
        if k.routing_key.is_empty() {
            return Err(invalid(&format!("keys[{i}].routing_key"), "is empty"));
        }
    }
    Ok(m)
}

/// The link crate's mesh ingress, if any mesh needs one; a mesh whose
/// credential has not arrived has none (the ingress stays warming).
pub(super) fn config(
    ingresses: &BTreeMap<String, Versioned<pb::MeshIngress>>,
    credentials: &BTreeMap<String, CredentialPem>,
    bind_host: &str,
    mesh_port: u16,
) -> Option<MeshIngressConfig> {
    (!ingresses.is_empty()).then(|| MeshIngressConfig {
        host: bind_host.to_owned(),
        port: mesh_port,
        meshes: ingresses
            .values()
            .map(|m| MeshIngressMesh {
                name: m.value.name.clone(),
                credential: credentials.get(&m.value.tls_credentials).cloned(),
                keys: m
                    .value
                    .keys
                    .iter()
                    .map(|k| MeshIngressKey {
                        sni: k.sni.clone(),
                        routing_key: k.routing_key.clone(),
                        allowed: k.allowed.clone(),
                    })
                    .collect(),
            })
            .collect(),
    })
}

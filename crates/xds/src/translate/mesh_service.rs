//! MeshService destinations: what an outbound with `backendRef {kind:
//! MeshService, name, port}` becomes.
//!
//! Owns the selection rules applied to the view (which Dataplanes a
//! MeshService selects, which of their inbounds serve a port), the
//! endpoints of a MeshService port, the SPIFFE IDs a client accepts from
//! its backends, and the Cluster and load assignment of each MeshService
//! port (sidecar and proxyless gRPC shapes). A backendRef to a MeshService
//! or port that does not exist yields a Cluster without endpoints, never
//! an error: resources may arrive in any order (I2).

use std::collections::{BTreeMap, BTreeSet};

use meshlink_api::spec::{DataplaneSpec, IdentityType, MeshServiceSpec};

use super::endpoints::assignment;
use super::memo::Memo;
use super::protocol::{self, Protocol};
use super::sidecar::{ClusterTuning, destination_cluster};
use super::snapshot::Versioned;
use super::{MeshView, Snapshot, http, names, tls};

/// `(MeshService name, port)` of every outbound of `dp` with a backendRef.
pub fn mesh_service_outbounds(dp: &DataplaneSpec) -> BTreeSet<(String, u16)> {
    dp.networking
        .outbound
        .iter()
        .filter_map(|o| o.mesh_service())
        .map(|(n, p)| (n.to_owned(), p))
        .collect()
}

/// The Dataplanes (name, spec) `ms` selects in `view`, in no particular
/// order.
pub fn selected_dataplanes<'a>(
    view: &'a MeshView,
    ms: &'a MeshServiceSpec,
) -> impl Iterator<Item = (&'a str, &'a DataplaneSpec)> + 'a {
    view.dataplanes()
        .iter()
        .filter(move |r| ms.selects(r.name(), r.labels(), &r.spec))
        .map(|r| (r.name(), &r.spec))
}

/// `(address, inbound port)` of every ready inbound of a selected
/// Dataplane that serves port `port` of MeshService `name`, sorted; empty
/// when either does not exist.
pub(super) fn endpoints(view: &MeshView, name: &str, port: u16) -> Vec<(String, u16)> {
    let Some(ms) = view.mesh_service(name) else {
        return Vec::new();
    };
    let Some(p) = ms.port(port) else {
        return Vec::new();
    };
    let mut out: Vec<(String, u16)> = selected_dataplanes(view, ms)
        .flat_map(|(_, dp)| {
            dp.networking
                .inbound
                .iter()
                .filter(|i| p.targets(i) && i.is_ready())
                .map(|i| {
                    (
                        i.effective_address(&dp.networking.address).to_owned(),
                        i.port.get(),
                    )
                })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The SPIFFE IDs a client accepts from the backends of MeshService
/// `name`: its `identities` if set (`ServiceTag` as the service's SPIFFE
/// ID), else the identity of every selected Dataplane. Never empty: with
/// none, [`names::no_identity`], which no workload certificate carries, so
/// every connection fails verification (an empty list would accept any
/// certificate of the mesh).
pub(super) fn accepted_identities(view: &MeshView, name: &str) -> Vec<String> {
    let td = view.trust_domain();
    let mut ids: Vec<String> = match view.mesh_service(name) {
        Some(ms) => match &ms.identities {
            Some(list) => list
                .iter()
                .map(|i| match i.type_ {
                    IdentityType::SpiffeID => i.value.clone(),
                    _ => names::spiffe_id(td, &i.value),
                })
                .collect(),
            None => selected_dataplanes(view, ms)
                .filter_map(|(n, dp)| dp.identity_service(n))
                .map(|s| names::spiffe_id(td, s))
                .collect(),
        },
        None => Vec::new(),
    };
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        ids.push(names::no_identity(td, name));
    }
    ids
}

/// The Clusters and load assignments of `destinations` (MeshService name,
/// port → what MeshTimeout and MeshCircuitBreaker set on it). `identity`
/// is the sidecar's SDS identity secret (mTLS on); `grpc` selects the
/// proxyless shape (certificate providers).
pub(super) fn clusters(
    snap: &mut Snapshot,
    view: &MeshView,
    identity: Option<&String>,
    grpc: bool,
    destinations: &BTreeMap<(String, u16), ClusterTuning>,
    memo: &mut Memo,
) {
    for ((name, port), tuning) in destinations {
        let cluster = names::mesh_service_cluster(name, *port);
        // Proxyless gRPC clients keep their shape whatever the protocol.
        let protocol = match grpc {
            true => Protocol::Tcp,
            false => protocol::mesh_service_port(view, name, *port),
        };
        let key = tuning.key(cluster.clone(), identity.cloned(), grpc, protocol);
        let encoded = memo.cluster(key, || {
            let ids = || accepted_identities(view, name);
            let alpn: &[&str] = match protocol.is_http() {
                true => http::UPSTREAM_ALPN,
                false => &[],
            };
            let transport = if grpc {
                view.mtls_enabled()
                    .then(|| tls::upstream_cert_provider_any(ids()))
            } else {
                identity
                    .map(|id| tls::upstream_sds_any_alpn(id.clone(), view.mesh_name(), ids(), alpn))
            };
            Versioned::encode(&destination_cluster(
                cluster.clone(),
                transport,
                protocol,
                tuning,
            ))
        });
        snap.insert_shared(cluster.clone(), encoded);
        let cla = memo.assignment(&cluster, || {
            Versioned::encode(&assignment(cluster.clone(), endpoints(view, name, *port)))
        });
        snap.insert_shared(cluster, cla);
    }
}

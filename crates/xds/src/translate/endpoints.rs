//! Endpoints of destination services (EDS) and socket addresses.
//!
//! Owns which dataplanes back a service: every Dataplane of the mesh with
//! an inbound carrying that service tag, endpoint = dataplane address +
//! inbound port, sorted; none in a Mesh whose `meshServices.mode` is
//! `Exclusive`. (MeshService endpoints: `mesh_service.rs`.) An inbound that
//! is not ready (`health.ready: false`, or its application reported
//! unreachable: `view::effective_health`) backs nothing. It must never
//! filter by locality or by anything else the view does not hold.

use envoy_types::pb::envoy::config::core::v3::{
    Address, Locality, SocketAddress, address, socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint::HostIdentifier,
};
use envoy_types::pb::google::protobuf::UInt32Value;

use meshlink_api::spec::Tags;

use super::{MeshView, names};

/// A TCP socket address.
pub(super) fn socket_address(address: &str, port: u16) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            protocol: socket_address::Protocol::Tcp as i32,
            address: address.to_owned(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(port))),
            ..Default::default()
        })),
    }
}

fn weight(value: u32) -> Option<UInt32Value> {
    Some(UInt32Value { value })
}

/// One endpoint (weight 1) on `address:port`.
pub(super) fn lb_endpoint(address: &str, port: u16) -> LbEndpoint {
    LbEndpoint {
        host_identifier: Some(HostIdentifier::Endpoint(Endpoint {
            address: Some(socket_address(address, port)),
            ..Default::default()
        })),
        load_balancing_weight: weight(1),
        ..Default::default()
    }
}

/// The load assignment of `cluster_name` from `endpoints`, in one locality
/// with weight 1 (gRPC ignores localities without a weight).
pub(super) fn assignment(
    cluster_name: String,
    endpoints: impl IntoIterator<Item = (String, u16)>,
) -> ClusterLoadAssignment {
    let lb_endpoints: Vec<_> = endpoints
        .into_iter()
        .map(|(a, p)| lb_endpoint(&a, p))
        .collect();
    let localities = if lb_endpoints.is_empty() {
        Vec::new()
    } else {
        vec![LocalityLbEndpoints {
            locality: Some(Locality::default()),
            lb_endpoints,
            load_balancing_weight: weight(1),
            ..Default::default()
        }]
    };
    ClusterLoadAssignment {
        cluster_name,
        endpoints: localities,
        ..Default::default()
    }
}

/// The EDS resource of destination `service`: no endpoints when the
/// Mesh's `meshServices.mode` is `Exclusive` (only MeshServices define
/// destinations there).
pub(super) fn service_assignment(view: &MeshView, service: &str) -> ClusterLoadAssignment {
    let endpoints = view
        .endpoints_of(service)
        .filter(|_| view.tag_destinations())
        .cloned();
    assignment(names::service_cluster(service), endpoints)
}

/// The EDS resource of a `MeshServiceSubset` backend: the ready inbounds
/// of `service` whose tags include every one of `tags`, sorted (none in an
/// `Exclusive` mesh, as for the whole service).
pub(super) fn subset_assignment(
    view: &MeshView,
    service: &str,
    tags: &Tags,
) -> ClusterLoadAssignment {
    let mut endpoints: Vec<(String, u16)> = view
        .dataplane_specs()
        .filter(|_| view.tag_destinations())
        .flat_map(|(_, dp)| {
            dp.networking
                .inbound
                .iter()
                .filter(|i| i.service() == Some(service) && i.is_ready())
                .filter(|i| tags.iter().all(|(k, v)| i.tags.get(k) == Some(v)))
                .map(|i| {
                    (
                        i.effective_address(&dp.networking.address).to_owned(),
                        i.port.get(),
                    )
                })
        })
        .collect();
    endpoints.sort();
    endpoints.dedup();
    assignment(names::subset_cluster(service, tags), endpoints)
}

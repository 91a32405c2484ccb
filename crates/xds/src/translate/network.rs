//! A sidecar outbound to a routing key of the multi-site network.
//!
//! Owns how such an outbound reaches its key: through this site's router
//! mesh ingress over mTLS (the key chosen by SNI), or, without mTLS, as
//! plain TCP to this site's router Listeners for the key. It is always
//! `tcp`: the L7 shape never applies to routing keys.

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, cluster::ClusterDiscoveryType, cluster::DiscoveryType, cluster::LbPolicy,
};
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};

use super::endpoints::{assignment, socket_address};
use super::sidecar::{CONNECT_TIMEOUT, tcp_proxy};
use super::{MeshView, Snapshot, names, tls};

/// An outbound to a routing key of the multi-site network. With mTLS on
/// (`identity` is the sidecar's SDS identity): mTLS to this site's router
/// mesh ingress, the key chosen by SNI, the router's SPIFFE ID required;
/// no endpoint until the router reported the ingress bound. Without mTLS:
/// plain TCP to this site's router Listeners for the key (none: no
/// endpoints, connections are refused until one exists).
pub(super) fn outbound(
    snap: &mut Snapshot,
    view: &MeshView,
    identity: Option<&str>,
    address: &str,
    port: u16,
    key: &str,
) {
    let name = names::outbound_listener(address, port);
    let cluster_name = names::network_cluster(key);
    let listener = Listener {
        name: name.clone(),
        address: Some(socket_address(address, port)),
        filter_chains: vec![FilterChain {
            filters: vec![tcp_proxy(&name, cluster_name.clone())],
            ..Default::default()
        }],
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    };
    snap.insert(name, &listener);
    let (targets, transport_socket) = match identity {
        Some(id) => {
            let ingress = view.mesh_ingress();
            let targets: Vec<(String, u16)> = ingress
                .map(|i| (i.host.clone(), i.port))
                .into_iter()
                .collect();
            // Without a reported ingress there is no endpoint; the SAN
            // then names no router, so nothing could pass anyway.
            let site = ingress.map_or("", |i| i.site.as_str());
            let router = names::router_spiffe_id(view.trust_domain(), site);
            let tls = tls::upstream_sds_sni(
                id.to_owned(),
                view.mesh_name(),
                router,
                names::network_sni(key),
            );
            (targets, Some(tls))
        }
        None => (view.network().get(key).cloned().unwrap_or_default(), None),
    };
    let cluster = Cluster {
        name: cluster_name.clone(),
        connect_timeout: Some(CONNECT_TIMEOUT),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        lb_policy: LbPolicy::RoundRobin as i32,
        load_assignment: Some(assignment(cluster_name.clone(), targets)),
        transport_socket,
        ..Default::default()
    };
    snap.insert(cluster_name, &cluster);
}

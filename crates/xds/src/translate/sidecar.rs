//! Sidecar resources (meshlink-proxy and Envoy clients).
//!
//! Owns the shape of a sidecar's configuration: one TCP listener per
//! inbound (TLS + RBAC when mTLS is on, then `tcp_proxy` to the local
//! application cluster), one per outbound (`tcp_proxy` to the destination
//! service), and an EDS cluster plus load assignment per destination. It
//! must never emit secret contents (see `tls::secrets`).

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, cluster::ClusterDiscoveryType, cluster::DiscoveryType, cluster::EdsClusterConfig,
    cluster::LbPolicy,
};
use envoy_types::pb::envoy::config::core::v3::{TrafficDirection, TransportSocket};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier,
};
use envoy_types::pb::google::protobuf::Duration;
use envoy_types::util::pack_any;
use meshlink_api::spec::{DataplaneSpec, Inbound, InboundTarget};

use super::endpoints::{assignment, socket_address};
use super::memo::{ClusterKey, Memo};
use super::snapshot::Versioned;
use super::{MeshView, Snapshot, mesh_service, names, rbac, tls};

/// Envoy's name of the TCP proxy filter.
const TCP_PROXY_FILTER: &str = "envoy.filters.network.tcp_proxy";

/// Connect timeout of every generated cluster.
const CONNECT_TIMEOUT: Duration = Duration {
    seconds: 5,
    nanos: 0,
};

/// Emits the listeners, clusters and load assignments of a sidecar;
/// destination clusters, load assignments and RBAC principals come from
/// (and go into) `memo`.
pub(super) fn build(
    snap: &mut Snapshot,
    view: &MeshView,
    name: &str,
    dp: &DataplaneSpec,
    memo: &mut Memo,
) {
    let identity = tls::identity_secret_name(dp, name).filter(|_| view.mtls_enabled());
    let no_labels = BTreeMap::new();
    let labels = view
        .dataplane_resource(name)
        .map_or(&no_labels, |r| r.labels());
    for inbound in &dp.networking.inbound {
        let target = InboundTarget {
            dataplane: name,
            labels,
            port: inbound.port.get(),
            name: inbound.name.as_deref(),
            tags: &inbound.tags,
        };
        inbound_resources(snap, view, dp, inbound, &target, identity.as_deref(), memo);
    }
    let mut destinations = BTreeSet::new();
    let mut mesh_services = BTreeSet::new();
    for outbound in &dp.networking.outbound {
        if let Some((ms, ms_port)) = outbound.mesh_service() {
            let (address, port) = (outbound.address(), outbound.port.get());
            mesh_service::sidecar_listener(snap, address, port, ms, ms_port);
            mesh_services.insert((ms.to_owned(), ms_port));
            continue;
        }
        if let Some(key) = outbound.routing_key() {
            let (address, port) = (outbound.address(), outbound.port.get());
            network_outbound(snap, view, identity.as_deref(), address, port, key);
            continue;
        }
        let Some(service) = outbound.service() else {
            continue;
        };
        let port = outbound.port.get();
        let name = names::outbound_listener(outbound.address(), port);
        let listener = Listener {
            name: name.clone(),
            address: Some(socket_address(outbound.address(), port)),
            filter_chains: vec![FilterChain {
                filters: vec![tcp_proxy(&name, names::service_cluster(service))],
                ..Default::default()
            }],
            traffic_direction: TrafficDirection::Outbound as i32,
            ..Default::default()
        };
        snap.insert(name, &listener);
        destinations.insert(service);
    }
    for service in destinations {
        let key = ClusterKey {
            service: service.to_owned(),
            identity: identity.clone(),
            grpc: false,
        };
        let name = names::service_cluster(service);
        let cluster = memo.cluster(key, || {
            let transport = identity.as_ref().map(|id| {
                let spiffe = names::spiffe_id(view.trust_domain(), service);
                tls::upstream_sds(id.clone(), view.mesh_name(), spiffe)
            });
            Versioned::encode(&eds_cluster(name.clone(), transport))
        });
        snap.insert_shared(name.clone(), cluster);
        let cla = super::service_load_assignment(view, memo, service);
        snap.insert_shared(name, cla);
    }
    mesh_service::clusters(snap, view, identity.as_ref(), false, &mesh_services, memo);
}

/// An outbound to a routing key of the multi-site network. With mTLS on
/// (`identity` is the sidecar's SDS identity): mTLS to this site's router
/// mesh ingress, the key chosen by SNI, the router's SPIFFE ID required;
/// no endpoint until the router reported the ingress bound. Without mTLS:
/// plain TCP to this site's router Listeners for the key (none: no
/// endpoints, connections are refused until one exists).
fn network_outbound(
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

fn inbound_resources(
    snap: &mut Snapshot,
    view: &MeshView,
    dp: &DataplaneSpec,
    inbound: &Inbound,
    target: &InboundTarget<'_>,
    identity: Option<&str>,
    memo: &mut Memo,
) {
    // A tagless inbound (selected by a MeshService) is named after the
    // Dataplane's identity.
    let Some(service) = inbound.service().or(dp.identity_service(target.dataplane)) else {
        return;
    };
    let address = inbound.effective_address(&dp.networking.address);
    let port = inbound.port.get();
    let service_port = inbound.effective_service_port();
    let name = names::inbound_listener(address, port);
    let local = names::inbound_cluster(service, service_port);

    let mut filters = Vec::new();
    let mut transport_socket = None;
    if let Some(identity) = identity {
        let key = rbac::rbac_key(view, target);
        let sources = memo.rbac(key, || rbac::inbound_sources(view, target));
        filters.extend(rbac::inbound_filters(&sources, &name));
        transport_socket = Some(tls::downstream_sds(identity.to_owned(), view.mesh_name()));
    }
    filters.push(tcp_proxy(&name, local.clone()));
    let listener = Listener {
        name: name.clone(),
        address: Some(socket_address(address, port)),
        filter_chains: vec![FilterChain {
            filters,
            transport_socket,
            ..Default::default()
        }],
        traffic_direction: TrafficDirection::Inbound as i32,
        ..Default::default()
    };
    snap.insert(name, &listener);

    let cluster = Cluster {
        name: local.clone(),
        connect_timeout: Some(CONNECT_TIMEOUT),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        load_assignment: Some(assignment(
            local.clone(),
            [(inbound.effective_service_address().to_owned(), service_port)],
        )),
        ..Default::default()
    };
    snap.insert(local, &cluster);
}

pub(super) fn tcp_proxy(stat_prefix: &str, cluster: String) -> Filter {
    let proxy = TcpProxy {
        stat_prefix: stat_prefix.to_owned(),
        cluster_specifier: Some(ClusterSpecifier::Cluster(cluster)),
        ..Default::default()
    };
    Filter {
        name: TCP_PROXY_FILTER.to_owned(),
        config_type: Some(filter::ConfigType::TypedConfig(pack_any(proxy))),
    }
}

/// A round-robin EDS cluster over ADS, with TLS when `transport` is given.
pub(super) fn eds_cluster(name: String, transport: Option<TransportSocket>) -> Cluster {
    Cluster {
        name,
        connect_timeout: Some(CONNECT_TIMEOUT),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(tls::ads()),
            service_name: String::new(),
        }),
        lb_policy: LbPolicy::RoundRobin as i32,
        transport_socket: transport,
        ..Default::default()
    }
}

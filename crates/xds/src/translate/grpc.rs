//! Proxyless gRPC resources (grpcio, grpc-js, grpc-go as xDS clients).
//!
//! Owns what a gRPC channel to `xds:///<service>` (or, for a MeshService
//! port, `xds:///<name>:<port>`) needs: an API listener of that name whose
//! HttpConnectionManager carries an inline route configuration (a
//! service's: the routes a sidecar gets, see `routes.rs`) and ends with
//! the router filter (after MeshFaultInjection's `to[]` faults, gRFC A33);
//! a round-robin EDS cluster; locality-weighted endpoints. TLS comes from
//! certificate-provider instances, never SDS. It must never emit socket
//! listeners: a gRPC client binds nothing (server-side xDS is not covered).

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route::Action,
    route_action::ClusterSpecifier, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_connection_manager::RouteSpecifier,
    http_filter::ConfigType,
};
use envoy_types::util::pack_any;
use meshlink_api::spec::{DataplaneSpec, Tags};

use super::memo::Memo;
use super::policies::{Destination, OutboundPolicies};
use super::protocol::Protocol;
use super::routes::{self, Backend, Outbound};
use super::sidecar::{ClusterTuning, eds_cluster};
use super::snapshot::Versioned;
use super::{MeshView, Snapshot, circuit_breaker, fault, load_balancing, mesh_service, names, tls};

/// Envoy's name of the HTTP router filter (gRPC requires it last).
const ROUTER_FILTER: &str = "envoy.filters.http.router";

/// Emits the API listeners, clusters and load assignments of gRPC client
/// `name` (clusters and load assignments shared through `memo`). A
/// channel to a service routes by the same RouteConfiguration a sidecar
/// gets (MeshHTTPRoute splits, MeshRetry, MeshTimeout as
/// `max_stream_duration`), inline in the API listener.
pub(super) fn build(
    snap: &mut Snapshot,
    view: &MeshView,
    name: &str,
    dp: &DataplaneSpec,
    memo: &mut Memo,
) {
    let services: BTreeSet<&str> = dp
        .networking
        .outbound
        .iter()
        .filter_map(|o| o.service())
        .collect();
    let no_labels = std::collections::BTreeMap::new();
    let labels = view
        .dataplane_resource(name)
        .map_or(&no_labels, |r| r.labels());
    let policies = OutboundPolicies::new(view.policies(), name, labels, dp);
    // (service, subset tags): the clusters the channels' routes name.
    let mut needed: BTreeSet<(String, Option<Tags>)> = BTreeSet::new();
    let mut mesh_services = mesh_service::mesh_service_outbounds(dp);
    for service in services {
        let cluster = names::service_cluster(service);
        let out = Outbound {
            dest: Destination {
                name: service,
                port: None,
            },
            cluster: &cluster,
            protocol: Protocol::Grpc,
            proxyless: true,
        };
        let mut backends = BTreeSet::new();
        let routes =
            routes::outbound_routes(service.to_owned(), view, &policies, out, &mut backends);
        let faults = fault::client_filters(&policies.faults(out.dest));
        snap.insert(service.to_owned(), &api_listener(service, routes, faults));
        needed.insert((service.to_owned(), None));
        for b in backends {
            match b {
                Backend::Service(s) => needed.insert((s, None)),
                Backend::MeshService(n, p) => mesh_services.insert((n, p)),
                Backend::Subset(s, tags) => needed.insert((s, Some(tags))),
            };
        }
    }
    for (service, subset) in &needed {
        let service = service.as_str();
        let cluster = match subset {
            Some(tags) => names::subset_cluster(service, tags),
            None => names::service_cluster(service),
        };
        let tuning = proxyless_tuning(&policies, service);
        let key = tuning.key(cluster.clone(), None, true, Protocol::Tcp);
        let encoded = memo.cluster(key, || {
            let transport = view.mtls_enabled().then(|| {
                tls::upstream_cert_provider(names::spiffe_id(view.trust_domain(), service))
            });
            let mut c = eds_cluster(cluster.clone(), transport);
            if let Some(cb) = &tuning.circuit_breaker {
                circuit_breaker::apply(&mut c, cb);
            }
            load_balancing::apply(tuning.load_balancing.as_ref(), &mut c);
            Versioned::encode(&c)
        });
        snap.insert_shared(cluster.clone(), encoded);
        let cla = match subset {
            Some(tags) => super::subset_load_assignment(view, memo, service, tags),
            None => super::service_load_assignment(view, memo, service),
        };
        snap.insert_shared(cluster, cla);
    }
    // MeshService outbounds: a channel to `xds:///<name>:<port>`.
    for (name, port) in &mesh_service::mesh_service_outbounds(dp) {
        let listener = names::mesh_service_grpc_listener(name, *port);
        let cluster = names::mesh_service_cluster(name, *port);
        let dest = Destination {
            name: name.as_str(),
            port: Some((*port, None)),
        };
        let faults = fault::client_filters(&policies.faults(dest));
        snap.insert(
            listener.clone(),
            &api_listener(&listener, default_routes(&listener, &cluster), faults),
        );
    }
    let mesh_services = mesh_services
        .into_iter()
        .map(|d| (d, ClusterTuning::default()))
        .collect();
    mesh_service::clusters(snap, view, None, true, &mesh_services, memo);
}

/// What policies set on a proxyless client's Cluster of `service`: the
/// fields gRPC's xDS client reads too. MeshCircuitBreaker's limits and
/// outlier detection (gRFC A32, A50) and MeshLoadBalancingStrategy's
/// balancer when gRPC has it (round robin, ring hash: A42, least
/// request: A48; a `Random` or `Maglev` balancer is left out, where gRPC
/// would refuse the Cluster). Health checks and connection timeouts are
/// not read by gRPC clients.
fn proxyless_tuning(policies: &OutboundPolicies, service: &str) -> ClusterTuning {
    let dest = Destination {
        name: service,
        port: None,
    };
    let load_balancing = policies.load_balancing(dest).filter(|conf| {
        conf.load_balancer.as_ref().is_some_and(|lb| {
            matches!(
                lb.type_.as_str(),
                "RoundRobin" | "RingHash" | "LeastRequest"
            )
        })
    });
    ClusterTuning {
        circuit_breaker: policies.circuit_breaker(dest),
        load_balancing,
        ..ClusterTuning::default()
    }
}

/// One route to `cluster` for every call (a MeshService channel).
fn default_routes(service: &str, cluster: &str) -> RouteConfiguration {
    let route = Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix(String::new())),
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.to_owned())),
            ..Default::default()
        })),
        ..Default::default()
    };
    RouteConfiguration {
        name: service.to_owned(),
        virtual_hosts: vec![VirtualHost {
            name: service.to_owned(),
            domains: vec!["*".to_owned()],
            routes: vec![route],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The API listener `service`, routing by `routes` (inline), its calls
/// passing `filters` (MeshFaultInjection's, gRFC A33) before the router.
fn api_listener(service: &str, routes: RouteConfiguration, filters: Vec<HttpFilter>) -> Listener {
    let mut http_filters = filters;
    http_filters.push(HttpFilter {
        name: ROUTER_FILTER.to_owned(),
        config_type: Some(ConfigType::TypedConfig(pack_any(Router::default()))),
        ..Default::default()
    });
    let hcm = HttpConnectionManager {
        stat_prefix: service.to_owned(),
        route_specifier: Some(RouteSpecifier::RouteConfig(routes)),
        http_filters,
        ..Default::default()
    };
    Listener {
        name: service.to_owned(),
        api_listener: Some(ApiListener {
            api_listener: Some(pack_any(hcm)),
        }),
        ..Default::default()
    }
}

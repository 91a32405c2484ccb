//! Services that declare an HTTP protocol get HTTP listeners: one
//! `http_connection_manager` whose routes come over RDS (the
//! RouteConfiguration named like the listener). Inbounds keep their RBAC
//! as HTTP filters before the router; outbounds route by MeshHTTPRoute
//! rules with MeshTimeout and MeshRetry, then to the destination itself.
//! A `tcp` service (the default), and a destination whose inbounds
//! disagree, keep the TCP shape.

mod translate_fixtures;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::transport_socket;
use envoy_types::pb::envoy::config::listener::v3::{Filter, Listener, filter};
use envoy_types::pb::envoy::config::rbac::v3::Rbac as RbacRules;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, header_matcher::HeaderMatchSpecifier, route,
    route_action::ClusterSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    DownstreamTlsContext, UpstreamTlsContext,
};
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use envoy_types::pb::google::protobuf::Duration;
use meshlink_api::Resource;
use meshlink_xds::translate::{
    CLUSTER_TYPE, ClientKind, ENDPOINT_TYPE, LISTENER_TYPE, MeshView, ROUTE_TYPE, Snapshot,
    translate,
};
use prost::Message;
use serde_json::{Value, json};
use translate_fixtures::{MESH, dataplane, mesh, permission, proxy};

const HCM: &str = "envoy.filters.network.http_connection_manager";
const INBOUND: &str = "inbound:10.0.0.1:8080";
const OUTBOUND: &str = "outbound:127.0.0.1:9001";

fn resource(v: Value) -> Resource {
    Resource::from_json(v.clone()).unwrap_or_else(|e| panic!("{v}: {e:?}"))
}

fn policy(kind: &str, name: &str, spec: Value) -> Resource {
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "mesh": MESH},
        "spec": spec,
    }))
}

/// `dataplane(...)` with `kuma.io/protocol: protocol` on its inbound.
fn speaking(dp: Resource, protocol: &str) -> Resource {
    let mut v = dp.to_json();
    v["spec"]["networking"]["inbound"][0]["tags"]["kuma.io/protocol"] = json!(protocol);
    resource(v)
}

/// web-1 (the proxy under test, serving `web` in `web_protocol`) calls
/// `backend`, served by backend-1 and backend-2 in the given protocols;
/// everyone may call everyone (mTLS on).
fn view(web_protocol: &str, backend: [&str; 2], policies: Vec<Resource>) -> MeshView {
    let web = dataplane("web-1", "10.0.0.1", "web", 8080, &[(9001, "backend")]);
    MeshView::new(
        mesh(true),
        vec![
            speaking(web, web_protocol),
            speaking(
                dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
                backend[0],
            ),
            speaking(
                dataplane("backend-2", "10.0.0.3", "backend", 8080, &[]),
                backend[1],
            ),
        ],
        vec![
            permission("web-to-backend", "backend", "web", "Allow"),
            permission("backend-to-web", "web", "backend", "Allow"),
        ],
    )
    .with_policies(policies)
}

fn web(view: &MeshView) -> Snapshot {
    translate(&proxy("web-1", ClientKind::MeshlinkProxy), view)
}

fn decode<M: Message + Default>(snap: &Snapshot, type_url: &str, name: &str) -> M {
    let r = snap
        .get(type_url, name)
        .unwrap_or_else(|| panic!("{name} is missing from {type_url}"));
    M::decode(r.resource.value.as_slice()).expect("decodes")
}

fn typed<M: Message + Default>(f: &Filter) -> M {
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else {
        panic!("{} has no typed config", f.name);
    };
    M::decode(any.value.as_slice()).expect("decodes")
}

/// The listener's only filter, as an HCM.
fn hcm(snap: &Snapshot, listener: &str) -> HttpConnectionManager {
    let l: Listener = decode(snap, LISTENER_TYPE, listener);
    let [f] = l.filter_chains[0].filters.as_slice() else {
        panic!(
            "{listener}: one filter wanted, got {:?}",
            l.filter_chains[0].filters
        );
    };
    assert_eq!(f.name, HCM);
    typed(f)
}

fn routes(snap: &Snapshot, listener: &str) -> Vec<Route> {
    let rc: RouteConfiguration = decode(snap, ROUTE_TYPE, listener);
    assert_eq!(rc.virtual_hosts.len(), 1);
    assert_eq!(rc.virtual_hosts[0].domains, ["*"]);
    rc.virtual_hosts[0].routes.clone()
}

fn action(r: &Route) -> &RouteAction {
    match &r.action {
        Some(route::Action::Route(a)) => a,
        other => panic!("route {} forwards nowhere: {other:?}", r.name),
    }
}

fn secs(s: i64) -> Option<Duration> {
    Some(Duration {
        seconds: s,
        nanos: 0,
    })
}

fn alpn_of(socket: &Option<envoy_types::pb::envoy::config::core::v3::TransportSocket>) -> Vec<u8> {
    let Some(transport_socket::ConfigType::TypedConfig(any)) =
        socket.as_ref().and_then(|s| s.config_type.clone())
    else {
        panic!("no TLS");
    };
    any.value
}

#[test]
fn an_http_inbound_gets_hcm_with_rds_its_rbac_as_http_filters_and_the_router() {
    let snap = web(&view("http", ["http", "http"], Vec::new()));
    let hcm = hcm(&snap, INBOUND);
    assert_eq!(hcm.stat_prefix, INBOUND);
    assert_eq!(hcm.use_remote_address.map(|b| b.value), Some(true));
    let Some(RouteSpecifier::Rds(rds)) = &hcm.route_specifier else {
        panic!("RDS wanted: {:?}", hcm.route_specifier);
    };
    assert_eq!(rds.route_config_name, INBOUND);
    assert!(rds.config_source.is_some(), "routes come over ADS");
    let options = hcm.common_http_protocol_options.unwrap();
    assert_eq!(options.idle_timeout, secs(3600));
    assert_eq!(hcm.stream_idle_timeout, secs(1800));
    assert_eq!(hcm.request_headers_timeout, None);

    // The same rules the tcp listener enforces, as HTTP filters, then the
    // router last.
    let names: Vec<&str> = hcm.http_filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["envoy.filters.http.rbac", "envoy.filters.http.router"]
    );
    let Some(http_filter::ConfigType::TypedConfig(any)) = &hcm.http_filters[0].config_type else {
        panic!("typed RBAC");
    };
    let http_rules = HttpRbac::decode(any.value.as_slice()).unwrap().rules;
    let tcp = web(&view("tcp", ["http", "http"], Vec::new()));
    let l: Listener = decode(&tcp, LISTENER_TYPE, INBOUND);
    let tcp_rules: Vec<Option<RbacRules>> = l.filter_chains[0]
        .filters
        .iter()
        .filter(|f| f.name == "envoy.filters.network.rbac")
        .map(|f| typed::<NetworkRbac>(f).rules)
        .collect();
    assert_eq!(tcp_rules, [http_rules]);

    // TLS offers h2 to other sidecars and HTTP/1.1 to anyone else.
    let l: Listener = decode(&snap, LISTENER_TYPE, INBOUND);
    let tls =
        DownstreamTlsContext::decode(alpn_of(&l.filter_chains[0].transport_socket).as_slice())
            .unwrap();
    assert_eq!(
        tls.common_tls_context.unwrap().alpn_protocols,
        ["h2", "http/1.1"]
    );

    let [r] = routes(&snap, INBOUND)
        .try_into()
        .expect("one inbound route");
    assert_eq!(r.name, "inbound");
    assert_eq!(
        action(&r).cluster_specifier,
        Some(ClusterSpecifier::Cluster("inbound:web:9080".into()))
    );
    assert_eq!(action(&r).timeout, secs(15));
    let local: Cluster = decode(&snap, CLUSTER_TYPE, "inbound:web:9080");
    assert!(
        local.typed_extension_protocol_options.is_empty(),
        "an http app keeps HTTP/1.1"
    );
}

#[test]
fn a_tcp_inbound_and_destination_keep_the_tcp_shape() {
    let snap = web(&view("tcp", ["tcp", "tcp"], Vec::new()));
    for listener in [INBOUND, OUTBOUND] {
        let l: Listener = decode(&snap, LISTENER_TYPE, listener);
        let last = l.filter_chains[0].filters.last().unwrap();
        assert_eq!(last.name, "envoy.filters.network.tcp_proxy", "{listener}");
    }
    assert!(snap.resources(ROUTE_TYPE).is_empty());
}

#[test]
fn an_inbound_meshtimeout_sets_the_inbound_route_timeout() {
    let timeout = policy(
        "MeshTimeout",
        "web-inbound",
        json!({"targetRef": {"kind": "MeshService", "name": "web"},
               "from": [{"targetRef": {"kind": "Mesh"},
                         "default": {"http": {"requestTimeout": "3s", "requestHeadersTimeout": "1s"}}}]}),
    );
    let snap = web(&view("grpc", ["http", "http"], vec![timeout]));
    let [r] = routes(&snap, INBOUND).try_into().expect("one route");
    assert_eq!(action(&r).timeout, secs(3));
    assert_eq!(hcm(&snap, INBOUND).request_headers_timeout, secs(1));
    let local: Cluster = decode(&snap, CLUSTER_TYPE, "inbound:web:9080");
    assert!(
        local
            .typed_extension_protocol_options
            .contains_key("envoy.extensions.upstreams.http.v3.HttpProtocolOptions"),
        "a grpc app is spoken to in HTTP/2"
    );
}

/// A 90/10 split of requests with `x-canary: 1`, 3 retries and a 2s
/// request timeout to `backend`.
fn canary_policies() -> Vec<Resource> {
    vec![
        policy(
            "MeshHTTPRoute",
            "canary",
            json!({"targetRef": {"kind": "MeshService", "name": "web"},
                   "to": [{"targetRef": {"kind": "MeshService", "name": "backend"},
                           "rules": [{"matches": [{"headers": [{"name": "x-canary", "value": "1"}]}],
                                      "default": {"backendRefs": [
                                          {"kind": "MeshService", "name": "backend-v1", "weight": 90},
                                          {"kind": "MeshService", "name": "backend-v2", "weight": 10}]}}]}]}),
        ),
        policy(
            "MeshRetry",
            "backend-retries",
            json!({"to": [{"targetRef": {"kind": "MeshService", "name": "backend"},
                           "default": {"http": {"numRetries": 3}}}]}),
        ),
        policy(
            "MeshTimeout",
            "backend-timeouts",
            json!({"to": [{"targetRef": {"kind": "MeshService", "name": "backend"},
                           "default": {"http": {"requestTimeout": "2s"}}}]}),
        ),
    ]
}

#[test]
fn an_http_destination_routes_by_meshhttproute_with_its_retries_and_timeouts() {
    let snap = web(&view("tcp", ["http", "http"], canary_policies()));
    let hcm = hcm(&snap, OUTBOUND);
    assert_eq!(hcm.use_remote_address.map(|b| b.value), Some(false));
    let names: Vec<&str> = hcm.http_filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["envoy.filters.http.router"], "no RBAC outbound");

    let routes = routes(&snap, OUTBOUND);
    let names: Vec<&str> = routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["canary", "default"]);
    let headers = &routes[0].r#match.as_ref().unwrap().headers;
    assert_eq!(headers.len(), 1);
    assert_eq!(headers[0].name, "x-canary");
    let Some(HeaderMatchSpecifier::StringMatch(m)) = &headers[0].header_match_specifier else {
        panic!("string match wanted: {headers:?}");
    };
    assert_eq!(m.match_pattern, Some(MatchPattern::Exact("1".into())));
    let Some(ClusterSpecifier::WeightedClusters(w)) = &action(&routes[0]).cluster_specifier else {
        panic!("weighted clusters wanted");
    };
    let split: Vec<(&str, u32)> = w
        .clusters
        .iter()
        .map(|c| (c.name.as_str(), c.weight.as_ref().unwrap().value))
        .collect();
    assert_eq!(split, [("backend-v1", 90), ("backend-v2", 10)]);
    for r in &routes {
        let a = action(r);
        assert_eq!(a.timeout, secs(2), "{}", r.name);
        assert_eq!(a.idle_timeout, secs(1800), "{}", r.name);
        let retry = a.retry_policy.as_ref().expect("retries");
        assert_eq!(retry.num_retries.as_ref().unwrap().value, 3, "{}", r.name);
        assert_eq!(
            retry.retry_on,
            "gateway-error,connect-failure,refused-stream"
        );
        assert_eq!(retry.per_try_timeout, secs(16), "Kuma's default policy");
    }
    assert_eq!(
        action(&routes[1]).cluster_specifier,
        Some(ClusterSpecifier::Cluster("backend".into()))
    );
    // The split's clusters are the sidecar's too.
    for c in ["backend-v1", "backend-v2"] {
        assert!(snap.get(CLUSTER_TYPE, c).is_some(), "cluster {c}");
        assert!(snap.get(ENDPOINT_TYPE, c).is_some(), "load assignment {c}");
    }
    // Between sidecars HTTP travels as HTTP/2.
    let backend: Cluster = decode(&snap, CLUSTER_TYPE, "backend");
    assert!(
        backend
            .typed_extension_protocol_options
            .contains_key("envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
    );
    let tls = UpstreamTlsContext::decode(alpn_of(&backend.transport_socket).as_slice()).unwrap();
    assert_eq!(tls.common_tls_context.unwrap().alpn_protocols, ["h2"]);
}

#[test]
fn without_policies_a_destination_gets_kumas_default_timeouts_and_retries() {
    let snap = web(&view("tcp", ["grpc", "grpc"], Vec::new()));
    let [r] = routes(&snap, OUTBOUND)
        .try_into()
        .expect("the default route");
    assert_eq!(r.name, "default");
    let a = action(&r);
    assert_eq!(a.timeout, secs(15));
    let retry = a.retry_policy.as_ref().unwrap();
    assert_eq!(retry.num_retries.as_ref().unwrap().value, 5);
    assert_eq!(
        retry.retry_on,
        "cancelled,connect-failure,gateway-error,refused-stream,reset,resource-exhausted,unavailable"
    );
}

#[test]
fn a_destination_whose_inbounds_disagree_stays_tcp() {
    let snap = web(&view("tcp", ["http", "grpc"], canary_policies()));
    let l: Listener = decode(&snap, LISTENER_TYPE, OUTBOUND);
    let last = l.filter_chains[0].filters.last().unwrap();
    assert_eq!(last.name, "envoy.filters.network.tcp_proxy");
    assert!(snap.resources(ROUTE_TYPE).is_empty());
    let backend: Cluster = decode(&snap, CLUSTER_TYPE, "backend");
    assert!(backend.typed_extension_protocol_options.is_empty());
    assert!(
        snap.get(CLUSTER_TYPE, "backend-v1").is_none(),
        "no route, no split"
    );
}

/// web-1 calling MeshService `api` (port 80, `appProtocol: http`) whose
/// one backend's inbound says `kuma.io/protocol: api_protocol` (none when
/// `None`).
fn meshservice_view(api_protocol: Option<&str>) -> MeshView {
    let client = resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "web-1", "mesh": MESH},
        "spec": {"networking": {
            "address": "10.0.0.1",
            "inbound": [{"port": 8080, "tags": {"kuma.io/service": "web"}}],
            "outbound": [{"port": 10080, "backendRef": {"kind": "MeshService", "name": "api", "port": 80}}],
        }},
    }));
    let mut tags = json!({"kuma.io/service": "api"});
    if let Some(p) = api_protocol {
        tags["kuma.io/protocol"] = p.into();
    }
    let backend = resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "api-1", "mesh": MESH},
        "spec": {"networking": {"address": "10.0.0.2", "inbound": [{"port": 8080, "tags": tags}]}},
    }));
    let api = resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshService",
        "metadata": {"name": "api", "mesh": MESH},
        "spec": {"selector": {"dataplaneTags": {"kuma.io/service": "api"}},
                 "ports": [{"port": 80, "targetPort": 8080, "appProtocol": "http"}]},
    }));
    MeshView::new(mesh(true), vec![client, backend], Vec::new()).with_mesh_services(vec![api])
}

#[test]
fn a_meshservice_port_with_app_protocol_http_gets_the_http_shape_when_its_inbounds_say_http() {
    let snap = web(&meshservice_view(Some("http")));
    let listener = "outbound:127.0.0.1:10080";
    hcm(&snap, listener);
    let routes = routes(&snap, listener);
    assert_eq!(
        action(routes.last().unwrap()).cluster_specifier,
        Some(ClusterSpecifier::Cluster("api_msvc_80".into()))
    );
    let cluster: Cluster = decode(&snap, CLUSTER_TYPE, "api_msvc_80");
    assert!(!cluster.typed_extension_protocol_options.is_empty());

    // An untagged inbound is served as TCP by its sidecar: the caller
    // must not send it HTTP/2, whatever the MeshService says.
    let snap = web(&meshservice_view(None));
    let l: Listener = decode(&snap, LISTENER_TYPE, listener);
    let names: Vec<&str> = l.filter_chains[0]
        .filters
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["envoy.filters.network.tcp_proxy"]);
}

#[test]
fn the_config_dump_prints_every_http_resource() {
    let snap = web(&view("grpc", ["http", "http"], canary_policies()));
    let dump = meshlink_xds::dump::config_dump(&snap).to_string();
    assert!(!dump.contains("\"error\""), "{dump}");
    for printed in [
        "envoy.extensions.filters.http.rbac.v3.RBAC",
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "\"route_config_name\"",
        "\"weighted_clusters\"",
    ] {
        assert!(dump.contains(printed), "{printed} is not in the dump");
    }
}

#[test]
fn meshtimeout_idle_timeout_reaches_tcp_listeners_both_ways_and_nothing_else_changes() {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
    let idle = |snap: &Snapshot, listener: &str| -> Option<Duration> {
        let l: Listener = decode(snap, LISTENER_TYPE, listener);
        let f = l.filter_chains[0].filters.last().expect("a filter");
        assert_eq!(f.name, "envoy.filters.network.tcp_proxy");
        typed::<TcpProxy>(f).idle_timeout
    };
    let timeout = policy(
        "MeshTimeout",
        "tcp-idle",
        json!({"targetRef": {"kind": "Mesh"},
               "to": [{"targetRef": {"kind": "Mesh"}, "default": {"idleTimeout": "20m"}}],
               "from": [{"targetRef": {"kind": "Mesh"}, "default": {"idleTimeout": "5m"}}]}),
    );
    let snap = web(&view("tcp", ["tcp", "tcp"], vec![timeout]));
    assert_eq!(idle(&snap, OUTBOUND), secs(1200), "to[]: the destination");
    assert_eq!(idle(&snap, INBOUND), secs(300), "from[]: the inbound");

    // Without a MeshTimeout the TCP listeners carry no idle timeout (the
    // proxy's default applies) and are exactly as before.
    let plain = web(&view("tcp", ["tcp", "tcp"], Vec::new()));
    assert_eq!(idle(&plain, OUTBOUND), None);
    assert_eq!(idle(&plain, INBOUND), None);
}

/// `view`, with backend-2's inbound tagged `version: v2`.
fn versioned_view(protocol: &str, policies: Vec<Resource>) -> MeshView {
    let base = view("tcp", [protocol, protocol], policies.clone());
    let mut dps: Vec<Resource> = base.dataplanes().iter().map(|d| d.to_resource()).collect();
    let mut v2 = dps[2].to_json();
    v2["spec"]["networking"]["inbound"][0]["tags"]["version"] = json!("v2");
    dps[2] = resource(v2);
    MeshView::new(mesh(true), dps, base.permissions().to_vec()).with_policies(policies)
}

/// A MeshTCPRoute from web to `backend`: 90 % to its `version: v1`
/// inbounds, 10 % to its `version: v2` ones (Kuma's traffic-split example).
fn tcp_split() -> Resource {
    policy(
        "MeshTCPRoute",
        "tcp-split",
        json!({"targetRef": {"kind": "Mesh"},
               "to": [{"targetRef": {"kind": "MeshService", "name": "backend"},
                       "rules": [{"default": {"backendRefs": [
                           {"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v1"}, "weight": 90},
                           {"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v2"}, "weight": 10}]}}]}]}),
    )
}

fn endpoint_ports(snap: &Snapshot, cluster: &str) -> Vec<String> {
    use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, lb_endpoint};
    let cla: ClusterLoadAssignment = decode(snap, ENDPOINT_TYPE, cluster);
    cla.endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(lb_endpoint::HostIdentifier::Endpoint(e)) => Some(format!("{:?}", e.address)),
            _ => None,
        })
        .map(|a| {
            if a.contains("10.0.0.2") {
                "backend-1".to_owned()
            } else if a.contains("10.0.0.3") {
                "backend-2".to_owned()
            } else {
                a
            }
        })
        .collect()
}

#[test]
fn a_meshtcproute_splits_a_tcp_destination_by_weight_over_subsets() {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
        TcpProxy, tcp_proxy::ClusterSpecifier as TcpSpecifier,
    };
    let snap = web(&versioned_view("tcp", vec![tcp_split()]));
    let l: Listener = decode(&snap, LISTENER_TYPE, OUTBOUND);
    let proxy: TcpProxy = typed(l.filter_chains[0].filters.last().unwrap());
    let Some(TcpSpecifier::WeightedClusters(w)) = proxy.cluster_specifier else {
        panic!("weighted clusters wanted: {:?}", proxy.cluster_specifier);
    };
    let split: Vec<(&str, u32)> = w
        .clusters
        .iter()
        .map(|c| (c.name.as_str(), c.weight))
        .collect();
    assert_eq!(
        split,
        [("backend[version=v1]", 90), ("backend[version=v2]", 10)]
    );
    // Each subset is a cluster of its own, with the service's identity
    // and only the inbounds that carry its tags.
    assert_eq!(endpoint_ports(&snap, "backend[version=v1]"), ["backend-1"]);
    assert_eq!(endpoint_ports(&snap, "backend[version=v2]"), ["backend-2"]);
    let v2: Cluster = decode(&snap, CLUSTER_TYPE, "backend[version=v2]");
    let tls = UpstreamTlsContext::decode(alpn_of(&v2.transport_socket).as_slice()).unwrap();
    let sans = format!(
        "{:?}",
        tls.common_tls_context.unwrap().validation_context_type
    );
    assert!(sans.contains("\"spiffe://example.org/backend\""), "{sans}");
}

#[test]
fn on_an_http_destination_a_meshhttproute_wins_over_a_meshtcproute() {
    // Only the MeshTCPRoute: its backends serve every request.
    let snap = web(&versioned_view("http", vec![tcp_split()]));
    let only_tcp = routes(&snap, OUTBOUND);
    assert_eq!(only_tcp.len(), 1);
    let Some(ClusterSpecifier::WeightedClusters(w)) = &action(&only_tcp[0]).cluster_specifier
    else {
        panic!("weighted clusters wanted: {:?}", only_tcp[0]);
    };
    let names: Vec<&str> = w.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["backend[version=v1]", "backend[version=v2]"]);
    assert_eq!(endpoint_ports(&snap, "backend[version=v1]"), ["backend-1"]);

    // With a MeshHTTPRoute for the same destination, the MeshTCPRoute is
    // ignored: the default route goes to the destination itself.
    let mut policies = canary_policies();
    policies.push(tcp_split());
    let snap = web(&versioned_view("http", policies));
    let both = routes(&snap, OUTBOUND);
    let names: Vec<&str> = both.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["canary", "default"]);
    assert_eq!(
        action(&both[1]).cluster_specifier,
        Some(ClusterSpecifier::Cluster("backend".into()))
    );
    assert!(snap.get(CLUSTER_TYPE, "backend[version=v1]").is_none());
}

#[test]
fn a_meshtcproute_without_a_reachable_backend_closes_connections() {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
        TcpProxy, tcp_proxy::ClusterSpecifier as TcpSpecifier,
    };
    let nowhere = policy(
        "MeshTCPRoute",
        "nowhere",
        json!({"to": [{"targetRef": {"kind": "MeshService", "name": "backend"},
                       "rules": [{"default": {"backendRefs": [
                           {"kind": "MeshService", "name": "backend", "weight": 0}]}}]}]}),
    );
    let snap = web(&versioned_view("tcp", vec![nowhere]));
    let l: Listener = decode(&snap, LISTENER_TYPE, OUTBOUND);
    let proxy: TcpProxy = typed(l.filter_chains[0].filters.last().unwrap());
    let Some(TcpSpecifier::WeightedClusters(w)) = proxy.cluster_specifier else {
        panic!("weighted clusters wanted");
    };
    let empty = &w.clusters[0].name;
    let c: Cluster = decode(&snap, CLUSTER_TYPE, empty);
    let endpoints = c.load_assignment.expect("static").endpoints;
    assert!(endpoints.is_empty(), "{endpoints:?}");
}

#[test]
fn meshtimeout_connection_timeout_reaches_the_clusters_it_targets() {
    let timeout = policy(
        "MeshTimeout",
        "connect",
        json!({"targetRef": {"kind": "Mesh"},
               "to": [{"targetRef": {"kind": "MeshService", "name": "backend"},
                       "default": {"connectionTimeout": "250ms"}}],
               "from": [{"targetRef": {"kind": "Mesh"}, "default": {"connectionTimeout": "2s"}}]}),
    );
    let ms = |s: i64, n: i32| {
        Some(Duration {
            seconds: s,
            nanos: n,
        })
    };
    for protocol in ["tcp", "http"] {
        let snap = web(&versioned_view(
            protocol,
            vec![timeout.clone(), tcp_split()],
        ));
        for c in ["backend", "backend[version=v1]", "backend[version=v2]"] {
            let cluster: Cluster = decode(&snap, CLUSTER_TYPE, c);
            assert_eq!(
                cluster.connect_timeout,
                ms(0, 250_000_000),
                "{protocol} {c}"
            );
        }
        let local: Cluster = decode(&snap, CLUSTER_TYPE, "inbound:web:9080");
        assert_eq!(local.connect_timeout, secs(2), "{protocol}: the inbound");
    }
    // Without the policy, Kuma's default of 5s.
    let snap = web(&versioned_view("tcp", Vec::new()));
    let backend: Cluster = decode(&snap, CLUSTER_TYPE, "backend");
    assert_eq!(backend.connect_timeout, secs(5));
}

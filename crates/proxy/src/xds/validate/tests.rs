//! Validation against the real translator's output (what our control
//! plane sends must be accepted) and against each class of bad input.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, Rds, http_connection_manager::RouteSpecifier, http_filter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, UpstreamTlsContext, secret,
};
use envoy_types::util::pack_any;
use meshlink_api::Resource;
use meshlink_xds::translate::{ClientKind, MeshView, ProxyContext, SecretsInput, translate};
use prost::Message as _;
use serde_json::json;

use super::*;
use crate::xds::apply::{CLUSTER, ENDPOINTS, LISTENER, ROUTE, SECRET};

fn resource(v: serde_json::Value) -> Resource {
    Resource::from_json(v).expect("valid fixture")
}

fn ca_pem() -> String {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    p.self_signed(&key).unwrap().pem()
}

/// Kuma L7 policies as users write them: a header match with a 90/10
/// split, path rewrites, header changes, a mirror, a redirect, retries
/// (HTTP and gRPC blocks) and timeouts.
fn l7_policies() -> Vec<Resource> {
    let policy = |kind: &str, name: &str, spec: serde_json::Value| {
        resource(json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name, "mesh": "default"}, "spec": spec}))
    };
    vec![
        policy(
            "MeshHTTPRoute",
            "canary",
            json!({"targetRef": {"kind": "Mesh"},
                "to": [{"targetRef": {"kind": "MeshService", "name": "backend"}, "rules": [
                    {"matches": [{"headers": [{"name": "x-canary", "value": "1"}]}],
                     "default": {"backendRefs": [{"kind": "MeshService", "name": "backend", "weight": 90},
                                                 {"kind": "MeshService", "name": "web", "weight": 10}]}},
                    {"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}, "method": "GET",
                                  "queryParams": [{"type": "RegularExpression", "name": "q", "value": "^a.*"}]}],
                     "default": {"filters": [
                        {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}},
                        {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}], "remove": ["x-b"]}},
                        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"add": [{"name": "x-c", "value": "2"}]}},
                        {"type": "RequestMirror", "requestMirror": {"percentage": 5, "backendRef": {"kind": "MeshService", "name": "web"}}}]}},
                    {"matches": [{"path": {"type": "Exact", "value": "/old"}}],
                     "default": {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]}}]}]}),
        ),
        policy(
            "MeshRetry",
            "retries",
            json!({"targetRef": {"kind": "Mesh"}, "to": [{"targetRef": {"kind": "Mesh"}, "default": {
                "http": {"numRetries": 3, "perTryTimeout": "1s", "backOff": {"baseInterval": "10ms", "maxInterval": "100ms"},
                         "retryOn": ["5xx", "503", "HttpMethodGet"]},
                "grpc": {"numRetries": 2, "retryOn": ["Unavailable", "Canceled"]}}}]}),
        ),
        policy(
            "MeshTimeout",
            "timeouts",
            json!({"targetRef": {"kind": "Mesh"}, "to": [{"targetRef": {"kind": "Mesh"}, "default": {
                "idleTimeout": "20m", "http": {"requestTimeout": "2s", "streamIdleTimeout": "1m", "maxStreamDuration": "10m"}}}]}),
        ),
        policy(
            "MeshFaultInjection",
            "faults",
            json!({"targetRef": {"kind": "MeshService", "name": "backend"}, "from": [
                {"targetRef": {"kind": "Mesh"}, "default": {"http": [
                    {"abort": {"httpStatus": 500, "percentage": "2.5"},
                     "delay": {"value": "5s", "percentage": 5},
                     "responseBandwidth": {"limit": "50Mbps", "percentage": 50}}]}},
                {"targetRef": {"kind": "MeshService", "name": "web"}, "default": {"http": [
                    {"abort": {"httpStatus": 503, "percentage": 70}},
                    {"abort": {"httpStatus": 503, "percentage": 50}}]}}]}),
        ),
        policy(
            "MeshCircuitBreaker",
            "circuit-breaker",
            json!({"targetRef": {"kind": "Mesh"},
                "to": [{"targetRef": {"kind": "Mesh"}, "default": {
                    "connectionLimits": {"maxConnections": 2, "maxPendingRequests": 8, "maxRetries": 2, "maxRequests": 2},
                    "outlierDetection": {"interval": "5s", "baseEjectionTime": "30s", "maxEjectionPercent": 20,
                        "splitExternalAndLocalErrors": true, "healthyPanicThreshold": 0,
                        "detectors": {"totalFailures": {"consecutive": 10}, "gatewayFailures": {"consecutive": 10},
                            "localOriginFailures": {"consecutive": 10},
                            "successRate": {"minimumHosts": 5, "requestVolume": 10, "standardDeviationFactor": "1.9"},
                            "failurePercentage": {"requestVolume": 10, "minimumHosts": 5, "threshold": 85}}}}}],
                "from": [{"targetRef": {"kind": "Mesh"}, "default": {
                    "connectionLimits": {"maxRequests": 100},
                    "outlierDetection": {"detectors": {"totalFailures": {"consecutive": 3}}}}}]}),
        ),
        policy(
            "MeshHealthCheck",
            "health",
            json!({"targetRef": {"kind": "Mesh"}, "to": [{"targetRef": {"kind": "Mesh"}, "default": {
                "interval": "10s", "timeout": "2s", "unhealthyThreshold": 3, "healthyThreshold": 1,
                "initialJitter": "5s", "intervalJitter": "6s", "intervalJitterPercent": 10,
                "noTrafficInterval": "10s", "alwaysLogHealthCheckFailures": true, "reuseConnection": false,
                "eventLogPath": "/tmp/health-check.log", "failTrafficOnPanic": true,
                "tcp": {"send": "Zm9v", "receive": ["YmFy", "YmF6"]},
                "http": {"path": "/health", "expectedStatuses": [200, 201],
                         "requestHeadersToAdd": {"add": [{"name": "x-some-header", "value": "value"}],
                                                 "set": [{"name": "host", "value": "example.com"}]}},
                "grpc": {"serviceName": "echo", "authority": "example.com"}}}]}),
        ),
        policy(
            "MeshTrace",
            "traces",
            json!({"targetRef": {"kind": "Mesh"}, "default": {
                "backends": [{"type": "OpenTelemetry", "openTelemetry": {"endpoint": "http://127.0.0.1:4318"}}],
                "sampling": {"overall": 80, "random": "60.5"},
                "tags": [{"name": "team", "literal": "core"}, {"name": "env", "header": {"name": "x-env", "default": "prod"}}]}}),
        ),
        policy(
            "MeshMetric",
            "metrics",
            json!({"targetRef": {"kind": "Mesh"}, "default": {
                "sidecar": {"profiles": {"appendProfiles": [{"name": "Basic"}],
                    "exclude": [{"type": "Regex", "match": "meshlink_proxy_http_.*"}],
                    "include": [{"type": "Exact", "match": "meshlink_proxy_xds_updates_total"}]}},
                "applications": [{"port": 8888}],
                "backends": [{"type": "Prometheus", "prometheus": {"port": 5670, "path": "/metrics"}},
                    {"type": "OpenTelemetry", "openTelemetry": {"endpoint": "otel:4317"}}]}}),
        ),
    ]
}

fn view_of(mtls: bool, protocol: &str) -> MeshView {
    let mut spec = json!({"trustDomain": "example.org"});
    if mtls {
        spec["mtls"] =
            json!({"enabledBackend": "ca-1", "backends": [{"name": "ca-1", "type": "builtin"}]});
    }
    let mesh = resource(
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh", "metadata": {"name": "default"}, "spec": spec}),
    );
    let dp = |name: &str, addr: &str, svc: &str, out: Option<&str>| {
        let mut networking = json!({"address": addr, "inbound": [{"port": 10001, "servicePort": 8080, "tags": {"kuma.io/service": svc, "kuma.io/protocol": protocol}}]});
        if let Some(o) = out {
            networking["outbound"] = json!([{"port": 9001, "tags": {"kuma.io/service": o}}]);
        }
        resource(
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane", "metadata": {"name": name, "mesh": "default"}, "spec": {"networking": networking}}),
        )
    };
    let mtp = resource(
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "MeshTrafficPermission", "metadata": {"name": "allow", "mesh": "default"},
        "spec": {"targetRef": {"kind": "MeshService", "name": "backend"}, "from": [{"targetRef": {"kind": "MeshService", "name": "web"}, "default": {"action": "Allow"}}]}}),
    );
    MeshView::new(
        mesh,
        vec![
            dp("web-1", "127.0.0.1", "web", Some("backend")),
            dp("backend-1", "127.0.0.2", "backend", None),
        ],
        vec![mtp],
    )
    .with_policies(if protocol == "tcp" {
        Vec::new()
    } else {
        l7_policies()
    })
}

fn snapshot(name: &str, client: ClientKind, mtls: bool) -> meshlink_xds::translate::Snapshot {
    snapshot_of(name, client, mtls, "tcp")
}

fn snapshot_of(
    name: &str,
    client: ClientKind,
    mtls: bool,
    protocol: &str,
) -> meshlink_xds::translate::Snapshot {
    let proxy = ProxyContext {
        mesh: "default".into(),
        name: name.into(),
        client,
        secrets: SecretsInput {
            identity: None,
            trust_bundle_pem: Some(ca_pem()),
            identity_policy: true,
        },
    };
    translate(&proxy, &view_of(mtls, protocol))
}

#[test]
fn everything_the_translator_sends_an_http_service_is_accepted_with_kumas_l7_policies() {
    for protocol in ["http", "http2", "grpc"] {
        for mtls in [true, false] {
            for name in ["web-1", "backend-1"] {
                let snap = snapshot_of(name, ClientKind::MeshlinkProxy, mtls, protocol);
                let mut http_listeners = 0;
                for (name, r) in snap.resources(LISTENER) {
                    if meshlink_proto::dns_listener::LISTENER_NAMES.contains(&name.as_str()) {
                        super::dns_listener(&r.resource).expect("mesh DNS");
                        continue;
                    }
                    if name == meshlink_proto::metrics_listener::LISTENER_NAME {
                        let m = super::metrics_listener(&r.resource).expect("MeshMetric");
                        assert_eq!(m.profiles, [crate::model::metrics::Profile::Basic]);
                        assert!(m.applications[0].authority.ends_with(":8888"), "{name}");
                        assert_eq!(m.prometheus[0].address.port(), 5670);
                        continue;
                    }
                    let l =
                        listener(&r.resource).unwrap_or_else(|e| panic!("{protocol} {name}: {e}"));
                    if let ListenerProtocol::Http(http) = &l.protocol {
                        http_listeners += 1;
                        assert!(
                            snap.get(ROUTE, &http.route_config).is_some(),
                            "{name}: its RouteConfiguration is sent"
                        );
                        assert_eq!(
                            l.rbac_per_request,
                            mtls && l.direction == Direction::Inbound
                        );
                        if name == "backend-1" && l.direction == Direction::Inbound {
                            faults_seen(&http.faults);
                        }
                        let tracing = http.tracing.as_ref().expect("MeshTrace's tracing");
                        assert_eq!(tracing.sampling.random, 60.5, "{name}");
                    }
                }
                assert!(http_listeners > 0, "{protocol}: {name} has HTTP listeners");
                assert!(
                    snap.get(LISTENER, meshlink_proto::metrics_listener::LISTENER_NAME)
                        .is_some(),
                    "{name}: the MeshMetric carrier is sent to meshlink-proxy"
                );
                let envoy = snapshot_of(name, ClientKind::Envoy, mtls, protocol);
                assert!(
                    envoy
                        .get(LISTENER, meshlink_proto::metrics_listener::LISTENER_NAME)
                        .is_none(),
                    "{name}: Envoy takes stats config from its bootstrap; it gets no carrier"
                );
                for (name, r) in snap.resources(ROUTE) {
                    let rc = route_configuration(&r.resource)
                        .unwrap_or_else(|e| panic!("{protocol} {name}: {e}"));
                    assert!(!rc.virtual_hosts.is_empty(), "{name}");
                }
                for (name, r) in snap.resources(CLUSTER) {
                    let c =
                        cluster(&r.resource).unwrap_or_else(|e| panic!("{protocol} {name}: {e}"));
                    // MeshCircuitBreaker: to[] on destinations, from[] on
                    // the local application.
                    let limits = c.circuit_breakers.expect("limits on every cluster");
                    let expected = if c.discovery == Discovery::Eds {
                        2
                    } else {
                        100
                    };
                    assert_eq!(limits.max_requests, expected, "{name}");
                    if c.discovery == Discovery::Eds {
                        let od = &c.outlier_detection;
                        assert!(od.split_external_local_origin_errors, "{name}");
                        assert_eq!(od.success_rate_stdev_factor, 1900);
                        assert_eq!(od.healthy_panic_threshold, 0);
                    } else {
                        assert_eq!(c.outlier_detection.consecutive_5xx, 3, "{name}");
                    }
                    if c.discovery == Discovery::Eds {
                        // MeshHealthCheck: the checker by protocol.
                        let hc = c.health_check.as_ref().expect("a health check");
                        let want = if protocol == "grpc" { "grpc" } else { "http" };
                        assert_eq!(hc.kind.as_str(), want, "{name}");
                        assert!(!hc.reuse_connection && hc.always_log_failures);
                        let log = hc.event_log_path.as_deref();
                        assert_eq!(log, Some(std::path::Path::new("/tmp/health-check.log")));
                        assert!(c.outlier_detection.fail_traffic_on_panic, "{name}");
                    }
                    if c.discovery == Discovery::Eds && mtls {
                        assert!(c.http2, "{name}: sidecars speak HTTP/2 to each other");
                        assert_eq!(c.tls.expect("upstream TLS").alpn, ["h2"]);
                    }
                }
            }
        }
    }
}

/// backend-1's inbound faults: web's two steps (for web only), then the
/// mesh-wide step for everyone else.
fn faults_seen(faults: &[crate::model::fault::Fault]) {
    use crate::model::fault::{Callers, Fraction};
    let web = vec!["spiffe://example.org/web".to_owned()];
    assert_eq!(faults.len(), 3, "{faults:?}");
    assert_eq!(faults[0].callers, Callers::Only(web.clone()));
    assert_eq!(
        faults[1].abort,
        Some((
            503,
            Fraction {
                numerator: 50,
                denominator: 100
            }
        ))
    );
    assert_eq!(faults[2].callers, Callers::Except(web));
    assert_eq!(
        faults[2].abort,
        Some((
            500,
            Fraction {
                numerator: 250,
                denominator: 10_000
            }
        ))
    );
    assert_eq!(
        faults[2].delay.map(|d| d.0),
        Some(std::time::Duration::from_secs(5))
    );
    assert_eq!(
        faults[2].response_bytes_per_second.map(|r| r.0),
        Some(6_104 * 1024)
    );
}

#[test]
fn a_fault_filter_after_one_it_must_follow_is_rejected() {
    use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
    let router = || http_filter("envoy.filters.http.router", pack_any(Router::default()));
    let fault = || http_filter("envoy.filters.http.fault", pack_any(HttpFault::default()));
    let limit = || {
        http_filter(
            "envoy.filters.http.local_ratelimit",
            pack_any(kuma_rate_limit()),
        )
    };
    let spec = listener(&pack_any(hcm_listener(rds_hcm(vec![
        limit(),
        fault(),
        fault(),
        router(),
    ]))))
    .unwrap();
    let ListenerProtocol::Http(http) = &spec.protocol else {
        panic!("an HTTP listener: {spec:?}");
    };
    assert_eq!(http.faults.len(), 2);
    let e = listener(&pack_any(hcm_listener(rds_hcm(vec![
        fault(),
        limit(),
        router(),
    ]))))
    .unwrap_err();
    assert_eq!(
        e.field,
        "filter_chains[0].filters[0].typed_config.http_filters[1]"
    );
    assert!(e.reason.contains("before injecting faults"), "{e}");
}

#[test]
fn a_tcp_route_connect_timeout_and_attempts_are_accepted_as_the_translator_sends_them() {
    let split = resource(
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "MeshTCPRoute",
        "metadata": {"name": "split", "mesh": "default"},
        "spec": {"to": [{"targetRef": {"kind": "MeshService", "name": "backend"}, "rules": [{"default": {"backendRefs": [
            {"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v1"}, "weight": 90},
            {"kind": "MeshService", "name": "backend", "weight": 10}]}}]}]}}),
    );
    let timeout = resource(
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "MeshTimeout",
        "metadata": {"name": "connect", "mesh": "default"},
        "spec": {"to": [{"targetRef": {"kind": "Mesh"}, "default": {"connectionTimeout": "300ms"}}]}}),
    );
    let retry = resource(
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "MeshRetry",
        "metadata": {"name": "connect-attempts", "mesh": "default"},
        "spec": {"to": [{"targetRef": {"kind": "MeshService", "name": "backend"}, "default": {"tcp": {"maxConnectAttempt": 7}}}]}}),
    );
    for mtls in [true, false] {
        let policies = vec![split.clone(), timeout.clone(), retry.clone()];
        let view = view_of(mtls, "tcp").with_policies(policies);
        let proxy = ProxyContext {
            mesh: "default".into(),
            name: "web-1".into(),
            client: ClientKind::MeshlinkProxy,
            secrets: SecretsInput {
                identity: None,
                trust_bundle_pem: Some(ca_pem()),
                identity_policy: true,
            },
        };
        let snap = translate(&proxy, &view);
        let out = snap
            .resources(LISTENER)
            .iter()
            .find(|(n, _)| n.starts_with("outbound:"))
            .map(|(_, r)| listener(&r.resource).expect("accepted"))
            .expect("an outbound listener");
        let ListenerProtocol::Tcp {
            weighted,
            max_connect_attempts,
            ..
        } = &out.protocol
        else {
            panic!("a TCP listener: {:?}", out.protocol);
        };
        assert_eq!(*max_connect_attempts, Some(7));
        let split: Vec<(&str, u32)> = weighted
            .iter()
            .map(|w| (w.cluster.as_str(), w.weight))
            .collect();
        assert_eq!(split, [("backend[version=v1]", 90), ("backend", 10)]);
        for name in out.tcp_clusters() {
            let r = snap
                .get(CLUSTER, name)
                .expect("every weighted cluster is sent");
            let c = cluster(&r.resource).expect("accepted");
            assert_eq!(c.connect_timeout, Duration::from_millis(300), "{name}");
        }
    }
}

#[test]
fn a_tcp_proxy_idle_timeout_is_read_and_zero_means_none() {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
    let with_idle = |idle: Option<envoy_types::pb::google::protobuf::Duration>| {
        let mut l = hcm_listener(HttpConnectionManager::default());
        l.filter_chains[0].filters[0] = Filter {
            name: "envoy.filters.network.tcp_proxy".into(),
            config_type: Some(filter::ConfigType::TypedConfig(pack_any(TcpProxy {
                stat_prefix: "l".into(),
                cluster_specifier: Some(
                    envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy::ClusterSpecifier::Cluster("c".into()),
                ),
                idle_timeout: idle,
                ..Default::default()
            }))),
        };
        listener(&pack_any(l))
    };
    let secs = |s| envoy_types::pb::google::protobuf::Duration {
        seconds: s,
        nanos: 0,
    };
    let idle_of = |spec: ListenerSpec| match spec.protocol {
        ListenerProtocol::Tcp { idle_timeout, .. } => idle_timeout,
        other => panic!("a TCP listener: {other:?}"),
    };
    assert_eq!(idle_of(with_idle(None).unwrap()), None);
    assert_eq!(
        idle_of(with_idle(Some(secs(300))).unwrap()),
        Some(Duration::from_secs(300))
    );
    assert_eq!(
        idle_of(with_idle(Some(secs(0))).unwrap()),
        Some(Duration::ZERO)
    );
    let e = with_idle(Some(secs(-1))).unwrap_err();
    assert_eq!(
        e.field,
        "filter_chains[0].filters[0].typed_config.idle_timeout"
    );
}

#[test]
fn everything_the_translator_sends_a_meshlink_proxy_is_accepted() {
    for mtls in [true, false] {
        for name in ["web-1", "backend-1"] {
            let snap = snapshot(name, ClientKind::MeshlinkProxy, mtls);
            for (name, r) in snap.resources(LISTENER) {
                if meshlink_proto::dns_listener::LISTENER_NAMES.contains(&name.as_str()) {
                    super::dns_listener(&r.resource).expect("mesh DNS");
                    continue;
                }
                let l = listener(&r.resource).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(l.tls.is_some(), mtls && l.direction == Direction::Inbound);
                if mtls && l.direction == Direction::Inbound {
                    assert_eq!(l.rbac.len(), 1, "the allow filter");
                }
            }
            for (name, r) in snap.resources(CLUSTER) {
                let c = cluster(&r.resource).unwrap_or_else(|e| panic!("{name}: {e}"));
                if c.discovery == Discovery::Eds && mtls {
                    let tls = c.tls.expect("upstream TLS");
                    assert_eq!(tls.expected_spiffe_ids, ["spiffe://example.org/backend"]);
                }
            }
            for (name, r) in snap.resources(ENDPOINTS) {
                load_assignment(&r.resource).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            for (name, r) in snap.resources(SECRET) {
                secret(&r.resource).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
}

#[test]
fn a_proxyless_grpc_listener_is_rejected_naming_the_field() {
    let snap = snapshot("web-1", ClientKind::Grpc, true);
    let (_, r) = snap.resources(LISTENER).iter().next().expect("a listener");
    let e = listener(&r.resource).unwrap_err();
    assert_eq!(e.field, "api_listener");
}

/// A listener on 127.0.0.1:1000 whose only filter is `hcm`.
fn hcm_listener(hcm: HttpConnectionManager) -> Listener {
    Listener {
        name: "l".into(),
        address: Some(envoy_types::pb::envoy::config::core::v3::Address {
            address: Some(envoy_types::pb::envoy::config::core::v3::address::Address::SocketAddress(
                envoy_types::pb::envoy::config::core::v3::SocketAddress {
                    address: "127.0.0.1".into(),
                    port_specifier: Some(envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(1000)),
                    ..Default::default()
                },
            )),
        }),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "hcm".into(),
                config_type: Some(filter::ConfigType::TypedConfig(pack_any(hcm))),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn http_filter(name: &str, any: envoy_types::pb::google::protobuf::Any) -> HttpFilter {
    HttpFilter {
        name: name.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any)),
        ..Default::default()
    }
}

fn rds_hcm(filters: Vec<HttpFilter>) -> HttpConnectionManager {
    HttpConnectionManager {
        stat_prefix: "l".into(),
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            route_config_name: "routes-l".into(),
            config_source: None,
        })),
        http_filters: filters,
        ..Default::default()
    }
}

#[test]
fn an_http_connection_manager_without_rds_is_rejected_naming_the_field() {
    let e = listener(&pack_any(hcm_listener(HttpConnectionManager::default()))).unwrap_err();
    assert_eq!(
        e.field,
        "filter_chains[0].filters[0].typed_config.route_specifier"
    );
    assert!(e.reason.contains("rds.route_config_name"), "{e}");
}

#[test]
fn an_http_connection_manager_with_rds_and_the_router_is_an_http_listener() {
    let router = http_filter("envoy.filters.http.router", pack_any(Router::default()));
    let spec = listener(&pack_any(hcm_listener(rds_hcm(vec![router])))).unwrap();
    let ListenerProtocol::Http(http) = &spec.protocol else {
        panic!("an HTTP listener: {spec:?}");
    };
    assert_eq!(http.route_config, "routes-l");
    assert!(!spec.rbac_per_request);
}

#[test]
fn an_unknown_http_filter_or_a_missing_router_is_rejected() {
    let cors = http_filter(
        "envoy.filters.http.cors",
        pack_any(envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors::default()),
    );
    let router = http_filter("envoy.filters.http.router", pack_any(Router::default()));
    let e = listener(&pack_any(hcm_listener(rds_hcm(vec![cors, router])))).unwrap_err();
    assert_eq!(
        e.field,
        "filter_chains[0].filters[0].typed_config.http_filters[0].typed_config"
    );
    assert!(e.reason.contains("Cors"), "{e}");
    let e = listener(&pack_any(hcm_listener(rds_hcm(Vec::new())))).unwrap_err();
    assert!(e.reason.contains("envoy.filters.http.router"), "{e}");
}

/// The local rate limit filter Kuma's MeshRateLimit example ("5 requests
/// per 10 s, status 423 with a header") becomes.
fn kuma_rate_limit()
-> envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit {
    use envoy_types::pb::envoy::config::core::v3::{
        HeaderValue, HeaderValueOption, RuntimeFractionalPercent,
    };
    use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, HttpStatus, TokenBucket};
    let all = || {
        Some(RuntimeFractionalPercent {
            default_value: Some(FractionalPercent {
                numerator: 100,
                denominator: 0,
            }),
            runtime_key: "local_rate_limit_enabled".into(),
        })
    };
    envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit {
        stat_prefix: "rate_limit".into(),
        status: Some(HttpStatus { code: 423 }),
        token_bucket: Some(TokenBucket {
            max_tokens: 5,
            tokens_per_fill: Some(envoy_types::pb::google::protobuf::UInt32Value { value: 5 }),
            fill_interval: Some(envoy_types::pb::google::protobuf::Duration {
                seconds: 10,
                nanos: 0,
            }),
        }),
        filter_enabled: all(),
        filter_enforced: all(),
        response_headers_to_add: vec![HeaderValueOption {
            header: Some(HeaderValue {
                key: "x-kuma-rate-limited".into(),
                value: "true".into(),
                ..Default::default()
            }),
            append_action: 0,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn a_local_rate_limit_filter_becomes_the_listeners_token_bucket() {
    let router = || http_filter("envoy.filters.http.router", pack_any(Router::default()));
    let limit = |l| http_filter("envoy.filters.http.local_ratelimit", pack_any(l));
    let spec = listener(&pack_any(hcm_listener(rds_hcm(vec![
        limit(kuma_rate_limit()),
        router(),
    ]))))
    .unwrap();
    let ListenerProtocol::Http(http) = &spec.protocol else {
        panic!("an HTTP listener: {spec:?}");
    };
    let l = http.local_rate_limit.as_ref().expect("the rate limit");
    assert_eq!(
        (l.max_tokens, l.tokens_per_fill, l.fill_interval, l.status),
        (5, 5, std::time::Duration::from_secs(10), 423)
    );
    assert_eq!(
        l.response_headers.add,
        [("x-kuma-rate-limited".to_owned(), "true".to_owned())]
    );

    // What meshlink-proxy cannot do is refused, naming the field.
    let field = "filter_chains[0].filters[0].typed_config.http_filters[0].typed_config";
    let mut half = kuma_rate_limit();
    half.filter_enforced
        .as_mut()
        .unwrap()
        .default_value
        .as_mut()
        .unwrap()
        .numerator = 50;
    let e = listener(&pack_any(hcm_listener(rds_hcm(vec![
        limit(half),
        router(),
    ]))))
    .unwrap_err();
    assert_eq!(e.field, format!("{field}.filter_enforced.default_value"));
    assert!(e.reason.contains("50/100"), "{e}");
    let mut per_connection = kuma_rate_limit();
    per_connection.local_rate_limit_per_downstream_connection = true;
    let e = listener(&pack_any(hcm_listener(rds_hcm(vec![
        limit(per_connection),
        router(),
    ]))))
    .unwrap_err();
    assert_eq!(
        e.field,
        format!("{field}.local_rate_limit_per_downstream_connection")
    );
    let mut no_bucket = kuma_rate_limit();
    no_bucket.token_bucket = None;
    let e = listener(&pack_any(hcm_listener(rds_hcm(vec![
        limit(no_bucket),
        router(),
    ]))))
    .unwrap_err();
    assert_eq!(e.field, format!("{field}.token_bucket"));
    let mut ok_status = kuma_rate_limit();
    ok_status.status = Some(envoy_types::pb::envoy::r#type::v3::HttpStatus { code: 200 });
    let e = listener(&pack_any(hcm_listener(rds_hcm(vec![
        limit(ok_status),
        router(),
    ]))))
    .unwrap_err();
    assert_eq!(e.field, format!("{field}.status.code"));
}

#[test]
fn unsupported_cluster_fields_are_rejected() {
    let c = Cluster {
        name: "c".into(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::StrictDns as i32,
        )),
        ..Default::default()
    };
    assert_eq!(cluster(&pack_any(c)).unwrap_err().field, "type");
    let c = Cluster {
        name: "c".into(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        lb_policy: cluster::LbPolicy::ClusterProvided as i32,
        ..Default::default()
    };
    assert_eq!(cluster(&pack_any(c)).unwrap_err().field, "lb_policy");
}

#[test]
fn ring_hash_maglev_random_and_least_request_clusters_are_read() {
    use crate::model::LbPolicy;
    use envoy_types::pb::envoy::config::cluster::v3::cluster::{
        LbConfig, LeastRequestLbConfig, MaglevLbConfig, RingHashLbConfig,
        ring_hash_lb_config::HashFunction,
    };
    let eds = |policy: cluster::LbPolicy, config: Option<LbConfig>| {
        cluster(&pack_any(Cluster {
            name: "c".into(),
            cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Eds as i32,
            )),
            lb_policy: policy as i32,
            lb_config: config,
            ..Default::default()
        }))
    };
    let u64v = |value| Some(envoy_types::pb::google::protobuf::UInt64Value { value });
    let ring = |function: HashFunction| {
        Some(LbConfig::RingHashLbConfig(RingHashLbConfig {
            minimum_ring_size: u64v(64),
            maximum_ring_size: u64v(1024),
            hash_function: function as i32,
        }))
    };
    assert_eq!(
        eds(cluster::LbPolicy::RingHash, ring(HashFunction::XxHash))
            .unwrap()
            .lb,
        LbPolicy::RingHash { min: 64, max: 1024 }
    );
    let e = eds(cluster::LbPolicy::RingHash, ring(HashFunction::MurmurHash2)).unwrap_err();
    assert_eq!(e.field, "ring_hash_lb_config.hash_function");
    let maglev = Some(LbConfig::MaglevLbConfig(MaglevLbConfig {
        table_size: u64v(65_537),
    }));
    assert_eq!(
        eds(cluster::LbPolicy::Maglev, maglev.clone()).unwrap().lb,
        LbPolicy::RingHash {
            min: 65_537,
            max: 65_537
        }
    );
    assert_eq!(
        eds(cluster::LbPolicy::RingHash, maglev).unwrap_err().field,
        "lb_config"
    );
    assert_eq!(
        eds(cluster::LbPolicy::Random, None).unwrap().lb,
        LbPolicy::Random
    );
    let choices = |n| {
        Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
            choice_count: Some(envoy_types::pb::google::protobuf::UInt32Value { value: n }),
            ..Default::default()
        }))
    };
    assert_eq!(
        eds(cluster::LbPolicy::LeastRequest, choices(8)).unwrap().lb,
        LbPolicy::LeastRequestOf(8)
    );
    assert_eq!(
        eds(cluster::LbPolicy::LeastRequest, choices(1))
            .unwrap_err()
            .field,
        "least_request_lb_config.choice_count"
    );
}

#[test]
fn a_garbage_trust_bundle_is_rejected() {
    let s = Secret {
        name: "mesh_ca:default".into(),
        r#type: Some(secret::Type::ValidationContext(
            CertificateValidationContext {
                trusted_ca: Some(DataSource {
                    specifier: Some(data_source::Specifier::InlineString(
                        "not a certificate".into(),
                    )),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )),
    };
    let e = secret(&pack_any(s)).unwrap_err();
    assert_eq!(e.field, "validation_context.trusted_ca");
}

#[test]
fn wrong_type_and_garbage_bytes_are_rejected() {
    let c = pack_any(Cluster::default());
    assert!(listener(&c).unwrap_err().reason.contains("expected"));
    let garbage = Any {
        type_url: Listener::type_url(),
        value: vec![0xff; 16],
    };
    assert!(
        listener(&garbage)
            .unwrap_err()
            .reason
            .contains("cannot decode")
    );
}

#[test]
fn a_network_cluster_keeps_its_sni_and_a_bad_sni_is_rejected() {
    let mesh = resource(
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh", "metadata": {"name": "default"},
        "spec": {"mtls": {"enabledBackend": "ca-1", "backends": [{"name": "ca-1", "type": "builtin"}]}}}),
    );
    let dp = resource(
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane", "metadata": {"name": "web-1", "mesh": "default"},
        "spec": {"networking": {"address": "127.0.0.1",
            "inbound": [{"port": 10001, "servicePort": 8080, "tags": {"kuma.io/service": "web"}}],
            "outbound": [{"port": 9002, "routingKey": "db/primary:5432"}]}}}),
    );
    let ingress = meshlink_xds::translate::RouterIngress {
        site: "a".into(),
        host: "127.0.0.9".into(),
        port: 15671,
    };
    let view = MeshView::new(mesh, vec![dp], Vec::new()).with_mesh_ingress(Some(ingress));
    let proxy = ProxyContext {
        mesh: "default".into(),
        name: "web-1".into(),
        client: ClientKind::MeshlinkProxy,
        secrets: SecretsInput::default(),
    };
    let snap = translate(&proxy, &view);
    let r = snap
        .get(CLUSTER, "network:db/primary:5432")
        .expect("the network cluster");
    let c = cluster(&r.resource).expect("accepted");
    let tls = c.tls.expect("mTLS to the router");
    let sni = meshlink_xds::translate::names::network_sni("db/primary:5432");
    assert_eq!(tls.sni.as_deref(), Some(sni.as_str()));
    assert_eq!(
        tls.expected_spiffe_ids,
        ["spiffe://default/meshlink.dev/router/a"]
    );

    let mut raw = Cluster::decode(r.resource.value.as_slice()).unwrap();
    let socket = raw.transport_socket.as_mut().unwrap();
    let Some(ConfigType::TypedConfig(any)) = socket.config_type.as_mut() else {
        panic!("typed config");
    };
    let mut ctx = UpstreamTlsContext::decode(any.value.as_slice()).unwrap();
    ctx.sni = "not a name!".into();
    *any = pack_any(ctx);
    let err = cluster(&pack_any(raw)).unwrap_err();
    assert!(err.field.ends_with(".sni"), "{err:?}");
}

#[test]
fn a_network_local_rate_limit_becomes_the_listeners_connection_bucket() {
    use envoy_types::pb::envoy::config::core::v3::RuntimeFeatureFlag;
    use envoy_types::pb::envoy::extensions::filters::network::local_ratelimit::v3::LocalRateLimit;
    let kuma = || LocalRateLimit {
        stat_prefix: "tcp_rate_limit".into(),
        token_bucket: Some(envoy_types::pb::envoy::r#type::v3::TokenBucket {
            max_tokens: 5,
            tokens_per_fill: Some(envoy_types::pb::google::protobuf::UInt32Value { value: 5 }),
            fill_interval: Some(envoy_types::pb::google::protobuf::Duration {
                seconds: 10,
                nanos: 0,
            }),
        }),
        ..Default::default()
    };
    let with = |limits: Vec<LocalRateLimit>| {
        let mut l = hcm_listener(rds_hcm(vec![http_filter(
            "envoy.filters.http.router",
            pack_any(Router::default()),
        )]));
        let filters = &mut l.filter_chains[0].filters;
        for (i, limit) in limits.into_iter().enumerate() {
            filters.insert(
                i,
                Filter {
                    name: "envoy.filters.network.local_ratelimit".into(),
                    config_type: Some(filter::ConfigType::TypedConfig(pack_any(limit))),
                },
            );
        }
        listener(&pack_any(l))
    };
    let spec = with(vec![kuma()]).unwrap();
    let c = spec.connection_rate_limit.expect("the connection bucket");
    assert_eq!(
        (c.max_tokens, c.tokens_per_fill, c.fill_interval),
        (5, 5, Duration::from_secs(10))
    );
    assert!(
        with(Vec::new()).unwrap().connection_rate_limit.is_none(),
        "none without the filter"
    );

    let field = "filter_chains[0].filters[0].typed_config";
    let mut shared = kuma();
    shared.share_key = "everyone".into();
    assert_eq!(
        with(vec![shared]).unwrap_err().field,
        format!("{field}.share_key")
    );
    let mut off = kuma();
    off.runtime_enabled = Some(RuntimeFeatureFlag {
        default_value: Some(envoy_types::pb::google::protobuf::BoolValue { value: false }),
        runtime_key: "k".into(),
    });
    assert_eq!(
        with(vec![off]).unwrap_err().field,
        format!("{field}.runtime_enabled.default_value")
    );
    let mut fast = kuma();
    fast.token_bucket.as_mut().unwrap().fill_interval =
        Some(envoy_types::pb::google::protobuf::Duration {
            seconds: 0,
            nanos: 10_000_000,
        });
    assert_eq!(
        with(vec![fast]).unwrap_err().field,
        format!("{field}.token_bucket.fill_interval")
    );
    let e = with(vec![kuma(), kuma()]).unwrap_err();
    assert_eq!(e.field, "filter_chains[0].filters[1]");
    assert!(e.reason.contains("one per listener"), "{e}");
}

#[test]
fn file_access_logs_are_read_and_unknown_operators_named() {
    use envoy_types::pb::envoy::config::accesslog::v3::{AccessLog, AccessLogFilter, access_log};
    use envoy_types::pb::envoy::config::core::v3::{
        SubstitutionFormatString, substitution_format_string,
    };
    use envoy_types::pb::envoy::extensions::access_loggers::file::v3::{
        FileAccessLog, file_access_log,
    };
    let file = |template: &str| AccessLog {
        name: "envoy.access_loggers.file".into(),
        config_type: Some(access_log::ConfigType::TypedConfig(pack_any(
            FileAccessLog {
                path: "/dev/null".into(),
                access_log_format: Some(file_access_log::AccessLogFormat::LogFormat(
                    SubstitutionFormatString {
                        format: Some(substitution_format_string::Format::TextFormatSource(
                            DataSource {
                                specifier: Some(data_source::Specifier::InlineString(
                                    template.into(),
                                )),
                                ..Default::default()
                            },
                        )),
                        ..Default::default()
                    },
                )),
            },
        ))),
        ..Default::default()
    };
    let with = |logs: Vec<AccessLog>| {
        let mut hcm = rds_hcm(vec![http_filter(
            "envoy.filters.http.router",
            pack_any(Router::default()),
        )]);
        hcm.access_log = logs;
        listener(&pack_any(hcm_listener(hcm)))
    };
    let spec = with(vec![file("%RESPONSE_CODE% %REQ(:PATH)%\n")]).unwrap();
    let ListenerProtocol::Http(http) = &spec.protocol else {
        panic!("an HTTP listener: {spec:?}");
    };
    assert_eq!(http.access_logs.len(), 1);
    assert_eq!(
        http.access_logs[0].target,
        crate::model::access_log::LogTarget::File("/dev/null".into())
    );

    let field = "filter_chains[0].filters[0].typed_config.access_log[0]";
    let e = with(vec![file("%RESPONSE_CODE% %UPSTREAM_WIRE_BYTES_SENT%")]).unwrap_err();
    assert_eq!(
        e.field,
        format!("{field}.typed_config.log_format.text_format_source")
    );
    assert!(
        e.reason
            .starts_with("unknown command operator %UPSTREAM_WIRE_BYTES_SENT%"),
        "{e}"
    );
    let mut filtered = file("%RESPONSE_CODE%");
    filtered.filter = Some(AccessLogFilter::default());
    assert_eq!(
        with(vec![filtered]).unwrap_err().field,
        format!("{field}.filter")
    );
}

#[test]
fn tracing_is_read_and_what_the_proxy_cannot_do_is_named() {
    use envoy_types::pb::envoy::config::trace::v3::{
        DatadogConfig, ZipkinConfig, tracing::Http, tracing::http::ConfigType as TracerConfig,
    };
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::Tracing as PbTracing;
    use envoy_types::pb::envoy::r#type::tracing::v3::{CustomTag, custom_tag};
    use envoy_types::pb::envoy::r#type::v3::Percent;
    let with = |tracing: PbTracing| {
        let mut hcm = rds_hcm(vec![http_filter(
            "envoy.filters.http.router",
            pack_any(Router::default()),
        )]);
        hcm.tracing = Some(tracing);
        listener(&pack_any(hcm_listener(hcm)))
    };
    let provider = |any| {
        Some(Http {
            name: "t".into(),
            config_type: Some(TracerConfig::TypedConfig(any)),
        })
    };
    let zipkin = ZipkinConfig {
        collector_cluster: "c".into(),
        collector_endpoint: "/api/v2/spans".into(),
        collector_hostname: "127.0.0.1:9411".into(),
        collector_endpoint_version: 1,
        ..Default::default()
    };
    let spec = with(PbTracing {
        provider: provider(pack_any(zipkin.clone())),
        overall_sampling: Some(Percent { value: 0.0 }),
        custom_tags: vec![CustomTag {
            tag: "env".into(),
            r#type: Some(custom_tag::Type::RequestHeader(custom_tag::Header {
                name: "x-env".into(),
                default_value: String::new(),
            })),
        }],
        ..Default::default()
    })
    .unwrap();
    let ListenerProtocol::Http(http) = &spec.protocol else {
        panic!("an HTTP listener: {spec:?}");
    };
    let t = http.tracing.as_ref().expect("tracing");
    assert_eq!(t.sampling.overall, 0.0);
    assert_eq!(t.sampling.random, 100.0, "unset is 100 %");
    assert!(matches!(
        &t.collector,
        crate::model::trace::Collector::Zipkin { host, shared_span_context: true, .. } if host == "127.0.0.1:9411"
    ));

    let field = "filter_chains[0].filters[0].typed_config.tracing";
    let e = with(PbTracing {
        provider: provider(pack_any(DatadogConfig::default())),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(e.field, format!("{field}.provider.typed_config"));
    assert!(e.reason.contains("Datadog is not supported yet"), "{e}");
    let e = with(PbTracing {
        provider: provider(pack_any(ZipkinConfig {
            collector_hostname: String::new(),
            ..zipkin.clone()
        })),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(
        e.field,
        format!("{field}.provider.typed_config.collector_hostname")
    );
    let e = with(PbTracing {
        provider: provider(pack_any(zipkin)),
        random_sampling: Some(Percent { value: 101.0 }),
        custom_tags: vec![CustomTag {
            tag: "e".into(),
            r#type: Some(custom_tag::Type::Environment(
                custom_tag::Environment::default(),
            )),
        }],
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(e.field, format!("{field}.random_sampling.value"));
}

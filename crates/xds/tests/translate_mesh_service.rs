//! MeshService destinations: an outbound `backendRef {kind: MeshService,
//! name, port}` becomes a listener to the Cluster `<name>_msvc_<port>`,
//! whose endpoints are the selected Dataplanes' inbounds named by the
//! port's `targetPort`, and whose TLS accepts the MeshService's identities.
//! Proxyless gRPC clients get the API listener `<name>:<port>`. A tagless
//! inbound is served under its Dataplane's name; `meshServices.mode:
//! Exclusive` empties tag destinations.

mod translate_fixtures;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::address;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, lb_endpoint::HostIdentifier,
};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    UpstreamTlsContext, common_tls_context::ValidationContextType,
};
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use meshlink_api::Resource;
use meshlink_xds::translate::{
    CLUSTER_TYPE, ClientKind, ENDPOINT_TYPE, LISTENER_TYPE, MeshView, ROUTE_TYPE, Snapshot,
    translate,
};
use prost::Message;
use serde_json::{Value, json};
use translate_fixtures::{MESH, dataplane, mesh, proxy};

fn resource(v: Value) -> Resource {
    Resource::from_json(v.clone()).unwrap_or_else(|e| panic!("{v}: {e:?}"))
}

fn with_labels(r: Resource, labels: Value) -> Resource {
    let mut v = r.to_json();
    v["metadata"]["labels"] = labels;
    resource(v)
}

/// `backend-2` serves an inbound with no tags, named `http`, on 9090.
fn tagless(name: &str, address: &str) -> Resource {
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": name, "mesh": MESH, "labels": {"app": "backend"}},
        "spec": {"networking": {"address": address, "inbound": [{"port": 9090, "name": "http"}]}},
    }))
}

fn client(outbound: Value) -> Resource {
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "client", "mesh": MESH},
        "spec": {"networking": {
            "address": "10.0.0.9",
            "inbound": [{"port": 7000, "tags": {"kuma.io/service": "client"}}],
            "outbound": outbound,
        }},
    }))
}

fn mesh_service(name: &str, spec: Value) -> Resource {
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshService",
        "metadata": {"name": name, "mesh": MESH},
        "spec": spec,
    }))
}

/// backend-1 (tagged `backend`, app=backend, inbound 8080 named http),
/// backend-2 (tagless, app=backend, inbound 9090 named http), other-1
/// (tagged `backend` too but app=other): the MeshService selects by
/// labels, so other-1 is not an endpoint.
fn view(mode: Option<&str>) -> MeshView {
    let mut m = mesh(true).to_json();
    if let Some(mode) = mode {
        m["spec"]["meshServices"] = json!({"mode": mode});
    }
    let mut b1 = dataplane("backend-1", "10.0.0.1", "backend", 8080, &[]).to_json();
    b1["spec"]["networking"]["inbound"][0]["name"] = json!("http");
    MeshView::new(
        resource(m),
        vec![
            with_labels(resource(b1), json!({"app": "backend"})),
            tagless("backend-2", "10.0.0.2"),
            with_labels(
                dataplane("other-1", "10.0.0.3", "backend", 8080, &[]),
                json!({"app": "other"}),
            ),
            client(json!([
                {"port": 10080, "backendRef": {"kind": "MeshService", "name": "backend", "port": 80}},
                {"port": 10081, "backendRef": {"kind": "MeshService", "name": "missing", "port": 80}},
                {"port": 10082, "tags": {"kuma.io/service": "backend"}},
            ])),
        ],
        Vec::new(),
    )
    .with_mesh_services(vec![mesh_service(
        "backend",
        json!({
            "selector": {"dataplaneLabels": {"matchLabels": {"app": "backend"}}},
            "ports": [{"port": 80, "targetPort": "http", "appProtocol": "http"}],
        }),
    )])
}

fn decode<M: Message + Default>(snap: &Snapshot, type_url: &str, name: &str) -> M {
    let r = snap
        .get(type_url, name)
        .unwrap_or_else(|| panic!("{name} is missing from {type_url}"));
    M::decode(r.resource.value.as_slice()).expect("decodes")
}

fn endpoints(snap: &Snapshot, cluster: &str) -> Vec<String> {
    let cla: ClusterLoadAssignment = decode(snap, ENDPOINT_TYPE, cluster);
    cla.endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(HostIdentifier::Endpoint(e)) => match e.address.as_ref()?.address.as_ref()? {
                address::Address::SocketAddress(s) => {
                    Some(format!("{}:{:?}", s.address, s.port_specifier.as_ref()?))
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn accepted_sans(cluster: &Cluster) -> Vec<String> {
    let any = cluster
        .transport_socket
        .as_ref()
        .expect("TLS")
        .config_type
        .as_ref();
    let Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
        any,
    )) = any
    else {
        panic!("typed TLS config");
    };
    let tls = UpstreamTlsContext::decode(any.value.as_slice()).unwrap();
    let validation = match tls.common_tls_context.unwrap().validation_context_type {
        Some(ValidationContextType::CombinedValidationContext(c)) => {
            c.default_validation_context.unwrap()
        }
        Some(ValidationContextType::ValidationContext(v)) => v,
        other => panic!("{other:?}"),
    };
    validation
        .match_typed_subject_alt_names
        .into_iter()
        .filter_map(|m| match m.matcher?.match_pattern? {
            MatchPattern::Exact(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// The cluster listener `listener` sends to: its `tcp_proxy`'s, or for an
/// HTTP listener (the port's `appProtocol: http`) its RDS `default` route's.
fn destination_cluster(snap: &Snapshot, listener: &str) -> String {
    let l: Listener = decode(snap, LISTENER_TYPE, listener);
    let f = &l.filter_chains[0].filters.last().unwrap();
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else {
        panic!("typed filter");
    };
    if f.name == "envoy.filters.network.http_connection_manager" {
        let routes: RouteConfiguration = decode(snap, ROUTE_TYPE, listener);
        let default = routes.virtual_hosts[0].routes.last().unwrap();
        return match &default.action {
            Some(route::Action::Route(a)) => match &a.cluster_specifier {
                Some(route_action::ClusterSpecifier::Cluster(c)) => c.clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
    }
    match TcpProxy::decode(any.value.as_slice())
        .unwrap()
        .cluster_specifier
    {
        Some(ClusterSpecifier::Cluster(c)) => c,
        other => panic!("{other:?}"),
    }
}

#[test]
fn backend_ref_outbound_reaches_only_the_selected_inbounds() {
    let snap = translate(&proxy("client", ClientKind::Envoy), &view(None));
    assert_eq!(
        destination_cluster(&snap, "outbound:127.0.0.1:10080"),
        "backend_msvc_80"
    );
    // targetPort `http` names backend-1's 8080 and backend-2's 9090.
    assert_eq!(
        endpoints(&snap, "backend_msvc_80"),
        ["10.0.0.1:PortValue(8080)", "10.0.0.2:PortValue(9090)"]
    );
    // The client verifies the selected Dataplanes' identities: backend-1's
    // service and backend-2's name (it has no service tag).
    let cluster: Cluster = decode(&snap, CLUSTER_TYPE, "backend_msvc_80");
    assert_eq!(
        accepted_sans(&cluster),
        [
            "spiffe://example.org/backend",
            "spiffe://example.org/backend-2"
        ]
    );
    // A MeshService that does not exist (yet): a cluster without endpoints.
    assert_eq!(
        destination_cluster(&snap, "outbound:127.0.0.1:10081"),
        "missing_msvc_80"
    );
    assert!(endpoints(&snap, "missing_msvc_80").is_empty());
    let cluster: Cluster = decode(&snap, CLUSTER_TYPE, "missing_msvc_80");
    assert_eq!(
        accepted_sans(&cluster),
        ["spiffe://example.org/meshlink.dev/no-identity/missing"]
    );
    // Disabled (the default): the tag outbound still reaches every
    // `backend`-tagged inbound.
    assert_eq!(
        endpoints(&snap, "backend"),
        ["10.0.0.1:PortValue(8080)", "10.0.0.3:PortValue(8080)"]
    );
}

#[test]
fn declared_identities_replace_the_selected_ones() {
    let v = view(None).with_mesh_services(vec![mesh_service(
        "backend",
        json!({
            "selector": {"dataplaneTags": {"kuma.io/service": "backend"}},
            "ports": [{"port": 80, "targetPort": 8080}],
            "identities": [
                {"type": "ServiceTag", "value": "backend"},
                {"type": "SpiffeID", "value": "spiffe://other.org/db"},
            ],
        }),
    )]);
    let snap = translate(&proxy("client", ClientKind::Envoy), &v);
    let cluster: Cluster = decode(&snap, CLUSTER_TYPE, "backend_msvc_80");
    assert_eq!(
        accepted_sans(&cluster),
        ["spiffe://example.org/backend", "spiffe://other.org/db"]
    );
    // dataplaneTags select by inbound tags: both tagged Dataplanes, by port.
    assert_eq!(
        endpoints(&snap, "backend_msvc_80"),
        ["10.0.0.1:PortValue(8080)", "10.0.0.3:PortValue(8080)"]
    );
}

#[test]
fn proxyless_grpc_clients_get_an_api_listener_per_mesh_service_port() {
    let snap = translate(&proxy("client", ClientKind::Grpc), &view(None));
    let names: Vec<&str> = snap.versions(LISTENER_TYPE).into_keys().collect();
    assert_eq!(names, ["backend", "backend:80", "missing:80"]);
    let clusters: Vec<&str> = snap.versions(CLUSTER_TYPE).into_keys().collect();
    assert_eq!(clusters, ["backend", "backend_msvc_80", "missing_msvc_80"]);
    assert_eq!(
        endpoints(&snap, "backend_msvc_80"),
        ["10.0.0.1:PortValue(8080)", "10.0.0.2:PortValue(9090)"]
    );
    let cluster: Cluster = decode(&snap, CLUSTER_TYPE, "backend_msvc_80");
    assert_eq!(
        accepted_sans(&cluster),
        [
            "spiffe://example.org/backend",
            "spiffe://example.org/backend-2"
        ]
    );
}

#[test]
fn a_tagless_inbound_is_served_under_its_dataplane_name() {
    let snap = translate(&proxy("backend-2", ClientKind::Envoy), &view(None));
    assert_eq!(
        destination_cluster(&snap, "inbound:10.0.0.2:9090"),
        "inbound:backend-2:9090"
    );
    assert!(
        snap.versions(meshlink_xds::translate::SECRET_TYPE)
            .contains_key("identity_cert:backend-2")
    );
}

#[test]
fn exclusive_mode_leaves_tag_destinations_without_endpoints() {
    for mode in ["Exclusive", "Everywhere", "ReachableBackends", "Disabled"] {
        let snap = translate(&proxy("client", ClientKind::Envoy), &view(Some(mode)));
        let tag = endpoints(&snap, "backend");
        assert_eq!(tag.is_empty(), mode == "Exclusive", "{mode}: {tag:?}");
        assert_eq!(endpoints(&snap, "backend_msvc_80").len(), 2, "{mode}");
    }
}

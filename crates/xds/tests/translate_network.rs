//! A Dataplane outbound to a routing key of the multi-site network (mesh →
//! network): with mTLS, a STATIC cluster with mTLS to this site's router
//! mesh ingress (SNI naming the key, the router's SPIFFE ID required);
//! without mTLS, plain TCP to this site's router Listeners for the key;
//! and a view change when either changes.

mod translate_fixtures;

use std::collections::BTreeMap;
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::address::Address as AddressKind;
use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::ValidationContextType;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use meshlink_api::Resource;
use meshlink_xds::translate::{
    CLUSTER_TYPE, ClientKind, LISTENER_TYPE, MeshView, NetworkListeners, RouterIngress, names,
    translate,
};
use prost::Message;
use serde_json::json;
use translate_fixtures::{MESH, dataplane, mesh, proxy};

fn client_with_network_outbound() -> Resource {
    Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": "web-1", "mesh": MESH},
        "spec": {"networking": {"address": "10.0.0.1",
            "inbound": [{"port": 8080, "servicePort": 9080, "tags": {"kuma.io/service": "web"}}],
            "outbound": [{"port": 15432, "routingKey": "postgres"}]}},
    }))
    .expect("valid")
}

fn view(network: NetworkListeners) -> MeshView {
    view_with(false, network)
}

fn view_with(mtls: bool, network: NetworkListeners) -> MeshView {
    MeshView::new(
        mesh(mtls),
        vec![
            client_with_network_outbound(),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        Vec::new(),
    )
    .with_network(Arc::new(network))
}

fn cluster(view: &MeshView) -> Cluster {
    let snap = translate(&proxy("web-1", ClientKind::MeshlinkProxy), view);
    let any = &snap
        .get(CLUSTER_TYPE, "network:postgres")
        .expect("the outbound's cluster")
        .resource;
    Cluster::decode(any.value.as_slice()).unwrap()
}

fn endpoints(view: &MeshView) -> Vec<(String, u32)> {
    let cluster = cluster(view);
    assert!(
        cluster.transport_socket.is_none(),
        "plain TCP to the local router"
    );
    endpoints_of(cluster)
}

fn endpoints_of(cluster: Cluster) -> Vec<(String, u32)> {
    cluster
        .load_assignment
        .unwrap_or_default()
        .endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match e.host_identifier.as_ref()? {
            envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier::Endpoint(ep) => {
                match ep.address.as_ref()?.address.as_ref()? {
                    AddressKind::SocketAddress(sa) => Some((
                        sa.address.clone(),
                        match sa.port_specifier {
                            Some(envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(p)) => p,
                            _ => 0,
                        },
                    )),
                    _ => None,
                }
            }
            _ => None,
        })
        .collect()
}

/// The upstream TLS context of the outbound's cluster.
fn upstream_tls(cluster: &Cluster) -> UpstreamTlsContext {
    let socket = cluster
        .transport_socket
        .as_ref()
        .expect("mTLS to the router");
    let Some(ConfigType::TypedConfig(any)) = &socket.config_type else {
        panic!("typed config");
    };
    UpstreamTlsContext::decode(any.value.as_slice()).unwrap()
}

#[test]
fn with_mtls_an_outbound_to_a_routing_key_is_mtls_to_the_router_mesh_ingress() {
    let mut network = BTreeMap::new();
    network.insert("postgres".to_owned(), vec![("127.0.0.9".to_owned(), 25432)]);
    // Not reported yet: no endpoint, and a Listener for the key is not used.
    let waiting = view_with(true, network.clone());
    let c = cluster(&waiting);
    let tls = upstream_tls(&c);
    assert!(endpoints_of(c).is_empty());
    assert_eq!(tls.sni, names::network_sni("postgres"));

    let ingress = RouterIngress {
        site: "site-b".into(),
        host: "10.0.0.254".into(),
        port: 15671,
    };
    let ready = view_with(true, network).with_mesh_ingress(Some(ingress));
    assert_ne!(
        waiting.mesh_ingress(),
        ready.mesh_ingress(),
        "the hub re-translates"
    );
    let c = cluster(&ready);
    let tls = upstream_tls(&c);
    assert_eq!(endpoints_of(c), [("10.0.0.254".to_owned(), 15671)]);
    assert_eq!(tls.sni, names::network_sni("postgres"));
    let common = tls.common_tls_context.expect("common context");
    assert_eq!(
        common.tls_certificate_sds_secret_configs[0].name,
        names::identity_secret("web")
    );
    let Some(ValidationContextType::CombinedValidationContext(v)) = common.validation_context_type
    else {
        panic!("a combined validation context");
    };
    assert_eq!(
        v.validation_context_sds_secret_config
            .expect("trust bundle")
            .name,
        names::mesh_ca_secret(MESH)
    );
    let sans: Vec<_> = v
        .default_validation_context
        .expect("SAN match")
        .match_typed_subject_alt_names
        .into_iter()
        .filter_map(|m| match m.matcher?.match_pattern? {
            MatchPattern::Exact(id) => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(sans, ["spiffe://example.org/meshlink.dev/router/site-b"]);
}

#[test]
fn without_mtls_an_outbound_to_a_routing_key_goes_to_this_sites_router_listeners() {
    let none = view(BTreeMap::new());
    let snap = translate(&proxy("web-1", ClientKind::MeshlinkProxy), &none);
    let any = &snap
        .get(LISTENER_TYPE, "outbound:127.0.0.1:15432")
        .expect("an outbound listener")
        .resource;
    let listener = Listener::decode(any.value.as_slice()).unwrap();
    assert!(listener.filter_chains[0].transport_socket.is_none());
    // No Listener for the key yet: a cluster without endpoints.
    assert!(endpoints(&none).is_empty());

    let mut network = BTreeMap::new();
    network.insert("postgres".to_owned(), vec![("127.0.0.9".to_owned(), 25432)]);
    let with = view(network);
    assert_eq!(endpoints(&with), [("127.0.0.9".to_owned(), 25432)]);
    assert_ne!(
        none.network(),
        with.network(),
        "the hub re-translates on a change"
    );
}

#[test]
fn a_dataplane_outbound_names_a_service_or_a_routing_key_not_both() {
    let errors = Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": "web-1", "mesh": MESH},
        "spec": {"networking": {"address": "10.0.0.1",
            "inbound": [{"port": 8080, "tags": {"kuma.io/service": "web"}}],
            "outbound": [
                {"port": 15432, "routingKey": "postgres", "tags": {"kuma.io/service": "db"}},
                {"port": 15433, "routingKey": "bad key!"}]}},
    }))
    .unwrap_err();
    let text = format!("{errors:?}");
    assert!(text.contains("outbound[0].routingKey"), "{text}");
    assert!(text.contains("outbound[1].routingKey"), "{text}");
}

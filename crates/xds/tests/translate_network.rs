//! A Dataplane outbound to a routing key of the multi-site network (mesh →
//! network): a plain TCP listener whose STATIC cluster is this site's
//! router Listeners for the key, and a view change when they change.

mod translate_fixtures;

use std::collections::BTreeMap;
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::address::Address as AddressKind;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use meshlink_api::Resource;
use meshlink_xds::translate::{
    CLUSTER_TYPE, ClientKind, LISTENER_TYPE, MeshView, NetworkListeners, translate,
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
    MeshView::new(
        mesh(true),
        vec![
            client_with_network_outbound(),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        Vec::new(),
    )
    .with_network(Arc::new(network))
}

fn endpoints(view: &MeshView) -> Vec<(String, u32)> {
    let snap = translate(&proxy("web-1", ClientKind::MeshlinkProxy), view);
    let any = &snap
        .get(CLUSTER_TYPE, "network:postgres")
        .expect("the outbound's cluster")
        .resource;
    let cluster = Cluster::decode(any.value.as_slice()).unwrap();
    assert!(
        cluster.transport_socket.is_none(),
        "plain TCP to the local router"
    );
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

#[test]
fn an_outbound_to_a_routing_key_goes_to_this_sites_router_listeners() {
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

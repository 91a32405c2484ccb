//! An inbound that is not ready backs no endpoint: Kuma's `health: {ready:
//! false}`, and an inbound whose application its sidecar reported
//! unreachable (the Dataplane's `status.unreachableApps`). Both rules reach
//! every destination shape: `kuma.io/service` clusters, `MeshServiceSubset`
//! subsets and MeshService ports; the inbound's own listener stays.

mod translate_fixtures;

use envoy_types::pb::envoy::config::core::v3::address;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, lb_endpoint::HostIdentifier,
};
use meshlink_api::Resource;
use meshlink_xds::translate::{
    ClientKind, ENDPOINT_TYPE, LISTENER_TYPE, MeshView, Snapshot, translate,
};
use prost::Message;
use serde_json::{Value, json};
use translate_fixtures::{MESH, dataplane, mesh, proxy};

fn resource(v: Value) -> Resource {
    Resource::from_json(v.clone()).unwrap_or_else(|e| panic!("{v}: {e:?}"))
}

/// `dp` with `health: {ready}` on its inbound.
fn declared(dp: Resource, ready: bool) -> Resource {
    let mut v = dp.to_json();
    v["spec"]["networking"]["inbound"][0]["health"] = json!({"ready": ready});
    resource(v)
}

/// `dp` with a status listing the application of inbound `port` as
/// unreachable, as the status task writes it.
fn unreachable(dp: Resource, port: u16) -> Resource {
    let mut v = dp.to_json();
    v["status"] = json!({
        "online": true,
        "unreachableApps": [{"port": port, "address": "127.0.0.1:9080",
            "error": "Connection refused (os error 111)", "since": "2026-12-01T10:00:00Z"}],
    });
    resource(v)
}

/// The client calls `backend` by tag and MeshService `backend-ms` port 80.
fn client() -> Resource {
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "client", "mesh": MESH},
        "spec": {"networking": {
            "address": "10.0.0.9",
            "inbound": [{"port": 7000, "tags": {"kuma.io/service": "client"}}],
            "outbound": [
                {"port": 10080, "tags": {"kuma.io/service": "backend"}},
                {"port": 10081, "backendRef": {"kind": "MeshService", "name": "backend-ms", "port": 80}},
            ],
        }},
    }))
}

fn view(backends: Vec<Resource>) -> MeshView {
    let mut dps = backends;
    dps.push(client());
    MeshView::new(mesh(true), dps, Vec::new()).with_mesh_services(vec![resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshService",
        "metadata": {"name": "backend-ms", "mesh": MESH},
        "spec": {
            "selector": {"dataplaneTags": {"kuma.io/service": "backend"}},
            "ports": [{"port": 80, "targetPort": 8080}],
        },
    }))])
}

/// `view` with a MeshTCPRoute sending `backend` to its `version: v1`
/// subset.
fn with_subset_route(view: &MeshView) -> MeshView {
    view.clone().with_policies(vec![resource(json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "MeshTCPRoute",
            "metadata": {"name": "v1-only", "mesh": MESH},
            "spec": {
                "targetRef": {"kind": "Mesh"},
                "to": [{"targetRef": {"kind": "MeshService", "name": "backend"},
                    "rules": [{"default": {"backendRefs": [
                        {"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v1"}}]}}]}],
            },
        }))])
}

fn endpoints(snap: &Snapshot, cluster: &str) -> Vec<String> {
    let r = snap
        .get(ENDPOINT_TYPE, cluster)
        .unwrap_or_else(|| panic!("no load assignment {cluster}"));
    let cla = ClusterLoadAssignment::decode(r.resource.value.as_slice()).expect("decodes");
    cla.endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(HostIdentifier::Endpoint(e)) => match e.address.as_ref()?.address.as_ref()? {
                address::Address::SocketAddress(s) => Some(s.address.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The backend addresses the client gets for each destination shape.
fn seen(view: &MeshView) -> [Vec<String>; 3] {
    let client = proxy("client", ClientKind::MeshlinkProxy);
    let snap = translate(&client, view);
    let routed = translate(&client, &with_subset_route(view));
    [
        endpoints(&snap, "backend"),
        endpoints(&routed, "backend[version=v1]"),
        endpoints(&snap, "backend-ms_msvc_80"),
    ]
}

fn backend(name: &str, address: &str) -> Resource {
    dataplane(name, address, "backend", 8080, &[])
}

#[test]
fn every_destination_shape_gets_both_backends_when_both_are_ready() {
    let v = view(vec![
        backend("backend-1", "10.0.0.1"),
        declared(backend("backend-2", "10.0.0.2"), true),
    ]);
    let both = vec!["10.0.0.1".to_owned(), "10.0.0.2".to_owned()];
    assert_eq!(seen(&v), [both.clone(), both.clone(), both]);
}

#[test]
fn a_declared_not_ready_inbound_backs_nothing() {
    let v = view(vec![
        backend("backend-1", "10.0.0.1"),
        declared(backend("backend-2", "10.0.0.2"), false),
    ]);
    let one = vec!["10.0.0.1".to_owned()];
    assert_eq!(seen(&v), [one.clone(), one.clone(), one]);
    // The Dataplane's own proxy still gets its inbound listener.
    let own = translate(&proxy("backend-2", ClientKind::MeshlinkProxy), &v);
    assert!(own.get(LISTENER_TYPE, "inbound:10.0.0.2:8080").is_some());
}

#[test]
fn an_inbound_whose_app_is_reported_unreachable_backs_nothing_until_it_is_back() {
    let mut v = view(vec![
        backend("backend-1", "10.0.0.1"),
        unreachable(backend("backend-2", "10.0.0.2"), 8080),
    ]);
    let one = vec!["10.0.0.1".to_owned()];
    assert_eq!(seen(&v), [one.clone(), one.clone(), one]);
    // The report names another port: this inbound stays.
    v.upsert_dataplane(unreachable(backend("backend-2", "10.0.0.2"), 9999));
    assert_eq!(seen(&v)[0], ["10.0.0.1", "10.0.0.2"]);
    // Every backend down: the client gets no endpoint (connections close
    // at once), not a dead one.
    v.upsert_dataplane(unreachable(backend("backend-1", "10.0.0.1"), 8080));
    v.upsert_dataplane(unreachable(backend("backend-2", "10.0.0.2"), 8080));
    assert_eq!(seen(&v), [vec![], vec![], vec![]] as [Vec<String>; 3]);
    // Status cleared: both are back.
    v.upsert_dataplane(backend("backend-1", "10.0.0.1"));
    v.upsert_dataplane(backend("backend-2", "10.0.0.2"));
    assert_eq!(seen(&v)[2], ["10.0.0.1", "10.0.0.2"]);
}

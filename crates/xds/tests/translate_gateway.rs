//! Kuma's networking fields that move or remove inbounds, through the
//! translator: an inbound `address` is where its listener binds and where
//! other proxies' endpoints point; a `DELEGATED` gateway Dataplane (no
//! inbounds) gets its outbounds and its identity like a sidecar; a
//! `BUILTIN` one gets its identity only.

mod translate_fixtures;

use meshlink_api::Resource;
use meshlink_xds::translate::{
    CLUSTER_TYPE, ClientKind, ENDPOINT_TYPE, LISTENER_TYPE, MeshView, SECRET_TYPE, Snapshot,
    translate,
};
use serde_json::{Value, json};
use translate_fixtures::{MESH, dataplane, mesh, permission, proxy, rbac_of_listener, render};

fn resource(v: Value) -> Resource {
    Resource::from_json(v.clone()).unwrap_or_else(|e| panic!("{v} is invalid: {e:?}"))
}

/// backend-1 (10.0.0.2) with its inbound listening on `address`.
fn backend_on(address: &str) -> Resource {
    let mut v = dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]).to_json();
    v["spec"]["networking"]["inbound"][0]["address"] = json!(address);
    resource(v)
}

/// A gateway Dataplane `edge-1` of `type_` (None: Kuma's default) for
/// service `edge`, with an outbound to backend on 9001 when `outbound`.
fn gateway(type_: Option<&str>, outbound: bool) -> Resource {
    let mut gw = json!({"tags": {"kuma.io/service": "edge"}});
    if let Some(t) = type_ {
        gw["type"] = json!(t);
    }
    let mut networking = json!({"address": "10.0.0.9", "gateway": gw});
    if outbound {
        networking["outbound"] = json!([{"port": 9001, "tags": {"kuma.io/service": "backend"}}]);
    }
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "edge-1", "mesh": MESH},
        "spec": {"networking": networking},
    }))
}

fn names(snap: &Snapshot, type_url: &str) -> Vec<String> {
    snap.resources(type_url).keys().cloned().collect()
}

#[test]
fn an_inbound_address_is_where_the_listener_binds_and_where_clients_dial() {
    let view = MeshView::new(
        mesh(false),
        vec![
            backend_on("10.0.1.7"),
            dataplane("web-1", "10.0.0.1", "web", 8080, &[(9001, "backend")]),
        ],
        vec![],
    );
    let backend = translate(&proxy("backend-1", ClientKind::Envoy), &view);
    assert_eq!(
        names(&backend, LISTENER_TYPE),
        vec!["inbound:10.0.1.7:8080"],
        "the inbound binds its own address, not the Dataplane's 10.0.0.2"
    );
    let listener = render(&backend);
    assert!(listener.contains("\"10.0.1.7\""), "{listener}");
    assert!(!listener.contains("10.0.0.2"), "{listener}");

    let web = translate(&proxy("web-1", ClientKind::Envoy), &view);
    let cla = web
        .get(ENDPOINT_TYPE, "backend")
        .expect("web-1 has backend's load assignment");
    let rendered = render(&web);
    assert!(!cla.resource.value.is_empty());
    assert!(
        rendered.contains("\"10.0.1.7\"") && !rendered.contains("10.0.0.2"),
        "web-1 dials backend at the inbound address:\n{rendered}"
    );
}

#[test]
fn without_an_inbound_address_the_dataplane_address_is_used() {
    let view = MeshView::new(
        mesh(false),
        vec![dataplane("backend-1", "10.0.0.2", "backend", 8080, &[])],
        vec![],
    );
    let backend = translate(&proxy("backend-1", ClientKind::Envoy), &view);
    assert_eq!(
        names(&backend, LISTENER_TYPE),
        vec!["inbound:10.0.0.2:8080"]
    );
}

#[test]
fn a_delegated_gateway_gets_outbounds_and_its_gateway_identity_and_no_inbound() {
    for type_ in [None, Some("DELEGATED")] {
        let view = MeshView::new(
            mesh(true),
            vec![
                gateway(type_, true),
                dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
            ],
            vec![permission("edge-to-backend", "backend", "edge", "Allow")],
        );
        let snap = translate(&proxy("edge-1", ClientKind::MeshlinkProxy), &view);
        assert_eq!(
            names(&snap, LISTENER_TYPE),
            vec!["outbound:127.0.0.1:9001"],
            "{type_:?}: the outbound only, no inbound listener"
        );
        assert_eq!(names(&snap, CLUSTER_TYPE), vec!["backend"], "{type_:?}");
        assert!(
            names(&snap, SECRET_TYPE).contains(&"identity_cert:edge".to_owned()),
            "{type_:?}: the gateway's identity is its service tag: {:?}",
            names(&snap, SECRET_TYPE)
        );
        let rendered = render(&snap);
        assert!(
            rendered.contains("10.0.0.2") && rendered.contains("spiffe://example.org/backend"),
            "{type_:?}: mTLS to backend's endpoint:\n{rendered}"
        );

        // backend-1's RBAC lets the gateway's SPIFFE ID in.
        let backend = translate(&proxy("backend-1", ClientKind::Envoy), &view);
        let rbac = format!("{:?}", rbac_of_listener(&backend, "inbound:10.0.0.2:8080"));
        assert!(rbac.contains("spiffe://example.org/edge"), "{rbac}");
    }
}

#[test]
fn a_meshsubset_source_matches_a_gateways_tags() {
    let mut gw = gateway(None, true).to_json();
    gw["spec"]["networking"]["gateway"]["tags"]["team"] = json!("edge");
    let subset = resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshTrafficPermission",
        "metadata": {"name": "team-edge", "mesh": MESH},
        "spec": {
            "targetRef": {"kind": "MeshService", "name": "backend"},
            "from": [{"targetRef": {"kind": "MeshSubset", "tags": {"team": "edge"}},
                      "default": {"action": "Allow"}}],
        },
    }));
    let view = MeshView::new(
        mesh(true),
        vec![
            resource(gw),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        vec![subset],
    );
    let backend = translate(&proxy("backend-1", ClientKind::Envoy), &view);
    let rbac = format!("{:?}", rbac_of_listener(&backend, "inbound:10.0.0.2:8080"));
    assert!(rbac.contains("spiffe://example.org/edge"), "{rbac}");
}

#[test]
fn a_builtin_gateway_gets_its_identity_and_nothing_to_serve() {
    let view = MeshView::new(
        mesh(true),
        vec![
            gateway(Some("BUILTIN"), false),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        vec![],
    );
    let snap = translate(&proxy("edge-1", ClientKind::MeshlinkProxy), &view);
    assert!(names(&snap, LISTENER_TYPE).is_empty(), "{}", render(&snap));
    assert!(names(&snap, CLUSTER_TYPE).is_empty(), "{}", render(&snap));
    assert!(names(&snap, SECRET_TYPE).contains(&"identity_cert:edge".to_owned()));
}

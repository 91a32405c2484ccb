//! Versions are content hashes: what changes in the mesh changes exactly
//! the versions of the resources that depend on it, and nothing else.

mod translate_fixtures;

use std::collections::BTreeSet;

use meshlink_xds::translate::{
    CLUSTER_TYPE, CONNECTOR_TYPE, ClientKind, ENDPOINT_TYPE, LINK_TYPE, LISTENER_TYPE,
    MESH_INGRESS_TYPE, MeshView, ROUTE_TYPE, ROUTER_ACCESS_TYPE, ROUTER_LISTENER_TYPE, SECRET_TYPE,
    SITE_TYPE, SecretsInput, Snapshot, TYPE_ORDER, translate,
};
use translate_fixtures::{dataplane, proxy, standard_view};

fn web(view: &MeshView) -> Snapshot {
    translate(&proxy("web-1", ClientKind::Envoy), view)
}

/// The types whose whole-type version differs between `a` and `b`.
fn changed_types(a: &Snapshot, b: &Snapshot) -> Vec<&'static str> {
    TYPE_ORDER
        .into_iter()
        .filter(|t| a.version_of(t) != b.version_of(t))
        .collect()
}

/// The names of `type_url` whose version differs (or that exist in one only).
fn changed_names(a: &Snapshot, b: &Snapshot, type_url: &str) -> Vec<String> {
    let (va, vb) = (a.versions(type_url), b.versions(type_url));
    let names: BTreeSet<String> = va
        .keys()
        .chain(vb.keys())
        .filter(|n| va.get(*n) != vb.get(*n))
        .map(|n| n.to_string())
        .collect();
    names.into_iter().collect()
}

#[test]
fn same_input_in_any_order_gives_identical_snapshots() {
    let view = standard_view(true, true);
    let mut dataplanes = dataplanes_of(&view);
    dataplanes.reverse();
    let mut permissions = view.permissions().to_vec();
    permissions.reverse();
    let reordered = MeshView::new(view.mesh().clone(), dataplanes, permissions);
    let first = web(&view);
    assert_eq!(first, web(&view));
    assert_eq!(first, web(&reordered));
    assert!(first.resources(LISTENER_TYPE).len() == 2, "{first:?}");
}

#[test]
fn unrelated_dataplane_changes_nothing_for_this_proxy() {
    let view = standard_view(true, true);
    let mut dataplanes = dataplanes_of(&view);
    dataplanes.push(dataplane(
        "db-1",
        "10.0.0.9",
        "db",
        5432,
        &[(9002, "backend")],
    ));
    let changed = MeshView::new(view.mesh().clone(), dataplanes, view.permissions().to_vec());
    let before = web(&view);
    let after = web(&changed);
    assert_eq!(
        before.versions(LISTENER_TYPE),
        after.versions(LISTENER_TYPE)
    );
    assert_eq!(changed_types(&before, &after), Vec::<&str>::new());
}

#[test]
fn adding_an_endpoint_changes_only_the_load_assignment() {
    let view = standard_view(true, true);
    let mut dataplanes = dataplanes_of(&view);
    dataplanes.push(dataplane("backend-3", "10.0.0.4", "backend", 8080, &[]));
    let scaled = MeshView::new(view.mesh().clone(), dataplanes, view.permissions().to_vec());
    let before = web(&view);
    let after = web(&scaled);
    assert_eq!(changed_types(&before, &after), vec![ENDPOINT_TYPE]);
    assert_eq!(
        changed_names(&before, &after, ENDPOINT_TYPE),
        vec!["backend"]
    );
}

#[test]
fn deleting_the_permission_changes_only_the_inbound_listener() {
    let view = standard_view(true, true);
    let mut permissions = view.permissions().to_vec();
    permissions.retain(|p| p.name() != "backend-to-web");
    assert_eq!(permissions.len(), 1, "fixture has backend-to-web");
    let revoked = view.clone().with_permissions(permissions);
    let before = web(&view);
    let after = web(&revoked);
    assert_eq!(changed_types(&before, &after), vec![LISTENER_TYPE]);
    assert_eq!(
        changed_names(&before, &after, LISTENER_TYPE),
        vec!["inbound:10.0.0.1:8080"]
    );
}

#[test]
fn secrets_come_first_and_only_when_given() {
    assert_eq!(TYPE_ORDER[0], SECRET_TYPE);
    assert_eq!(
        TYPE_ORDER,
        [
            SECRET_TYPE,
            CLUSTER_TYPE,
            ENDPOINT_TYPE,
            LISTENER_TYPE,
            ROUTE_TYPE,
            SITE_TYPE,
            ROUTER_ACCESS_TYPE,
            LINK_TYPE,
            ROUTER_LISTENER_TYPE,
            CONNECTOR_TYPE,
            MESH_INGRESS_TYPE,
        ]
    );

    let view = standard_view(true, true);
    let with = web(&view);
    let names: Vec<&str> = with.versions(SECRET_TYPE).into_keys().collect();
    assert_eq!(names, ["identity_cert:web", "mesh_ca:default"]);

    let mut bare = proxy("web-1", ClientKind::Envoy);
    bare.secrets = SecretsInput::default();
    let without = translate(&bare, &view);
    assert!(without.resources(SECRET_TYPE).is_empty());
    // Secret contents never affect what references them.
    assert_eq!(changed_types(&with, &without), vec![SECRET_TYPE]);

    let plaintext = web(&standard_view(false, true));
    assert!(plaintext.resources(SECRET_TYPE).is_empty());
}

#[test]
fn grpc_and_sidecar_clients_share_endpoints_but_not_tls() {
    let view = standard_view(true, true);
    let sidecar = web(&view);
    let grpc = translate(&proxy("web-1", ClientKind::Grpc), &view);
    assert_eq!(
        sidecar.get(ENDPOINT_TYPE, "backend"),
        grpc.get(ENDPOINT_TYPE, "backend")
    );
    assert_ne!(
        sidecar.get(CLUSTER_TYPE, "backend").map(|r| &r.version),
        grpc.get(CLUSTER_TYPE, "backend").map(|r| &r.version)
    );
    let grpc_listeners: Vec<&str> = grpc.versions(LISTENER_TYPE).into_keys().collect();
    assert_eq!(grpc_listeners, ["backend"]);
    assert!(grpc.resources(SECRET_TYPE).is_empty());
}

/// The view's Dataplanes as resources, to build a changed view from.
fn dataplanes_of(view: &MeshView) -> Vec<meshlink_api::Resource> {
    view.dataplanes()
        .iter()
        .map(meshlink_xds::translate::ViewDataplane::to_resource)
        .collect()
}

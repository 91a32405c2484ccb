//! Golden files of the translator's output (`tests/golden/*.txt`).
//!
//! `UPDATE_GOLDEN=1 cargo test -p meshlink-xds --test translate_golden`
//! rewrites them; review the diff before committing.

mod translate_fixtures;

use meshlink_xds::translate::{ClientKind, MeshView, translate};
use translate_fixtures::{assert_golden, dataplane, mesh, proxy, render, standard_view};

#[test]
fn sidecar_mtls_with_allow_permission() {
    let snap = translate(
        &proxy("web-1", ClientKind::Envoy),
        &standard_view(true, true),
    );
    assert_golden("sidecar_mtls_allow", &render(&snap));
}

#[test]
fn sidecar_mtls_without_permission_denies_by_default() {
    let snap = translate(
        &proxy("web-1", ClientKind::Envoy),
        &standard_view(true, false),
    );
    assert_golden("sidecar_mtls_default_deny", &render(&snap));
}

#[test]
fn sidecar_mtls_off_is_plaintext_without_rbac() {
    let snap = translate(
        &proxy("web-1", ClientKind::Envoy),
        &standard_view(false, true),
    );
    assert_golden("sidecar_plaintext", &render(&snap));
}

#[test]
fn proxyless_grpc_with_two_backend_endpoints() {
    let snap = translate(
        &proxy("web-1", ClientKind::Grpc),
        &standard_view(true, true),
    );
    assert_golden("grpc_two_endpoints", &render(&snap));
}

#[test]
fn backend_with_no_outbounds_gets_only_its_inbound() {
    let snap = translate(
        &proxy("backend-1", ClientKind::MeshlinkProxy),
        &standard_view(true, true),
    );
    assert_golden("sidecar_no_outbounds", &render(&snap));
}

#[test]
fn unknown_dataplane_gets_an_empty_snapshot() {
    let view = MeshView::new(
        mesh(true),
        vec![dataplane("web-1", "10.0.0.1", "web", 8080, &[])],
        Vec::new(),
    );
    let snap = translate(&proxy("gone", ClientKind::Envoy), &view);
    assert!(snap.is_empty(), "{snap:?}");
}

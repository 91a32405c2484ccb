//! A Dataplane inbound `name` through real sidecars: backend-1 (Kuma
//! universal) names its inbound `http`; with a mesh-wide Deny in place, a
//! MeshTrafficPermission `targetRef: {kind: Dataplane, name: backend-1,
//! sectionName: http}` lets web reach backend; pointed at a section no
//! inbound has, it no longer selects the inbound and web is refused.

use std::time::Duration;

use meshlink_e2e::app::{PythonApp, http_get};
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const READY: Duration = Duration::from_secs(30);

/// backend-1 with a named inbound, and a mesh-wide Deny.
fn backend_with_named_inbound(ports: &PairPorts) -> String {
    let backend = proxy::kuma_backend_1(ports, "", "      name: http\n");
    format!(
        r#"{backend}---
type: MeshTrafficPermission
name: deny-all
mesh: default
spec:
  targetRef:
    kind: Mesh
  from:
    - targetRef:
        kind: Mesh
      default:
        action: Deny
"#
    )
}

/// Allows web on backend-1's inbound named `section`.
fn allow_web_on(section: &str) -> String {
    format!(
        r#"
type: MeshTrafficPermission
name: backend-http-from-web
mesh: default
spec:
  targetRef:
    kind: Dataplane
    name: backend-1
    sectionName: {section}
  from:
    - targetRef:
        kind: MeshService
        name: web
      default:
        action: Allow
"#
    )
}

#[test]
fn section_name_naming_an_inbound_allows_and_then_refuses_real_traffic() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair_without_permissions(&cp, &ports);
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(&backend_with_named_inbound(&ports)),
    )
    .success();
    cp.cli_stdin(&["apply", "-f", "-"], Some(&allow_web_on("http")))
        .success();
    let yaml = proxy::dataplane_yaml(&cp, "backend-1");
    assert!(
        yaml.contains("name: http"),
        "inbound name not stored:\n{yaml}"
    );

    let backend_page = format!("backend app {}\n", uuid::Uuid::new_v4());
    let _backend_app = PythonApp::start(ports.backend_app, &[("page.txt", &backend_page)]);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);

    // sectionName: http names backend-1's inbound: web is allowed.
    let r = eventually("web -> backend (sectionName: http)", READY, || {
        http_get(ports.web_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, backend_page.clone()));

    // A section no inbound has selects nothing: deny-all decides.
    let denied = backend.metric("meshlink_proxy_rbac_denied_total");
    cp.cli_stdin(&["apply", "-f", "-"], Some(&allow_web_on("grpc")))
        .success();
    eventually("web -> backend to be denied", READY, || {
        http_get(ports.web_outbound, "/page.txt").err()
    });
    eventually("rbac_denied_total to grow on backend-1", READY, || {
        (backend.metric("meshlink_proxy_rbac_denied_total") > denied).then_some(())
    });

    // Named again, web is let in again.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&allow_web_on("http")))
        .success();
    let r = eventually("web -> backend allowed again", READY, || {
        http_get(ports.web_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, backend_page));
    drop(web);
}

//! MeshTrafficPermissions written the way Kuma documents them today, through
//! real sidecars: a policy installed by `targetRef: {kind: Dataplane,
//! labels: {app: backend}}` (the Dataplane's labels given at the top level
//! of a Kuma universal document) lets web reach backend; a mesh-wide Deny
//! does not override it (the more specific target wins) although it does
//! win over an equally general Allow whose name sorts later; a policy
//! naming the Dataplane outranks the labels and refuses web; deleting it
//! lets web in again.

use std::time::Duration;

use meshlink_e2e::app::{PythonApp, http_get};
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const READY: Duration = Duration::from_secs(30);

/// Kuma universal: backend-1 with top-level labels, the labels policy, and
/// a mesh-wide Allow (which keeps backend -> web open).
fn kuma_policies(ports: &PairPorts) -> String {
    let backend = proxy::kuma_backend_1(ports, "labels:\n  app: backend\n", "");
    format!(
        r#"{backend}---
type: MeshTrafficPermission
name: backend-from-web
mesh: default
spec:
  targetRef:
    kind: Dataplane
    labels:
      app: backend
  from:
    - targetRef:
        kind: MeshSubset
        tags:
          kuma.io/service: web
      default:
        action: Allow
---
type: MeshTrafficPermission
name: mesh-allow
mesh: default
spec:
  targetRef:
    kind: Mesh
  from:
    - targetRef:
        kind: Mesh
      default:
        action: Allow
"#
    )
}

const DENY_ALL: &str = r#"
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
"#;

const DENY_WEB_ON_BACKEND_1: &str = r#"
type: MeshTrafficPermission
name: backend-1-refuses-web
mesh: default
spec:
  targetRef:
    kind: Dataplane
    name: backend-1
  from:
    - targetRef:
        kind: MeshSubset
        tags:
          kuma.io/service: web
      default:
        action: Deny
"#;

#[test]
fn dataplane_label_targets_allow_and_deny_real_traffic_in_kuma_merge_order() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair_without_permissions(&cp, &ports);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&kuma_policies(&ports)))
        .success();
    let yaml = proxy::dataplane_yaml(&cp, "backend-1");
    assert!(yaml.contains("app: backend"), "labels not stored:\n{yaml}");

    let backend_page = format!("backend app {}\n", uuid::Uuid::new_v4());
    let web_page = format!("web app {}\n", uuid::Uuid::new_v4());
    let _backend_app = PythonApp::start(ports.backend_app, &[("page.txt", &backend_page)]);
    let _web_app = PythonApp::start(ports.web_app, &[("page.txt", &web_page)]);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);

    // The labels policy lets web in; the mesh-wide Allow lets backend in.
    let r = eventually("web -> backend (labels policy)", READY, || {
        http_get(ports.web_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, backend_page.clone()));
    let r = eventually("backend -> web (mesh-allow)", READY, || {
        http_get(ports.backend_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, web_page.clone()));

    // A mesh-wide Deny: equal in rank to mesh-allow and its name sorts
    // first, so it wins on web-1 (backend -> web is refused) ...
    cp.cli_stdin(&["apply", "-f", "-"], Some(DENY_ALL))
        .success();
    eventually("backend -> web to be denied by deny-all", READY, || {
        http_get(ports.backend_outbound, "/page.txt").err()
    });
    // ... but backend-1's labels policy is more specific: web stays allowed.
    for i in 0..5 {
        let r = http_get(ports.web_outbound, "/page.txt")
            .unwrap_or_else(|e| panic!("request {i} was refused: {e}\n{}", backend.logs()));
        assert_eq!((r.status, r.text()), (200, backend_page.clone()));
    }

    // A policy naming backend-1 outranks the labels policy: web is refused.
    let denied = backend.metric("meshlink_proxy_rbac_denied_total");
    cp.cli_stdin(&["apply", "-f", "-"], Some(DENY_WEB_ON_BACKEND_1))
        .success();
    eventually("web -> backend to be denied by name", READY, || {
        http_get(ports.web_outbound, "/page.txt").err()
    });
    eventually("rbac_denied_total to grow on backend-1", READY, || {
        (backend.metric("meshlink_proxy_rbac_denied_total") > denied).then_some(())
    });

    // Without it the labels policy decides again.
    cp.cli(&["delete", "mtp", "backend-1-refuses-web", "-m", proxy::MESH])
        .success();
    let r = eventually("web -> backend to be allowed again", READY, || {
        http_get(ports.web_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, backend_page));
    drop(web);
}

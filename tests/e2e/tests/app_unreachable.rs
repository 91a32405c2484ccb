//! Issue 35 §2, "app down looks like a denial", with the real binaries:
//! a control plane, three meshlink-proxy sidecars (web-1 calling the
//! service `backend`, served by backend-1 and backend-2) and real apps.
//!
//! - backend-1's app stops: its sidecar finds it (the first refused
//!   connection, or its probe) and reports it; the Dataplane shows
//!   `AppReachable=False` (reason `AppUnreachable`, the port and the OS
//!   error) and `Ready=False` through the REST API and the CLI; web-1 gets
//!   backend-2 alone, so every request succeeds instead of an empty reply.
//!   The app comes back on its port: `AppReachable=True`, `Ready=True`,
//!   and backend-1 gets traffic again.
//! - A Kuma Dataplane applied with `health: {ready: false}` on its inbound
//!   gets no traffic and says why in `Ready`, until it is re-applied ready.

use std::collections::BTreeSet;
use std::time::Duration;

use meshlink_e2e::app::{HttpApp, http_get};
use meshlink_e2e::proxy::{MESH, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};
use serde_json::Value;

/// A failure deadline, never a timing bound.
const WAIT: Duration = Duration::from_secs(30);

/// The ports the Dataplanes name.
struct Ports {
    web_inbound: u16,
    web_outbound: u16,
    backend_1_inbound: u16,
    backend_2_inbound: u16,
}

impl Ports {
    fn free() -> Ports {
        Ports {
            web_inbound: free_port(),
            web_outbound: free_port(),
            backend_1_inbound: free_port(),
            backend_2_inbound: free_port(),
        }
    }
}

/// A backend Dataplane in Kuma universal form, `extra` spliced into its
/// inbound (lines indented six spaces).
fn kuma_backend(name: &str, inbound: u16, app: u16, extra: &str) -> String {
    format!(
        r#"type: Dataplane
name: {name}
mesh: {MESH}
networking:
  address: 127.0.0.1
  inbound:
    - port: {inbound}
      servicePort: {app}
{extra}      tags:
        kuma.io/service: backend
"#
    )
}

/// Mesh (mTLS), web-1 calling `backend`, and the permission.
fn mesh_and_web(ports: &Ports, web_app: u16) -> String {
    format!(
        r#"apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {{name: {MESH}}}
spec:
  mtls:
    enabledBackend: ca-1
    backends: [{{name: ca-1, type: builtin}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {{name: web-1, mesh: {MESH}}}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{{port: {web_in}, servicePort: {web_app}, tags: {{kuma.io/service: web}}}}]
    outbound: [{{port: {web_out}, tags: {{kuma.io/service: backend}}}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: MeshTrafficPermission
metadata: {{name: web-to-backend, mesh: {MESH}}}
spec:
  targetRef: {{kind: MeshService, name: backend}}
  from: [{{targetRef: {{kind: MeshService, name: web}}, default: {{action: Allow}}}}]
"#,
        web_in = ports.web_inbound,
        web_out = ports.web_outbound,
    )
}

fn apply(cp: &ControlPlane, yaml: &str) {
    cp.cli_stdin(&["apply", "-f", "-"], Some(yaml)).success();
}

/// The Dataplane as the REST API serves it.
fn dataplane(cp: &ControlPlane, name: &str) -> Value {
    let (status, body) = cp.api(
        "GET",
        &format!("/api/v1/dataplanes/{name}?mesh={MESH}"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    body
}

/// `(status, reason, message)` of condition `ty`, if present.
fn condition(dp: &Value, ty: &str) -> Option<(String, String, String)> {
    let c = dp["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("message")))
}

/// The backend endpoints web-1 holds (its `/config_dump`).
fn web_backend_endpoints(web: &Sidecar) -> Option<BTreeSet<String>> {
    let dump = web.config_dump();
    let cluster = dump["clusters"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "backend")?
        .clone();
    Some(
        cluster["endpoints"]
            .as_array()?
            .iter()
            .filter_map(|e| e.as_str().map(str::to_owned))
            .collect(),
    )
}

fn endpoint(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// Which app answered one request through web-1's outbound (`None`: the
/// request failed).
fn who_answers(ports: &Ports) -> Option<String> {
    let r = http_get(ports.web_outbound, "/name").ok()?;
    (r.status == 200).then(|| r.text().trim().to_owned())
}

/// Sends requests through web-1 until both backends have answered.
fn wait_for_both(ports: &Ports, what: &str) {
    let mut seen = BTreeSet::new();
    eventually(what, WAIT, || {
        seen.extend(who_answers(ports));
        (seen.len() == 2).then_some(())
    });
}

fn start_sidecars(cp: &ControlPlane, dir: &std::path::Path) -> [Sidecar; 3] {
    let mut sidecars = ["web-1", "backend-1", "backend-2"].map(|n| Sidecar::start(cp, dir, n));
    for s in &mut sidecars {
        s.wait_ready(WAIT);
    }
    sidecars
}

#[test]
fn an_app_that_refuses_connections_is_reported_and_steered_around_until_it_is_back() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = Ports::free();
    let web_app = HttpApp::start("web");
    let backend_1_app = HttpApp::start("backend-1");
    let backend_2_app = HttpApp::start("backend-2");
    let app_1_port = backend_1_app.port();
    apply(&cp, &mesh_and_web(&ports, web_app.port()));
    apply(
        &cp,
        &kuma_backend("backend-1", ports.backend_1_inbound, app_1_port, ""),
    );
    apply(
        &cp,
        &kuma_backend(
            "backend-2",
            ports.backend_2_inbound,
            backend_2_app.port(),
            "",
        ),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let [web, backend_1, _backend_2] = start_sidecars(&cp, dir.path());
    wait_for_both(&ports, "both backends to answer through web-1");
    eventually("backend-1 AppReachable=True", WAIT, || {
        let c = condition(&dataplane(&cp, "backend-1"), "AppReachable")?;
        (c.0 == "True").then_some(())
    });

    // The app stops; a request that reaches it is refused by the OS, and
    // the sidecar reports it (requests keep coming, as from real clients).
    drop(backend_1_app);
    let dp = eventually("backend-1 AppReachable=False", WAIT, || {
        let _ = who_answers(&ports);
        let dp = dataplane(&cp, "backend-1");
        let c = condition(&dp, "AppReachable")?;
        (c.0 == "False").then_some(dp)
    });
    let (_, reason, message) = condition(&dp, "AppReachable").unwrap();
    assert_eq!(reason, "AppUnreachable", "{message}");
    for part in [
        format!("inbound {}", ports.backend_1_inbound),
        endpoint(app_1_port),
        "refused".to_owned(),
    ] {
        assert!(message.contains(&part), "{part:?} missing from {message:?}");
    }
    let (ready, ready_reason, _) = condition(&dp, "Ready").expect("Ready");
    assert_eq!(
        (ready.as_str(), ready_reason.as_str()),
        ("False", "AppUnreachable")
    );
    let listed = &dp["status"]["unreachableApps"][0];
    assert_eq!(listed["port"], ports.backend_1_inbound, "{dp}");
    assert!(listed["since"].is_string(), "{dp}");

    // The CLI says it too: the MESSAGE column and inspect.
    let table = cp.cli(&["get", "dataplanes", "-m", MESH]).success().stdout;
    let row = table
        .lines()
        .find(|l| l.contains("backend-1"))
        .unwrap_or_else(|| panic!("no backend-1 row:\n{table}"));
    assert!(row.contains("unreachable"), "{table}");
    let inspect = cp
        .cli(&["inspect", "dataplane", "backend-1", "-m", MESH])
        .success()
        .stdout;
    assert!(inspect.contains("AppReachable"), "{inspect}");

    // And the sidecar: /ready names the app (still 200: the proxy is
    // fine), and the gauge is 0.
    let (status, body) = backend_1.ready();
    assert_eq!(status, 200, "{body}");
    let lines = body["unreachable_apps"].to_string();
    assert!(lines.contains(&endpoint(app_1_port)), "{body}");
    assert_eq!(backend_1.metric("meshlink_proxy_app_reachable{"), 0.0);

    // Steered: web-1 holds backend-2 alone, so no request gets the empty
    // reply a denial gives.
    let only_2 = BTreeSet::from([endpoint(ports.backend_2_inbound)]);
    eventually("web-1 to hold backend-2 alone", WAIT, || {
        (web_backend_endpoints(&web)? == only_2).then_some(())
    });
    for i in 0..20 {
        assert_eq!(
            who_answers(&ports).as_deref(),
            Some("backend-2"),
            "request {i}: {}",
            web.logs()
        );
    }

    // The app comes back on its port: reported, and traffic returns.
    let _backend_1_app = HttpApp::start_on("backend-1", app_1_port);
    eventually("backend-1 AppReachable=True again", WAIT, || {
        let dp = dataplane(&cp, "backend-1");
        let app = condition(&dp, "AppReachable")?;
        let ready = condition(&dp, "Ready")?;
        (app.0 == "True" && ready.0 == "True").then_some(())
    });
    assert!(
        dataplane(&cp, "backend-1")["status"]["unreachableApps"].is_null(),
        "the list is gone"
    );
    wait_for_both(&ports, "backend-1 to answer again");
    assert_eq!(backend_1.metric("meshlink_proxy_app_reachable{"), 1.0);
}

#[test]
fn an_inbound_applied_with_health_ready_false_gets_no_traffic_until_it_is_ready() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = Ports::free();
    let web_app = HttpApp::start("web");
    let backend_1_app = HttpApp::start("backend-1");
    let backend_2_app = HttpApp::start("backend-2");
    apply(&cp, &mesh_and_web(&ports, web_app.port()));
    apply(
        &cp,
        &kuma_backend(
            "backend-1",
            ports.backend_1_inbound,
            backend_1_app.port(),
            "",
        ),
    );
    let not_ready = "      health:\n        ready: false\n";
    let backend_2 = |extra| {
        kuma_backend(
            "backend-2",
            ports.backend_2_inbound,
            backend_2_app.port(),
            extra,
        )
    };
    let applied = cp
        .cli_stdin(&["apply", "-f", "-"], Some(&backend_2(not_ready)))
        .success();
    assert!(
        !applied.stderr.contains("health"),
        "health is no ignored field any more: {}",
        applied.stderr
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let [web, _backend_1, _backend_2] = start_sidecars(&cp, dir.path());

    let only_1 = BTreeSet::from([endpoint(ports.backend_1_inbound)]);
    eventually("web-1 to hold backend-1's endpoint", WAIT, || {
        web_backend_endpoints(&web).filter(|e| !e.is_empty())
    });
    assert_eq!(web_backend_endpoints(&web), Some(only_1));
    for i in 0..10 {
        assert_eq!(
            who_answers(&ports).as_deref(),
            Some("backend-1"),
            "request {i}"
        );
    }
    let (ready, _reason, message) = eventually("backend-2 Ready=False", WAIT, || {
        condition(&dataplane(&cp, "backend-2"), "Ready").filter(|c| c.1 == "InboundNotReady")
    });
    assert_eq!(ready, "False");
    assert!(
        message.contains(&format!("inbound {}", ports.backend_2_inbound)),
        "{message}"
    );

    // Ready again (Kuma's form, explicitly): traffic reaches it.
    apply(&cp, &backend_2("      health:\n        ready: true\n"));
    wait_for_both(&ports, "backend-2 to answer once ready");
    eventually("backend-2 Ready=True", WAIT, || {
        condition(&dataplane(&cp, "backend-2"), "Ready").filter(|c| c.0 == "True")
    });
}

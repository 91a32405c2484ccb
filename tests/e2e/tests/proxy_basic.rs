//! The sidecar proxy between two real apps: requests flow app → sidecar →
//! mTLS → sidecar → app when a MeshTrafficPermission allows them and stop
//! when it is deleted; the inbound refuses plaintext; a sidecar whose
//! control plane, CA or token is not there yet reports what is missing on
//! `/ready`, keeps running, and gets ready once they appear; bad flags
//! exit 2.

use std::time::{Duration, Instant};

use meshlink_e2e::app::{PythonApp, http_get};
use meshlink_e2e::proxy::{self, PairPorts, Sidecar, SidecarOptions};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use serde_json::Value;

const READY: Duration = Duration::from_secs(30);

#[test]
fn requests_flow_over_mtls_while_permitted_and_stop_when_the_permission_is_deleted() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    let backend_page = format!("backend app {}\n", uuid::Uuid::new_v4());
    let web_page = format!("web app {}\n", uuid::Uuid::new_v4());
    let _backend_app = PythonApp::start(ports.backend_app, &[("page.txt", &backend_page)]);
    let _web_app = PythonApp::start(ports.web_app, &[("page.txt", &web_page)]);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (mut web, mut backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);

    // Both directions reach the other app, byte for byte.
    let r = http_get(ports.web_outbound, "/page.txt").expect("web -> backend");
    assert_eq!(
        (r.status, r.text()),
        (200, backend_page.clone()),
        "{}",
        web.logs()
    );
    let r = http_get(ports.backend_outbound, "/page.txt").expect("backend -> web");
    assert_eq!(
        (r.status, r.text()),
        (200, web_page.clone()),
        "{}",
        backend.logs()
    );

    // Each sidecar carries its own workload identity and saw the connection.
    let id = &web.config_dump()["identity"]["spiffe_id"];
    assert_eq!(id, "spiffe://default/web", "{}", web.config_dump());
    let id = &backend.config_dump()["identity"]["spiffe_id"];
    assert_eq!(id, "spiffe://default/backend", "{}", backend.config_dump());
    assert!(backend.metric("meshlink_proxy_connections_total{") >= 2.0);

    // The inbound port speaks only mTLS: a plaintext request gets no answer.
    let failures = backend.metric("meshlink_proxy_handshake_failures_total{");
    let plain = http_get(ports.backend_inbound, "/page.txt");
    assert!(
        plain.is_err(),
        "plaintext to the inbound answered {plain:?}"
    );
    eventually("a handshake failure on backend-1", READY, || {
        (backend.metric("meshlink_proxy_handshake_failures_total{") > failures).then_some(())
    });

    // Without the permission new connections are denied on backend-1.
    let denied = backend.metric("meshlink_proxy_rbac_denied_total");
    cp.cli(&["delete", "mtp", "web-to-backend", "-m", proxy::MESH])
        .success();
    eventually("web -> backend to be denied", READY, || {
        http_get(ports.web_outbound, "/page.txt").err()
    });
    for i in 0..5 {
        let r = http_get(ports.web_outbound, "/page.txt");
        assert!(r.is_err(), "request {i} after the deletion answered {r:?}");
    }
    eventually("rbac_denied_total to grow on backend-1", READY, || {
        (backend.metric("meshlink_proxy_rbac_denied_total") > denied).then_some(())
    });
    // The other direction keeps its own permission.
    let r = http_get(ports.backend_outbound, "/page.txt").expect("backend -> web");
    assert_eq!(r.text(), web_page);

    // Re-applying the permission lets traffic through again.
    proxy::apply_pair(&cp, &ports, "1h");
    let r = eventually("web -> backend to be allowed again", READY, || {
        http_get(ports.web_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, backend_page));
    assert_eq!(web.exit_status(), None, "{}", web.logs());
    assert_eq!(backend.exit_status(), None, "{}", backend.logs());
}

/// Asserts `/ready` is 503 with a non-empty list of non-empty strings.
fn assert_not_ready(sidecar: &Sidecar) -> Vec<String> {
    let (status, body) = sidecar.ready();
    assert_eq!(status, 503, "/ready: {body}\nlogs:\n{}", sidecar.logs());
    assert_eq!(body["ready"], false, "{body}");
    let missing: Vec<String> = body["missing"]
        .as_array()
        .unwrap_or_else(|| panic!("missing is a list: {body}"))
        .iter()
        .map(|m| m.as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        !missing.is_empty() && missing.iter().all(|m| !m.is_empty()),
        "{body}"
    );
    missing
}

#[test]
fn without_a_reachable_cp_the_sidecar_is_not_ready_says_why_and_keeps_running() {
    // Valid credential files from a control plane that is then killed:
    // only the control plane is missing (nothing listens on its port).
    let mut cp = ControlPlane::start(StoreKind::Sqlite);
    proxy::apply_pair(&cp, &PairPorts::free(), "1h");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = SidecarOptions::new(&cp, &dir.path().join("web-1.token"), "web-1");
    opts.cp_ca = dir.path().join("ca.pem");
    std::fs::write(&opts.cp_ca, cp.xds_ca_pem()).expect("write CA");
    proxy::write_token(&cp, &opts.token_file, "web-1");
    cp.kill9();
    let mut sidecar = Sidecar::spawn(&opts);
    eventually("the admin endpoint to answer", READY, || {
        (sidecar.admin_get("/ready").0 != 0).then_some(())
    });
    let missing = assert_not_ready(&sidecar);
    println!("/ready missing: {missing:?}");
    assert!(
        missing.iter().any(|m| m.contains(&opts.cp_url)),
        "/ready does not name the control plane {}: {missing:?}",
        opts.cp_url
    );
    // Observed over a few seconds of retries: still not ready, still running.
    let window = Instant::now() + Duration::from_secs(3);
    while Instant::now() < window {
        assert_not_ready(&sidecar);
        assert_eq!(sidecar.exit_status(), None, "{}", sidecar.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        sidecar.terminate().code(),
        Some(0),
        "SIGTERM exits 0:\n{}",
        sidecar.logs()
    );
}

#[test]
fn a_sidecar_waits_for_its_ca_and_token_files_and_then_gets_ready() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = SidecarOptions::new(&cp, &dir.path().join("web-1.token"), "web-1");
    opts.cp_ca = dir.path().join("ca.pem");
    let mut sidecar = Sidecar::spawn(&opts);
    eventually("the admin endpoint to answer", READY, || {
        (sidecar.admin_get("/ready").0 != 0).then_some(())
    });
    let missing = assert_not_ready(&sidecar);
    println!("/ready missing: {missing:?}");

    std::fs::write(&opts.cp_ca, cp.xds_ca_pem()).expect("write CA");
    proxy::write_token(&cp, &opts.token_file, "web-1");
    sidecar.wait_ready(READY);
    let (_, body) = sidecar.ready();
    assert_eq!(body["missing"], Value::Array(vec![]), "{body}");
}

#[test]
fn bad_flags_exit_2_and_name_the_flag() {
    let out = std::process::Command::new(meshlink_e2e::bin_path("meshlink-proxy"))
        .args(["run", "--drain-timeout", "soonish"])
        .output()
        .expect("run meshlink-proxy");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("drain-timeout"), "{stderr}");
}

#[test]
fn ready_names_each_missing_credential_file() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    proxy::apply_pair(&cp, &PairPorts::free(), "1h");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = SidecarOptions::new(&cp, &dir.path().join("web-1.token"), "web-1");
    opts.cp_ca = dir.path().join("ca.pem");
    let sidecar = Sidecar::spawn(&opts);
    eventually("the admin endpoint to answer", READY, || {
        (sidecar.admin_get("/ready").0 != 0).then_some(())
    });
    let missing = assert_not_ready(&sidecar).join("\n");
    for file in [&opts.cp_ca, &opts.token_file] {
        let file = file.display().to_string();
        assert!(
            missing.contains(&file),
            "/ready does not name the missing {file}:\n{missing}"
        );
    }
}

//! Bad configuration from the control plane (I3): a Dataplane whose new
//! outbound listens on a hostname, which the control plane accepts (a
//! hostname is a valid address) but no proxy can bind. The sidecar NACKs
//! that Listener naming the field, keeps serving everything else, stays
//! up, and `meshlink inspect` shows the NACK; fixing the Dataplane clears
//! it.

use std::time::Duration;

use meshlink_e2e::app::{PythonApp, http_get};
use meshlink_e2e::proxy::{self, PairPorts, Sidecar, SidecarOptions};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};
use serde_json::Value;

const READY: Duration = Duration::from_secs(30);
const PROPAGATION: Duration = Duration::from_secs(15);

/// web-1's Dataplane with an extra outbound on `localhost:<port>`.
fn web_with_hostname_outbound(ports: &PairPorts, extra: u16) -> String {
    format!(
        "apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {{name: web-1, mesh: default}}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{{port: {}, servicePort: {}, tags: {{kuma.io/service: web}}}}]
    outbound:
      - {{port: {}, tags: {{kuma.io/service: backend}}}}
      - {{port: {extra}, address: localhost, tags: {{kuma.io/service: backend}}}}
",
        ports.web_inbound, ports.web_app, ports.web_outbound
    )
}

fn listener_nack(cp: &ControlPlane) -> Option<String> {
    let out = cp
        .cli(&[
            "inspect",
            "dataplane",
            "web-1",
            "-m",
            "default",
            "-o",
            "json",
        ])
        .success();
    let body: Value = serde_json::from_str(&out.stdout).expect("inspect JSON");
    body["types"]["Listener"]["lastNack"]["detail"]
        .as_str()
        .map(str::to_owned)
}

#[test]
fn an_unbindable_listener_is_nacked_and_everything_else_keeps_serving() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    let page = format!("backend {}\n", uuid::Uuid::new_v4());
    let _backend_app = PythonApp::start(ports.backend_app, &[("page.txt", &page)]);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (mut web, _backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    assert_eq!(
        http_get(ports.web_outbound, "/page.txt")
            .expect("request")
            .text(),
        page
    );

    // The control plane accepts the Dataplane and pushes the new Listener.
    let extra = free_port();
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(&web_with_hostname_outbound(&ports, extra)),
    )
    .success();
    let bad = format!("outbound:localhost:{extra}");

    // The sidecar rejects exactly that Listener, naming the field.
    let rejected = eventually("the sidecar to reject the listener", PROPAGATION, || {
        let dump = web.config_dump();
        let list = dump["xds"]["rejected"].as_array()?.clone();
        (!list.is_empty()).then_some(list)
    });
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0]["name"], bad.as_str(), "{rejected:?}");
    let error = rejected[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("address.socket_address.address") && error.contains("not an IP address"),
        "{error}"
    );
    assert!(web.metric("meshlink_proxy_xds_rejected_total{type=\"Listener\"}") >= 1.0);

    // The control plane saw the NACK with the sidecar's detail.
    let detail = eventually("inspect to show the NACK", PROPAGATION, || {
        listener_nack(&cp)
    });
    assert!(
        detail.contains(&bad) && detail.contains("not an IP address"),
        "{detail}"
    );
    let table = cp
        .cli(&["inspect", "dataplane", "web-1", "-m", "default"])
        .success()
        .stdout;
    assert!(table.contains("not an IP address"), "{table}");

    // Nothing else changed: the process is up, ready, and still serving.
    assert!(
        web.exit_status().is_none(),
        "the sidecar exited:\n{}",
        web.logs()
    );
    assert_eq!(web.ready().0, 200, "{}", web.ready().1);
    for _ in 0..5 {
        let r = http_get(ports.web_outbound, "/page.txt").expect("request after the NACK");
        assert_eq!(r.text(), page);
    }
    let names: Vec<String> = web.config_dump()["listeners"]
        .as_array()
        .expect("listeners")
        .iter()
        .filter_map(|l| l["name"].as_str().map(str::to_owned))
        .collect();
    assert!(!names.contains(&bad), "{names:?}");

    // Fixing the Dataplane clears the rejection.
    proxy::apply_pair(&cp, &ports, "1h");
    eventually("the rejection to clear", PROPAGATION, || {
        let dump = web.config_dump();
        dump["xds"]["rejected"].as_array()?.is_empty().then_some(())
    });
    assert_eq!(
        http_get(ports.web_outbound, "/page.txt")
            .expect("request")
            .text(),
        page
    );
}

#[test]
fn garbage_on_the_inbound_and_admin_ports_is_refused_and_the_proxy_keeps_serving() {
    use std::io::{Read, Write};
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    let page = format!("backend {}\n", uuid::Uuid::new_v4());
    let _backend_app = PythonApp::start(ports.backend_app, &[("page.txt", &page)]);
    let tokens = tempfile::tempdir().expect("tempdir");
    let mut web = Sidecar::start(&cp, tokens.path(), "web-1");
    let backend_token = tokens.path().join("backend-1.token");
    proxy::write_token(&cp, &backend_token, "backend-1");
    let backend_opts = SidecarOptions::new(&cp, &backend_token, "backend-1");
    let mut backend = Sidecar::spawn(&backend_opts);
    web.wait_ready(READY);
    backend.wait_ready(READY);
    let admin_port = backend.admin_port();
    let failures_before = backend.metric("meshlink_proxy_handshake_failures_total{");

    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    for port in [ports.backend_inbound, admin_port] {
        for _ in 0..20 {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            let _ = s.write_all(&garbage);
            let mut sink = Vec::new();
            // The proxy answers with an error (or nothing) and closes.
            let _ = s.read_to_end(&mut sink);
        }
    }

    assert!(
        backend.exit_status().is_none(),
        "the sidecar exited:\n{}",
        backend.logs()
    );
    assert!(
        backend.metric("meshlink_proxy_handshake_failures_total{") >= failures_before + 20.0,
        "every garbage connection counts as a failed handshake"
    );
    assert_eq!(backend.ready().0, 200);
    let r = http_get(ports.web_outbound, "/page.txt").expect("request after garbage");
    assert_eq!(r.text(), page);
}

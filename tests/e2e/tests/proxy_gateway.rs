//! Kuma's Dataplane networking that moves or removes inbounds, through real
//! sidecars: backend-1's inbound listens on its own `address` (127.0.0.5)
//! and web reaches it there, while nothing listens on the Dataplane's
//! address for that port; a `DELEGATED` gateway Dataplane (no inbounds) run
//! by a real meshlink-proxy reaches the sidecar'd backend through its
//! outbound, as its gateway service's identity (refused until a permission
//! names that service); a `BUILTIN` gateway is stored with a warning.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use meshlink_e2e::app::{PythonApp, http_get};
use meshlink_e2e::proxy::{self, PairPorts, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};

const READY: Duration = Duration::from_secs(30);

/// A loopback address other than the Dataplane's 127.0.0.1 (all of
/// 127/8 is loopback on Linux).
const INBOUND_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 5);

/// Kuma universal backend-1 whose inbound listens on [`INBOUND_IP`].
fn backend_on_own_address(ports: &PairPorts) -> String {
    format!(
        r#"
type: Dataplane
name: backend-1
mesh: default
networking:
  address: 127.0.0.1
  inbound:
    - port: {inbound}
      address: {INBOUND_IP}
      servicePort: {app}
      tags:
        kuma.io/service: backend
  outbound:
    - port: {outbound}
      tags:
        kuma.io/service: web
"#,
        inbound = ports.backend_inbound,
        app = ports.backend_app,
        outbound = ports.backend_outbound,
    )
}

#[test]
fn an_inbound_address_is_where_the_sidecar_listens_and_where_web_dials() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    cp.cli_stdin(&["apply", "-f", "-"], Some(&backend_on_own_address(&ports)))
        .success();

    let page = format!("backend app {}\n", uuid::Uuid::new_v4());
    let _app = PythonApp::start(ports.backend_app, &[("page.txt", &page)]);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);

    let r = eventually("web -> backend at 127.0.0.5", READY, || {
        http_get(ports.web_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, page));

    let at = |ip: Ipv4Addr| SocketAddr::from((ip, ports.backend_inbound));
    assert!(
        TcpStream::connect(at(INBOUND_IP)).is_ok(),
        "backend-1's inbound listens on {INBOUND_IP}"
    );
    let dataplane_address = TcpStream::connect(at(Ipv4Addr::LOCALHOST));
    assert!(
        dataplane_address.is_err(),
        "nothing may listen on the Dataplane address 127.0.0.1:{}; logs:\n{}",
        ports.backend_inbound,
        backend.logs()
    );
    let dump = backend.config_dump().to_string();
    assert!(
        dump.contains(&format!("inbound:{INBOUND_IP}:{}", ports.backend_inbound)),
        "{dump}"
    );
    drop(web);
}

/// A Kuma universal delegated gateway `edge-1` (service `edge`) calling
/// backend through its outbound on `outbound`.
fn delegated_gateway(outbound: u16) -> String {
    format!(
        r#"
type: Dataplane
name: edge-1
mesh: default
networking:
  address: 127.0.0.1
  gateway:
    type: DELEGATED
    tags:
      kuma.io/service: edge
  outbound:
    - port: {outbound}
      tags:
        kuma.io/service: backend
"#
    )
}

const EDGE_TO_BACKEND: &str = r#"
type: MeshTrafficPermission
name: edge-to-backend
mesh: default
spec:
  targetRef:
    kind: MeshService
    name: backend
  from:
    - targetRef:
        kind: MeshService
        name: edge
      default:
        action: Allow
"#;

const BUILTIN_GATEWAY: &str = r#"
type: Dataplane
name: public-gw-1
mesh: default
networking:
  address: 127.0.0.1
  gateway:
    type: BUILTIN
    tags:
      kuma.io/service: public-gw
"#;

#[test]
fn a_delegated_gateway_reaches_a_sidecar_backend_through_its_outbound() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    let edge_outbound = free_port();
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(&delegated_gateway(edge_outbound)),
    )
    .success();

    let page = format!("backend app {}\n", uuid::Uuid::new_v4());
    let _app = PythonApp::start(ports.backend_app, &[("page.txt", &page)]);
    let tokens = tempfile::tempdir().expect("tempdir");
    let mut backend = Sidecar::start(&cp, tokens.path(), "backend-1");
    let mut edge = Sidecar::start(&cp, tokens.path(), "edge-1");
    backend.wait_ready(READY);
    edge.wait_ready(READY);

    // Its identity is the gateway's service: only web may reach backend yet.
    let denied = backend.metric("meshlink_proxy_rbac_denied_total");
    eventually("edge -> backend to be refused by RBAC", READY, || {
        let refused = http_get(edge_outbound, "/page.txt").is_err();
        (refused && backend.metric("meshlink_proxy_rbac_denied_total") > denied).then_some(())
    });
    cp.cli_stdin(&["apply", "-f", "-"], Some(EDGE_TO_BACKEND))
        .success();
    let r = eventually("edge -> backend", READY, || {
        http_get(edge_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, page));
    assert!(
        edge.serial().is_some(),
        "edge-1 holds an identity certificate"
    );

    // Its status is written like a sidecar's; SERVICES names the gateway.
    eventually("edge-1 listed Online as a DELEGATED gateway", READY, || {
        let table = cp
            .cli(&["get", "dataplanes", "-m", proxy::MESH])
            .success()
            .stdout;
        let row = table.lines().find(|l| l.contains(" edge-1 "))?.to_owned();
        (row.contains("edge (DELEGATED gateway)") && row.contains("Online")).then_some(())
    });

    // A BUILTIN gateway is stored, with a warning naming what is not served.
    let out = cp
        .cli_stdin(&["apply", "-f", "-"], Some(BUILTIN_GATEWAY))
        .success();
    assert!(
        out.stderr.contains(
            "networking.gateway.type: BUILTIN gateway accepted and stored, but not served"
        ),
        "{}",
        out.stderr
    );
    let yaml = cp
        .cli(&[
            "get",
            "dataplane",
            "public-gw-1",
            "-m",
            proxy::MESH,
            "-o",
            "yaml",
        ])
        .success()
        .stdout;
    assert!(yaml.contains("type: BUILTIN"), "{yaml}");
}

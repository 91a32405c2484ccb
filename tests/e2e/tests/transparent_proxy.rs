//! Issue 37 acceptance: an unmodified client in a workload's network
//! namespace calls `http://backend.mesh/` and gets mTLS, authorization and
//! passthrough from its sidecar (so does a call to the backend's own
//! address), with the traffic captured by
//! `meshlink install transparent-proxy` and the name answered by the
//! sidecar's DNS. The set-up is [`meshlink_e2e::transparent::Pair`].
//!
//! Needs root, iptables, python3, curl and getent (scripts/setup-test-deps).

use std::process::Command;
use std::time::Instant;

use meshlink_e2e::eventually;
use meshlink_e2e::transparent::{
    APP, APP_PORT, BACKEND_ADDR, DEADLINE, PERMISSION, PYTHON, Pair, Program, WEB_ADDR, app_answer,
    dataplane, http, mesh,
};

/// Sends 10,000 random datagrams (0 to 299 bytes) to UDP port 53 of
/// argv[1], paced at 10,000 a second; prints the seconds it took.
const FLOOD: &str = r#"
import os, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
start = time.monotonic()
for i in range(10000):
    s.sendto(os.urandom(i % 300), (sys.argv[1], 53))
    ahead = start + (i + 1) / 10000 - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
print(round(time.monotonic() - start, 2))
"#;

#[test]
fn an_unmodified_client_calls_backend_mesh_through_its_sidecar() {
    let pair = Pair::new();
    let (web, backend, cp) = (&pair.web, &pair.backend, &pair.cp);
    let access_log = pair.log_path("backend-access.log");
    pair.apply(
        &format!(
            "{}---\n{}---\n{}---\n{PERMISSION}---\ntype: MeshAccessLog\nmesh: default\nname: backend-inbound\nspec:\n  targetRef: {{kind: MeshService, name: backend}}\n  from:\n    - targetRef: {{kind: Mesh}}\n      default:\n        backends:\n          - type: File\n            file:\n              path: {}\n              format:\n                type: Json\n                json:\n                  - {{key: peer, value: \"%DOWNSTREAM_PEER_URI_SAN%\"}}\n                  - {{key: code, value: \"%RESPONSE_CODE%\"}}\n",
            mesh(true),
            dataplane("web-1", WEB_ADDR, &[(APP_PORT, &http("web"))], "{}"),
            dataplane("backend-1", BACKEND_ADDR, &[(APP_PORT, &http("backend"))], "{}"),
            access_log.display(),
        ),
    );
    web.install_rules();
    backend.install_rules();
    let _app = Program::python(Some(&backend.ns), APP, &[&APP_PORT.to_string(), "backend"]);
    let mut web_proxy = pair.start_sidecar(web, "web-1");
    let mut backend_proxy = pair.start_sidecar(backend, "backend-1");
    web_proxy.wait_ready(DEADLINE);
    backend_proxy.wait_ready(DEADLINE);

    // The VIP, from the Mesh's status, and the name that resolves to it.
    let vip = pair.vip("backend");
    let first: u8 = vip
        .split('.')
        .next()
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    assert!(first >= 240, "{vip} is in the default range 240.0.0.0/4");
    let resolved = eventually("backend.mesh resolves in web's namespace", DEADLINE, || {
        web.resolve("backend.mesh")
    });
    assert_eq!(resolved, vip);

    // An unmodified curl reaches the backend app through both sidecars,
    // over mTLS: the backend's sidecar logs web's SPIFFE ID.
    let (code, body) = eventually("curl http://backend.mesh/ answers", DEADLINE, || {
        let r = web.curl("http://backend.mesh/");
        (r.0 == 200).then_some(r)
    });
    assert_eq!((code, app_answer(&body).0), (200, "backend"));
    assert_ne!(
        app_answer(&body).1,
        WEB_ADDR,
        "the app's peer is its sidecar"
    );
    let line = eventually("the backend sidecar's access log line", DEADLINE, || {
        std::fs::read_to_string(&access_log)
            .ok()?
            .lines()
            .next()
            .map(str::to_owned)
    });
    let logged: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(logged["peer"], "spiffe://default/web", "{line}");
    assert_eq!(logged["code"], "200", "{line}");

    // The backend's own address and port is captured the same way: the
    // second line of its sidecar's log names web again.
    let direct = format!("http://{BACKEND_ADDR}:{APP_PORT}/");
    let (code, body) = web.curl(&direct);
    assert_eq!((code, app_answer(&body).0), (200, "backend"));
    let second = eventually("a second access log line", DEADLINE, || {
        std::fs::read_to_string(&access_log)
            .ok()?
            .lines()
            .nth(1)
            .map(str::to_owned)
    });
    assert!(second.contains("spiffe://default/web"), "{second}");

    // An external name is answered by the namespace's own resolver,
    // through the sidecar.
    assert_eq!(web.resolve("external.test").as_deref(), Some("192.0.2.55"));

    // A flood of garbage at the namespace's resolver (redirected to the
    // sidecar), 10,000 datagrams paced at 10,000 a second, leaves the
    // sidecar serving: it counts them, and names still resolve.
    let (code, out, err) = web.ns.run(&[PYTHON, "-c", FLOOD, &web.cp_link.outer_addr]);
    assert_eq!(code, 0, "the flood:\n{out}\n{err}");
    eprintln!("10,000 garbage datagrams sent in {}s", out.trim());
    assert_eq!(web.resolve("backend.mesh").as_deref(), Some(vip.as_str()));
    assert!(web_proxy.exit_status().is_none(), "the sidecar still runs");
    let counted = web_proxy.metric(r#"meshlink_proxy_dns_queries_total{result="malformed"}"#)
        + web_proxy.metric(r#"meshlink_proxy_dns_queries_total{result="dropped"}"#);
    assert!(counted > 0.0, "the garbage is counted");

    // A client outside the mesh cannot reach the backend app past its
    // sidecar: on its own address and port, it meets the inbound's mTLS.
    let from_root = Command::new("curl")
        .args(["-s", "-m", "5", "-w", "%{http_code}", "-o", "/dev/null"])
        .arg(format!("http://{}:{APP_PORT}/", backend.cp_link.inner_addr))
        .output()
        .expect("curl from the root namespace");
    assert_eq!(
        String::from_utf8_lossy(&from_root.stdout),
        "000",
        "a plain client got an answer from the backend app"
    );

    // Passthrough: a destination outside the mesh (the test's resolver
    // host, a plain server in the root namespace) is reached while the
    // Mesh allows it, and refused once it does not.
    let plain_port = meshlink_e2e::ports::claim(&web.cp_link.outer_addr);
    let _plain = Program::python(None, APP, &[&plain_port.to_string(), "outside"]);
    let outside = format!("http://{}:{plain_port}/", web.cp_link.outer_addr);
    let (code, body) = web.curl(&outside);
    assert_eq!((code, app_answer(&body).0), (200, "outside"));
    pair.apply(&mesh(false));
    eventually(
        "passthrough off refuses the outside server",
        DEADLINE,
        || (web.curl(&outside).0 == 0).then_some(()),
    );
    assert!(
        web_proxy.metric(
            r#"meshlink_proxy_upstream_none_healthy_total{cluster="outbound:passthrough:disabled"}"#
        ) > 0.0,
        "the refusal is counted on the disabled pass-through cluster"
    );
    pair.apply(&mesh(true));

    // Authorization still applies: without the permission, 403.
    let out = cp.cli(&[
        "delete",
        "meshtrafficpermission",
        "web-to-backend",
        "-m",
        "default",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    eventually(
        "web is denied once the permission is gone",
        DEADLINE,
        || (web.curl("http://backend.mesh/").0 == 403).then_some(()),
    );

    // A deleted service stops resolving.
    let out = cp.cli(&["delete", "dataplane", "backend-1", "-m", "default"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let deleted = Instant::now();
    eventually("backend.mesh stops resolving", DEADLINE, || {
        web.resolve("backend.mesh").is_none().then_some(())
    });
    eprintln!(
        "backend.mesh stopped resolving {:?} after its Dataplane was deleted",
        deleted.elapsed()
    );
}

//! Issue 12, the web console: the security headers `meshlink-cp` serves it
//! with, and the console in a real browser (Debian's headless Chromium,
//! driven by `tests/console/console-test.mjs` through playwright-core)
//! against two linked sites with two sidecars.
//!
//! The browser script asks for what a browser cannot do (delete a Dataplane
//! with the CLI, stop and restart site B's router, apply a Connector to a
//! closed port) with an `ACTION <name>` line on its stdout; this test does
//! it and answers `DONE <name>` on its stdin. Both sides wait for
//! conditions with deadlines, never fixed sleeps.
//! Screenshots go to docs/img/ (docs/console.md shows them).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use meshlink_e2e::proxy::{PairPorts, apply_pair, start_pair_sidecars};
use meshlink_e2e::site::{Site, free_port_on};
use meshlink_e2e::{ControlPlane, StoreKind};

const DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn the_console_is_served_with_a_strict_csp_nosniff_and_no_framing() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let client = reqwest::blocking::Client::new();
    for path in [
        "/",
        "/assets/app.js",
        "/assets/graph.js",
        "/assets/style.css",
    ] {
        let res = client
            .get(format!("{}{path}", cp.server()))
            .send()
            .expect("GET");
        assert_eq!(res.status(), 200, "{path}");
        let h = res.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        for part in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(part), "{path}: CSP {csp:?} lacks {part}");
        }
        assert!(!csp.contains("unsafe"), "{path}: CSP allows unsafe: {csp}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        let media = h["content-type"].to_str().unwrap().to_owned();
        let body = res.text().unwrap();
        if path == "/" {
            assert!(media.starts_with("text/html"), "{media}");
            // Every script is a file from this origin: no inline code.
            for tag in body.split("<script").skip(1) {
                let tag = &tag[..tag.find('>').unwrap()];
                assert!(tag.contains("src=\"/assets/"), "inline script: {tag}");
            }
        } else {
            assert!(!media.starts_with("text/html"), "{path} served as {media}");
        }
    }
    // Compressed for browsers that accept gzip.
    let res = client
        .get(format!("{}/assets/graph.js", cp.server()))
        .header("accept-encoding", "gzip")
        .send()
        .unwrap();
    assert_eq!(res.headers()["content-encoding"], "gzip");
    // An unknown asset is a JSON 404, not the page; the API still wants its token.
    let res = client
        .get(format!("{}/assets/nope.js", cp.server()))
        .send()
        .unwrap();
    assert_eq!(res.status(), 404);
    let res = client
        .get(format!("{}/api/v1/meshes", cp.server()))
        .send()
        .unwrap();
    assert_eq!(res.status(), 401);
}

/// One HTTP/1.0 GET of `/name` (the app answers its name) through the
/// local port `port`; the whole answer.
fn http_get_through(port: u16) -> String {
    use std::io::Read;
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(DEADLINE)).expect("read timeout");
    c.write_all(b"GET /name HTTP/1.0\r\n\r\n").expect("send");
    let mut answer = Vec::new();
    let _ = c.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn repo() -> PathBuf {
    meshlink_e2e::workspace_root()
}

#[test]
fn the_console_shows_proxies_sites_and_links_live_in_headless_chromium() {
    let script_dir = repo().join("tests/console");
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists()
            && script_dir.join("node_modules/playwright-core").exists(),
        "the browser test needs /usr/bin/chromium and tests/console/node_modules: run scripts/setup-test-deps"
    );
    let a = Site::start("console-a", 2);
    let mut b = Site::start("console-b", 3);
    let link = b.link_to(&a, Some(2));
    // Both sidecars' apps listen (a sidecar whose app refuses connections
    // is not Ready; the Services page would show it unhealthy).
    let (web_app, backend_app) = (
        meshlink_e2e::app::HttpApp::start("web"),
        meshlink_e2e::app::HttpApp::start("backend"),
    );
    let ports = PairPorts::with_apps(web_app.port(), backend_app.port());
    apply_pair(&b.cp, &ports, "2m");
    // An L7 policy for the Policies page's table (generous enough that
    // the test's requests never hit it).
    b.apply(
        "type: MeshRateLimit\nname: backend-limit\nmesh: default\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n    - targetRef: {kind: Mesh}\n      default: {local: {http: {requestRate: {num: 1000, interval: 1s}}}}\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let _sidecars = start_pair_sidecars(&b.cp, dir.path(), DEADLINE);
    // One request from web through the mesh to backend (the Services
    // page's mesh service traffic counts it at backend-1's inbound).
    let answer = http_get_through(ports.web_outbound);
    assert!(answer.contains("backend"), "web reached backend: {answer}");
    // A routing key served and listened for in site B (the Services page),
    // served by a real app.
    let app = meshlink_e2e::app::HttpApp::start("backend-app");
    let listener_port = free_port_on(b.host());
    b.apply(&format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Listener\nmetadata: {{name: backend}}\nspec: {{routingKey: backend, host: {}, port: {listener_port}}}\n---\napiVersion: meshlink.dev/v1alpha1\nkind: Connector\nmetadata: {{name: backend}}\nspec: {{routingKey: backend, host: 127.0.0.1, port: {}}}\n",
        b.host(),
        app.port()
    ));

    // One flow through site B's backend Listener (the Services page's
    // traffic figures count it, whatever the connector's target answers).
    b.wait_listener_matched("backend", DEADLINE);
    {
        use std::io::Read;
        let mut flow = std::net::TcpStream::connect((b.host(), listener_port))
            .expect("connect to the backend Listener");
        flow.write_all(b"GET / HTTP/1.0\r\n\r\n")
            .expect("send through the Listener");
        flow.set_read_timeout(Some(DEADLINE)).expect("read timeout");
        let mut answer = Vec::new();
        let _ = flow.read_to_end(&mut answer);
    }

    // A second backend Dataplane whose proxy never starts: the Services
    // page shows backend partially degraded, naming it.
    b.apply(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {name: backend-2, mesh: default}\n\
         spec: {networking: {address: 127.0.0.1, inbound: [{port: 10099, servicePort: 8099, tags: {kuma.io/service: backend}}]}}\n",
    );

    // A MeshHTTPRoute splitting backend 90/10 (the Services page's routes).
    b.apply(
        "type: MeshHTTPRoute\nname: backend-split\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  \
         to:\n    - targetRef: {kind: MeshService, name: backend}\n      rules:\n        - matches: \
         [{path: {type: PathPrefix, value: /api}}]\n          default:\n            backendRefs:\n              \
         - {kind: MeshService, name: backend, weight: 90}\n              \
         - {kind: MeshService, name: backend-v2, weight: 10}\n",
    );

    let mut node = Command::new("node")
        .arg("console-test.mjs")
        .current_dir(&script_dir)
        .env("CONSOLE_URL", b.cp.server())
        .env("CONSOLE_TOKEN", b.cp.token())
        .env("SCREENSHOT_DIR", repo().join("docs/img"))
        .env("CONSOLE_DATAPLANES", "web-1,backend-1")
        .env("CONSOLE_DELETE", "backend-1")
        .env("CONSOLE_LINK", &link)
        .env("CONSOLE_SITES", "console-b,console-a")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run node (apt-get install nodejs)");
    let mut to_node = node.stdin.take().unwrap();
    let from_node = BufReader::new(node.stdout.take().unwrap());
    let mut passed = false;
    for line in from_node.lines() {
        let line = line.expect("read the browser script's stdout");
        eprintln!("console-test says: {line}");
        let Some(action) = line.strip_prefix("ACTION ") else {
            passed |= line == "PASS";
            continue;
        };
        match action {
            "stop-router" => {
                b.router.take().expect("router running").terminate();
            }
            "start-router" => {
                b.spawn_router();
                b.router.as_mut().unwrap().wait_ready(DEADLINE);
                b.wait_link_operational(&link, DEADLINE);
            }
            "deny-web-by-rules" => {
                // Kuma's rules on backend: web's SPIFFE ID is denied (the
                // mesh's trust domain is its name), every other one allowed.
                b.apply(
                    "type: MeshTrafficPermission\nname: backend-rules\nmesh: default\nspec:\n  \
                     targetRef: {kind: MeshService, name: backend}\n  rules:\n    - default:\n        \
                     deny: [{spiffeID: {type: Exact, value: 'spiffe://default/web'}}]\n        \
                     allow: [{spiffeID: {type: Prefix, value: 'spiffe://default'}}]\n",
                );
            }
            "unreachable-connector" => {
                // Nothing listens on a claimed port: the router's probe
                // is refused.
                let closed = free_port_on(b.host());
                b.apply(&format!(
                    "apiVersion: meshlink.dev/v1alpha1\nkind: Connector\nmetadata: {{name: ghost}}\nspec: {{routingKey: ghost, host: {}, port: {closed}}}\n",
                    b.host()
                ));
            }
            "delete-dataplane" => {
                b.cp.cli(&["delete", "dataplane", "backend-1", "--mesh", "default"])
                    .success();
            }
            other => panic!("the browser script asked for an unknown action {other:?}"),
        }
        writeln!(to_node, "DONE {action}").expect("answer the browser script");
    }
    let status = node.wait().expect("wait for node");
    assert!(
        status.success() && passed,
        "the browser test failed ({status}); its steps are in the output above"
    );
}

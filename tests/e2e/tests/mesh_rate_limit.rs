//! MeshRateLimit (issue 36) with real binaries and curl: Kuma's documented
//! example ("5 requests per 10 s to backend, then 423 with a header"),
//! applied unchanged, becomes a local rate limit on backend's inbound. In a
//! window, exactly 5 requests reach the app; the rest are answered by
//! backend's sidecar with 423, the header and `local_rate_limited`, and
//! counted. Deleting the policy lifts the limit. Kuma's TCP example
//! (`local.tcp.connectionRate`) on a TCP mesh lets exactly 5 connections
//! per window through backend's sidecar; the others are closed before
//! their handshake and never reach the app.

use std::time::Duration;

use meshlink_e2e::app::http_get;
use meshlink_e2e::curl::curl;
use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const READY: Duration = Duration::from_secs(30);

/// Kuma's MeshRateLimit HTTP example, as its docs print it.
const KUMA_EXAMPLE: &str = "\
type: MeshRateLimit
mesh: default
name: backend-rate-limit
spec:
  targetRef:
    kind: MeshService
    name: backend
  from:
    - targetRef:
        kind: Mesh
      default:
        local:
          http:
            requestRate:
              num: 5
              interval: 10s
            onRateLimit:
              status: 423
              headers:
                set:
                  - name: \"x-kuma-rate-limited\"
                    value: \"true\"
";

/// A GET of `/hello` through web's outbound: status, the rate-limit
/// header, body.
fn get(port: u16) -> (u16, Option<String>, String) {
    let seen = curl(port, "/hello", &[]);
    let header = seen.header("x-kuma-rate-limited").map(str::to_owned);
    (seen.status, header, seen.body)
}

#[test]
fn kumas_rate_limit_example_lets_five_requests_per_window_reach_the_app() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, "1h", "http", &["web", "backend"]);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let app = HttpBackend::start("backend", ports.backend_app);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (_web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    assert_eq!(get(ports.web_outbound).0, 200, "no limit before the policy");

    cp.cli_stdin(&["apply", "-f", "-"], Some(KUMA_EXAMPLE))
        .success();
    let listed = cp
        .cli(&["get", "meshratelimits", "-m", "default"])
        .success()
        .stdout;
    assert!(listed.contains("backend-rate-limit"), "{listed}");

    // The limit is on once a request is refused; then, once a window
    // opens (the first 200 after it), the next requests get exactly the
    // window's 5 before the next refusal.
    let refused = eventually("the rate limit to apply", READY, || {
        let seen = get(ports.web_outbound);
        (seen.0 == 423).then_some(seen)
    });
    assert_eq!(refused.1.as_deref(), Some("true"), "{refused:?}");
    assert_eq!(refused.2.trim_end(), "local_rate_limited");
    eventually("the next window", READY, || {
        (get(ports.web_outbound).0 == 200).then_some(())
    });
    let hits_before = app.hits();
    let mut passed = 1;
    loop {
        let (status, header, body) = get(ports.web_outbound);
        if status == 200 {
            passed += 1;
            assert!(passed <= 5, "more than 5 requests in one window");
            continue;
        }
        assert_eq!((status, header.as_deref()), (423, Some("true")), "{body}");
        break;
    }
    assert_eq!(passed, 5, "exactly the window's 5 requests passed");
    assert_eq!(
        app.hits() - hits_before,
        4,
        "a refused request never reaches the app"
    );
    let limited = backend.metric("meshlink_proxy_http_rate_limited_total{listener=");
    assert!(
        limited >= 2.0,
        "backend's sidecar counted its refusals: {limited}"
    );

    // Deleting the policy lifts the limit.
    cp.cli(&[
        "delete",
        "meshratelimit",
        "backend-rate-limit",
        "-m",
        "default",
    ])
    .success();
    eventually("the limit to lift", READY, || {
        (0..8)
            .all(|_| get(ports.web_outbound).0 == 200)
            .then_some(())
    });
}

/// Kuma's MeshRateLimit TCP example, as its docs print it.
const KUMA_TCP_EXAMPLE: &str = "\
type: MeshRateLimit
mesh: default
name: backend-rate-limit
spec:
  targetRef:
    kind: MeshService
    name: backend
  from:
    - targetRef:
        kind: Mesh
      default:
        local:
          tcp:
            connectionRate:
              num: 5
              interval: 10s
";

#[test]
fn kumas_tcp_rate_limit_example_lets_five_connections_per_window_reach_the_app() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    let app = HttpBackend::start("backend", ports.backend_app);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (_web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    // Each GET is a new TCP connection through web's outbound, and so a
    // new mTLS connection to backend's inbound.
    let get = || http_get(ports.web_outbound, "/hello").map(|r| r.status);
    assert_eq!(get().ok(), Some(200), "no limit before the policy");

    cp.cli_stdin(&["apply", "-f", "-"], Some(KUMA_TCP_EXAMPLE))
        .success();
    eventually("the connection rate limit to apply", READY, || {
        get().is_err().then_some(())
    });
    eventually("the next window", READY, || {
        (get().ok() == Some(200)).then_some(())
    });
    let hits_before = app.hits();
    let mut passed = 1;
    while let Ok(status) = get() {
        assert_eq!(status, 200);
        passed += 1;
        assert!(passed <= 5, "more than 5 connections in one window");
    }
    assert_eq!(passed, 5, "exactly the window's 5 connections passed");
    assert_eq!(
        app.hits() - hits_before,
        4,
        "a refused connection never reaches the app"
    );
    let closed = backend.metric("meshlink_proxy_connections_rate_limited_total{listener=");
    assert!(
        closed >= 2.0,
        "backend's sidecar counted its refusals: {closed}"
    );
}

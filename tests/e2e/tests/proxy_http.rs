//! L7 through the sidecar pair, real binaries and curl: with
//! `kuma.io/protocol: http` on the backend's inbound, web's outbound
//! routes each request and carries it to backend's sidecar as HTTP/2 over
//! mTLS, which delivers it to the app as HTTP/1.1. Kuma's MeshTimeout and
//! MeshRetry, applied unchanged, time out and retry requests; a deleted
//! permission answers 403 with a reason instead of a reset; the golden
//! metrics count what curl saw.

use std::time::Duration;

use meshlink_e2e::curl::curl;
use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const READY: Duration = Duration::from_secs(30);

#[test]
fn http_requests_are_routed_timed_out_retried_denied_and_counted() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, "1h", "http", &["web", "backend"]);
    assert!(yaml.contains("kuma.io/protocol: http"), "{yaml}");
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let backend_app = HttpBackend::start("backend", ports.backend_app);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);

    // HTTP/1.1 from the app; the request crosses as HTTP/2 and reaches
    // the app as HTTP/1.1 with x-forwarded-for and a request ID.
    let seen = curl(ports.web_outbound, "/hello", &[]);
    assert_eq!(seen.status, 200, "{}\n{}", seen.body, web.logs());
    let echo = seen.json();
    assert_eq!(echo["name"], "backend");
    assert_eq!(echo["version"], "HTTP/1.1");
    assert_eq!(
        echo["headers"]["host"],
        format!("127.0.0.1:{}", ports.web_outbound)
    );
    assert!(
        echo["headers"]["x-forwarded-for"]
            .as_str()
            .is_some_and(|v| v.contains("127.0.0.1")),
        "{echo}"
    );
    assert!(echo["headers"]["x-request-id"].is_string(), "{echo}");
    let inbound = backend.config_dump();
    assert!(
        inbound.to_string().contains("\"route_config\""),
        "backend's inbound is an HTTP listener: {inbound}"
    );

    // HTTP/2 from the app (prior knowledge) works the same.
    let seen = curl(ports.web_outbound, "/h2", &["--http2-prior-knowledge"]);
    assert_eq!(seen.status, 200, "{}", seen.body);
    assert_eq!(seen.json()["path"], "/h2");

    // A request ID the app sent is passed through unchanged.
    let seen = curl(ports.web_outbound, "/id", &["-H", "x-request-id: keep-me"]);
    assert_eq!(seen.json()["headers"]["x-request-id"], "keep-me");

    // MeshTimeout: a 3 s answer under a 1 s request timeout is a 504.
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(
            "type: MeshTimeout\nname: backend-timeout\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: backend}\n      default:\n        http: {requestTimeout: 1s}\n",
        ),
    )
    .success();
    let seen = eventually("the 1 s timeout to apply", READY, || {
        let seen = curl(ports.web_outbound, "/delay/3000", &[]);
        (seen.status == 504).then_some(seen)
    });
    assert_eq!(seen.header("x-meshlink-error"), Some("timeout"));

    // MeshRetry: the backend fails 2 requests of every 3; 5 retries on
    // 5xx turn every one into a 200.
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(
            "type: MeshRetry\nname: backend-retry\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: backend}\n      default:\n        http:\n          numRetries: 5\n          retryOn: [\"5xx\"]\n          backOff: {baseInterval: 1ms, maxInterval: 5ms}\n",
        ),
    )
    .success();
    eventually("the retry policy to apply", READY, || {
        (curl(ports.web_outbound, "/flaky/2", &[]).status == 200).then_some(())
    });
    for i in 0..30 {
        let seen = curl(ports.web_outbound, "/flaky/2", &[]);
        assert_eq!(seen.status, 200, "request {i}: {}", seen.body);
    }
    let retries = web.metric("meshlink_proxy_http_retries_total{");
    assert!(retries >= 60.0, "two retries per request: {retries}");

    // The golden metrics count what curl saw.
    let ok = web.metric("meshlink_proxy_http_requests_total{direction=\"outbound\"");
    assert!(ok >= 35.0, "{ok}");

    // Without the permission, the inbound answers 403 with a reason.
    cp.cli(&["delete", "mtp", "web-to-backend", "-m", proxy::MESH])
        .success();
    let seen = eventually("web -> backend to be denied", READY, || {
        let seen = curl(ports.web_outbound, "/hello", &[]);
        (seen.status == 403).then_some(seen)
    });
    assert_eq!(
        seen.header("x-meshlink-error"),
        Some("denied"),
        "{}",
        seen.body
    );
    assert!(backend.metric("meshlink_proxy_rbac_denied_total") >= 1.0);
    assert!(backend_app.hits() >= 35);
}

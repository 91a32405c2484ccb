//! MeshHealthCheck (issue 36) with real binaries and real apps, through
//! web-1's sidecar to the HTTP service `backend` (backend-1 and
//! backend-2):
//!
//! - **A backend whose `/health` answers 500 leaves the balancer before
//!   any client request hits it.** The policy is stored before any
//!   sidecar starts; web-1's sidecar checks both backends over mTLS from
//!   its first configuration. The first client request is sent only once
//!   web-1's `/config_dump` reports its first check round (backend-2
//!   healthy, backend-1 unhealthy). backend-1's own request log then
//!   holds `/health` checks only (each answered 500), never a client
//!   path; backend-2 got every client request.
//! - **Named where users look.** While it fails, web-1's Dataplane
//!   status lists backend-1's address under `unhealthyEndpoints` (cluster
//!   `backend`, reason `HealthCheck`: what web-1's sidecar sees), and
//!   `meshlink inspect dataplane web-1` names it.
//! - **Recovery.** Once backend-1's `/health` answers 200 again it is
//!   healthy after `healthyThreshold` (2) passes in a row and takes
//!   client requests again: in its log, the first client request follows
//!   two `/health` 200s in a row. The status entry and the inspect line
//!   are gone.
//! - **gRPC check.** For a gRPC service, a backend whose
//!   `grpc.health.v1.Health/Check` answers `NOT_SERVING` sees only checks
//!   until it answers `SERVING`, then client requests too.
//! - **TCP check.** For a TCP service, a backend that closes every
//!   connection without answering the check's `send` stays out of the
//!   balancer and never sees a client connection's bytes.

use std::time::Duration;

use meshlink_e2e::curl::curl;
use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, PairPorts, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};
use serde_json::Value;

/// A failure deadline, never a timing bound.
const READY: Duration = Duration::from_secs(60);

/// Kuma's MeshHealthCheck example shape (docs: "HTTP health check"),
/// with a 1 s interval so the test runs fast.
const HEALTH_CHECK: &str = "\
type: MeshHealthCheck
mesh: default
name: backend-health
spec:
  targetRef:
    kind: Mesh
  to:
    - targetRef:
        kind: MeshService
        name: backend
      default:
        interval: 1s
        noTrafficInterval: 1s
        timeout: 2s
        unhealthyThreshold: 3
        healthyThreshold: 2
        http:
          path: /health
          expectedStatuses: [200]
";

/// web-1's view of cluster `cluster`: address → health, from
/// `/config_dump`'s `endpoint_health`.
fn health(web: &Sidecar, cluster: &str) -> Vec<(String, String)> {
    let dump = web.config_dump();
    let clusters = dump["clusters"].as_array().cloned().unwrap_or_default();
    clusters
        .iter()
        .filter(|c| c["name"] == cluster)
        .flat_map(|c| c["endpoint_health"].as_array().cloned().unwrap_or_default())
        .map(|e| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (s(&e["address"]), s(&e["health"]))
        })
        .collect()
}

/// Waits until web-1 reports `want` (address port → health) for
/// `cluster`, every other endpoint aside.
fn wait_health(web: &Sidecar, cluster: &str, want: &[(u16, &str)]) {
    let what = format!("web-1 to report {want:?} for {cluster}");
    eventually(&what, READY, || {
        let seen = health(web, cluster);
        want.iter()
            .all(|(port, h)| {
                seen.iter()
                    .any(|(a, got)| a.ends_with(&format!(":{port}")) && got == h)
            })
            .then_some(())
    });
}

/// [`HEALTH_CHECK`] with `check` instead of its `http` check.
fn with_check(check: &str) -> String {
    let policy = HEALTH_CHECK.replace(
        "        http:\n          path: /health\n          expectedStatuses: [200]\n",
        check,
    );
    assert!(policy.contains(check), "{policy}");
    policy
}

/// Applies the pair with backend speaking `protocol` (`None`: TCP),
/// backend-2 (its app on `b2_app`) and `policy`; returns backend-2's
/// inbound port.
fn apply_backends(
    cp: &ControlPlane,
    ports: &PairPorts,
    protocol: Option<&str>,
    b2_app: u16,
    policy: &str,
) -> u16 {
    let pair = match protocol {
        Some(p) => proxy::pair_yaml_speaking(ports, "1h", p, &["backend"]),
        None => proxy::pair_yaml(ports, "1h"),
    };
    cp.cli_stdin(&["apply", "-f", "-"], Some(&pair)).success();
    let (b2_inbound, b2_outbound) = (free_port(), free_port());
    let tag = protocol.map_or(String::new(), |p| {
        format!("        kuma.io/protocol: {p}\n")
    });
    let extra = proxy::extra_backend_yaml("backend-2", b2_inbound, b2_app, b2_outbound)
        .replace("        kuma.io/protocol: http\n", &tag);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&extra)).success();
    cp.cli_stdin(&["apply", "-f", "-"], Some(policy)).success();
    b2_inbound
}

/// Starts web-1, backend-1 and backend-2 (inbound `b2_inbound`) and
/// waits for the first check round that reached backend-1's app
/// (`reached`; an earlier check may find its sidecar not listening yet):
/// web-1 reports backend-1 unhealthy and backend-2 healthy. Returns
/// web-1 and the backends' sidecars.
fn first_round(
    cp: &ControlPlane,
    dir: &std::path::Path,
    ports: &PairPorts,
    b2_inbound: u16,
    reached: impl Fn() -> bool,
) -> (Sidecar, [Sidecar; 2]) {
    let mut backend_2 = Sidecar::start(cp, dir, "backend-2");
    let (web, backend_1) = proxy::start_pair_sidecars(cp, dir, READY);
    backend_2.wait_ready(READY);
    eventually("a check to reach backend-1's app", READY, || {
        reached().then_some(())
    });
    wait_health(
        &web,
        "backend",
        &[
            (ports.backend_inbound, "unhealthy"),
            (b2_inbound, "healthy"),
        ],
    );
    (web, [backend_1, backend_2])
}

/// web-1's `status.unhealthyEndpoints` entries for the endpoint whose
/// address ends in `:port`.
fn listed_unhealthy(cp: &ControlPlane, port: u16) -> Vec<Value> {
    let (status, dp) = cp.api("GET", "/api/v1/dataplanes/web-1?mesh=default", None);
    assert_eq!(status, 200, "{dp}");
    let suffix = format!(":{port}");
    dp["status"]["unhealthyEndpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["address"].as_str().is_some_and(|a| a.ends_with(&suffix)))
        .cloned()
        .collect()
}

/// The output of `meshlink inspect dataplane web-1`, and its lines that
/// name `:port`.
fn inspect_lines(cp: &ControlPlane, port: u16) -> (String, Vec<String>) {
    let out = cp
        .cli(&["inspect", "dataplane", "web-1", "-m", "default"])
        .success()
        .stdout;
    let suffix = format!(":{port} ");
    let lines = out
        .lines()
        .filter(|l| l.contains(&suffix))
        .map(str::to_owned)
        .collect();
    (out, lines)
}

/// The name in the body of a GET of `path` through web-1's outbound.
fn who(port: u16, path: &str) -> Option<String> {
    let seen = curl(port, path, &[]);
    let body: Value = serde_json::from_str(&seen.body).ok()?;
    body["name"].as_str().map(str::to_owned)
}

#[test]
fn a_backend_whose_health_answers_500_never_sees_a_client_request_and_returns_when_healthy() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let app_1 = HttpBackend::start("backend-1", ports.backend_app);
    app_1.set_health_status(500);
    let app_2 = HttpBackend::start("backend-2", 0);
    // The policy is in place before any sidecar runs; web-1 appends its
    // health events to `events` (Kuma's `eventLogPath`).
    let dir = tempfile::tempdir().expect("tempdir");
    let events = dir.path().join("health-events.log");
    let policy = HEALTH_CHECK.replace(
        "        interval: 1s\n",
        &format!(
            "        interval: 1s\n        eventLogPath: {}\n",
            events.display()
        ),
    );
    let b2_inbound = apply_backends(&cp, &ports, Some("http"), app_2.port(), &policy);
    let (web, _sidecars) = first_round(&cp, dir.path(), &ports, b2_inbound, || {
        !app_1.log().is_empty()
    });

    let answers: Vec<_> = (0..20).map(|_| who(ports.web_outbound, "/who")).collect();
    let log_1 = app_1.log();
    println!("backend-1's log before recovery: {log_1:?}");
    assert!(!log_1.is_empty(), "backend-1 was checked");
    assert!(
        log_1
            .iter()
            .all(|(path, status)| path == "/health" && *status == 500),
        "backend-1 saw only its failing checks: {log_1:?}"
    );
    assert!(
        answers.iter().all(|a| a.as_deref() == Some("backend-2")),
        "{answers:?}"
    );
    let client_2 = app_2.log().iter().filter(|(p, _)| p == "/who").count();
    assert_eq!(client_2, 20, "backend-2 got every client request");
    eventually("the failed checks to be counted", READY, || {
        let series =
            "meshlink_proxy_health_check_total{cluster=\"backend\",result=\"unexpected_answer\"}";
        (web.metric(series) >= 1.0).then_some(())
    });
    let unhealthy =
        web.metric("meshlink_proxy_health_check_unhealthy_endpoints{cluster=\"backend\"}");
    assert_eq!(unhealthy, 1.0);

    // The control plane names it in web-1's status (what web-1's sidecar
    // sees), and inspect prints it.
    // (A report written before web-1's first round was over may list
    // backend-2 too, while its first check found its sidecar not
    // listening yet: it passes now, so the next report drops it.)
    let listed = eventually(
        "web-1's status to list backend-1 as unhealthy, and not backend-2",
        READY,
        || {
            let b1 = listed_unhealthy(&cp, ports.backend_inbound)
                .into_iter()
                .find(|e| e["reason"] == "HealthCheck")?;
            let b2 = listed_unhealthy(&cp, b2_inbound);
            if !b2.is_empty() {
                println!("backend-2 still listed: {b2:?}");
            }
            b2.is_empty().then_some(b1)
        },
    );
    assert_eq!(listed["cluster"], "backend", "{listed}");
    assert!(listed["since"].is_string(), "{listed}");
    let (inspect, lines) = inspect_lines(&cp, ports.backend_inbound);
    assert!(
        inspect.contains("Unhealthy endpoints (as this sidecar sees them):\n"),
        "{inspect}"
    );
    assert!(
        lines.len() == 1
            && lines[0].trim_start().starts_with("backend ")
            && lines[0].contains("failing its health check since "),
        "{inspect}"
    );

    // /health answers 200 again: after 2 passes backend-1 takes traffic.
    app_1.set_health_status(200);
    eventually("backend-1 to answer a client again", READY, || {
        (who(ports.web_outbound, "/again").as_deref() == Some("backend-1")).then_some(())
    });
    let log_1 = app_1.log();
    let first_client = log_1
        .iter()
        .position(|(path, _)| path != "/health")
        .expect("a client request");
    println!("backend-1's log: {log_1:?}");
    assert_eq!(log_1[first_client].0, "/again");
    assert!(
        first_client >= 2
            && log_1[first_client - 2..first_client]
                .iter()
                .all(|(p, s)| p == "/health" && *s == 200),
        "two passing checks in a row came before the first client request: {log_1:?}"
    );
    wait_health(&web, "backend", &[(ports.backend_inbound, "healthy")]);
    eventually(
        "backend-1 to leave web-1's unhealthy endpoints",
        READY,
        || {
            listed_unhealthy(&cp, ports.backend_inbound)
                .is_empty()
                .then_some(())
        },
    );
    let (inspect, lines) = inspect_lines(&cp, ports.backend_inbound);
    assert!(lines.is_empty(), "{inspect}");
    // The event log: backend-1 was added once healthy (not at its first
    // check, which failed).
    let log = std::fs::read_to_string(&events).expect("the event log");
    let added_1 = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["host"]["socket_address"]["port_value"] == ports.backend_inbound)
        .filter(|e| e["add_healthy_event"]["first_check"] == false);
    assert!(added_1.is_some(), "{log}");
}

/// A TCP app that logs every chunk it receives and answers a chunk
/// containing `ping` with `pong` when `healthy`, else with `nope` and a
/// close; any other chunk is echoed after its name.
struct TcpApp {
    port: u16,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl TcpApp {
    fn start(name: &'static str, healthy: bool) -> TcpApp {
        use std::io::{Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let shared = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let log = shared.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 {
                            return;
                        }
                        let chunk = String::from_utf8_lossy(&buf[..n]).into_owned();
                        log.lock().unwrap().push(chunk.clone());
                        let answer = match (chunk.contains("ping"), healthy) {
                            (true, true) => "pong".to_owned(),
                            (true, false) => {
                                let _ = stream.write_all(b"nope");
                                return;
                            }
                            (false, _) => format!("{name}:{chunk}"),
                        };
                        if stream.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        TcpApp { port, log }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// What `text` sent over a new connection to `port` gets back.
fn exchange(port: u16, text: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(text.as_bytes()).expect("write");
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn a_tcp_backend_that_does_not_answer_the_check_never_sees_a_client_connection() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let mute = TcpApp::start("backend-1", false);
    let good = TcpApp::start("backend-2", true);
    let ports = PairPorts::with_apps(free_port(), mute.port);
    // The same policy with a TCP check: send "ping", expect "pong".
    let policy =
        with_check("        tcp:\n          send: cGluZw==\n          receive: [cG9uZw==]\n");
    let b2_inbound = apply_backends(&cp, &ports, None, good.port, &policy);
    let dir = tempfile::tempdir().expect("tempdir");
    let (web, _sidecars) = first_round(&cp, dir.path(), &ports, b2_inbound, || {
        !mute.log().is_empty()
    });
    eventually("backend-1 to count as unhealthy", READY, || {
        let series = "meshlink_proxy_health_check_unhealthy_endpoints{cluster=\"backend\"}";
        (web.metric(series) == 1.0).then_some(())
    });
    let answers: Vec<_> = (0..10)
        .map(|i| exchange(ports.web_outbound, &format!("hello-{i}")))
        .collect();
    assert!(
        answers.iter().all(|a| a.starts_with("backend-2:hello-")),
        "{answers:?}"
    );
    let log_1 = mute.log();
    println!("backend-1's log: {log_1:?}");
    assert!(!log_1.is_empty(), "backend-1 was checked");
    assert!(log_1.iter().all(|c| c == "ping"), "{log_1:?}");
    let clients_2 = good
        .log()
        .iter()
        .filter(|c| c.starts_with("hello-"))
        .count();
    assert_eq!(clients_2, 10, "backend-2 got every client connection");
}

#[test]
fn a_grpc_backend_not_serving_sees_only_checks_until_it_serves() {
    const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let app_1 = HttpBackend::start("backend-1", ports.backend_app);
    app_1.set_grpc_serving(false);
    let app_2 = HttpBackend::start("backend-2", 0);
    let policy = with_check("        grpc:\n          serviceName: backend\n");
    let b2_inbound = apply_backends(&cp, &ports, Some("grpc"), app_2.port(), &policy);
    let dir = tempfile::tempdir().expect("tempdir");
    let (web, _sidecars) = first_round(&cp, dir.path(), &ports, b2_inbound, || {
        !app_1.log().is_empty()
    });
    let answers: Vec<_> = (0..10).map(|_| who(ports.web_outbound, "/who")).collect();
    assert!(
        answers.iter().all(|a| a.as_deref() == Some("backend-2")),
        "{answers:?}"
    );
    let log_1 = app_1.log();
    println!("backend-1's log while not serving: {log_1:?}");
    assert!(log_1.iter().all(|(p, _)| p == CHECK_PATH), "{log_1:?}");

    app_1.set_grpc_serving(true);
    eventually("backend-1 to answer a client again", READY, || {
        (who(ports.web_outbound, "/again").as_deref() == Some("backend-1")).then_some(())
    });
    wait_health(&web, "backend", &[(ports.backend_inbound, "healthy")]);
}

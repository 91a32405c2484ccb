//! MeshCircuitBreaker (issue 36) with real binaries, real apps, curl and
//! wrk, through web-1's sidecar to the HTTP service `backend`:
//!
//! - **Outlier detection.** Kuma's documented `totalFailures` example,
//!   applied unchanged (10 consecutive 5xx eject, Envoy's default 30 s
//!   base ejection time), with backend served by backend-1 and backend-2
//!   and retries off (a MeshRetry with `numRetries: 0`, so every answer
//!   the client sees is the one backend's). backend-1's app starts
//!   answering 503: exactly 10 answers come from it, then none (its share
//!   of a wrk run is 0; every answer is backend-2's 200), and once healthy
//!   it answers again after the ejection.
//! - **Connection limits.** `maxRequests: 10` and 50 concurrent requests
//!   the app holds: exactly the 40 over the limit are answered 503 by
//!   web-1's sidecar with `x-envoy-overloaded: true` and
//!   `x-meshlink-overflow: max_requests`, counted per cluster and limit;
//!   the 10 admitted ones are answered 200 once the app lets them go.

use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use meshlink_e2e::curl::{Seen, curl};
use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, MESH, PairPorts, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};

/// A failure deadline, never a timing bound.
const READY: Duration = Duration::from_secs(30);

/// Kuma's MeshCircuitBreaker `totalFailures` example (default mode), as
/// its docs print it.
const KUMA_TOTAL_FAILURES: &str = "\
type: MeshCircuitBreaker
mesh: default
name: circuit-breaker
spec:
  targetRef:
    kind: Mesh
  to:
  - targetRef:
      kind: Mesh
    default:
      outlierDetection:
        detectors:
          totalFailures:
            consecutive: 10
";

/// Retries off, so each answer a client sees is one backend's.
const NO_RETRIES: &str = "\
type: MeshRetry
mesh: default
name: no-retries
spec:
  targetRef:
    kind: Mesh
  to:
    - targetRef:
        kind: Mesh
      default:
        http:
          numRetries: 0
";

/// Which backend answered a GET through web-1's outbound, by the name in
/// the body (`None`: the answer has none), and its status.
fn who(port: u16) -> (u16, Option<String>) {
    let seen = curl(port, "/who", &[]);
    let name = serde_json::from_str::<serde_json::Value>(&seen.body)
        .ok()
        .and_then(|v| v["name"].as_str().map(str::to_owned));
    (seen.status, name)
}

/// What a wrk run through `port` saw: answers per backend and non-200s.
#[derive(Debug, PartialEq, Eq)]
struct Shares {
    backend_1: u64,
    backend_2: u64,
    other: u64,
    non_200: u64,
}

/// Counts, per thread, which backend each answer names; `done` sums the
/// threads (wrk gives each thread its own Lua state).
const WRK_SCRIPT: &str = r#"
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) b1 = 0; b2 = 0; other = 0; non200 = 0 end
function response(status, headers, body)
  if status ~= 200 then non200 = non200 + 1 end
  if string.find(body, '"name":"backend-1"', 1, true) then b1 = b1 + 1
  elseif string.find(body, '"name":"backend-2"', 1, true) then b2 = b2 + 1
  else other = other + 1 end
end
function done(summary, latency, requests)
  local t = {b1 = 0, b2 = 0, other = 0, non200 = 0}
  for _, th in ipairs(threads) do
    for k, _ in pairs(t) do t[k] = t[k] + th:get(k) end
  end
  io.write(string.format("SHARES %d %d %d %d\n", t.b1, t.b2, t.other, t.non200))
end
"#;

/// `wrk` for 2 s with 4 connections through `port`.
fn wrk(port: u16) -> Shares {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("shares.lua");
    std::fs::write(&script, WRK_SCRIPT).expect("write script");
    let out = Command::new("wrk")
        .args(["-t", "2", "-c", "4", "-d", "2s", "-s"])
        .arg(&script)
        .arg(format!("http://127.0.0.1:{port}/who"))
        .output()
        .expect("run wrk (apt-get install wrk)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "wrk failed: {text}");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("SHARES "))
        .unwrap_or_else(|| panic!("no SHARES line in {text}"));
    let n: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
    Shares {
        backend_1: n[0],
        backend_2: n[1],
        other: n[2],
        non_200: n[3],
    }
}

#[test]
fn kumas_total_failures_example_ejects_a_backend_answering_503_and_takes_it_back() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, "1h", "http", &["web", "backend"]);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let (b2_inbound, b2_outbound) = (free_port(), free_port());
    let app_1 = HttpBackend::start("backend-1", ports.backend_app);
    let app_2 = HttpBackend::start("backend-2", 0);
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(&proxy::extra_backend_yaml(
            "backend-2",
            b2_inbound,
            app_2.port(),
            b2_outbound,
        )),
    )
    .success();
    let dir = tempfile::tempdir().expect("tempdir");
    let (web, _backend_1) = proxy::start_pair_sidecars(&cp, dir.path(), READY);
    let mut backend_2 = Sidecar::start(&cp, dir.path(), "backend-2");
    backend_2.wait_ready(READY);
    eventually("both backends to answer through web-1", READY, || {
        let names: std::collections::BTreeSet<_> =
            (0..6).filter_map(|_| who(ports.web_outbound).1).collect();
        (names.len() == 2).then_some(())
    });

    cp.cli_stdin(&["apply", "-f", "-"], Some(NO_RETRIES))
        .success();
    eventually("retries to be off at web-1", READY, || {
        let dump = web.config_dump();
        let routes = &dump["routes"];
        let sent = routes.as_array().is_some_and(|r| !r.is_empty());
        (sent && !routes.to_string().contains("\"num_retries\":5")).then_some(())
    });
    cp.cli_stdin(&["apply", "-f", "-"], Some(KUMA_TOTAL_FAILURES))
        .success();
    let listed = cp
        .cli(&["get", "meshcircuitbreakers", "-m", MESH])
        .success()
        .stdout;
    assert!(listed.contains("circuit-breaker"), "{listed}");
    eventually("the detector to reach web-1", READY, || {
        let dump = web.config_dump().to_string();
        dump.contains("\"consecutive_5xx\":10").then_some(())
    });
    let before = wrk(ports.web_outbound);
    println!("healthy: {before:?}");
    assert!(
        before.backend_1 > 0 && before.backend_2 > 0 && before.non_200 == 0,
        "both backends share the load: {before:?}"
    );

    // backend-1 answers 503 from now on: after 10 in a row it gets nothing.
    app_1.set_sick(true);
    let sick_from = app_1.hits();
    let mut answers = Vec::new();
    eventually("backend-1 to see 10 requests while sick", READY, || {
        answers.push(who(ports.web_outbound));
        (app_1.hits() - sick_from >= 10).then_some(())
    });
    for _ in 0..20 {
        answers.push(who(ports.web_outbound));
    }
    let during = wrk(ports.web_outbound);
    println!("backend-1 sick: {during:?}; sequential answers {answers:?}");
    let from_1: Vec<_> = answers
        .iter()
        .filter(|(_, name)| name.as_deref() == Some("backend-1"))
        .collect();
    assert_eq!(
        from_1.len(),
        10,
        "exactly `consecutive` answers from backend-1"
    );
    assert!(
        from_1.iter().all(|(status, _)| *status == 503),
        "{from_1:?}"
    );
    let last_from_1 = answers
        .iter()
        .rposition(|(_, name)| name.as_deref() == Some("backend-1"))
        .unwrap();
    assert!(
        answers.len() - last_from_1 > 20,
        "none after the ejection: {answers:?}"
    );
    assert_eq!(
        app_1.hits() - sick_from,
        10,
        "backend-1 got exactly `consecutive` requests, then none"
    );
    assert_eq!(
        (during.backend_1, during.other, during.non_200),
        (0, 0, 0),
        "every answer of the load came from backend-2: {during:?}"
    );
    assert!(during.backend_2 > 0, "{during:?}");
    let ejected = web.metric(
        "meshlink_proxy_outlier_ejections_total{cluster=\"backend\",detector=\"consecutive_5xx\"}",
    );
    assert_eq!(ejected, 1.0, "one ejection, by the 5xx detector");

    // Healthy again: after the ejection time backend-1 takes traffic.
    app_1.set_sick(false);
    eventually("backend-1 to answer again", Duration::from_secs(90), || {
        (who(ports.web_outbound) == (200, Some("backend-1".to_owned()))).then_some(())
    });
}

#[test]
fn max_requests_10_answers_exactly_the_40_excess_of_50_concurrent_requests_503() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, "1h", "http", &["web", "backend"]);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let app = HttpBackend::start("backend-1", ports.backend_app);
    let dir = tempfile::tempdir().expect("tempdir");
    let (web, _backend) = proxy::start_pair_sidecars(&cp, dir.path(), READY);
    assert_eq!(curl(ports.web_outbound, "/", &[]).status, 200);

    let policy = "\
type: MeshCircuitBreaker
mesh: default
name: web-to-backend-limits
spec:
  targetRef:
    kind: Mesh
  to:
    - targetRef:
        kind: MeshService
        name: backend
      default:
        connectionLimits:
          maxRequests: 10
";
    cp.cli_stdin(&["apply", "-f", "-"], Some(policy)).success();
    eventually("the limit to reach web-1", READY, || {
        let dump = web.config_dump().to_string();
        dump.contains("\"max_requests\":10").then_some(())
    });

    let (tx, rx) = mpsc::channel::<Seen>();
    let port = ports.web_outbound;
    let clients: Vec<_> = (0..50)
        .map(|_| {
            let tx = tx.clone();
            std::thread::spawn(move || tx.send(curl(port, "/hold", &[])).unwrap())
        })
        .collect();
    // The app holds what reaches it; the 40 over the limit come back now.
    let refused: Vec<Seen> = (0..40)
        .map(|i| {
            rx.recv_timeout(READY)
                .unwrap_or_else(|_| panic!("answer {i} of the 40 refusals"))
        })
        .collect();
    eventually("the app to hold the 10 admitted requests", READY, || {
        (app.held() == 10).then_some(())
    });
    for seen in &refused {
        assert_eq!(seen.status, 503, "{}", seen.body);
        assert_eq!(seen.header("x-envoy-overloaded"), Some("true"));
        assert_eq!(seen.header("x-meshlink-overflow"), Some("max_requests"));
    }
    app.release();
    let admitted: Vec<Seen> = (0..10)
        .map(|_| rx.recv_timeout(READY).expect("an admitted answer"))
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    assert!(
        admitted.iter().all(|s| s.status == 200),
        "{:?}",
        admitted.iter().map(|s| s.status).collect::<Vec<_>>()
    );
    assert_eq!(app.hits(), 11, "the refused requests never reached the app");
    let overflows = web.metric(
        "meshlink_proxy_upstream_overflow_total{cluster=\"backend\",limit=\"max_requests\"}",
    );
    assert_eq!(overflows, 40.0);
}

//! MeshAccessLog (issue 36) with real binaries and curl: Kuma's
//! multiple-backends example shape, applied unchanged but for the file
//! paths, makes backend's sidecar write one JSON line per inbound request
//! (response code, duration, the caller's SPIFFE ID and the destination
//! service) and web's sidecar one plain line per outbound request (`web`
//! -> `backend`, the endpoint that answered). A `Tcp` backend with the
//! same JSON format, a listener in the test, receives the same lines as the
//! file. Deleting the policy stops the lines.

use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use meshlink_e2e::curl::curl;
use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use serde_json::Value;

const READY: Duration = Duration::from_secs(30);

/// The JSON format of the inbound backends.
const JSON: &str = "
                type: Json
                json:
                  - key: \"start_time\"
                    value: \"%START_TIME%\"
                  - key: \"response_code\"
                    value: \"%RESPONSE_CODE%\"
                  - key: \"duration_ms\"
                    value: \"%DURATION%\"
                  - key: \"method\"
                    value: \"%REQ(:METHOD)%\"
                  - key: \"path\"
                    value: \"%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%\"
                  - key: \"source\"
                    value: \"%KUMA_SOURCE_SERVICE%\"
                  - key: \"destination\"
                    value: \"%KUMA_DESTINATION_SERVICE%\"
                  - key: \"direction\"
                    value: \"%KUMA_TRAFFIC_DIRECTION%\"
                  - key: \"mesh\"
                    value: \"%KUMA_MESH%\"";

/// Kuma's example with a JSON file backend and a TCP backend (`tcp`) for
/// the inbounds (`from`), and a plain file one for the outbounds (`to`).
fn policy(inbound_log: &Path, outbound_log: &Path, tcp: &str) -> String {
    format!(
        "\
type: MeshAccessLog
name: multiple-backends
mesh: default
spec:
  targetRef:
    kind: Mesh
  from:
    - targetRef:
        kind: Mesh
      default:
        backends:
          - type: File
            file:
              path: {inbound}
              format:{JSON}
          - type: Tcp
            tcp:
              address: {tcp}
              format:{JSON}
  to:
    - targetRef:
        kind: Mesh
      default:
        backends:
          - type: File
            file:
              path: {outbound}
              format:
                type: Plain
                plain: '%KUMA_SOURCE_SERVICE%->%KUMA_DESTINATION_SERVICE% %RESPONSE_CODE% %REQ(:METHOD)% %REQ(:PATH)% %UPSTREAM_HOST%'
",
        inbound = inbound_log.display(),
        outbound = outbound_log.display(),
    )
}

/// A TCP log receiver: every line any connection sends, in order.
fn tcp_receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let sink = sink.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(conn).lines().map_while(Result::ok) {
                    sink.lock().unwrap().push(line);
                }
            });
        }
    });
    (address, got)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_request_gets_a_json_line_inbound_and_a_plain_line_outbound() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, "1h", "http", &["web", "backend"]);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let _app = HttpBackend::start("backend", ports.backend_app);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let logs = tempfile::tempdir().expect("tempdir");
    let (inbound_log, outbound_log) = (logs.path().join("in.log"), logs.path().join("out.log"));
    let (tcp, received) = tcp_receiver();
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(&policy(&inbound_log, &outbound_log, &tcp)),
    )
    .success();

    // The policy is on once a request is logged; from then on every
    // request is, in order.
    eventually("the first logged request", READY, || {
        assert_eq!(curl(ports.web_outbound, "/warm-up", &[]).status, 200);
        (!lines(&inbound_log).is_empty() && !lines(&outbound_log).is_empty()).then_some(())
    });
    let (in_before, out_before) = (lines(&inbound_log).len(), lines(&outbound_log).len());
    let paths: Vec<String> = (0..10)
        .map(|i| {
            if i % 5 == 4 {
                "/status/404".to_owned()
            } else {
                format!("/ok/{i}")
            }
        })
        .collect();
    for p in &paths {
        curl(ports.web_outbound, p, &[]);
    }
    let inbound = eventually("10 more inbound lines", READY, || {
        let l = lines(&inbound_log);
        (l.len() >= in_before + 10).then(|| l[in_before..].to_vec())
    });
    let outbound = eventually("10 more outbound lines", READY, || {
        let l = lines(&outbound_log);
        (l.len() >= out_before + 10).then(|| l[out_before..].to_vec())
    });
    assert_eq!(inbound.len(), 10, "one line per request: {inbound:#?}");
    for (line, path) in inbound.iter().zip(&paths) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let code = if path.starts_with("/status/") {
            "404"
        } else {
            "200"
        };
        assert_eq!(v["response_code"], code, "{line}");
        assert_eq!(v["path"], path.as_str(), "{line}");
        assert_eq!(v["method"], "GET", "{line}");
        assert_eq!(v["source"], "spiffe://default/web", "{line}");
        assert_eq!(v["destination"], "backend", "{line}");
        assert_eq!(v["direction"], "INBOUND", "{line}");
        assert_eq!(v["mesh"], "default", "{line}");
        let ms: u64 = v["duration_ms"]
            .as_str()
            .and_then(|d| d.parse().ok())
            .expect(line);
        assert!(ms < READY.as_millis() as u64, "{line}");
        assert!(
            v["start_time"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{line}"
        );
    }
    // The TCP backend got the same lines as the file.
    let all_in = lines(&inbound_log);
    let over_tcp = eventually("the TCP backend's lines", READY, || {
        let got = received.lock().unwrap().clone();
        (got.len() >= all_in.len()).then_some(got)
    });
    assert_eq!(over_tcp, all_in, "the TCP backend's lines are the file's");
    let app = format!("127.0.0.1:{}", ports.backend_inbound);
    for (line, path) in outbound.iter().zip(&paths) {
        let code = if path.starts_with("/status/") {
            "404"
        } else {
            "200"
        };
        assert_eq!(line, &format!("web->backend {code} GET {path} {app}"));
    }
    assert_eq!(
        backend.metric("meshlink_proxy_access_log_dropped_total"),
        0.0
    );
    assert_eq!(web.metric("meshlink_proxy_access_log_dropped_total"), 0.0);

    // Deleting the policy stops the lines.
    cp.cli(&[
        "delete",
        "meshaccesslog",
        "multiple-backends",
        "-m",
        "default",
    ])
    .success();
    eventually("logging to stop", READY, || {
        let before = lines(&inbound_log).len();
        curl(ports.web_outbound, "/after", &[]);
        // The request's line would be queued before curl saw the answer;
        // a second request makes sure the writer had a turn.
        curl(ports.web_outbound, "/after", &[]);
        (lines(&inbound_log).len() == before).then_some(())
    });
}

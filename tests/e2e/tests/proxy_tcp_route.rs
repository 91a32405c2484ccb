//! MeshTCPRoute end to end, real binaries: Kuma's traffic-split example
//! (90 % of connections to the `version: v1` inbounds of `backend`, 10 %
//! to its `version: v2` ones, as `MeshServiceSubset` backends) splits new
//! TCP connections through web's sidecar within 5 points; flipping it
//! sends every new connection to v2; deleting it spreads them over both
//! again. `backend` stays a `tcp` service: bytes are copied, not parsed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, PairPorts, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};

const READY: Duration = Duration::from_secs(30);

/// Opens one connection through web's outbound, sends one HTTP/1.1
/// request over it and returns the name of the app that answered.
fn who_answers(outbound: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", outbound)).expect("connect to web's outbound");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /who HTTP/1.1\r\nHost: backend\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read the answer");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("not an answer from a backend ({e}): {answer:?}"));
    json["name"].as_str().unwrap_or_default().to_owned()
}

/// Counts who answers `n` new connections: (v1, v2).
fn tally(outbound: u16, n: usize) -> (usize, usize) {
    let mut t = (0, 0);
    for _ in 0..n {
        match who_answers(outbound).as_str() {
            "v1" => t.0 += 1,
            "v2" => t.1 += 1,
            other => panic!("unexpected answer from {other:?}"),
        }
    }
    t
}

fn route(weights: (u32, u32)) -> String {
    format!(
        "type: MeshTCPRoute\nname: tcp-split\nmesh: default\nspec:\n  targetRef: {{kind: MeshService, name: web}}\n  to:\n    - targetRef: {{kind: MeshService, name: backend}}\n      rules:\n        - default:\n            backendRefs:\n              - {{kind: MeshServiceSubset, name: backend, tags: {{version: v1}}, weight: {}}}\n              - {{kind: MeshServiceSubset, name: backend, tags: {{version: v2}}, weight: {}}}\n",
        weights.0, weights.1
    )
}

#[test]
fn a_meshtcproute_splits_connections_over_subsets_by_weight_and_follows_changes() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let (v2_inbound, v2_app_port) = (free_port(), free_port());
    let pair = proxy::pair_yaml(&ports, "1h").replace(
        &format!(
            "servicePort: {}, tags: {{kuma.io/service: backend}}",
            ports.backend_app
        ),
        &format!(
            "servicePort: {}, tags: {{kuma.io/service: backend, version: v1}}",
            ports.backend_app
        ),
    );
    assert!(pair.contains("version: v1"), "{pair}");
    let v2 = format!(
        "---\napiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {{name: backend-2, mesh: default}}\nspec:\n  networking:\n    address: 127.0.0.1\n    inbound: [{{port: {v2_inbound}, servicePort: {v2_app_port}, tags: {{kuma.io/service: backend, version: v2}}}}]\n"
    );
    cp.cli_stdin(&["apply", "-f", "-"], Some(&format!("{pair}\n{v2}")))
        .success();
    let _v1_app = HttpBackend::start("v1", ports.backend_app);
    let _v2_app = HttpBackend::start("v2", v2_app_port);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, _backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let mut backend_2 = Sidecar::start(&cp, tokens.path(), "backend-2");
    backend_2.wait_ready(READY);
    let outbound = ports.web_outbound;

    // Without a route, both backends of the service answer.
    eventually("both backends answer", READY, || {
        let (v1, v2) = tally(outbound, 20);
        (v1 > 0 && v2 > 0).then_some(())
    });

    // 90/10: the subsets get their share of new connections.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&route((90, 10))))
        .success();
    eventually("web's sidecar takes the split", READY, || {
        let dump = web.config_dump().to_string();
        dump.contains("backend[version=v2]").then_some(())
    });
    let n = 800;
    let (v1, v2) = tally(outbound, n);
    assert_eq!(v1 + v2, n);
    let share = v1 as f64 * 100.0 / n as f64;
    assert!(
        (85.0..=95.0).contains(&share),
        "90/10 split over {n} connections: {v1} to v1, {v2} to v2 ({share:.1} %)"
    );

    // Flipped to 0/100: every new connection goes to v2.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&route((0, 100))))
        .success();
    eventually("every new connection goes to v2", READY, || {
        (tally(outbound, 20) == (0, 20)).then_some(())
    });
    assert_eq!(tally(outbound, 100), (0, 100));

    // Deleted: the whole service again.
    cp.cli(&["delete", "meshtcproute", "tcp-split", "-m", "default"])
        .success();
    eventually("both backends answer again", READY, || {
        let (v1, v2) = tally(outbound, 20);
        (v1 > 0 && v2 > 0).then_some(())
    });
}

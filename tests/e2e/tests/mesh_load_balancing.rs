//! MeshLoadBalancingStrategy (issue 36) with real binaries and curl: a
//! `RingHash` strategy hashing the `x-session-id` header, in Kuma's shape,
//! applied to web's calls to `backend` served by three Dataplanes. 1,000
//! requests with 20 distinct session IDs: every request of one ID reaches
//! the same backend (named in each answer's body), and the IDs spread over
//! more than one backend.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, MESH, PairPorts, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};

/// A failure deadline, never a timing bound.
const READY: Duration = Duration::from_secs(30);

/// Sticky sessions on `x-session-id`, in the shape of Kuma's RingHash
/// example.
const RING_HASH: &str = "\
type: MeshLoadBalancingStrategy
name: ring-hash
mesh: default
spec:
  targetRef:
    kind: Mesh
  to:
    - targetRef:
        kind: MeshService
        name: backend
      default:
        loadBalancer:
          type: RingHash
          ringHash:
            hashPolicies:
              - type: Header
                header:
                  name: x-session-id
";

/// The backends that answered `n` GETs through `port` carrying session
/// `id`, in order (one curl, one keep-alive connection).
fn answers(port: u16, id: &str, n: usize) -> Vec<String> {
    let url = format!("http://127.0.0.1:{port}/session");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "-H"])
        .arg(format!("x-session-id: {id}"))
        .args(["-w", "\n"])
        .args(std::iter::repeat_n(url.as_str(), n))
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            v["name"].as_str().expect("a backend's name").to_owned()
        })
        .collect()
}

#[test]
fn a_ring_hash_on_a_header_sends_each_session_to_one_backend() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, "1h", "http", &["web", "backend"]);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let _app_1 = HttpBackend::start("backend-1", ports.backend_app);
    let apps: Vec<HttpBackend> = ["backend-2", "backend-3"]
        .iter()
        .map(|name| {
            let app = HttpBackend::start(name, 0);
            let extra = proxy::extra_backend_yaml(name, free_port(), app.port(), free_port());
            cp.cli_stdin(&["apply", "-f", "-"], Some(&extra)).success();
            app
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let (web, _backend_1) = proxy::start_pair_sidecars(&cp, dir.path(), READY);
    let mut extra = Vec::new();
    for name in ["backend-2", "backend-3"] {
        let mut s = Sidecar::start(&cp, dir.path(), name);
        s.wait_ready(READY);
        extra.push(s);
    }
    eventually("all three backends to answer through web-1", READY, || {
        let seen: BTreeSet<String> = answers(ports.web_outbound, "warm-up", 12)
            .into_iter()
            .collect();
        (seen.len() == 3).then_some(())
    });

    cp.cli_stdin(&["apply", "-f", "-"], Some(RING_HASH))
        .success();
    let listed = cp
        .cli(&["get", "meshloadbalancingstrategies", "-m", MESH])
        .success()
        .stdout;
    assert!(listed.contains("ring-hash"), "{listed}");
    eventually("the ring and the hash policy to reach web-1", READY, || {
        let dump = web.config_dump().to_string();
        (dump.contains("ring_hash") && dump.contains("x-session-id")).then_some(())
    });

    let mut per_session: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut total = 0;
    for i in 0..20 {
        let id = format!("session-{i}");
        let got = answers(ports.web_outbound, &id, 50);
        assert_eq!(got.len(), 50, "{id}: every request answered");
        total += got.len();
        per_session.entry(id).or_default().extend(got);
    }
    assert_eq!(total, 1000);
    for (id, backends) in &per_session {
        assert_eq!(backends.len(), 1, "{id} reached {backends:?}");
    }
    let used: BTreeSet<&String> = per_session.values().flatten().collect();
    assert!(used.len() > 1, "20 sessions all on {used:?}");
    println!("sessions per backend: {per_session:?}");
    drop(apps);
}

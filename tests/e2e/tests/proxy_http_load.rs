//! L7 under load, real binaries and h2load (nghttp2): HTTP/2 with 100
//! connections and 10 streams each through the pair with zero errors and
//! metrics equal to h2load's own counts; a 90/10 MeshHTTPRoute split over
//! one HTTP/1.1 keep-alive connection within 2 percentage points; a
//! route flip while h2load runs, with zero failed requests; and both
//! sidecars' certificates rotating (10 s certificates) under HTTP/2 load,
//! with zero failed requests.

use std::process::Command;
use std::time::Duration;

use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, PairPorts, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};

const READY: Duration = Duration::from_secs(30);

/// h2load's own counts.
#[derive(Debug)]
struct Load {
    done: u64,
    succeeded: u64,
    failed: u64,
    errored: u64,
    status_2xx: u64,
    /// 4xx and 5xx answers.
    status_errors: u64,
}

/// Runs h2load against web's outbound and reads its summary.
fn h2load(port: u16, args: &[&str]) -> Load {
    h2load_path(port, "/load", args)
}

/// [`h2load`] on `path`.
fn h2load_path(port: u16, path: &str, args: &[&str]) -> Load {
    let out = Command::new("h2load")
        .args(args)
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("run h2load (apt-get install nghttp2-client)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "h2load failed: {text}");

    let count = |line: &str, key: &str| -> u64 {
        let l = text
            .lines()
            .find(|l| l.starts_with(line))
            .unwrap_or_else(|| panic!("no {line:?} line in {text}"));
        l.split(',')
            .find_map(|part| {
                let part = part.trim().trim_start_matches(line).trim();
                part.strip_suffix(key)
                    .map(|n| n.trim().parse().unwrap_or(0))
            })
            .unwrap_or_else(|| panic!("no {key:?} in {l:?}"))
    };
    Load {
        done: count("requests:", "done"),
        succeeded: count("requests:", "succeeded"),
        failed: count("requests:", "failed"),
        errored: count("requests:", "errored"),
        status_2xx: count("status codes:", "2xx"),
        status_errors: count("status codes:", "4xx") + count("status codes:", "5xx"),
    }
}

/// The pair with `kuma.io/protocol: http`, and a third Dataplane,
/// backend-v2-1 of service `backend-v2`, with its own app.
struct Mesh {
    cp: ControlPlane,
    ports: PairPorts,
    web: Sidecar,
    backend: Sidecar,
    v2: Sidecar,
    backend_app: HttpBackend,
    v2_app: HttpBackend,
    _tokens: tempfile::TempDir,
}

fn mesh() -> Mesh {
    mesh_with_certificates_for("1h")
}

/// [`mesh`] with workload certificates valid for `lifetime`.
fn mesh_with_certificates_for(lifetime: &str) -> Mesh {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, lifetime, "http", &["backend"]);
    let (v2_inbound, v2_app_port) = (free_port(), free_port());
    let v2 = format!(
        "---\napiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {{name: backend-v2-1, mesh: default}}\nspec:\n  networking:\n    address: 127.0.0.1\n    inbound: [{{port: {v2_inbound}, servicePort: {v2_app_port}, tags: {{kuma.io/service: backend-v2, kuma.io/protocol: http}}}}]\n---\napiVersion: meshlink.dev/v1alpha1\nkind: MeshTrafficPermission\nmetadata: {{name: web-to-backend-v2, mesh: default}}\nspec:\n  targetRef: {{kind: MeshService, name: backend-v2}}\n  from: [{{targetRef: {{kind: MeshService, name: web}}, default: {{action: Allow}}}}]\n"
    );
    cp.cli_stdin(&["apply", "-f", "-"], Some(&format!("{yaml}\n{v2}")))
        .success();
    let backend_app = HttpBackend::start("backend", ports.backend_app);
    let v2_app = HttpBackend::start("backend-v2", v2_app_port);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let mut v2 = Sidecar::start(&cp, tokens.path(), "backend-v2-1");
    v2.wait_ready(READY);
    Mesh {
        cp,
        ports,
        web,
        backend,
        v2,
        backend_app,
        v2_app,
        _tokens: tokens,
    }
}

/// A MeshHTTPRoute from web splitting `backend` by `weights`
/// (backend, backend-v2).
fn split(m: &Mesh, weights: (u32, u32)) {
    let yaml = format!(
        "type: MeshHTTPRoute\nname: backend-split\nmesh: default\nspec:\n  targetRef: {{kind: MeshService, name: web}}\n  to:\n    - targetRef: {{kind: MeshService, name: backend}}\n      rules:\n        - matches: [{{path: {{type: PathPrefix, value: /}}}}]\n          default:\n            backendRefs:\n              - {{kind: MeshService, name: backend, weight: {}}}\n              - {{kind: MeshService, name: backend-v2, weight: {}}}\n",
        weights.0, weights.1
    );
    m.cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
}

#[test]
fn h2load_100_connections_10_streams_has_no_errors_and_metrics_match_its_counts() {
    let m = mesh();
    let before = m.backend_app.hits();
    let load = h2load(
        m.ports.web_outbound,
        &["-n", "20000", "-c", "100", "-m", "10"],
    );
    println!("h2load -c 100 -m 10: {load:?}");
    assert_eq!((load.failed, load.errored), (0, 0), "{load:?}");
    assert_eq!(load.succeeded, 20000);
    assert_eq!(load.status_2xx, 20000);
    assert_eq!(
        m.backend_app.hits() - before,
        20000,
        "every request reached the app once"
    );
    // Only h2load's requests crossed the pair.
    let outbound = m.web.metric(
        "meshlink_proxy_http_requests_total{direction=\"outbound\",cluster=\"backend\",route=\"default\",code=\"200\"",
    );
    let inbound = m
        .backend
        .metric("meshlink_proxy_http_requests_total{direction=\"inbound\"");
    assert_eq!(outbound, load.done as f64, "web's count equals h2load's");
    assert_eq!(inbound, load.done as f64, "backend's count equals h2load's");
    assert_eq!(m.web.metric("meshlink_proxy_http_requests_active{"), 0.0);
}

#[test]
fn a_90_10_split_holds_within_2_points_over_one_keep_alive_connection_and_a_flip_loses_nothing() {
    let m = mesh();
    split(&m, (90, 10));
    eventually("the split to apply", READY, || {
        let before = m.v2_app.hits();
        h2load(m.ports.web_outbound, &["--h1", "-n", "200", "-c", "1"]);
        (m.v2_app.hits() > before).then_some(())
    });
    let (a0, b0) = (m.backend_app.hits(), m.v2_app.hits());
    let n = 5000;
    let load = h2load(
        m.ports.web_outbound,
        &["--h1", "-n", &n.to_string(), "-c", "1"],
    );
    assert_eq!((load.failed, load.errored, load.status_2xx), (0, 0, n));
    let (a, b) = (m.backend_app.hits() - a0, m.v2_app.hits() - b0);
    assert_eq!(a + b, n as usize);
    let share = a as f64 / n as f64 * 100.0;
    println!(
        "90/10 split over one HTTP/1.1 connection: {a} backend, {b} backend-v2 ({share:.2} %)"
    );
    assert!((88.0..=92.0).contains(&share), "{share:.2} % to backend");

    // The route flips while h2load runs; no request fails.
    let runner = {
        let port = m.ports.web_outbound;
        std::thread::spawn(move || h2load(port, &["-n", "30000", "-c", "8", "-m", "4"]))
    };
    let v2_before = m.v2_app.hits();
    let total = || m.backend_app.hits() + m.v2_app.hits();
    let base = total();
    eventually("h2load to be under way", READY, || {
        (total() > base + 1000).then_some(())
    });
    split(&m, (0, 100));
    eventually("traffic to move to backend-v2", READY, || {
        (m.v2_app.hits() > v2_before + 2000).then_some(())
    });
    let load = runner.join().expect("h2load thread");
    println!("route flip under load: {load:?}");
    assert_eq!((load.failed, load.errored), (0, 0), "{load:?}");
    assert_eq!(load.status_2xx, 30000);
    drop((m.backend, m.v2));
}

#[test]
fn sigterm_under_http2_load_sends_goaway_and_no_completed_request_fails() {
    let mut m = mesh();
    let n: u64 = 2_000_000;
    let before = m.backend_app.hits();
    let runner = {
        let port = m.ports.web_outbound;
        std::thread::spawn(move || h2load(port, &["-n", &n.to_string(), "-c", "10", "-m", "10"]))
    };
    eventually("h2load to be under way", READY, || {
        (m.backend_app.hits() > before + 2000).then_some(())
    });
    m.web.sigterm();
    let status = m.web.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "web-1 exits 0 after draining: {status:?}");
    let load = runner.join().expect("h2load thread");
    let reached = m.backend_app.hits() - before;
    println!("SIGTERM under HTTP/2 load: {load:?}, {reached} reached the app");
    // GOAWAY told h2load to stop: it did not get to send everything (a
    // proxy that kept serving its open connections until the deadline
    // would have let it finish), and every request that got an answer got
    // a 2xx; every request that reached the app got its answer back. (h2load also counts as done the few streams it opened after
    // the final GOAWAY, which the proxy refused unprocessed: they have no
    // status and never reached the app.)
    assert!(load.done < n, "{load:?}");
    assert_eq!(load.status_errors, 0, "{load:?}");
    assert_eq!(load.status_2xx, load.succeeded, "{load:?}");
    assert!(load.succeeded > 2000, "{load:?}");
    assert_eq!(
        reached, load.succeeded as usize,
        "every request that reached the app was answered"
    );
}

#[test]
fn five_retries_on_5xx_turn_30_percent_injected_503s_into_at_least_99_5_percent_success() {
    let m = mesh();
    m.cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(
            "type: MeshRetry\nname: backend-retry\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: backend}\n      default:\n        http:\n          numRetries: 5\n          retryOn: [\"5xx\"]\n          backOff: {baseInterval: 1ms, maxInterval: 5ms}\n",
        ),
    )
    .success();
    // Kuma's default policy already retries 503 (gateway-error); the
    // applied one says 5xx with a 1-5 ms back-off.
    eventually("the retry policy to reach web's sidecar", READY, || {
        let dump = m.web.config_dump().to_string();
        dump.contains("\"backoff_base\":\"1ms\"").then_some(())
    });
    let retried = || m.web.metric("meshlink_proxy_http_retries_total{");
    let (hits0, retries0) = (m.backend_app.hits(), retried());
    let n: u64 = 5000;
    // Three requests at a time: the retry budget lets at least 3 retries
    // be in flight (as Kuma's default MeshCircuitBreaker, maxRetries: 3),
    // so it never binds here. With more, a 30 % failure rate is what the
    // budget exists to bound (see operations.md, "HTTP services").
    let load = h2load_path(
        m.ports.web_outbound,
        "/unavailable/30",
        &["-n", &n.to_string(), "-c", "3", "-m", "1"],
    );
    let tries = (m.backend_app.hits() - hits0) as u64;
    let retries = retried() - retries0;
    let overflows = m.web.metric("meshlink_proxy_http_retry_overflows_total{");
    let ejections = m.web.metric("meshlink_proxy_outlier_ejections_total{");
    println!(
        "30 % injected 503s, 5 retries: {load:?}; {tries} tries, {retries} retries, {overflows} budget overflows, {ejections} ejections"
    );
    assert_eq!(
        (load.done, load.failed + load.succeeded),
        (n, n),
        "{load:?}"
    );
    let success = load.status_2xx as f64 * 100.0 / n as f64;
    assert!(success >= 99.5, "{success:.2} % succeeded: {load:?}");
    // About 0.43 retries per request reached the app (1/0.7 tries each).
    assert_eq!(
        tries as f64,
        n as f64 + retries,
        "every retry is one more try"
    );
    assert!(
        retries >= n as f64 * 0.3,
        "{retries} retries for {n} requests"
    );
    assert_eq!(overflows, 0.0, "the budget did not bind");
}

#[test]
fn certificates_rotating_under_http2_load_fail_no_request() {
    // 10 s certificates renew about every 5 s: a 20 s run sees several
    // rotations on both sides, new pooled connections with each.
    let m = mesh_with_certificates_for("10s");
    let sidecars = [&m.web, &m.backend];
    let mut last: Vec<Option<String>> = sidecars.iter().map(|s| s.serial()).collect();
    let mut changes = [0u32; 2];
    let before = m.backend_app.hits();
    let runner = {
        let port = m.ports.web_outbound;
        std::thread::spawn(move || h2load(port, &["-D", "20", "-c", "10", "-m", "10"]))
    };
    while !runner.is_finished() {
        for (i, s) in sidecars.iter().enumerate() {
            let now = s.serial();
            if now.is_some() && now != last[i] {
                changes[i] += 1;
                last[i] = now;
            }
        }
        // Sampling period of the serials, not a wait for the system.
        std::thread::sleep(Duration::from_millis(250));
    }
    let load = runner.join().expect("h2load thread");
    println!("rotation under HTTP/2 load: {load:?}; serial changes web {changes:?}");
    assert_eq!(
        (load.failed, load.errored, load.status_errors),
        (0, 0, 0),
        "{load:?}\nweb-1:\n{}\nbackend-1:\n{}",
        m.web.logs(),
        m.backend.logs()
    );
    // h2load counts a status when the response's headers arrive and a
    // success when its stream ends: a response whose headers beat the
    // clock but whose stream did not is a 2xx without a success, so up to
    // the 10 × 10 requests in flight may be 2xx beyond the successes.
    assert!(
        load.succeeded > 0 && (load.succeeded..=load.succeeded + 100).contains(&load.status_2xx),
        "{load:?}"
    );
    // Every answered request reached the app once; h2load's clock ends the
    // run with up to 10 × 10 requests still in flight, uncounted by it.
    let reached = (m.backend_app.hits() - before) as u64;
    assert!(
        (load.succeeded..=load.succeeded + 100).contains(&reached),
        "{reached} reached the app, {load:?}"
    );
    for (s, n) in sidecars.iter().zip(changes) {
        assert!(n >= 2, "{}: {n} serial changes during the run", s.name());
    }
}

//! Shutdown of a control plane under load, with real binaries.
//!
//! SIGTERM with two sidecars carrying traffic and 100 raw ADS streams open:
//! every raw stream ends with UNAVAILABLE ("control plane shutting down"),
//! the process exits 0 (it exits 1 when the drain had to be forced at
//! `--drain-timeout`, so 0 is the product's promise that it drained in
//! time), not one request between the sidecars fails while it is down, and
//! after a restart both sidecars reconnect and renew their certificates.
//!
//! A drain held up by an in-flight REST request (a request whose body never
//! finishes) shows the two ways out: a second signal exits at once with
//! 130, and otherwise the drain timeout forces the exit with 1.

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use meshlink_e2e::ads::{CLUSTER_TYPE, Sotw, connect, node, sotw_request};
use meshlink_e2e::app::{HttpApp, Traffic};
use meshlink_e2e::proxy::{self, PairPorts, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use serde_json::json;
use tonic::Code;

const READY: Duration = Duration::from_secs(30);
const RAW_STREAMS: usize = 100;
const XDS_CONNECTED: &str = "meshlink_proxy_xds_connected";
const CERT_EXPIRY: &str = "meshlink_proxy_cert_expiry_seconds";
/// Workload certificate lifetime: short, so the rotation after the restart
/// comes within the test.
const LIFETIME: Duration = Duration::from_secs(60);

fn gauge(s: &Sidecar, series: &str) -> Option<f64> {
    (s.admin_get("/ready").0 != 0).then(|| s.metric(series))
}

fn signal(cp: &ControlPlane, sig: &str) {
    let pid = cp.pid().expect("cp running").to_string();
    let ok = Command::new("kill")
        .args([sig, &pid])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

fn wait_exit(cp: &mut ControlPlane, within: Duration) -> Option<i32> {
    let status = eventually("meshlink-cp to exit", within, || cp.exit_status());
    status.code()
}

#[test]
fn sigterm_under_load_ends_streams_with_unavailable_exits_0_and_traffic_never_fails() {
    let mut cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, &format!("{}s", LIFETIME.as_secs()));
    let _backend_app = HttpApp::start_on("backend app", ports.backend_app);
    let _web_app = HttpApp::start_on("web app", ports.web_app);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (mut web, mut backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let to_backend = Traffic::start(ports.web_outbound, "/name", b"backend app\n");
    let to_web = Traffic::start(ports.backend_outbound, "/name", b"web app\n");

    // 100 raw ADS clients, each its own dataplane identity.
    let raw_tokens: Vec<String> = (0..RAW_STREAMS)
        .map(|i| {
            let (status, body) = cp.api(
                "POST",
                "/api/v1/tokens/dataplane",
                Some(&json!({"mesh": proxy::MESH, "name": format!("load-{i}"), "services": ["load"]})),
            );
            assert_eq!(status, 200, "{body}");
            body["token"].as_str().expect("token").to_owned()
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let readers: Vec<_> = rt.block_on(async {
        let mut readers = Vec::new();
        for (i, token) in raw_tokens.iter().enumerate() {
            let ch = connect(&cp, None).await;
            let mut s = Sotw::open(
                ch,
                Some(token),
                node(proxy::MESH, &format!("load-{i}"), "envoy"),
                sotw_request(CLUSTER_TYPE, &[], "", ""),
            )
            .await
            .expect("raw stream opens");
            // Read until the stream ends; its final status is the result.
            readers.push(tokio::spawn(async move {
                loop {
                    if let Err(status) = s.next().await {
                        return status;
                    }
                }
            }));
        }
        readers
    });
    eventually("the cp to count every stream", READY, || {
        (cp.metric(&["meshlink_xds_streams{", "sotw"]) >= RAW_STREAMS as f64).then_some(())
    });

    // Only while both certificates outlive a generous outage.
    eventually("both certificates to have > 40 s left", LIFETIME, || {
        [&web, &backend]
            .iter()
            .all(|s| gauge(s, CERT_EXPIRY).is_some_and(|left| left > 40.0))
            .then_some(())
    });
    let serials = [web.serial(), backend.serial()];
    let sent = Instant::now();
    let code = cp.terminate();
    println!("meshlink-cp exited {:?} after SIGTERM", sent.elapsed());
    assert_eq!(code, Some(0), "drained in time:\n{}", cp.logs());

    let statuses: Vec<tonic::Status> = rt.block_on(async {
        let mut out = Vec::new();
        for r in readers {
            out.push(r.await.expect("reader"));
        }
        out
    });
    for status in &statuses {
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(
            status
                .message()
                .contains("control plane shutting down; reconnect"),
            "{status:?}"
        );
    }
    for s in [&web, &backend] {
        eventually("xds_connected 0 while the cp is down", READY, || {
            (gauge(s, XDS_CONNECTED) == Some(0.0)).then_some(())
        });
    }
    let during = (to_backend.snapshot(), to_web.snapshot());

    cp.restart();
    for s in [&web, &backend] {
        eventually("xds_connected 1 after the restart", READY, || {
            (gauge(s, XDS_CONNECTED) == Some(1.0)).then_some(())
        });
    }
    for (s, before) in [&web, &backend].iter().zip(serials) {
        let after = eventually(
            "a renewed certificate after the restart",
            LIFETIME * 2,
            || s.serial().filter(|now| Some(now) != before.as_ref()),
        );
        println!("{}: serial {before:?} -> {after}", s.name());
    }
    let to_backend = to_backend.stop();
    let to_web = to_web.stop();
    println!("while down: {during:?}\nweb -> backend: {to_backend:?}\nbackend -> web: {to_web:?}");
    for (what, report) in [("web -> backend", &to_backend), ("backend -> web", &to_web)] {
        assert_eq!(report.failed, 0, "{what}: {report:?}");
        assert!(report.ok > 0, "{what}: {report:?}");
    }
    assert_eq!(web.exit_status(), None, "{}", web.logs());
    assert_eq!(backend.exit_status(), None, "{}", backend.logs());
}

/// Starts a REST request whose body never completes: an in-flight request
/// the drain has to wait for.
fn hold_a_request(cp: &ControlPlane) -> TcpStream {
    let addr = cp.server().trim_start_matches("http://").to_owned();
    let mut conn = TcpStream::connect(addr).expect("connect to the REST API");
    write!(
        conn,
        "POST /api/v1/tokens/revoke HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"id\":",
        cp.token()
    )
    .expect("send the start of a request");
    conn
}

/// A control plane whose body-read timeout (the header-read timeout) is
/// longer than the 10 s drain timeout, so a held request outlasts the
/// drain.
fn start_with_a_long_body_timeout() -> ControlPlane {
    let mut cp = ControlPlane::prepare_on(StoreKind::Sqlite, "127.0.0.1", 0);
    cp.add_args(&["--http-header-read-timeout", "60s"]);
    cp.restart();
    cp
}

/// Waits until the control plane logged that it started draining.
fn wait_draining(cp: &mut ControlPlane) {
    eventually("the cp to start draining", READY, || {
        assert_eq!(cp.exit_status(), None, "exited before the second signal");
        cp.logs().contains("draining").then_some(())
    });
}

#[test]
fn a_second_signal_during_the_drain_exits_at_once_with_130() {
    let mut cp = start_with_a_long_body_timeout();
    let _held = hold_a_request(&cp);
    signal(&cp, "-TERM");
    wait_draining(&mut cp);
    signal(&cp, "-INT");
    // Well inside the default 10 s drain timeout the held request keeps
    // the drain going, so only the second signal can end it now.
    let code = wait_exit(&mut cp, READY);
    assert_eq!(code, Some(130), "{}", cp.logs());
    assert!(cp.logs().contains("second signal"), "{}", cp.logs());
}

#[test]
fn past_the_drain_timeout_the_exit_is_forced_with_1() {
    let mut cp = start_with_a_long_body_timeout();
    let _held = hold_a_request(&cp);
    signal(&cp, "-TERM");
    wait_draining(&mut cp);
    let code = wait_exit(&mut cp, READY);
    assert_eq!(code, Some(1), "{}", cp.logs());
    assert!(
        cp.logs().contains("drain timeout") && cp.logs().contains("--drain-timeout"),
        "{}",
        cp.logs()
    );
}

//! A control-plane outage under load: the cp is killed with SIGKILL for
//! 30 s (`MESHLINK_OUTAGE_SECS`) while two sidecars carry continuous
//! traffic. Not one request fails; the sidecars notice (`xds_connected` 0),
//! reconnect once it is restarted on the same data dir and ports
//! (`xds_connected` 1), and then renew their certificates (serials change).
//!
//! Certificates live 3 × the outage (90 s) and the cp is killed only while
//! both still have more than outage + 25 s left: a proxy cannot serve mTLS
//! with an expired certificate, so a lifetime shorter than the outage would
//! make failures unavoidable rather than a bug.

use std::time::{Duration, Instant};

use meshlink_e2e::app::{HttpApp, Traffic};
use meshlink_e2e::proxy::{self, PairPorts, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const READY: Duration = Duration::from_secs(30);
const XDS_CONNECTED: &str = "meshlink_proxy_xds_connected";
const CERT_EXPIRY: &str = "meshlink_proxy_cert_expiry_seconds";

/// The gauge `series` of `s`, or None when its admin endpoint does not answer.
fn gauge(s: &Sidecar, series: &str) -> Option<f64> {
    (s.admin_get("/ready").0 != 0).then(|| s.metric(series))
}

#[test]
fn cp_outage_under_traffic_drops_nothing_and_rotation_resumes_after_restart() {
    let outage = Duration::from_secs(
        std::env::var("MESHLINK_OUTAGE_SECS")
            .ok()
            .map(|s| {
                s.parse()
                    .expect("MESHLINK_OUTAGE_SECS is a number of seconds")
            })
            .unwrap_or(30),
    );
    let lifetime = outage * 3;
    let mut cp = ControlPlane::start(StoreKind::Sqlite);
    let backend_app = HttpApp::start("backend app");
    let web_app = HttpApp::start("web app");
    let ports = PairPorts::with_apps(web_app.port(), backend_app.port());
    proxy::apply_pair(&cp, &ports, &format!("{}s", lifetime.as_secs()));
    let tokens = tempfile::tempdir().expect("tempdir");
    let (mut web, mut backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let to_backend = Traffic::start(ports.web_outbound, "/name", b"backend app\n");
    let to_web = Traffic::start(ports.backend_outbound, "/name", b"web app\n");
    let traffic_start = Instant::now();

    // Kill only while both certificates outlive the outage by 25 s.
    let margin = (outage + Duration::from_secs(25)).as_secs_f64();
    eventually(
        "both certificates to have > outage + 25 s left",
        lifetime * 2,
        || {
            [&web, &backend]
                .iter()
                .all(|s| gauge(s, CERT_EXPIRY).is_some_and(|left| left > margin))
                .then_some(())
        },
    );
    cp.kill9();
    let killed = Instant::now();
    for s in [&web, &backend] {
        eventually("xds_connected 0 after the kill", outage, || {
            (gauge(s, XDS_CONNECTED) == Some(0.0)).then_some(())
        });
        println!("{} disconnected after {:?}", s.name(), killed.elapsed());
    }
    let mut unready = Vec::new();
    while killed.elapsed() < outage {
        for s in [&mut web, &mut backend] {
            assert_eq!(s.exit_status(), None, "{}", s.logs());
            let (status, body) = s.ready();
            if status != 200 && unready.len() < 5 {
                unready.push(format!(
                    "{:.1}s {}: {status} {body}",
                    killed.elapsed().as_secs_f64(),
                    s.name()
                ));
            }
        }
        // Length of the outage (the scenario), sampled twice a second.
        std::thread::sleep(Duration::from_millis(500));
    }
    println!("/ready not 200 during the outage: {unready:?}");
    let during = (to_backend.snapshot(), to_web.snapshot());
    println!("traffic during the outage: {during:?}");

    let serials = [web.serial(), backend.serial()];
    cp.restart();
    let up = Instant::now();
    for s in [&web, &backend] {
        eventually("xds_connected 1 after the restart", READY, || {
            (gauge(s, XDS_CONNECTED) == Some(1.0)).then_some(())
        });
        println!(
            "{} reconnected {:?} after the cp was ready",
            s.name(),
            up.elapsed()
        );
    }
    for (s, before) in [&web, &backend].iter().zip(serials) {
        let after = eventually("a renewed certificate after the restart", lifetime, || {
            s.serial().filter(|now| Some(now) != before.as_ref())
        });
        println!(
            "{} serial {before:?} -> {after} {:?} after the restart",
            s.name(),
            up.elapsed()
        );
    }

    let to_backend = to_backend.stop();
    let to_web = to_web.stop();
    println!("web -> backend: {to_backend:?}\nbackend -> web: {to_web:?}");
    for (what, report) in [("web -> backend", &to_backend), ("backend -> web", &to_web)] {
        assert_eq!(
            report.failed,
            0,
            "{what}: {report:?} (the outage began {:?} into the traffic)\nweb-1:\n{}\nbackend-1:\n{}",
            killed.duration_since(traffic_start),
            web.logs(),
            backend.logs()
        );
        assert!(report.ok > 0, "{what}: {report:?}");
    }
    assert_eq!(web.exit_status(), None, "{}", web.logs());
    assert_eq!(backend.exit_status(), None, "{}", backend.logs());
}

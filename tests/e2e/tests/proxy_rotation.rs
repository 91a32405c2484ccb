//! Certificate rotation under load: with 20 s workload certificates, two
//! sidecars serve continuous requests (each on a new connection, so each is
//! a new mTLS handshake) for two minutes (`MESHLINK_ROTATION_SECS`) without
//! a single failure, while their identity serials change at least 5 times
//! each; one long-lived connection opened before the first rotation keeps
//! working through all of them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use meshlink_e2e::app::{HttpApp, HttpConn, Traffic};
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind};

const READY: Duration = Duration::from_secs(30);

fn rotation_secs() -> u64 {
    std::env::var("MESHLINK_ROTATION_SECS")
        .ok()
        .map(|s| {
            s.parse()
                .expect("MESHLINK_ROTATION_SECS is a number of seconds")
        })
        .unwrap_or(120)
}

#[test]
fn rotation_under_continuous_traffic_drops_nothing() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let backend_app = HttpApp::start("backend app");
    let web_app = HttpApp::start("web app");
    let ports = PairPorts::with_apps(web_app.port(), backend_app.port());
    proxy::apply_pair(&cp, &ports, "20s");
    let tokens = tempfile::tempdir().expect("tempdir");
    let (mut web, mut backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);

    let to_backend = Traffic::start(ports.web_outbound, "/name", b"backend app\n");
    let to_web = Traffic::start(ports.backend_outbound, "/name", b"web app\n");
    let mut long_lived = HttpConn::connect(ports.web_outbound).expect("long-lived connection");
    let mut long_lived_requests = 0;

    let sidecars = [&web, &backend];
    let mut last: HashMap<&str, Option<String>> =
        sidecars.iter().map(|s| (s.name(), s.serial())).collect();
    let mut changes: HashMap<&str, u32> = sidecars.iter().map(|s| (s.name(), 0)).collect();
    let duration = Duration::from_secs(rotation_secs());
    let start = Instant::now();
    while start.elapsed() < duration {
        for s in sidecars {
            let now = s.serial();
            if now.is_some() && now != last[s.name()] {
                *changes.get_mut(s.name()).unwrap() += 1;
                println!(
                    "{:6.1}s {} serial {:?} -> {:?}",
                    start.elapsed().as_secs_f64(),
                    s.name(),
                    last[s.name()],
                    now
                );
                last.insert(s.name(), now);
            }
        }
        let r = long_lived.get("/name").unwrap_or_else(|e| {
            panic!(
                "the long-lived connection failed after {long_lived_requests} requests, {:.1}s: {e}\nweb-1:\n{}\nbackend-1:\n{}",
                start.elapsed().as_secs_f64(),
                web.logs(),
                backend.logs()
            )
        });
        assert_eq!(r.text(), "backend app\n");
        long_lived_requests += 1;
        // Sampling period of the serials, not a wait for the system.
        std::thread::sleep(Duration::from_secs(1));
    }
    let to_backend = to_backend.stop();
    let to_web = to_web.stop();
    println!("web -> backend: {to_backend:?}\nbackend -> web: {to_web:?}");
    println!("serial changes: {changes:?}");

    for (what, report) in [("web -> backend", &to_backend), ("backend -> web", &to_web)] {
        assert_eq!(
            report.failed,
            0,
            "{what}: {report:?}\nweb-1:\n{}\nbackend-1:\n{}",
            web.logs(),
            backend.logs()
        );
        assert!(report.ok > 0, "{what}: {report:?}");
    }
    for s in sidecars {
        let n = changes[s.name()];
        assert!(
            n >= 5,
            "{}: serial changed {n} times in {duration:?}; logs:\n{}",
            s.name(),
            s.logs()
        );
        let rotations = s.metric("meshlink_proxy_cert_rotations_total");
        assert!(
            rotations >= f64::from(n),
            "{}: cert_rotations_total {rotations} < {n} serial changes seen",
            s.name()
        );
    }
    assert_eq!(web.exit_status(), None, "{}", web.logs());
    assert_eq!(backend.exit_status(), None, "{}", backend.logs());
}

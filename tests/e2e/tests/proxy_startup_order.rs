//! Start-up order does not matter: for every one of the 120 orders of
//! {control plane, sidecar A, sidecar B, app A, app B}, each started right
//! after the previous one, both sidecars get ready, traffic flows both ways,
//! nothing exits early, and every process exits 0 on SIGTERM. And a sidecar
//! that has been retrying while the control plane was down becomes ready
//! once the control plane comes up; the test prints how long after, and
//! docs/BENCHMARKS.md records it (a timing is a benchmark figure, not a
//! pass/fail bound).
//!
//! The orders share one control-plane data dir, seeded once (mesh,
//! Dataplanes, permissions, proxy tokens), as an operator's would be: each
//! order still starts a new control-plane process on it, and new sidecar
//! and app processes, so nothing carries over but the stored resources.

use std::time::{Duration, Instant};

use meshlink_e2e::app::{HttpApp, http_get};
use meshlink_e2e::proxy::{self, PairPorts, Sidecar, SidecarOptions};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const READY: Duration = Duration::from_secs(30);

/// A stopped control plane whose data dir holds the pair mesh, and the
/// sidecars' options (token files written).
struct Seeded {
    cp: ControlPlane,
    ports: PairPorts,
    web: SidecarOptions,
    backend: SidecarOptions,
    _tokens: tempfile::TempDir,
}

fn seed() -> Seeded {
    let mut cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    let tokens = tempfile::tempdir().expect("tempdir");
    let web =
        SidecarOptions::new(&cp, &tokens.path().join("web-1.token"), "web-1").drain_timeout("5s");
    let backend = SidecarOptions::new(&cp, &tokens.path().join("backend-1.token"), "backend-1")
        .drain_timeout("5s");
    proxy::write_token(&cp, &web.token_file, "web-1");
    proxy::write_token(&cp, &backend.token_file, "backend-1");
    assert_eq!(cp.terminate(), Some(0), "{}", cp.logs());
    Seeded {
        cp,
        ports,
        web,
        backend,
        _tokens: tokens,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    Cp,
    SidecarA,
    SidecarB,
    AppA,
    AppB,
}

/// Every order of `parts`.
fn permutations(parts: &[Part]) -> Vec<Vec<Part>> {
    if parts.len() <= 1 {
        return vec![parts.to_vec()];
    }
    let mut all = Vec::new();
    for (i, first) in parts.iter().enumerate() {
        let mut rest = parts.to_vec();
        rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, *first);
            all.push(tail);
        }
    }
    all
}

/// Starts the parts in `order`, back to back, then checks the end state and
/// stops everything.
fn run_order(s: &mut Seeded, order: &[Part]) {
    let (mut web, mut backend, mut web_app, mut backend_app) = (None, None, None, None);
    for part in order {
        match part {
            Part::Cp => s.cp.spawn(),
            Part::SidecarA => web = Some(Sidecar::spawn(&s.web)),
            Part::SidecarB => backend = Some(Sidecar::spawn(&s.backend)),
            // The apps restart on the ports the stored Dataplanes name, in
            // any order relative to the sidecars, so their ports are fixed.
            Part::AppA => web_app = Some(HttpApp::start_on("web app", s.ports.web_app)),
            Part::AppB => backend_app = Some(HttpApp::start_on("backend app", s.ports.backend_app)),
        }
    }
    let (mut web, mut backend) = (web.expect("started"), backend.expect("started"));
    s.cp.wait_ready();
    web.wait_ready(READY);
    backend.wait_ready(READY);
    for (port, expected, from) in [
        (s.ports.web_outbound, "backend app\n", &web),
        (s.ports.backend_outbound, "web app\n", &backend),
    ] {
        let r = eventually("traffic to flow", READY, || http_get(port, "/name").ok());
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, expected),
            "{}",
            from.logs()
        );
    }
    assert_eq!(s.cp.exit_status(), None, "cp:\n{}", s.cp.logs());
    for sidecar in [&mut web, &mut backend] {
        assert_eq!(sidecar.exit_status(), None, "{}", sidecar.logs());
        let status = sidecar.terminate();
        assert_eq!(
            status.code(),
            Some(0),
            "{}: {status}\n{}",
            sidecar.name(),
            sidecar.logs()
        );
    }
    assert_eq!(s.cp.terminate(), Some(0), "cp:\n{}", s.cp.logs());
    drop((web_app, backend_app));
}

#[test]
fn every_start_order_ends_ready_with_traffic_flowing() {
    let mut seeded = seed();
    let orders = permutations(&[
        Part::Cp,
        Part::SidecarA,
        Part::SidecarB,
        Part::AppA,
        Part::AppB,
    ]);
    assert_eq!(orders.len(), 120);
    let start = Instant::now();
    for (i, order) in orders.iter().enumerate() {
        println!("order {i}: {order:?}");
        let t = Instant::now();
        run_order(&mut seeded, order);
        println!("order {i}: ok in {:.2}s", t.elapsed().as_secs_f64());
    }
    println!(
        "{} orders in {:.1}s",
        orders.len(),
        start.elapsed().as_secs_f64()
    );
}

/// The port of `cp`'s REST API.
fn api_port(cp: &ControlPlane) -> u16 {
    let server = cp.server();
    server
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port in server URL")
}

#[test]
fn a_sidecar_waiting_for_the_cp_becomes_ready_once_it_comes_up() {
    let mut seeded = seed();
    let mut sidecars = [Sidecar::spawn(&seeded.web), Sidecar::spawn(&seeded.backend)];
    for s in &sidecars {
        eventually("the admin endpoint to answer", READY, || {
            (s.admin_get("/ready").0 == 503).then_some(())
        });
    }
    // The control plane stays down long enough for retries to back off;
    // meanwhile the sidecars stay up and not ready.
    let down_for = Duration::from_secs(
        std::env::var("MESHLINK_CP_DOWN_SECS")
            .ok()
            .map(|s| {
                s.parse()
                    .expect("MESHLINK_CP_DOWN_SECS is a number of seconds")
            })
            .unwrap_or(30),
    );
    let down = Instant::now();
    while down.elapsed() < down_for {
        for s in &mut sidecars {
            assert_eq!(s.ready().0, 503, "{}", s.logs());
            assert_eq!(s.exit_status(), None, "{}", s.logs());
        }
        std::thread::sleep(Duration::from_millis(250));
    }

    seeded.cp.spawn();
    let port = api_port(&seeded.cp);
    // Polled every few milliseconds (not with `eventually`'s backoff), so
    // the printed delays are measured to within a few milliseconds.
    let deadline = Instant::now() + READY;
    let up = loop {
        if let Some(s) = seeded.cp.exit_status() {
            panic!("cp exited with {s}:\n{}", seeded.cp.logs());
        }
        if http_get(port, "/readyz").is_ok_and(|r| r.status == 200) {
            break Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "cp not ready:\n{}",
            seeded.cp.logs()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    // Each sidecar becomes ready; READY is how long we wait before calling
    // it a failure, not a performance bound.
    let deadline = up + READY;
    let mut pending: Vec<&mut Sidecar> = sidecars.iter_mut().collect();
    let mut delays = Vec::new();
    while !pending.is_empty() {
        pending.retain_mut(|s| {
            if let Some(status) = s.exit_status() {
                panic!("{} exited with {status}:\n{}", s.name(), s.logs());
            }
            let ready = s.ready().0 == 200;
            if ready {
                delays.push((s.name().to_owned(), up.elapsed()));
            }
            !ready
        });
        if let Some(s) = pending.first() {
            assert!(
                Instant::now() < deadline,
                "{} not ready {READY:?} after the cp came up: {}\nlogs:\n{}",
                s.name(),
                s.ready().1,
                s.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for (name, delay) in delays {
        println!(
            "{name} ready {} ms after the cp's /readyz answered (cp down {}s before)",
            delay.as_millis(),
            down_for.as_secs()
        );
    }
}

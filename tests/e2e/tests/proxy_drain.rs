//! Graceful shutdown: SIGTERM to a sidecar in the middle of a long transfer
//! through it stops new connections at once (refused), lets the transfer
//! finish byte for byte, and exits 0 within `--drain-timeout`; a transfer
//! that outlives the drain timeout is cut and the proxy still exits 0.

use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use meshlink_e2e::app::{HttpApp, Transfer, pattern};
use meshlink_e2e::proxy::{self, PairPorts, Sidecar, SidecarOptions};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const READY: Duration = Duration::from_secs(30);
/// The transfer: 8 MiB, a quarter at once, the rest over about 3 s once the
/// app's gate opens.
const SIZE: usize = 8 * 1024 * 1024;

struct Scenario {
    _cp: ControlPlane,
    ports: PairPorts,
    backend_app: HttpApp,
    web: Sidecar,
    _backend: Sidecar,
    _tokens: tempfile::TempDir,
}

/// The pair mesh with web-1 draining for at most `drain`, both ready.
fn start(drain: &str) -> Scenario {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let backend_app = HttpApp::start("backend app");
    // web's app is never called in these scenarios: its port stays a free one.
    let ports = PairPorts::with_apps(meshlink_e2e::free_port(), backend_app.port());
    proxy::apply_pair(&cp, &ports, "1h");
    let tokens = tempfile::tempdir().expect("tempdir");
    let token = tokens.path().join("web-1.token");
    proxy::write_token(&cp, &token, "web-1");
    let mut web = Sidecar::spawn(&SidecarOptions::new(&cp, &token, "web-1").drain_timeout(drain));
    let mut backend = Sidecar::start(&cp, tokens.path(), "backend-1");
    web.wait_ready(READY);
    backend.wait_ready(READY);
    Scenario {
        _cp: cp,
        ports,
        backend_app,
        web,
        _backend: backend,
        _tokens: tokens,
    }
}

/// A transfer through web-1 that has received its first bytes.
fn transfer_in_flight(s: &Scenario) -> Transfer {
    let transfer = Transfer::start(s.ports.web_outbound, &format!("/slow/{SIZE}"));
    eventually("the transfer's first bytes", READY, || {
        assert!(!transfer.is_finished(), "the transfer ended early");
        (transfer.received() > 0).then_some(())
    });
    transfer
}

#[test]
fn sigterm_refuses_new_connections_finishes_the_transfer_and_exits_0() {
    let drain = Duration::from_secs(20);
    let mut s = start("20s");
    let transfer = transfer_in_flight(&s);

    s.web.sigterm();
    let term = Instant::now();
    let port = s.ports.web_outbound;
    eventually(
        "new connections to web-1's outbound to be refused",
        READY,
        || match TcpStream::connect(("127.0.0.1", port)) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => Some(()),
            _ => None,
        },
    );
    // Refused while draining: the app still holds the transfer open.
    assert!(
        !transfer.is_finished(),
        "the transfer ended before the app sent the rest"
    );
    assert_eq!(
        s.web.exit_status(),
        None,
        "exited before the transfer finished:\n{}",
        s.web.logs()
    );

    s.backend_app.gate().open();
    let r = transfer
        .join()
        .unwrap_or_else(|e| panic!("transfer failed: {e}\nweb-1:\n{}", s.web.logs()));
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), SIZE, "{}", s.web.logs());
    let expected = pattern(SIZE);
    if let Some(at) = r.body.iter().zip(&expected).position(|(a, b)| a != b) {
        panic!("the transfer differs from what the app sent at byte {at}");
    }

    let status = s.web.wait_exit(drain + Duration::from_secs(10));
    let took = term.elapsed();
    println!("web-1 exited with {status} {took:?} after SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", s.web.logs());
    assert!(
        took < drain,
        "exit {took:?} after SIGTERM, drain timeout {drain:?}"
    );
}

#[test]
fn a_transfer_outliving_the_drain_timeout_is_cut_and_the_proxy_still_exits_0() {
    let drain = Duration::from_secs(2);
    let mut s = start("2s");
    let transfer = transfer_in_flight(&s);

    s.web.sigterm();
    let term = Instant::now();
    let status = s.web.wait_exit(drain + Duration::from_secs(10));
    println!(
        "web-1 exited with {status} {:?} after SIGTERM",
        term.elapsed()
    );
    assert_eq!(status.code(), Some(0), "{}", s.web.logs());
    let r = transfer.join();
    assert!(
        r.as_ref().is_err(),
        "a transfer held past the drain timeout completed: {:?}",
        r.map(|r| r.body.len())
    );
    s.backend_app.gate().open();
}

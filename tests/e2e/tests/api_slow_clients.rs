//! The REST API under slow clients (issue 35 §6), against the real
//! `meshlink-cp`: connections that never finish their request header are
//! closed by the header-read timeout and counted, `/healthz` answers all
//! the while, and the control plane's open descriptors return to what they
//! were; a kept-alive connection left idle is closed by the idle timeout;
//! connections over the cap are closed at once.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use meshlink_e2e::{ControlPlane, StoreKind, eventually};

/// Slow clients in the main test.
const SLOW_CLIENTS: usize = 1_000;
/// The header-read timeout the control plane is started with.
const HEADER_TIMEOUT: &str = "3s";
/// A safety net past the timeout for the closes to be seen, on a loaded
/// machine; the counter, not this, shows which limit closed them.
const CLOSE_WAIT: Duration = Duration::from_secs(60);

/// Descriptors the control plane holds open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read /proc/PID/fd")
        .count()
}

/// Opens a connection to the REST API and sends the start of a request
/// whose header never ends.
fn slow_client(cp: &ControlPlane) -> TcpStream {
    let addr = cp.server().trim_start_matches("http://").to_owned();
    let mut s = TcpStream::connect(&addr).expect("connect to the REST API");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: meshlink\r\nX-Slow: ")
        .expect("send a partial header");
    s.set_nonblocking(true).expect("non-blocking");
    s
}

/// The server has closed `s` (end of stream, or a reset).
fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 512];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

/// GET /healthz on a new connection: 200 within 10 s, or panics.
fn healthz_answers(cp: &ControlPlane) {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let r = client
        .get(format!("{}/healthz", cp.server()))
        .send()
        .unwrap_or_else(|e| panic!("/healthz did not answer: {e}\n{}", cp.logs()));
    assert_eq!(r.status().as_u16(), 200, "/healthz");
}

fn closed(cp: &ControlPlane, reason: &str) -> f64 {
    cp.metric(&[
        "meshlink_http_closed_connections_total{",
        "port=\"api\"",
        &format!("reason=\"{reason}\""),
    ])
}

#[test]
fn a_thousand_slow_clients_are_closed_by_the_header_timeout_while_healthz_answers() {
    // The test holds a descriptor per client too; the control plane
    // inherits the raised limit (and raises its own at start).
    meshlink_runtime::raise_open_files_limit().expect("raise the open-files limit");
    let limit = meshlink_runtime::open_files_limit();
    assert!(
        limit.is_none_or(|l| l > 2 * SLOW_CLIENTS as u64 + 200),
        "the hard open-files limit ({limit:?}) is too low for {SLOW_CLIENTS} clients"
    );
    let mut cp = ControlPlane::prepare_on(StoreKind::Sqlite, "127.0.0.1", 0);
    cp.add_args(&["--http-header-read-timeout", HEADER_TIMEOUT]);
    cp.restart();
    let pid = cp.pid().expect("control plane pid");
    healthz_answers(&cp);
    let baseline = open_fds(pid);
    assert_eq!(closed(&cp, "header_timeout"), 0.0);

    let started = Instant::now();
    let mut clients: Vec<TcpStream> = (0..SLOW_CLIENTS).map(|_| slow_client(&cp)).collect();
    let mut open: Vec<usize> = (0..SLOW_CLIENTS).collect();
    let mut held_at_most = 0;
    let mut healthz_checks = 0;
    eventually(
        "every slow client closed by the control plane",
        CLOSE_WAIT,
        || {
            healthz_answers(&cp);
            healthz_checks += 1;
            held_at_most = held_at_most.max(open_fds(pid).saturating_sub(baseline));
            open.retain(|&i| !closed_by_server(&mut clients[i]));
            open.is_empty().then_some(())
        },
    );
    let all_closed_after = started.elapsed();
    assert_eq!(
        closed(&cp, "header_timeout"),
        SLOW_CLIENTS as f64,
        "each was closed by the header-read timeout"
    );
    eventually(
        "the control plane's descriptors back to the baseline",
        CLOSE_WAIT,
        || (open_fds(pid) <= baseline).then_some(()),
    );
    healthz_answers(&cp);
    eprintln!(
        "{SLOW_CLIENTS} slow clients, header-read timeout {HEADER_TIMEOUT}: all closed {all_closed_after:?} after the first connect; \
         at most {held_at_most} descriptors above the baseline of {baseline}; /healthz answered {healthz_checks} times meanwhile"
    );
}

#[test]
fn an_idle_kept_alive_connection_is_closed_and_the_cap_closes_extra_connections() {
    let mut cp = ControlPlane::prepare_on(StoreKind::Sqlite, "127.0.0.1", 0);
    cp.add_args(&[
        "--http-idle-timeout",
        "2s",
        "--http-header-read-timeout",
        "60s",
        "--http-max-connections",
        "3",
    ]);
    cp.restart();
    let addr = cp.server().trim_start_matches("http://").to_owned();

    // A complete request on a kept-alive connection, answered; then idle.
    let mut idle = TcpStream::connect(&addr).expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: meshlink\r\n\r\n")
        .expect("send a request");
    let mut answer = [0u8; 12];
    idle.read_exact(&mut answer).expect("read the status line");
    assert_eq!(&answer, b"HTTP/1.1 200");
    idle.set_nonblocking(true).expect("non-blocking");
    // Two slow clients fill the cap of 3 with it; a fourth is closed at once.
    let slow: Vec<TcpStream> = (0..2).map(|_| slow_client(&cp)).collect();
    let mut extra = slow_client(&cp);
    eventually("the connection over the cap closed", CLOSE_WAIT, || {
        closed_by_server(&mut extra).then_some(())
    });
    eventually("the idle connection closed", CLOSE_WAIT, || {
        closed_by_server(&mut idle).then_some(())
    });
    // Slots free again (a request each, while the close of the one before
    // may not be seen yet): the API answers again.
    drop(slow);
    assert_eq!(closed(&cp, "over_limit"), 1.0, "{}", cp.logs());
    assert_eq!(closed(&cp, "idle_timeout"), 1.0);
    assert_eq!(closed(&cp, "header_timeout"), 0.0);
    healthz_answers(&cp);
}

/// Clients in the stalled-body test.
const STALLED_BODIES: usize = 50;

#[test]
fn a_request_body_that_stalls_is_answered_400_and_its_connection_closed() {
    let mut cp = ControlPlane::prepare_on(StoreKind::Sqlite, "127.0.0.1", 0);
    cp.add_args(&["--http-header-read-timeout", HEADER_TIMEOUT]);
    cp.restart();
    let pid = cp.pid().expect("control plane pid");
    healthz_answers(&cp);
    let baseline = open_fds(pid);
    let addr = cp.server().trim_start_matches("http://").to_owned();
    // A complete header promising 1,000 bytes of body, then one byte.
    let request = format!(
        "PUT /api/v1/meshes/stalled HTTP/1.1\r\nHost: meshlink\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/yaml\r\nContent-Length: 1000\r\n\r\nt",
        cp.token()
    );
    let mut clients: Vec<TcpStream> = (0..STALLED_BODIES)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).expect("connect to the REST API");
            s.write_all(request.as_bytes()).expect("send the header");
            s.set_nonblocking(true).expect("non-blocking");
            s
        })
        .collect();
    let mut answers: Vec<Vec<u8>> = vec![Vec::new(); STALLED_BODIES];
    let mut open: Vec<usize> = (0..STALLED_BODIES).collect();
    eventually("every stalled body answered and closed", CLOSE_WAIT, || {
        healthz_answers(&cp);
        open.retain(|&i| {
            let mut buf = [0u8; 4096];
            loop {
                match clients[i].read(&mut buf) {
                    Ok(0) => return false,
                    Ok(n) => answers[i].extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                    Err(_) => return false,
                }
            }
        });
        open.is_empty().then_some(())
    });
    for a in &answers {
        let text = String::from_utf8_lossy(a);
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
        assert!(
            text.contains("no byte of the request body arrived"),
            "{text}"
        );
    }
    assert_eq!(closed(&cp, "body_timeout"), STALLED_BODIES as f64);
    // Nothing was stored, and the control plane holds no descriptor more.
    let (code, _) = cp.api("GET", "/api/v1/meshes/stalled", None);
    assert_eq!(code, 404);
    eventually(
        "the control plane's descriptors back to the baseline",
        CLOSE_WAIT,
        || (open_fds(pid) <= baseline).then_some(()),
    );
}

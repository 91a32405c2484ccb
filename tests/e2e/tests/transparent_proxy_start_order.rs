//! Issue 37 acceptance, start-up order: every order of {rules installed,
//! sidecar started, app started}, applied to both workloads of
//! [`meshlink_e2e::transparent::Pair`] at each step, ends with web's
//! unmodified client answered by the backend app through both sidecars.
//! On the way, at every step:
//! - no call hangs: each fails or answers before the client's own 10 s
//!   timeout (a sidecar bounds each upstream connect, TLS handshake
//!   included, by the cluster's 5 s connect timeout: a call made while
//!   web is captured and backend is not yet meets backend's plain app with
//!   mTLS, which it may never answer);
//! - once the rules are in, no call reaches the backend app past its
//!   sidecar (the app sees its sidecar as the peer, never web);
//! - while web's rules are in and its sidecar is not started, a call to
//!   the backend's address gets connection refused.
//!
//! And `meshlink-proxy wait -- <app>` (the `holdApplicationUntilProxyStarts`
//! equivalent) holds a client started before its sidecar until the
//! sidecar is ready: its very first calls are answered.
//!
//! Needs root, iptables, python3, curl and getent (scripts/setup-test-deps).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;

use meshlink_e2e::bin_path;
use meshlink_e2e::proxy::Sidecar;
use meshlink_e2e::transparent::{
    APP, APP_PORT, BACKEND_ADDR, DEADLINE, PERMISSION, PYTHON, Pair, Program, WEB_ADDR, Workload,
    app_answer, dataplane, http, mesh,
};

/// A client calling each URL in argv[1:] in turn, one call at a time over
/// a new connection, for ever; prints one JSON line per call:
/// `{"url", "started" (seconds since the epoch), "status" (0: no answer),
/// "body" or "error", "secs"}`.
const CLIENT: &str = r#"
import itertools, json, sys, time, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for url in itertools.cycle(sys.argv[1:]):
    t = time.monotonic()
    out = {"url": url, "started": time.time()}
    try:
        with opener.open(url, timeout=10) as r:
            out.update(status=r.status, body=r.read().decode())
    except urllib.error.HTTPError as e:
        out.update(status=e.code, error=str(e.reason))
    except Exception as e:
        out.update(status=0, error=f"{type(e).__name__}: {e}")
    out["secs"] = time.monotonic() - t
    print(json.dumps(out), flush=True)
    time.sleep(0.05)
"#;

/// One call of [`CLIENT`].
#[derive(Debug)]
struct Call {
    url: String,
    started: f64,
    status: u16,
    body: String,
    error: String,
    secs: f64,
}

impl Call {
    /// A line of [`CLIENT`]'s output.
    fn parse(line: &str) -> Call {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("a client line {line:?}: {e}"));
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        Call {
            url: text("url"),
            started: v["started"].as_f64().unwrap_or(0.0),
            status: v["status"].as_u64().unwrap_or(0) as u16,
            body: text("body"),
            error: text("error"),
            secs: v["secs"].as_f64().unwrap_or(f64::MAX),
        }
    }
}

/// [`CLIENT`] running in web's namespace, its calls read as they come.
struct Client {
    calls: mpsc::Receiver<Call>,
    _program: Program,
}

const BY_NAME: &str = "http://backend.mesh/";

fn by_address() -> String {
    format!("http://{BACKEND_ADDR}:{APP_PORT}/")
}

impl Client {
    /// Starts [`CLIENT`] on both URLs, under `meshlink-proxy wait` for the
    /// sidecar at `wait_for` when given.
    fn start(w: &Workload, wait_for: Option<&str>) -> Client {
        let address = by_address();
        let client_args = ["-c", CLIENT, BY_NAME, &address];
        let mut program = match wait_for {
            None => Program::spawn(Some(&w.ns), PYTHON, &client_args, &[], Stdio::piped()),
            Some(admin) => {
                let proxy = bin_path("meshlink-proxy");
                let wrapper = ["wait", "--admin-addr", admin, "--", PYTHON];
                Program::spawn(
                    Some(&w.ns),
                    proxy.to_str().expect("utf-8"),
                    &wrapper,
                    &client_args,
                    Stdio::piped(),
                )
            }
        };
        let stdout = program.child().stdout.take().expect("stdout");
        let (tx, calls) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(Call::parse(&line)).is_err() {
                    return;
                }
            }
        });
        Client {
            calls,
            _program: program,
        }
    }

    /// The next call's outcome.
    fn next(&self) -> Call {
        self.calls
            .recv_timeout(DEADLINE)
            .expect("the client reports a call within the deadline")
    }

    /// The next call that started at `since` (seconds since the epoch)
    /// or later: one started earlier ran in an earlier state (only
    /// checked not to have hung).
    fn next_since(&self, since: f64) -> Call {
        loop {
            let call = self.next();
            assert_no_hang(&call, "a call before the step");
            if call.started >= since {
                return call;
            }
        }
    }
}

/// The steps of a start order.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Rules,
    Sidecar,
    App,
}

/// What runs, at one moment of a start order.
#[derive(Default)]
struct Running {
    rules: bool,
    sidecars: Vec<Sidecar>,
    apps: Option<(Program, Client)>,
}

/// Checks one call against what may happen in state `running`; true when
/// it was one that must be refused (and was).
fn check(call: &Call, running: &Running, order: &[Step]) -> bool {
    let ctx = format!(
        "order {order:?}, rules {}, sidecars {}: {call:?}",
        running.rules,
        running.sidecars.len()
    );
    assert_no_hang(call, &ctx);
    if running.rules && call.status == 200 {
        let (app, peer) = app_answer(&call.body);
        assert_eq!(app, "backend", "{ctx}");
        assert_ne!(
            peer, WEB_ADDR,
            "web reached the backend app past its sidecar: {ctx}"
        );
    }
    let must_refuse = running.rules && running.sidecars.is_empty() && call.url == by_address();
    if must_refuse {
        assert!(
            call.status == 0 && call.error.contains("Connection refused"),
            "with the rules in and no sidecar, a call is refused: {ctx}"
        );
    }
    must_refuse
}

/// A call failed or was answered before the client's own timeout.
fn assert_no_hang(call: &Call, ctx: &str) {
    assert!(
        call.secs < 10.0 && !call.error.contains("timed out"),
        "a call hung: {ctx}: {call:?}"
    );
}

/// Now, in seconds since the epoch (the client's `time.time()`).
fn epoch_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

fn permutations() -> Vec<[Step; 3]> {
    use Step::*;
    vec![
        [Rules, Sidecar, App],
        [Rules, App, Sidecar],
        [Sidecar, Rules, App],
        [Sidecar, App, Rules],
        [App, Rules, Sidecar],
        [App, Sidecar, Rules],
    ]
}

#[test]
fn every_start_order_ends_serving_without_a_hang_or_a_bypass_and_wait_holds_the_app() {
    let pair = Pair::new();
    let (web, backend) = (&pair.web, &pair.backend);
    pair.apply(&format!(
        "{}---\n{}---\n{}---\n{PERMISSION}",
        mesh(true),
        dataplane("web-1", WEB_ADDR, &[(APP_PORT, &http("web"))], "{}"),
        dataplane(
            "backend-1",
            BACKEND_ADDR,
            &[(APP_PORT, &http("backend"))],
            "{}"
        ),
    ));
    pair.vip("backend");

    let mut refused = 0;
    for order in permutations() {
        let mut running = Running::default();
        for step in order {
            match step {
                Step::Rules => {
                    web.install_rules();
                    backend.install_rules();
                    running.rules = true;
                }
                Step::Sidecar => {
                    running.sidecars.push(pair.start_sidecar(web, "web-1"));
                    running
                        .sidecars
                        .push(pair.start_sidecar(backend, "backend-1"));
                }
                Step::App => {
                    let app = Program::python(
                        Some(&backend.ns),
                        APP,
                        &[&APP_PORT.to_string(), "backend"],
                    );
                    running.apps = Some((app, Client::start(web, None)));
                }
            }
            // Two calls (one by name, one by address) in this state.
            let since = epoch_now();
            if let Some((_, client)) = &running.apps {
                for _ in 0..2 {
                    let call = client.next_since(since);
                    refused += usize::from(check(&call, &running, &order));
                }
            }
        }
        // Everything is up: the client is answered, through both sidecars.
        let client = &running.apps.as_ref().expect("the app started").1;
        let since = epoch_now();
        let deadline = std::time::Instant::now() + DEADLINE;
        let mut answered = [false, false];
        let mut last = std::collections::VecDeque::new();
        while answered != [true, true] {
            if std::time::Instant::now() >= deadline {
                let logs: Vec<String> = running.sidecars.iter().map(|s| s.logs()).collect();
                panic!(
                    "order {order:?}: never answered; the last calls: {last:#?}\nsidecar logs:\n{}",
                    logs.join("\n----\n")
                );
            }
            let call = client.next_since(since);
            if last.len() == 6 {
                last.pop_front();
            }
            last.push_back(format!("{call:?}"));
            refused += usize::from(check(&call, &running, &order));
            if call.status == 200 {
                answered[usize::from(call.url == by_address())] = true;
            }
        }
        println!("order {order:?}: served by name and by address");
        running.apps = None;
        for mut sidecar in running.sidecars.drain(..) {
            sidecar.terminate();
        }
        web.uninstall_rules();
        backend.uninstall_rules();
    }

    // Two orders start the app between the rules and the sidecar.
    assert!(
        refused >= 2,
        "the refused window was observed ({refused} calls)"
    );

    // `meshlink-proxy wait`: the client starts before its sidecar and its
    // first calls are answered.
    web.install_rules();
    backend.install_rules();
    let _app = Program::python(Some(&backend.ns), APP, &[&APP_PORT.to_string(), "backend"]);
    let mut backend_proxy = pair.start_sidecar(backend, "backend-1");
    backend_proxy.wait_ready(DEADLINE);
    let client = Client::start(web, Some(&web.admin_addr()));
    let _web_proxy = pair.start_sidecar(web, "web-1");
    for _ in 0..2 {
        let call = client.next();
        assert_eq!(
            call.status, 200,
            "held until ready, the app's first calls are answered: {call:?}"
        );
        let (app, peer) = app_answer(&call.body);
        assert_eq!(app, "backend", "{call:?}");
        assert_ne!(peer, WEB_ADDR, "{call:?}");
    }
}

//! Interop with an independent xDS client (issue 4): grpcio's own xDS client,
//! with `xds:///greeter` and a bootstrap pointing at the real control plane,
//! authenticating with the `meshlink token dataplane --cert-dir` files
//! (`channel_creds` type `tls`). It must resolve through our LDS/RDS/CDS/EDS,
//! reach two real Python gRPC servers registered as Dataplanes, spread calls
//! round-robin, and stop calling one soon after its Dataplane is deleted.
//!
//! Needs the Python venv of `tests/interop` (see its README.md); fails with
//! the command to create it when it is missing.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use meshlink_e2e::interop::{Greeter, Killed, interop_python, script};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};
use serde_json::{Value, json};

/// Calls per batch when waiting for a condition.
const WINDOW: usize = 10;
/// How long one line from a Python process may take before the test gives up
/// on it (a hang guard; each call has its own 5 s deadline in the client).
const LINE_GUARD: Duration = Duration::from_secs(30);

#[test]
fn grpcio_xds_client_round_robins_and_follows_dataplane_deletion() {
    let python = interop_python();
    let g1 = Greeter::start(&python, "greeter-1");
    let g2 = Greeter::start(&python, "greeter-2");
    let setup = Setup::new(python, g1.port, g2.port);
    let bootstrap = setup.bootstrap("default.client", true);
    let stderr = setup.tmp.path().join("client.stderr");
    let mut client = XdsClient::start(&setup.python, &bootstrap, &stderr);
    let mut report = Report {
        cp: &setup.cp,
        client_stderr: stderr,
        passed: false,
    };

    // 1. Resolution through LDS/RDS/CDS/EDS: both servers answer.
    let mut seen = BTreeMap::<String, usize>::new();
    let mut last_failure = None;
    eventually(
        "calls reaching both greeter-1 and greeter-2",
        Duration::from_secs(60),
        || {
            let batch = client.calls(WINDOW);
            if let Some(Err(e)) = batch.iter().find(|o| o.is_err())
                && last_failure.as_ref() != Some(e)
            {
                report.note(format!("calls fail while waiting: {e}"));
                last_failure = Some(e.clone());
            }
            for server in batch.into_iter().flatten() {
                *seen.entry(server).or_default() += 1;
            }
            (seen.len() == 2).then_some(())
        },
    );
    report.note(format!("both servers answered: {seen:?}"));

    // 2. Round-robin spread. grpc's round_robin picks READY endpoints in strict
    // rotation, and both are READY (each just answered), so 20 calls split
    // 10/10. The 8..=12 bound only allows for the picker being rebuilt once
    // mid-batch (a new picker starts at a random index); anything outside it
    // means the policy is not round_robin or an endpoint is missing.
    let counts = count_servers(&client.calls(20));
    report.note(format!("20 calls: {counts:?}"));
    for g in ["greeter-1", "greeter-2"] {
        let n = counts.get(g).copied().unwrap_or(0);
        assert!(
            (8..=12).contains(&n),
            "{g} got {n} of 20 calls, expected 8..=12 (round robin): {counts:?}"
        );
    }

    // 3. Deleting greeter-2's Dataplane (its server keeps running, so only xDS
    // can stop the calls): soon a whole window of calls goes to greeter-1.
    setup
        .cp
        .cli(&["delete", "dataplane", "greeter-2", "--mesh", "default"])
        .success();
    eventually(
        "a window of calls all answered by greeter-1 after deleting greeter-2",
        Duration::from_secs(15),
        || {
            let out = client.calls(WINDOW);
            report.note(format!("after the delete: {:?}", count_servers(&out)));
            out.iter()
                .all(|o| o.as_deref() == Ok("greeter-1"))
                .then_some(())
        },
    );
    // ...and it stays that way.
    let after = client.calls(20);
    assert_eq!(
        count_servers(&after).get("greeter-1"),
        Some(&20),
        "after deletion: {after:?}"
    );
    report.passed = true;
    drop(g2); // greeter-2 served until the end: only xDS steered calls away from it
}

/// A MeshService as a proxyless destination: the client's outbound
/// `backendRef {kind: MeshService, name: greeters, port: 80}` gives grpcio
/// the target `xds:///greeters:80`, and only the Dataplane the MeshService
/// selects (greeter-1, by name) answers.
#[test]
fn grpcio_xds_client_reaches_only_the_backends_a_mesh_service_selects() {
    let python = interop_python();
    let g1 = Greeter::start(&python, "greeter-1");
    let g2 = Greeter::start(&python, "greeter-2");
    let setup = Setup::new(python, g1.port, g2.port);
    let client_inbound = free_port();
    let mesh_service = format!(
        r#"
type: MeshService
name: greeters
mesh: default
spec:
  selector:
    dataplaneRef:
      name: greeter-1
  ports:
    - port: 80
      targetPort: {port1}
      appProtocol: grpc
---
type: Dataplane
name: client
mesh: default
networking:
  address: 127.0.0.1
  inbound: [{{port: {client_inbound}, tags: {{kuma.io/service: greeter-client}}}}]
  outbound:
    - port: 10002
      backendRef: {{kind: MeshService, name: greeters, port: 80}}
"#,
        port1 = g1.port,
    );
    setup
        .cp
        .cli_stdin(&["apply", "-f", "-"], Some(&mesh_service))
        .success();
    let bootstrap = setup.bootstrap("default.client", true);
    let out = Command::new(&setup.python)
        .arg(script("xds_client.py"))
        .args([
            "--target",
            "xds:///greeters:80",
            "--calls",
            "10",
            "--timeout",
            "30",
        ])
        .env("GRPC_XDS_BOOTSTRAP", bootstrap)
        .stderr(Stdio::null())
        .output()
        .expect("run xds_client.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let outcomes: Vec<_> = stdout.lines().filter_map(parse_outcome).collect();
    assert_eq!(
        count_servers(&outcomes),
        BTreeMap::from([("greeter-1".to_string(), 10)]),
        "{stdout}"
    );
    drop(g2); // served throughout: only the MeshService kept calls from it
}

/// The certificate is what authenticates grpcio: without it the ADS stream is
/// refused, and with it a `node.id` of another dataplane is refused too.
#[test]
fn grpcio_xds_client_needs_its_certificate_and_matching_node_id() {
    let setup = Setup::new(interop_python(), free_port(), free_port());
    for (what, node_id, with_cert, status) in [
        (
            "without a client certificate",
            "default.client",
            false,
            "UNAUTHENTICATED",
        ),
        (
            "with node.id of another dataplane",
            "default.greeter-1",
            true,
            "PERMISSION_DENIED",
        ),
    ] {
        let out = Command::new(&setup.python)
            .arg(script("xds_client.py"))
            .args(["--calls", "1", "--timeout", "10"])
            .env("GRPC_XDS_BOOTSTRAP", setup.bootstrap(node_id, with_cert))
            .stderr(Stdio::null())
            .output()
            .expect("run xds_client.py");
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().find_map(parse_outcome) {
            Some(Err(e)) => assert!(
                e.contains(status),
                "{what}: expected the ADS stream to end with {status}, the call failed with {e}"
            ),
            other => panic!("{what}: expected a failed call, got {other:?} from:\n{stdout}"),
        }
    }
}

/// A control plane with the greeter resources applied, and the client's
/// certificate written by `meshlink token dataplane --cert-dir`.
struct Setup {
    python: PathBuf,
    cp: ControlPlane,
    tmp: tempfile::TempDir,
}

impl Setup {
    fn new(python: PathBuf, port1: u16, port2: u16) -> Setup {
        let cp = ControlPlane::start(StoreKind::Sqlite);
        let tmp = tempfile::tempdir().expect("tempdir");
        cp.cli_stdin(&["apply", "-f", "-"], Some(&resources(port1, port2)))
            .success();
        let cert_dir = tmp.path().join("certs");
        let cert_dir = cert_dir.to_str().expect("UTF-8 temp path");
        let token = [
            "token",
            "dataplane",
            "--mesh",
            "default",
            "--name",
            "client",
        ];
        cp.cli(&[&token[..], &["--cert-dir", cert_dir]].concat())
            .success();
        Setup { python, cp, tmp }
    }

    /// Writes a gRPC xDS bootstrap (gRFC A27) with `tls` channel creds (gRFC
    /// A65), with or without the client certificate, and returns its path.
    fn bootstrap(&self, node_id: &str, with_cert: bool) -> PathBuf {
        let url = self.cp.xds_url();
        let port = url.rsplit(':').next().expect("xds url has a port");
        let file = |n: &str| {
            let p = self.tmp.path().join("certs").join(n);
            p.to_str().expect("UTF-8 path").to_string()
        };
        let mut creds = json!({"ca_certificate_file": file("ca.crt")});
        if with_cert {
            creds["certificate_file"] = file("tls.crt").into();
            creds["private_key_file"] = file("tls.key").into();
        }
        let b = json!({
            "xds_servers": [{
                "server_uri": format!("127.0.0.1:{port}"),
                "channel_creds": [{"type": "tls", "config": creds}],
                "server_features": ["xds_v3"],
            }],
            "node": {
                "id": node_id,
                "cluster": "greeter-client",
                "metadata": {"meshlink.dev/client": "grpc"},
            },
        });
        let name = format!("bootstrap-{node_id}-{with_cert}.json");
        let path = self.tmp.path().join(name);
        let text = serde_json::to_string_pretty(&b).expect("bootstrap JSON");
        std::fs::write(&path, text).expect("write bootstrap");
        path
    }
}

/// The Mesh (no mTLS: plain-text calls to the backends), two backends and the client.
fn resources(port1: u16, port2: u16) -> String {
    let client_inbound = free_port();
    format!(
        r#"
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {{name: default}}
spec: {{}}
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {{name: greeter-1, mesh: default}}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{{port: {port1}, tags: {{kuma.io/service: greeter}}}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {{name: greeter-2, mesh: default}}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{{port: {port2}, tags: {{kuma.io/service: greeter}}}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {{name: client, mesh: default}}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{{port: {client_inbound}, tags: {{kuma.io/service: greeter-client}}}}]
    outbound: [{{port: 10001, tags: {{kuma.io/service: greeter}}}}]
"#
    )
}

/// Which server answered each successful call.
fn count_servers(outcomes: &[Result<String, String>]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for o in outcomes {
        let key = o.clone().unwrap_or_else(|e| format!("failed: {e}"));
        *m.entry(key).or_default() += 1;
    }
    m
}

/// Prints what helps debug a failure: the cp log and the client's xDS trace.
struct Report<'a> {
    cp: &'a ControlPlane,
    client_stderr: PathBuf,
    passed: bool,
}

impl Report<'_> {
    fn note(&self, what: String) {
        eprintln!("interop: {what}");
    }
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        if self.passed {
            return;
        }
        eprintln!("=== meshlink-cp log (tail)\n{}", tail(&self.cp.logs(), 60));
        let trace = std::fs::read_to_string(&self.client_stderr).unwrap_or_default();
        eprintln!(
            "=== grpcio client stderr, GRPC_TRACE=xds_client,xds_resolver (tail)\n{}",
            tail(&trace, 150)
        );
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `xds_client.py --stdin`: makes as many calls as asked, one JSON line each.
struct XdsClient {
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    _child: Killed,
}

impl XdsClient {
    fn start(python: &Path, bootstrap: &Path, stderr: &Path) -> XdsClient {
        XdsClient::start_with(python, bootstrap, stderr, "{}")
    }

    /// [`XdsClient::start`], adding the JSON fields `request` to every call.
    fn start_with(python: &Path, bootstrap: &Path, stderr: &Path, request: &str) -> XdsClient {
        let mut child = Command::new(python)
            .arg(script("xds_client.py"))
            .args(["--stdin", "--request", request])
            .env("GRPC_XDS_BOOTSTRAP", bootstrap)
            .env("GRPC_TRACE", "xds_client,xds_resolver")
            .env("GRPC_VERBOSITY", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(stderr).expect("client stderr file"))
            .spawn()
            .expect("spawn xds_client.py");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        XdsClient {
            stdin,
            lines,
            _child: Killed(child),
        }
    }

    /// Makes `n` calls: `Ok(server id)` or `Err("CODE: details")` for each.
    fn calls(&mut self, n: usize) -> Vec<Result<String, String>> {
        writeln!(self.stdin, "{n}").expect("write to xds_client.py (did it exit?)");
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let line = self
                .lines
                .recv_timeout(LINE_GUARD)
                .expect("xds_client.py exited or hung (its stderr is printed below)");
            out.extend(parse_outcome(&line));
        }
        out
    }
}

/// One call's outcome from an `xds_client.py` line: `Ok(server id)` or
/// `Err("CODE: details")`; `None` for event lines.
fn parse_outcome(line: &str) -> Option<Result<String, String>> {
    let v: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("xds_client.py printed a non-JSON line ({e}): {line}"));
    v.get("seq")?;
    Some(match v["ok"].as_bool() {
        Some(true) => Ok(v["server"].as_str().unwrap_or("?").to_string()),
        _ => Err(format!(
            "{}: {}",
            v["code"].as_str().unwrap_or("?"),
            v["details"].as_str().unwrap_or("?")
        )),
    })
}

/// The same routes a sidecar gets reach grpcio's own xDS client (gRFC A28,
/// A31, A44): a MeshHTTPRoute moves every call to another service, a
/// MeshRetry's `numRetries` decides whether a backend failing 2 of 3
/// calls with UNAVAILABLE is retried into success, and a MeshTimeout's
/// `requestTimeout` ends a slow call with DEADLINE_EXCEEDED.
#[test]
fn grpcio_xds_client_follows_a_route_a_retry_and_a_timeout() {
    let python = interop_python();
    let g1 = Greeter::start(&python, "greeter-1");
    let g2 = Greeter::start(&python, "greeter-2");
    let g3 = Greeter::start(&python, "greeter-3");
    let setup = Setup::new(python, g1.port, g2.port);
    let v2 = format!(
        "type: Dataplane\nname: greeter-v2-1\nmesh: default\nnetworking:\n  address: 127.0.0.1\n  inbound: [{{port: {}, tags: {{kuma.io/service: greeter-v2, kuma.io/protocol: grpc}}}}]\n",
        g3.port
    );
    setup
        .cp
        .cli_stdin(&["apply", "-f", "-"], Some(&v2))
        .success();
    let bootstrap = setup.bootstrap("default.client", true);
    let calls = |n: &str, request: &str| -> Vec<Result<String, String>> {
        let out = Command::new(&setup.python)
            .arg(script("xds_client.py"))
            .args(["--calls", n, "--timeout", "30", "--request", request])
            .env("GRPC_XDS_BOOTSTRAP", &bootstrap)
            .stderr(Stdio::null())
            .output()
            .expect("run xds_client.py");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(parse_outcome)
            .collect()
    };
    let apply = |yaml: &str| {
        setup
            .cp
            .cli_stdin(&["apply", "-f", "-"], Some(yaml))
            .success()
    };

    // A route sends every call to greeter-v2.
    apply(
        "type: MeshHTTPRoute\nname: to-v2\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: greeter}\n      rules:\n        - matches: [{path: {type: PathPrefix, value: /}}]\n          default:\n            backendRefs: [{kind: MeshService, name: greeter-v2, weight: 1}]\n",
    );
    let seen = eventually("calls to follow the route", LINE_GUARD, || {
        let seen = count_servers(&calls("10", "{}"));
        (seen == BTreeMap::from([("greeter-3".to_string(), 10)])).then_some(seen)
    });
    assert_eq!(seen.values().sum::<usize>(), 10);

    // No retries: a backend failing 2 of every 3 calls fails calls.
    apply(
        "type: MeshRetry\nname: greeter-retry\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: greeter}\n      default:\n        grpc: {numRetries: 0}\n",
    );
    eventually("calls to fail without retries", LINE_GUARD, || {
        let outcomes = calls("3", r#"{"fail": 2}"#);
        outcomes.iter().any(Result::is_err).then_some(())
    });
    // Four retries on UNAVAILABLE: every call succeeds.
    apply(
        "type: MeshRetry\nname: greeter-retry\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: greeter}\n      default:\n        grpc:\n          numRetries: 4\n          retryOn: [Unavailable]\n          backOff: {baseInterval: 10ms, maxInterval: 50ms}\n",
    );
    eventually("calls to be retried into success", LINE_GUARD, || {
        let outcomes = calls("12", r#"{"fail": 2}"#);
        (outcomes.len() == 12 && outcomes.iter().all(Result::is_ok)).then_some(())
    });

    // A 1 s request timeout ends a 3 s call with DEADLINE_EXCEEDED.
    apply(
        "type: MeshTimeout\nname: greeter-timeout\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: greeter}\n      default:\n        http: {requestTimeout: 1s}\n",
    );
    eventually(
        "a slow call to hit the route's deadline",
        LINE_GUARD,
        || {
            let outcomes = calls("1", r#"{"delay_ms": 3000}"#);
            outcomes
                .iter()
                .any(|o| {
                    o.as_ref()
                        .is_err_and(|e| e.starts_with("DEADLINE_EXCEEDED"))
                })
                .then_some(())
        },
    );
    drop((g1, g2));
}

/// MeshLoadBalancingStrategy reaches grpcio's own xDS client (gRFC A42):
/// before the policy, round robin spreads each session's calls over both
/// greeters; with Kuma's `RingHash` on the `x-session-id` header, every
/// session's calls reach one greeter, in a fresh channel each time. Seven
/// sessions over 98 calls, so round robin's alternation cannot look sticky
/// (a session's calls alternate between odd and even call numbers).
#[test]
fn grpcio_xds_client_hashes_sessions_to_one_backend_with_ring_hash() {
    let python = interop_python();
    let g1 = Greeter::start(&python, "greeter-1");
    let g2 = Greeter::start(&python, "greeter-2");
    let setup = Setup::new(python, g1.port, g2.port);
    let bootstrap = setup.bootstrap("default.client", true);
    // Per session, the servers that answered; errors are kept as such.
    let sessions = || -> BTreeMap<String, std::collections::BTreeSet<String>> {
        let out = Command::new(&setup.python)
            .arg(script("xds_client.py"))
            .args(["--calls", "98", "--sessions", "7"])
            .env("GRPC_XDS_BOOTSTRAP", &bootstrap)
            .stderr(Stdio::null())
            .output()
            .expect("run xds_client.py");
        let mut seen: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: Value = serde_json::from_str(line).expect("a JSON line");
            let Some(session) = v["session"].as_str() else {
                continue;
            };
            let answer = match v["server"].as_str() {
                Some(s) if v["ok"] == true => s.to_owned(),
                _ => format!("error {}", v["code"]),
            };
            seen.entry(session.to_owned()).or_default().insert(answer);
        }
        seen
    };
    let sticky = |seen: &BTreeMap<String, std::collections::BTreeSet<String>>| {
        seen.len() == 7
            && seen
                .values()
                .all(|s| s.len() == 1 && !s.iter().any(|a| a.starts_with("error")))
    };

    let before = eventually("round robin over both greeters", LINE_GUARD, || {
        let seen = sessions();
        let both = seen.values().all(|s| s.len() == 2);
        both.then_some(seen)
    });
    assert!(!sticky(&before), "round robin looked sticky: {before:?}");

    setup
        .cp
        .cli_stdin(
            &["apply", "-f", "-"],
            Some(
                "type: MeshLoadBalancingStrategy\nname: ring-hash\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: greeter}\n      default:\n        loadBalancer:\n          type: RingHash\n          ringHash:\n            hashFunction: XXHash\n            minRingSize: 1024\n            maxRingSize: 8192\n            hashPolicies:\n              - type: Header\n                header: {name: x-session-id}\n",
            ),
        )
        .success();
    let after = eventually("every session on one greeter", LINE_GUARD, || {
        let seen = sessions();
        sticky(&seen).then_some(seen)
    });
    // And again, from another fresh channel: the same session, the same greeter.
    let again = sessions();
    assert_eq!(
        again, after,
        "a second channel hashed the sessions differently"
    );
    drop((g1, g2));
}

/// MeshCircuitBreaker's outlier detection reaches grpcio's own xDS client
/// (gRFC A50, which reads the success-rate and failure-percentage
/// detectors): while greeter-2 answers every call UNAVAILABLE (and
/// MeshRetry turns retries off), round robin keeps sending it half the
/// calls; with a `failurePercentage` detector, grpcio ejects it and a
/// whole window of calls reaches greeter-1.
#[test]
fn grpcio_xds_client_ejects_a_failing_backend_with_outlier_detection() {
    let python = interop_python();
    let g1 = Greeter::start(&python, "greeter-1");
    let g2 = Greeter::start(&python, "greeter-2");
    let setup = Setup::new(python, g1.port, g2.port);
    let bootstrap = setup.bootstrap("default.client", true);
    // No retries, so that a call greeter-2 fails is not retried on
    // greeter-1 (the routes retry UNAVAILABLE by default, as Kuma's do).
    setup
        .cp
        .cli_stdin(
            &["apply", "-f", "-"],
            Some(
                "type: MeshRetry\nname: no-retry\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: greeter}\n      default:\n        grpc: {numRetries: 0}\n",
            ),
        )
        .success();
    // One channel: the detector counts calls per interval in that channel.
    let stderr = setup.tmp.path().join("client.stderr");
    let mut client = XdsClient::start_with(
        &setup.python,
        &bootstrap,
        &stderr,
        r#"{"fail_servers": ["greeter-2"]}"#,
    );
    // Without a policy, greeter-2's failures reach the caller: round robin
    // gives it every other call.
    let before = eventually("calls to reach both greeters", LINE_GUARD, || {
        let out = client.calls(20);
        let failed = out.iter().filter(|o| o.is_err()).count();
        (failed >= 5).then_some(out)
    });
    assert!(
        before.iter().any(|o| o.as_deref() == Ok("greeter-1")),
        "greeter-1 answered none of {before:?}"
    );
    setup
        .cp
        .cli_stdin(
            &["apply", "-f", "-"],
            Some(
                "type: MeshCircuitBreaker\nname: eject\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: greeter}\n      default:\n        outlierDetection:\n          interval: 1s\n          baseEjectionTime: 30s\n          maxEjectionPercent: 50\n          detectors:\n            failurePercentage:\n              requestVolume: 5\n              minimumHosts: 2\n              threshold: 50\n",
            ),
        )
        .success();
    eventually(
        "a window of 20 calls all answered by greeter-1",
        LINE_GUARD,
        || {
            let out = client.calls(20);
            out.iter()
                .all(|o| o.as_deref() == Ok("greeter-1"))
                .then_some(())
        },
    );
    drop((g1, g2));
}

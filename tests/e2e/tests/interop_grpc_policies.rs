//! Policies reaching grpcio's own xDS client (issues 35 and 36): the
//! routes, retries and timeouts a sidecar gets (gRFC A28, A31, A44),
//! MeshLoadBalancingStrategy's ring hash (A42), MeshCircuitBreaker's
//! outlier detection (A50) and MeshFaultInjection's faults (A33), each
//! observed in the calls of a real grpcio client to two Python greeters.
//!
//! Needs the Python venv of `tests/interop` (see its README.md).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use meshlink_e2e::eventually;
use meshlink_e2e::grpc_xds::{LINE_GUARD, Setup, XdsClient, count_servers, parse_outcome};
use meshlink_e2e::interop::{Greeter, interop_python, script};
use serde_json::Value;

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

/// MeshFaultInjection reaches grpcio's own xDS client (gRFC A33): a
/// policy selecting the client, with Kuma's `to: [{targetRef: {kind:
/// Mesh}}]`, becomes fault filters in its channel's connection manager,
/// and grpcio enforces them itself (there is no sidecar on the path).
/// An abort of 503 on every call fails every call UNAVAILABLE (the gRPC
/// code for HTTP 503); chained aborts of 503 at 50 % then 500 at 50 %
/// fail half the calls UNAVAILABLE and a quarter UNKNOWN (each entry's
/// percentage applies to what the one before let through); a 1 s delay
/// holds every call at least 1 s; deleting the policy ends the faults.
#[test]
fn grpcio_xds_client_injects_mesh_fault_injection_faults() {
    let python = interop_python();
    let g1 = Greeter::start(&python, "greeter-1");
    let g2 = Greeter::start(&python, "greeter-2");
    let setup = Setup::new(python, g1.port, g2.port);
    let bootstrap = setup.bootstrap("default.client", true);
    let apply = |yaml: &str| {
        setup
            .cp
            .cli_stdin(&["apply", "-f", "-"], Some(yaml))
            .success()
    };
    let faults = |http: &str| {
        format!(
            "type: MeshFaultInjection\nname: client-faults\nmesh: default\nspec:\n  targetRef:\n    kind: MeshSubset\n    tags: {{kuma.io/service: greeter-client}}\n  to:\n    - targetRef: {{kind: Mesh}}\n      default:\n        http:\n{http}"
        )
    };
    // No retries: an aborted call is the caller's outcome, as the policy says.
    apply(
        "type: MeshRetry\nname: no-retry\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: greeter}\n      default:\n        grpc: {numRetries: 0}\n",
    );
    let stderr = setup.tmp.path().join("client.stderr");
    let mut client = XdsClient::start(&setup.python, &bootstrap, &stderr);
    let codes = |out: &[Result<String, String>]| -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for o in out {
            let code = match o {
                Ok(_) => "OK".to_owned(),
                Err(e) => e.split(':').next().unwrap_or("?").to_owned(),
            };
            *m.entry(code).or_default() += 1;
        }
        m
    };
    eventually("calls to reach the greeters", LINE_GUARD, || {
        let out = client.calls(10);
        out.iter().all(Result::is_ok).then_some(())
    });

    // Every call aborted with 503: UNAVAILABLE, and no greeter sees it.
    apply(&faults(
        "          - abort: {httpStatus: 503, percentage: 100}\n",
    ));
    let aborted = eventually("every call to be aborted", LINE_GUARD, || {
        let out = client.calls(10);
        (codes(&out) == BTreeMap::from([("UNAVAILABLE".to_owned(), 10)])).then_some(out)
    });
    eprintln!("an aborted call: {:?}", aborted[0]);

    // Chained: 50 % of calls aborted with 503, then 50 % of the rest with
    // 500 (UNKNOWN in gRPC). Once an UNKNOWN shows the new filters are in
    // place, 1,000 calls: expected 500 / 250 / 250, each within 3.8
    // standard deviations (60 for the half, 52 for the quarters).
    apply(&faults(
        "          - abort: {httpStatus: 503, percentage: 50}\n          - abort: {httpStatus: 500, percentage: 50}\n",
    ));
    eventually("the chained aborts to apply", LINE_GUARD, || {
        let out = client.calls(20);
        codes(&out).contains_key("UNKNOWN").then_some(())
    });
    let counts = codes(&client.calls(1000));
    eprintln!("1,000 calls with chained aborts: {counts:?}");
    let n = |code: &str| counts.get(code).copied().unwrap_or(0);
    assert_eq!(
        n("OK") + n("UNAVAILABLE") + n("UNKNOWN"),
        1000,
        "{counts:?}"
    );
    assert!((440..=560).contains(&n("UNAVAILABLE")), "{counts:?}");
    assert!((198..=302).contains(&n("UNKNOWN")), "{counts:?}");
    assert!((198..=302).contains(&n("OK")), "{counts:?}");

    // A 1 s delay on every call; a responseBandwidth entry (which gRPC
    // cannot enforce) is left out rather than refusing the listener.
    apply(&faults(
        "          - responseBandwidth: {limit: 1Mbps, percentage: 100}\n          - delay: {value: 1s, percentage: 100}\n",
    ));
    let timed = |client: &mut XdsClient| {
        let start = Instant::now();
        let out = client.calls(1);
        (out, start.elapsed())
    };
    eventually("calls to be delayed", LINE_GUARD, || {
        let (out, took) = timed(&mut client);
        (out[0].is_ok() && took >= Duration::from_secs(1)).then_some(())
    });
    for _ in 0..3 {
        let (out, took) = timed(&mut client);
        assert!(out[0].is_ok(), "a delayed call failed: {out:?}");
        assert!(took >= Duration::from_secs(1), "a call took only {took:?}");
    }

    // Without the policy, calls go through again, undelayed: a window of
    // 10 calls in under the 10 s the delay alone would take.
    setup
        .cp
        .cli(&[
            "delete",
            "meshfaultinjection",
            "client-faults",
            "--mesh",
            "default",
        ])
        .success();
    eventually("faults to end", LINE_GUARD, || {
        let start = Instant::now();
        let out = client.calls(10);
        (out.iter().all(Result::is_ok) && start.elapsed() < Duration::from_secs(10)).then_some(())
    });
    drop((g1, g2));
}

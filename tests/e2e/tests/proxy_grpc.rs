//! gRPC through the sidecar pair with real grpcio on both ends: a grpcio
//! client (`tests/interop/sidecar_client.py`) calls the interop Greeter
//! through web's outbound over one channel; `backend` (two Dataplanes,
//! `kuma.io/protocol: grpc`, each with its own grpcio server) answers.
//! Unary calls are balanced per request across both backends, a
//! server-streaming call of 10,000 messages arrives whole and in order,
//! and a MeshTimeout makes a slow call end in `DEADLINE_EXCEEDED`.

use std::process::Command;
use std::time::Duration;

use meshlink_e2e::interop::{Greeter, interop_python, script};
use meshlink_e2e::proxy::Sidecar;
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};
use serde_json::Value;

const READY: Duration = Duration::from_secs(30);

fn client(python: &std::path::Path, port: u16, args: &[&str]) -> Value {
    let out = Command::new(python)
        .arg(script("sidecar_client.py"))
        .arg("--target")
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .output()
        .expect("run sidecar_client.py");
    assert!(
        out.status.success(),
        "sidecar_client.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

#[test]
fn grpcio_unary_and_streaming_calls_cross_the_pair_balanced_per_request_and_time_out() {
    let python = interop_python();
    let g1 = Greeter::start(&python, "greeter-1");
    let g2 = Greeter::start(&python, "greeter-2");
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let (web_in, web_app, web_out) = (free_port(), free_port(), free_port());
    let (b1_in, b2_in) = (free_port(), free_port());
    let dp = |name: &str, inbound: u16, app: u16, service: &str, outbound: Option<u16>| {
        let out = outbound.map_or(String::new(), |p| {
            format!("\n    outbound: [{{port: {p}, tags: {{kuma.io/service: backend}}}}]")
        });
        format!(
            "---\napiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {{name: {name}, mesh: default}}\nspec:\n  networking:\n    address: 127.0.0.1\n    inbound: [{{port: {inbound}, servicePort: {app}, tags: {{kuma.io/service: {service}, kuma.io/protocol: grpc}}}}]{out}\n"
        )
    };
    let yaml = format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {{name: default}}\nspec:\n  mtls:\n    enabledBackend: ca-1\n    backends: [{{name: ca-1, type: builtin}}]\n{}{}{}---\napiVersion: meshlink.dev/v1alpha1\nkind: MeshTrafficPermission\nmetadata: {{name: web-to-backend, mesh: default}}\nspec:\n  targetRef: {{kind: MeshService, name: backend}}\n  from: [{{targetRef: {{kind: MeshService, name: web}}, default: {{action: Allow}}}}]\n",
        dp("web-1", web_in, web_app, "web", Some(web_out)),
        dp("backend-1", b1_in, g1.port, "backend", None),
        dp("backend-2", b2_in, g2.port, "backend", None),
    );
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let tokens = tempfile::tempdir().expect("tempdir");
    let mut sidecars: Vec<Sidecar> = ["web-1", "backend-1", "backend-2"]
        .iter()
        .map(|n| Sidecar::start(&cp, tokens.path(), n))
        .collect();
    for s in &mut sidecars {
        s.wait_ready(READY);
    }

    // Both backends' endpoints reach web (EDS), then calls spread.
    let seen = eventually("calls to reach both backends", READY, || {
        let seen = client(&python, web_out, &["--calls", "200", "--stream", "10000"]);
        (seen["unary"].as_object().is_some_and(|m| m.len() == 2)).then_some(seen)
    });
    assert_eq!(seen["unary_errors"], serde_json::json!([]), "{seen}");
    let counts: Vec<u64> = seen["unary"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 200);
    println!("200 unary calls over one channel: {counts:?}");
    assert!(
        counts.iter().all(|c| *c >= 40),
        "balanced per request: {seen}"
    );
    assert_eq!(seen["streamed"], 10000, "{seen}");
    assert_eq!(seen["stream_servers"].as_array().map(Vec::len), Some(1));

    // A 1 s request timeout ends a 3 s call with DEADLINE_EXCEEDED.
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(
            "type: MeshTimeout\nname: backend-timeout\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: backend}\n      default:\n        http: {requestTimeout: 1s}\n",
        ),
    )
    .success();
    eventually("the timeout to apply", READY, || {
        let seen = client(&python, web_out, &["--calls", "0", "--slow-ms", "3000"]);
        (seen["slow"] == "DEADLINE_EXCEEDED").then_some(())
    });
    assert!(sidecars[0].metric("grpc_status=\"4\"") >= 1.0);
}

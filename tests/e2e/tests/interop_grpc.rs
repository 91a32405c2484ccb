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
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use meshlink_e2e::grpc_xds::{Setup, XdsClient, count_servers, parse_outcome};
use meshlink_e2e::interop::{Greeter, interop_python, script};
use meshlink_e2e::{ControlPlane, eventually, free_port};

/// Calls per batch when waiting for a condition.
const WINDOW: usize = 10;

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

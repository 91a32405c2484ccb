//! Drives grpcio's own xDS client against a real control plane: a mesh of
//! two greeter Dataplanes and a proxyless client (its certificate written
//! by `meshlink token dataplane --cert-dir`), the client's gRPC xDS
//! bootstrap, and `xds_client.py` as a long-lived caller whose outcomes
//! are read line by line. Shared by the grpcio interop tests.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::interop::{Killed, script};
use crate::{ControlPlane, StoreKind, free_port};

/// How long one line from a Python process may take before a test gives up
/// on it (a hang guard; each call has its own 5 s deadline in the client).
pub const LINE_GUARD: Duration = Duration::from_secs(30);

/// A control plane with the greeter resources applied, and the client's
/// certificate written by `meshlink token dataplane --cert-dir`.
pub struct Setup {
    /// The interop venv's Python.
    pub python: PathBuf,
    /// The control plane.
    pub cp: ControlPlane,
    /// Holds the client's certificate and bootstrap files.
    pub tmp: tempfile::TempDir,
}

impl Setup {
    /// Starts a control plane (SQLite) with greeters on `port1` and
    /// `port2` and the client's certificate.
    pub fn new(python: PathBuf, port1: u16, port2: u16) -> Setup {
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
    pub fn bootstrap(&self, node_id: &str, with_cert: bool) -> PathBuf {
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
pub fn count_servers(outcomes: &[Result<String, String>]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for o in outcomes {
        let key = o.clone().unwrap_or_else(|e| format!("failed: {e}"));
        *m.entry(key).or_default() += 1;
    }
    m
}

/// `xds_client.py --stdin`: makes as many calls as asked, one JSON line each.
pub struct XdsClient {
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    _child: Killed,
}

impl XdsClient {
    /// Starts `xds_client.py --stdin` with `bootstrap`, its stderr to `stderr`.
    pub fn start(python: &Path, bootstrap: &Path, stderr: &Path) -> XdsClient {
        XdsClient::start_with(python, bootstrap, stderr, "{}")
    }

    /// [`XdsClient::start`], adding the JSON fields `request` to every call.
    pub fn start_with(python: &Path, bootstrap: &Path, stderr: &Path, request: &str) -> XdsClient {
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
    pub fn calls(&mut self, n: usize) -> Vec<Result<String, String>> {
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
pub fn parse_outcome(line: &str) -> Option<Result<String, String>> {
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

//! Real `meshlink-proxy run` sidecars for end-to-end tests, and the
//! two-sidecar mesh they serve (`fixtures/proxy-pair.yaml`, filled in with
//! free ports so tests can run in parallel).
//!
//! Ports: a sidecar's admin endpoint binds port 0 and reports its address
//! through `--admin-addr-file`. The inbound and outbound listener ports
//! cannot be 0: the Dataplane names them before the proxy binds them, so
//! [`PairPorts`] takes them from [`crate::free_port`]. Apps started in
//! this process bind port 0 first and hand their ports to
//! [`PairPorts::with_apps`].
//!
//! A [`Sidecar`] is a child process (killed on drop) logging to a temp file;
//! its admin endpoint is read with the plain HTTP client of [`crate::app`].
//! Every wait polls with a deadline and panics with the proxy's logs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::ControlPlane;
use crate::app::http_get_at;

/// The mesh of the proxy tests.
pub const MESH: &str = "default";

// === impl PairPorts ===

/// The ports of the two-sidecar mesh: web-1 (service `web`) calls backend
/// through `web_outbound`; backend-1 (service `backend`) calls web through
/// `backend_outbound`. `*_inbound` are the sidecars' mTLS listeners and
/// `*_app` the apps' ports behind them.
#[derive(Debug, Clone, Copy)]
pub struct PairPorts {
    /// web-1's inbound (mTLS) listener.
    pub web_inbound: u16,
    /// web's app.
    pub web_app: u16,
    /// web-1's outbound listener for `backend`.
    pub web_outbound: u16,
    /// backend-1's inbound (mTLS) listener.
    pub backend_inbound: u16,
    /// backend's app.
    pub backend_app: u16,
    /// backend-1's outbound listener for `web`.
    pub backend_outbound: u16,
}

impl PairPorts {
    /// Listener ports from [`crate::free_port`] around apps already
    /// listening on `web_app` and `backend_app` (e.g. [`crate::app::HttpApp`]
    /// on port 0).
    pub fn with_apps(web_app: u16, backend_app: u16) -> PairPorts {
        PairPorts {
            web_app,
            backend_app,
            ..PairPorts::free()
        }
    }

    /// Six currently free loopback ports (for apps that are started later
    /// or as child processes, which must be told their port).
    pub fn free() -> PairPorts {
        PairPorts {
            web_inbound: crate::free_port(),
            web_app: crate::free_port(),
            web_outbound: crate::free_port(),
            backend_inbound: crate::free_port(),
            backend_app: crate::free_port(),
            backend_outbound: crate::free_port(),
        }
    }
}

/// [`pair_yaml`] with `kuma.io/protocol: protocol` on the inbounds of
/// `services` (`web`, `backend`): HTTP services, routed per request.
pub fn pair_yaml_speaking(
    ports: &PairPorts,
    cert_expiration: &str,
    protocol: &str,
    services: &[&str],
) -> String {
    services
        .iter()
        .fold(pair_yaml(ports, cert_expiration), |yaml, service| {
            yaml.replace(
                &format!("tags: {{kuma.io/service: {service}}}}}]"),
                &format!("tags: {{kuma.io/service: {service}, kuma.io/protocol: {protocol}}}}}]"),
            )
        })
}

/// `fixtures/proxy-pair.yaml` with `ports` and the workload certificate
/// lifetime `cert_expiration` (e.g. `20s`, `1h`) filled in.
pub fn pair_yaml(ports: &PairPorts, cert_expiration: &str) -> String {
    let template = std::fs::read_to_string(crate::fixture("proxy-pair.yaml"))
        .expect("read fixtures/proxy-pair.yaml");
    let yaml = [
        ("CERT_EXPIRATION", cert_expiration.to_owned()),
        ("WEB_INBOUND", ports.web_inbound.to_string()),
        ("WEB_APP", ports.web_app.to_string()),
        ("WEB_OUTBOUND", ports.web_outbound.to_string()),
        ("BACKEND_INBOUND", ports.backend_inbound.to_string()),
        ("BACKEND_APP", ports.backend_app.to_string()),
        ("BACKEND_OUTBOUND", ports.backend_outbound.to_string()),
    ]
    .iter()
    .fold(template, |t, (k, v)| t.replace(&format!("${{{k}}}"), v));
    assert!(!yaml.contains("${"), "unfilled placeholder in:\n{yaml}");
    yaml
}

/// Applies [`pair_yaml`] to `cp`.
pub fn apply_pair(cp: &ControlPlane, ports: &PairPorts, cert_expiration: &str) {
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(&pair_yaml(ports, cert_expiration)),
    )
    .success();
}

/// Applies [`pair_yaml`] without its two permissions (`web-to-backend`,
/// `backend-to-web`), for tests that install their own policies.
pub fn apply_pair_without_permissions(cp: &ControlPlane, ports: &PairPorts) {
    apply_pair(cp, ports, "1h");
    for mtp in ["web-to-backend", "backend-to-web"] {
        cp.cli(&["delete", "mtp", mtp, "-m", MESH]).success();
    }
}

/// The pair's backend-1 Dataplane as a Kuma universal document, with
/// `top` (top-level lines, e.g. `labels:`) and `inbound` (extra fields of
/// its one inbound, each line indented six spaces) spliced in.
pub fn kuma_backend_1(ports: &PairPorts, top: &str, inbound: &str) -> String {
    format!(
        r#"type: Dataplane
name: backend-1
mesh: {MESH}
{top}networking:
  address: 127.0.0.1
  inbound:
    - port: {backend_inbound}
{inbound}      servicePort: {backend_app}
      tags:
        kuma.io/service: backend
  outbound:
    - port: {backend_outbound}
      tags:
        kuma.io/service: web
"#,
        backend_inbound = ports.backend_inbound,
        backend_app = ports.backend_app,
        backend_outbound = ports.backend_outbound,
    )
}

/// `meshlink get dataplane NAME -m MESH -o yaml`.
pub fn dataplane_yaml(cp: &ControlPlane, name: &str) -> String {
    cp.cli(&["get", "dataplane", name, "-m", MESH, "-o", "yaml"])
        .success()
        .stdout
}

/// Issues a proxy token for `MESH/name` (valid 24 h) and writes it to `path`.
pub fn write_token(cp: &ControlPlane, path: &Path, name: &str) {
    let (token, _) = cp.dataplane_token(&["--mesh", MESH, "--name", name, "--valid-for", "24h"]);
    std::fs::write(path, token).expect("write token file");
}

/// Starts the pair's two sidecars, web-1 and backend-1, on `cp` (tokens
/// written into `dir`) and waits until both are ready.
pub fn start_pair_sidecars(cp: &ControlPlane, dir: &Path, ready: Duration) -> (Sidecar, Sidecar) {
    let mut web = Sidecar::start(cp, dir, "web-1");
    let mut backend = Sidecar::start(cp, dir, "backend-1");
    web.wait_ready(ready);
    backend.wait_ready(ready);
    (web, backend)
}

// === impl SidecarOptions ===

/// The command line of one sidecar.
#[derive(Debug, Clone)]
pub struct SidecarOptions {
    /// `--cp`.
    pub cp_url: String,
    /// `--cp-ca`.
    pub cp_ca: PathBuf,
    /// `--token-file`.
    pub token_file: PathBuf,
    /// `--name` (the mesh is [`MESH`]).
    pub name: String,
    /// The port of `--admin-addr 127.0.0.1:PORT` (0, the default: any free
    /// port, read back from `--admin-addr-file`).
    pub admin_port: u16,
    /// `--drain-timeout`.
    pub drain_timeout: String,
}

impl SidecarOptions {
    /// Options for Dataplane `name` of `cp` (`--cp https://<cp host>:XDS`,
    /// `--cp-ca <data-dir>/cp-tls/ca.pem`), admin on port 0 and a 30 s
    /// drain. Nothing is written: the token file may not exist yet.
    pub fn new(cp: &ControlPlane, token_file: &Path, name: &str) -> SidecarOptions {
        SidecarOptions {
            cp_url: format!("https://{}:{}", cp.host(), cp.xds_port()),
            cp_ca: cp.data_dir().join("cp-tls").join("ca.pem"),
            token_file: token_file.to_owned(),
            name: name.to_owned(),
            admin_port: 0,
            drain_timeout: "30s".to_owned(),
        }
    }

    /// The same with `--drain-timeout drain`.
    pub fn drain_timeout(mut self, drain: &str) -> SidecarOptions {
        self.drain_timeout = drain.to_owned();
        self
    }
}

// === impl Sidecar ===

/// A running `meshlink-proxy run` process. Killed on drop.
pub struct Sidecar {
    child: Option<Child>,
    status: Option<ExitStatus>,
    name: String,
    admin_addr: std::sync::OnceLock<std::net::SocketAddr>,
    admin_addr_file: PathBuf,
    log: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Sidecar {
    /// Writes a fresh token for `name` into `dir` (the cp must be running)
    /// and starts the sidecar with default options.
    pub fn start(cp: &ControlPlane, dir: &Path, name: &str) -> Sidecar {
        let token = dir.join(format!("{name}.token"));
        write_token(cp, &token, name);
        Sidecar::spawn(&SidecarOptions::new(cp, &token, name))
    }

    /// Starts the process without waiting for anything.
    pub fn spawn(opts: &SidecarOptions) -> Sidecar {
        let mut args: Vec<std::ffi::OsString> = vec![
            "--cp".into(),
            opts.cp_url.clone().into(),
            "--cp-ca".into(),
            opts.cp_ca.clone().into(),
            "--token-file".into(),
            opts.token_file.clone().into(),
            "--drain-timeout".into(),
            opts.drain_timeout.clone().into(),
        ];
        for a in ["--mesh", MESH, "--name", &opts.name] {
            args.push(a.into());
        }
        Sidecar::spawn_args(&opts.name, opts.admin_port, &args)
    }

    /// Starts `meshlink-proxy run ARGS --admin-addr 127.0.0.1:ADMIN_PORT`
    /// (with `--admin-addr-file`), logging to a file, without waiting;
    /// `name` names it in logs and panics (a Dataplane or a site).
    pub fn spawn_args(name: &str, admin_port: u16, args: &[std::ffi::OsString]) -> Sidecar {
        Sidecar::spawn_in(None, name, admin_port, args)
    }

    /// [`Sidecar::spawn_args`] in network namespace `netns` (its admin
    /// endpoint then listens on `admin_host`, an address the test reaches).
    pub fn spawn_in(
        netns: Option<(&str, &str)>,
        name: &str,
        admin_port: u16,
        args: &[std::ffi::OsString],
    ) -> Sidecar {
        Sidecar::spawn_as(netns, None, name, admin_port, args)
    }

    /// [`Sidecar::spawn_in`] as user and group `uid` when given
    /// (`setpriv`; a transparent proxy's rules exclude the sidecar's own
    /// traffic by its uid). Its files must be readable by that user.
    pub fn spawn_as(
        netns: Option<(&str, &str)>,
        uid: Option<u32>,
        name: &str,
        admin_port: u16,
        args: &[std::ffi::OsString],
    ) -> Sidecar {
        let admin_host = netns.map_or("127.0.0.1", |(_, h)| h);
        let tmp = tempfile::tempdir().expect("tempdir");
        if uid.is_some() {
            // The proxy writes its admin address file here.
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777))
                .expect("open the temp dir to the proxy's user");
        }
        let log = tmp.path().join(format!("{name}.log"));
        let admin_addr_file = tmp.path().join("admin-addr.json");
        let out = std::fs::File::create(&log).expect("create proxy log");
        let err = out.try_clone().expect("clone log handle");
        let rust_log = std::env::var("MESHLINK_E2E_PROXY_LOG").unwrap_or_else(|_| "info".into());
        let program = crate::bin_path("meshlink-proxy");
        let mut command = match uid {
            Some(uid) => {
                let mut c = crate::netns::command(netns.map(|(n, _)| n), Path::new("setpriv"));
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={uid}"))
                    .arg("--clear-groups")
                    .arg(&program);
                c
            }
            None => crate::netns::command(netns.map(|(n, _)| n), &program),
        };
        let child = command
            .arg("run")
            .args(args)
            .arg("--admin-addr")
            .arg(format!("{admin_host}:{admin_port}"))
            .arg("--admin-addr-file")
            .arg(&admin_addr_file)
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn meshlink-proxy");
        Sidecar {
            child: Some(child),
            status: None,
            name: name.to_owned(),
            admin_addr: std::sync::OnceLock::new(),
            admin_addr_file,
            log,
            _tmp: tmp,
        }
    }

    /// The Dataplane name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Everything the process logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The admin endpoint's port, from `--admin-addr-file` (waits for the
    /// proxy to write it; it does so as soon as the endpoint listens).
    pub fn admin_port(&self) -> u16 {
        self.admin_addr().port()
    }

    /// The admin endpoint's address, from `--admin-addr-file`.
    pub fn admin_addr(&self) -> std::net::SocketAddr {
        *self.admin_addr.get_or_init(|| {
            let addr: Value = crate::eventually(
                &format!("{}'s --admin-addr-file", self.name),
                Duration::from_secs(30),
                || {
                    let text = std::fs::read_to_string(&self.admin_addr_file).ok()?;
                    Some(serde_json::from_str(&text).expect("--admin-addr-file is JSON"))
                },
            );
            addr["adminAddr"]
                .as_str()
                .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
                .unwrap_or_else(|| panic!("adminAddr in {addr}; logs:\n{}", self.logs()))
        })
    }

    /// `GET path` on the admin endpoint: (status, body); status 0 with the
    /// error as body when it cannot be reached.
    pub fn admin_get(&self, path: &str) -> (u16, String) {
        match http_get_at(self.admin_addr(), path) {
            Ok(r) => (r.status, r.text()),
            Err(e) => (0, format!("admin endpoint unreachable: {e}")),
        }
    }

    /// `/ready` as (status, JSON body or Null).
    pub fn ready(&self) -> (u16, Value) {
        let (status, body) = self.admin_get("/ready");
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    /// Polls `/ready` until 200; panics with the last answer and the logs
    /// after `timeout`, or at once if the process exits.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.exit_status() {
                panic!(
                    "proxy {} exited with {s} before it was ready; logs:\n{}",
                    self.name,
                    self.logs()
                );
            }
            let (status, body) = self.admin_get("/ready");
            if status == 200 {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "proxy {} not ready after {timeout:?}: /ready answered {status} {body}\nlogs:\n{}",
                    self.name,
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The sum of the `/metrics` samples whose series (name and labels)
    /// contains `series` (0 when none does or the endpoint is unreachable).
    pub fn metric(&self, series: &str) -> f64 {
        let (_, text) = self.admin_get("/metrics");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit_once(' '))
            .filter(|(name, _)| name.contains(series))
            .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
            .sum()
    }

    /// `/config_dump` (Null when unreachable or not JSON).
    pub fn config_dump(&self) -> Value {
        let (_, body) = self.admin_get("/config_dump");
        serde_json::from_str(&body).unwrap_or(Value::Null)
    }

    /// The fingerprints of the trust-bundle roots the sidecar holds (from
    /// its `/config_dump`).
    pub fn trust_roots(&self) -> Vec<String> {
        self.config_dump()["secrets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x["type"]["trust_bundle"].as_array())
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_owned))
            .collect()
    }

    /// The serial of the current identity certificate, if it has one.
    pub fn serial(&self) -> Option<String> {
        match &self.config_dump()["identity"]["serial"] {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        }
    }

    /// The process id, until it has been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// How the process exited, if it did (non-blocking).
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none()
            && let Some(c) = self.child.as_mut()
            && let Ok(Some(s)) = c.try_wait()
        {
            self.status = Some(s);
            self.child = None;
        }
        self.status
    }

    /// Sends SIGTERM (without waiting).
    pub fn sigterm(&self) {
        let pid = self.pid().expect("sidecar still running");
        let ok = Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -TERM {pid} failed");
    }

    /// Waits up to `timeout` for the process to exit; panics with the logs
    /// if it does not.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.exit_status() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "sidecar {} still running {timeout:?} later; logs:\n{}",
                self.name,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, then waits (up to 60 s) for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        if let Some(s) = self.exit_status() {
            return s;
        }
        self.sigterm();
        self.wait_exit(Duration::from_secs(60))
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            if let Ok(s) = c.wait() {
                self.status.get_or_insert(s);
            }
        }
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Another Dataplane `name` of the HTTP service `backend` (beside the
/// pair's backend-1): its inbound on `inbound` to the app on `app`, and an
/// outbound to `web` on `outbound`.
pub fn extra_backend_yaml(name: &str, inbound: u16, app: u16, outbound: u16) -> String {
    format!(
        "type: Dataplane
name: {name}
mesh: {MESH}
networking:
  address: 127.0.0.1
  inbound:
    - port: {inbound}
      servicePort: {app}
      tags:
        kuma.io/service: backend
        kuma.io/protocol: http
  outbound:
    - port: {outbound}
      tags:
        kuma.io/service: web
"
    )
}

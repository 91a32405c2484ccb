//! A real `meshlink-cp` process on a temporary data dir.
//!
//! Ports: the REST API and xDS ports are claimed up front
//! ([`crate::ports::claim`]: below the ephemeral range, held by this test
//! process until it exits), because a restart must come back on the same
//! ports: sidecars and clients started earlier were given the xDS URL and
//! the REST server URL. A port from the ephemeral range could be taken
//! in between as the source port of an outgoing connection (a sidecar
//! retrying this very control plane). The grant server binds port 0 on
//! every start; it is reached through the advertised address.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::cli::CliOutput;

/// Which store the control plane uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// The embedded default (`<data-dir>/store.db`).
    Sqlite,
    /// A PostgreSQL database URL.
    Postgres(String),
}

impl StoreKind {
    /// A fresh store of the kind named by `name` (`sqlite` or `postgres`).
    pub fn fresh(name: &str) -> StoreKind {
        match name {
            "sqlite" => StoreKind::Sqlite,
            "postgres" => StoreKind::Postgres(crate::fresh_postgres_database()),
            other => panic!("unknown store kind {other}"),
        }
    }
}

/// A running (or stopped) control-plane process. Killed on drop.
pub struct ControlPlane {
    child: Option<Child>,
    _tmp: Option<tempfile::TempDir>,
    data_dir: PathBuf,
    /// Claimed at the first start; in a network namespace (where nothing
    /// else binds), 0 until the first start reports the bound port.
    api_port: u16,
    /// Claimed up front unless the caller names one.
    xds_port: u16,
    store: StoreKind,
    token: String,
    log: PathBuf,
    ready_file: PathBuf,
    /// The loopback address every listener binds and the advertised host.
    host: String,
    /// The network namespace the process runs in (`ip netns exec`).
    netns: Option<String>,
    /// Extra flags for `meshlink-cp run`.
    args: Vec<String>,
}

impl ControlPlane {
    /// Starts a control plane on a fresh data dir and waits until it is ready.
    pub fn start(store: StoreKind) -> ControlPlane {
        Self::start_on(store, "127.0.0.1")
    }

    /// Starts a control plane whose listeners (API, xDS, grant server) bind
    /// `host` (e.g. `127.0.0.2`, one per site) and which advertises `host`.
    pub fn start_on(store: StoreKind, host: &str) -> ControlPlane {
        let mut cp = Self::prepare_on(store, host, 0);
        cp.restart();
        cp
    }

    /// A control plane on `host` that is not started yet, with its xDS
    /// port fixed up front (0: one is claimed here), so that
    /// routers and sidecars can be started before it (tests of start-up
    /// order). Start it with [`Self::spawn`] and [`Self::wait_ready`].
    pub fn prepare_on(store: StoreKind, host: &str, xds_port: u16) -> ControlPlane {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data_dir = tmp.path().join("data");
        let log = tmp.path().join("cp.log");
        let ready_file = tmp.path().join("ready.json");
        let mut cp = ControlPlane {
            child: None,
            _tmp: Some(tmp),
            data_dir,
            api_port: 0,
            xds_port: 0,
            store,
            token: String::new(),
            log,
            ready_file,
            host: host.to_owned(),
            netns: None,
            args: Vec::new(),
        };
        cp.xds_port = match xds_port {
            0 => crate::ports::claim(host),
            port => port,
        };
        cp
    }

    /// Adds flags to every later start (e.g. `--instance cp-1`).
    pub fn add_args(&mut self, args: &[&str]) {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
    }

    /// The process command line, without spawning.
    pub fn command(&self) -> Command {
        self.command_on(self.api_port)
    }

    /// The command line with another REST API port (same data dir and
    /// store; 0 lets the kernel pick one).
    pub fn command_on(&self, api_port: u16) -> Command {
        let mut cmd = crate::netns::command(self.netns.as_deref(), &crate::bin_path("meshlink-cp"));
        cmd.arg("run")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--api-addr")
            .arg(format!("{}:{api_port}", self.host))
            .arg("--xds-addr")
            .arg(format!("{}:{}", self.host, self.xds_port))
            .arg("--grant-addr")
            .arg(format!("{}:0", self.host))
            .arg("--advertised-host")
            .arg(&self.host)
            .arg("--ready-file")
            .arg(&self.ready_file)
            .args(&self.args);
        if let StoreKind::Postgres(url) = &self.store {
            cmd.arg("--store").arg(url);
        }
        cmd
    }

    /// (Re)starts the process on the same data dir and port, and waits for `/readyz`.
    pub fn restart(&mut self) {
        self.spawn();
        self.wait_ready();
    }

    /// Starts the process on the same data dir and ports without waiting
    /// for it (tests of start-up order); follow with [`Self::wait_ready`].
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "control plane already running");
        if self.api_port == 0 && self.netns.is_none() {
            self.api_port = crate::ports::claim(&self.host);
        }
        match std::fs::remove_file(&self.ready_file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("remove {}: {e}", self.ready_file.display()),
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open cp log");
        let child = self
            .command()
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn meshlink-cp");
        self.child = Some(child);
    }

    /// Waits for the spawned process's `--ready-file` (its bound ports)
    /// and then `/readyz` (panics with the logs if it exits), then reads
    /// the admin token.
    pub fn wait_ready(&mut self) {
        let ready: Value = crate::eventually(
            "control plane --ready-file",
            Duration::from_secs(30),
            || {
                if let Some(status) = self.exit_status() {
                    panic!(
                        "meshlink-cp exited with {status} during start-up:\n{}",
                        self.logs()
                    );
                }
                let text = std::fs::read_to_string(&self.ready_file).ok()?;
                Some(serde_json::from_str(&text).expect("--ready-file is JSON"))
            },
        );
        let port = |key: &str| -> u16 {
            ready[key]
                .as_str()
                .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
                .unwrap_or_else(|| panic!("{key} in --ready-file: {ready}"))
                .port()
        };
        let (api, xds) = (port("apiAddr"), port("xdsAddr"));
        for (what, known, bound) in [("API", self.api_port, api), ("xDS", self.xds_port, xds)] {
            assert!(
                known == 0 || known == bound,
                "{what} port changed across a restart: {known} -> {bound}"
            );
        }
        (self.api_port, self.xds_port) = (api, xds);
        let url = format!("{}/readyz", self.server());
        crate::eventually("control plane /readyz", Duration::from_secs(30), || {
            if let Some(status) = self.exit_status() {
                panic!(
                    "meshlink-cp exited with {status} during start-up:\n{}",
                    self.logs()
                );
            }
            reqwest::blocking::get(&url)
                .ok()
                .filter(|r| r.status().is_success())
                .map(|_| ())
        });
        self.token = std::fs::read_to_string(self.data_dir.join("admin-token"))
            .expect("admin token exists after start")
            .trim()
            .to_string();
    }

    /// How the process exited, if it did (non-blocking; `None` while it
    /// runs or when it was never started).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// The REST API base URL.
    pub fn server(&self) -> String {
        format!("http://{}:{}", self.host, self.api_port)
    }

    /// The xDS/Certify port (claimed when this value was made, then fixed
    /// for its life, across restarts).
    pub fn xds_port(&self) -> u16 {
        self.xds_port
    }

    /// Runs the process in network namespace `netns` from its next start.
    pub fn set_netns(&mut self, netns: &str) {
        self.netns = Some(netns.to_owned());
    }

    /// The loopback address this control plane binds and advertises.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `meshlink token router` for this control plane's site.
    pub fn router_token(&self) -> String {
        self.cli(&["token", "router"])
            .success()
            .stdout
            .trim()
            .to_owned()
    }

    /// The xDS/Certify endpoint, `https://localhost:PORT`.
    pub fn xds_url(&self) -> String {
        format!("https://localhost:{}", self.xds_port)
    }

    /// The CA that verifies the xDS port (`<data-dir>/cp-tls/ca.pem`).
    pub fn xds_ca_pem(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("cp-tls").join("ca.pem")).expect("cp-tls/ca.pem")
    }

    /// The admin token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The data dir.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Everything the process logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `kill -9`: no chance to flush or clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("SIGKILL meshlink-cp");
            c.wait().expect("reap meshlink-cp");
        }
    }

    /// SIGTERM, then waits for exit and returns the exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = c.try_wait().expect("wait") {
                return s.code();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "meshlink-cp did not exit within 20s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs the CLI against this control plane.
    pub fn cli(&self, args: &[&str]) -> CliOutput {
        self.cli_stdin(args, None)
    }

    /// Runs the CLI against this control plane, feeding `stdin`.
    pub fn cli_stdin(&self, args: &[&str], stdin: Option<&str>) -> CliOutput {
        let server = self.server();
        crate::cli::run_cli(
            args,
            &[
                ("MESHLINK_SERVER", &server),
                ("MESHLINK_TOKEN", &self.token),
            ],
            stdin,
        )
    }

    /// The value of one counter sample in `/metrics` whose line contains
    /// every string in `parts` (0 when absent).
    pub fn metric(&self, parts: &[&str]) -> f64 {
        let text = reqwest::blocking::get(format!("{}/metrics", self.server()))
            .and_then(|r| r.text())
            .unwrap_or_default();
        text.lines()
            .filter(|l| !l.starts_with('#') && parts.iter().all(|p| l.contains(p)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// An authenticated REST call; returns (status, JSON body or Null).
    pub fn api(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        let mut req = client
            .request(
                method.parse().expect("method"),
                format!("{}{path}", self.server()),
            )
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().expect("API request");
        let status = resp.status().as_u16();
        let text = resp.text().unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kill9();
    }
}

//! A real `meshlink-cp` process on a temporary data dir.

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
    api_port: u16,
    xds_port: u16,
    store: StoreKind,
    token: String,
    log: PathBuf,
}

impl ControlPlane {
    /// Starts a control plane on a fresh data dir and waits until it is ready.
    pub fn start(store: StoreKind) -> ControlPlane {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data_dir = tmp.path().join("data");
        let log = tmp.path().join("cp.log");
        let mut cp = ControlPlane {
            child: None,
            _tmp: Some(tmp),
            data_dir,
            api_port: crate::free_port(),
            xds_port: crate::free_port(),
            store,
            token: String::new(),
            log,
        };
        cp.restart();
        cp
    }

    /// The process command line, without spawning.
    pub fn command(&self) -> Command {
        self.command_on(self.api_port)
    }

    /// The command line with another REST API port (same data dir and store).
    pub fn command_on(&self, api_port: u16) -> Command {
        let mut cmd = Command::new(crate::bin_path("meshlink-cp"));
        cmd.arg("run")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--api-addr")
            .arg(format!("127.0.0.1:{api_port}"))
            .arg("--xds-addr")
            .arg(format!("127.0.0.1:{}", self.xds_port))
            .arg("--grant-addr")
            .arg("127.0.0.1:0");
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

    /// Waits for `/readyz` of the spawned process (panics with the logs if
    /// it exits), then reads the admin token.
    pub fn wait_ready(&mut self) {
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
        format!("http://127.0.0.1:{}", self.api_port)
    }

    /// The xDS/Certify port (fixed for the life of this value, across restarts).
    pub fn xds_port(&self) -> u16 {
        self.xds_port
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

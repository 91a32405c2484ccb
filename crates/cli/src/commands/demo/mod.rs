//! `meshlink demo`: the whole product on one machine, two linked sites.
//!
//! Site A (127.0.0.1): the real `meshlink-cp`, two `meshlink-proxy`
//! sidecars and a router; site B (127.0.0.2): a second control plane and
//! router. The binaries are found next to this executable, else on PATH;
//! the three tiny HTTP apps are served by this process. Site A gets a Mesh
//! with mTLS (2-minute certificates), two Dataplanes (web, backend), a
//! MeshTrafficPermission web -> backend, a Site, a RouterAccess and a
//! Listener; site B a Site and a Connector to its app. A grant issued in A
//! and redeemed in B links them. The demo waits until a request flows
//! web -> backend through both sidecars and another from web's outbound
//! across the link to site B's app, prints what to try, and on
//! Ctrl-C/SIGTERM stops every child (SIGTERM, then wait).
//!
//! Owns the demo's child processes: it must never return while one it
//! started is still running.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::ApiClient;
use crate::failure::Failure;

/// What the backend app answers.
const BACKEND_BODY: &str = "hello from backend\n";
/// What the web app answers.
const WEB_BODY: &str = "hello from web\n";
/// The MeshTrafficPermission that lets web call backend.
const MTP_NAME: &str = "web-to-backend";

/// Flags of `meshlink demo`.
#[derive(clap::Args)]
pub(crate) struct DemoArgs {
    /// Directory for the control plane's data, the proxy tokens and the logs.
    #[arg(long, default_value = "meshlink-demo")]
    data_dir: PathBuf,
    /// Start everything, send one request through the mesh, print the
    /// result, stop everything and exit (0 when the request succeeded).
    #[arg(long, visible_alias = "check")]
    once: bool,
    /// Use free ephemeral ports instead of the defaults (REST API 5681,
    /// xDS 5678, proxy admin 9901/9902, ...), e.g. to run two demos at once.
    #[arg(long)]
    random_ports: bool,
    /// How long each start-up step may take.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Once everything is ready, write the demo's addresses here as JSON
    /// (atomically), for scripts and tests.
    #[arg(long)]
    ready_file: Option<PathBuf>,
}

/// The ports the demo uses, all on 127.0.0.1.
struct Ports {
    api: u16,
    web_app: u16,
    backend_app: u16,
    xds: u16,
    grant: u16,
    web_inbound: u16,
    web_outbound: u16,
    backend_inbound: u16,
    web_admin: u16,
    backend_admin: u16,
    /// Web's outbound to site B's service (mesh to network).
    web_to_b: u16,
    /// Site A's inter-router port (RouterAccess).
    a_link: u16,
    /// Site A's Listener for site B's service.
    a_listener: u16,
    a_router_admin: u16,
    /// Site B, on [`SITE_B_HOST`].
    b_api: u16,
    b_xds: u16,
    b_grant: u16,
    b_app: u16,
    b_router_admin: u16,
}

/// Runs `meshlink demo`.
pub(crate) async fn run(args: DemoArgs) -> Result<(), Failure> {
    let cp_bin = find_binary("meshlink-cp")?;
    let proxy_bin = find_binary("meshlink-proxy")?;
    let dir = prepare_dir(&args.data_dir)?;
    let _lock = lock_dir(&dir)?;
    let mut signals = Signals::install()?;
    println!(
        "meshlink demo: data in {0}, logs in {0}/logs",
        dir.display()
    );
    let mut demo = Demo {
        dir,
        timeout: args.timeout,
        procs: Vec::new(),
        apps: JoinSet::new(),
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| Failure::Runtime(format!("cannot build an HTTP client: {e}")))?,
    };
    let started = tokio::select! {
        r = demo.start(&cp_bin, &proxy_bin, args.random_ports) => r.map(Some),
        sig = signals.recv() => {
            println!("{sig} received during start-up; stopping");
            if args.once {
                Err(Failure::Runtime(format!("interrupted by {sig} before the check completed")))
            } else {
                Ok(None)
            }
        }
    };
    let result = match started {
        Ok(Some(_)) if args.once => {
            println!(
                "ok: the mesh works (web -> backend over mTLS, allowed by MeshTrafficPermission {MTP_NAME}) and so does the link (web -> site B's {ROUTING_KEY})"
            );
            Ok(())
        }
        Ok(Some(ports)) => match write_ready_file(args.ready_file.as_deref(), &demo.dir, &ports) {
            Ok(()) => {
                print_try(&demo.dir, &ports);
                demo.supervise(&mut signals).await
            }
            Err(e) => Err(e),
        },
        Ok(None) => Ok(()),
        Err(e) => {
            println!("stopping the demo (error below)");
            Err(e)
        }
    };
    let clean = demo.stop(&mut signals).await;
    match result {
        Err(e) => Err(e),
        Ok(()) if clean => {
            println!("meshlink demo stopped");
            Ok(())
        }
        Ok(()) => Err(Failure::Runtime(format!(
            "some demo processes did not stop cleanly; see the logs in {}/logs",
            demo.dir.display()
        ))),
    }
}

// === impl Demo ===

/// The running demo: child processes in start order and the app servers.
struct Demo {
    dir: PathBuf,
    timeout: Duration,
    procs: Vec<Proc>,
    apps: JoinSet<()>,
    http: reqwest::Client,
}

impl Demo {
    /// Starts everything and returns once requests flow web -> backend and
    /// web -> site B.
    async fn start(
        &mut self,
        cp_bin: &Path,
        proxy_bin: &Path,
        random: bool,
    ) -> Result<Ports, Failure> {
        let began = Instant::now();
        let b_host: Ipv4Addr = SITE_B_HOST.parse().expect("a loopback address");
        let mut picker = PortPicker {
            random,
            held: Vec::new(),
        };
        let web_app = picker.pick(8080, "the web app")?;
        let backend_app = picker.pick(8081, "the backend app")?;
        let b_app = picker.pick_on(b_host, 8080, "site B's app").map_err(|e| {
            Failure::Runtime(format!(
                "{e}; site B runs on {SITE_B_HOST}, a loopback address Linux has by default"
            ))
        })?;
        let ports = Ports {
            web_app: port_of(&web_app),
            backend_app: port_of(&backend_app),
            b_app: port_of(&b_app),
            api: picker.pick_port(5681, "the control plane's REST API")?,
            xds: picker.pick_port(5678, "the control plane's xDS port")?,
            grant: picker.pick_port(9090, "the control plane's grant server")?,
            web_inbound: picker.pick_port(10001, "web's sidecar inbound")?,
            web_outbound: picker.pick_port(10080, "web's outbound to backend")?,
            web_to_b: picker.pick_port(10081, "web's outbound to site B")?,
            backend_inbound: picker.pick_port(10002, "backend's sidecar inbound")?,
            web_admin: picker.pick_port(9902, "web's sidecar admin")?,
            backend_admin: picker.pick_port(9901, "backend's sidecar admin")?,
            a_link: picker.pick_port(55671, "site A's inter-router port")?,
            a_listener: picker.pick_port(10090, "site A's listener for site B's service")?,
            a_router_admin: picker.pick_port(9903, "site A's router admin")?,
            b_router_admin: picker.pick_port(9904, "site B's router admin")?,
            b_api: picker.pick_port_on(b_host, 5681, "site B's REST API")?,
            b_xds: picker.pick_port_on(b_host, 5678, "site B's xDS port")?,
            b_grant: picker.pick_port_on(b_host, 9090, "site B's grant server")?,
        };
        drop(picker);
        self.apps.spawn(serve_app(into_tokio(web_app)?, WEB_BODY));
        self.apps
            .spawn(serve_app(into_tokio(backend_app)?, BACKEND_BODY));
        self.apps.spawn(serve_app(into_tokio(b_app)?, SITE_B_BODY));
        step(1, "apps started", began);

        let site_b_dir = self.dir.join("site-b");
        std::fs::create_dir_all(&site_b_dir).map_err(|e| {
            Failure::Runtime(format!("cannot create {}: {e}", site_b_dir.display()))
        })?;
        let a = CpSpec {
            label: "meshlink-cp",
            dir: self.dir.clone(),
            host: "127.0.0.1",
            api: ports.api,
            xds: ports.xds,
            grant: ports.grant,
            log: "cp.log",
        };
        let b = CpSpec {
            label: "meshlink-cp for site B",
            dir: site_b_dir.clone(),
            host: SITE_B_HOST,
            api: ports.b_api,
            xds: ports.b_xds,
            grant: ports.b_grant,
            log: "site-b-cp.log",
        };
        self.spawn_cp(cp_bin, &a)?;
        self.spawn_cp(cp_bin, &b)?;
        let client = self.wait_cp(&a).await?;
        let client_b = self.wait_cp(&b).await?;
        step(2, "both control planes ready", began);

        let yaml_path = self.dir.join("demo.yaml");
        let yaml = format!("{}{}", demo_yaml(&ports), site_a_yaml(&ports));
        std::fs::write(&yaml_path, yaml)
            .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", yaml_path.display())))?;
        println!("applying {} to site A", yaml_path.display());
        super::apply::run(&client, &yaml_path.to_string_lossy(), false).await?;
        let b_yaml = self.dir.join("site-b.yaml");
        std::fs::write(&b_yaml, site_b_yaml(&ports))
            .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", b_yaml.display())))?;
        println!("applying {} to site B", b_yaml.display());
        super::apply::run(&client_b, &b_yaml.to_string_lossy(), false).await?;
        step(3, "resources applied", began);

        let sidecars = [("backend", ports.backend_admin), ("web", ports.web_admin)];
        for (name, admin_port) in sidecars {
            let token_file = self.issue_token(&client, name).await?;
            let args = flags(&[
                ("--cp", format!("https://127.0.0.1:{}", ports.xds)),
                ("--cp-ca", format!("{}/cp-tls/ca.pem", self.dir.display())),
                ("--token-file", token_file.display().to_string()),
                ("--mesh", "default".into()),
                ("--name", name.into()),
                ("--mode", "sidecar".into()),
                ("--admin-addr", format!("127.0.0.1:{admin_port}")),
                ("--drain-timeout", "5s".into()),
            ]);
            let label = format!("meshlink-proxy for {name}");
            self.spawn(&label, proxy_bin, &args, &format!("{name}-proxy.log"))?;
            println!("  admin http://127.0.0.1:{admin_port}");
        }
        let token_a = self.router_token(&client, "site-a-router.token").await?;
        let token_b = self.router_token(&client_b, "site-b-router.token").await?;
        let dir = self.dir.clone();
        let (ra, rb) = (ports.a_router_admin, ports.b_router_admin);
        self.spawn_router(
            proxy_bin,
            "site-a",
            ("127.0.0.1", ports.xds),
            &dir,
            &token_a,
            ra,
        )?;
        self.spawn_router(
            proxy_bin,
            "site-b",
            (SITE_B_HOST, ports.b_xds),
            &site_b_dir,
            &token_b,
            rb,
        )?;
        for (name, admin_port) in sidecars {
            self.wait_sidecar(name, admin_port).await?;
        }
        self.check(ports.web_outbound, BACKEND_BODY, "web -> backend")
            .await?;
        step(4, "mesh ready: web -> backend over mTLS", began);

        self.link(&client, &client_b).await?;
        self.wait_network(&client, "site-a", 2).await?;
        self.wait_network(&client_b, "site-b", 2).await?;
        step(5, "sites linked: site B -> site A, Operational", began);
        self.check(ports.web_to_b, SITE_B_BODY, "web -> site B")
            .await?;
        step(
            6,
            "service across the link: web -> site A router -> site B",
            began,
        );
        Ok(ports)
    }

    /// Starts a control plane (not waiting for it).
    fn spawn_cp(&mut self, cp_bin: &Path, cp: &CpSpec) -> Result<(), Failure> {
        let args = flags(&[
            ("--data-dir", cp.dir.display().to_string()),
            ("--api-addr", format!("{}:{}", cp.host, cp.api)),
            ("--xds-addr", format!("{}:{}", cp.host, cp.xds)),
            ("--grant-addr", format!("{}:{}", cp.host, cp.grant)),
            ("--advertised-host", cp.host.into()),
        ]);
        self.spawn(cp.label, cp_bin, &args, cp.log)?;
        println!(
            "  REST API http://{}:{}, xDS https://{}:{}",
            cp.host, cp.api, cp.host, cp.xds
        );
        Ok(())
    }

    /// Waits for a control plane's `/readyz`; returns an admin client.
    async fn wait_cp(&mut self, cp: &CpSpec) -> Result<ApiClient, Failure> {
        let server = format!("http://{}:{}", cp.host, cp.api);
        let readyz = format!("{server}/readyz");
        self.wait_for(cp.label, &readyz, async |http| {
            let r = http.get(&readyz).send().await.map_err(|e| cause(&e))?;
            let status = r.status();
            status.is_success().then_some(()).ok_or(status.to_string())
        })
        .await?;
        let path = cp.dir.join("admin-token");
        let admin = std::fs::read_to_string(&path)
            .map_err(|e| Failure::Runtime(format!("cannot read {}: {e}", path.display())))?;
        let source = crate::client::TokenSource::File(path.display().to_string());
        Ok(ApiClient::new(
            &server,
            Some((admin.trim().to_string(), source)),
        ))
    }

    /// Waits until a sidecar's `/ready` is 200, printing what it misses.
    async fn wait_sidecar(&mut self, name: &str, admin_port: u16) -> Result<(), Failure> {
        let url = format!("http://127.0.0.1:{admin_port}/ready");
        self.wait_for(&format!("{name}'s sidecar"), &url, async |http| {
            let r = http.get(&url).send().await.map_err(|e| cause(&e))?;
            if r.status().is_success() {
                return Ok(());
            }
            let body: Value = r.json().await.unwrap_or(Value::Null);
            let missing = body["missing"].as_array().into_iter().flatten();
            let missing: Vec<&str> = missing.filter_map(Value::as_str).collect();
            Err(format!("missing: {}", missing.join("; ")))
        })
        .await
    }

    /// Sends requests to `outbound` until one is answered with `expect`.
    async fn check(&mut self, outbound: u16, expect: &str, what: &str) -> Result<(), Failure> {
        let url = format!("http://127.0.0.1:{outbound}/");
        let body = self
            .wait_for(&format!("a request {what}"), &url, async |http| {
                let r = http.get(&url).send().await.map_err(|e| cause(&e))?;
                let status = r.status();
                let body = r.text().await.map_err(|e| cause(&e))?;
                match status.is_success() && body == expect {
                    true => Ok(body),
                    false => Err(format!("{status} {:?}", body.trim())),
                }
            })
            .await?;
        println!("check: GET {url} ({what}): 200 {:?}", body.trim());
        Ok(())
    }

    /// Issues a proxy token for dataplane `name` and writes it (0600).
    async fn issue_token(&self, client: &ApiClient, name: &str) -> Result<PathBuf, Failure> {
        let body = json!({ "mesh": "default", "name": name, "validFor": "168h" });
        let resp = super::token::request_token(client, "dataplane", &body).await?;
        let token = resp["token"].as_str().unwrap_or_default();
        let path = self.dir.join("tokens").join(format!("{name}.token"));
        write_private(&path, token)?;
        println!("issued a proxy token for {name}: {}", path.display());
        Ok(path)
    }
}

/// One control plane of the demo.
struct CpSpec {
    label: &'static str,
    dir: PathBuf,
    host: &'static str,
    api: u16,
    xds: u16,
    grant: u16,
    log: &'static str,
}

/// Prints a finished start-up step with the time since the start (with a
/// tick on a terminal; plain text otherwise, for logs and scripts).
fn step(n: u32, what: &str, began: Instant) {
    use std::io::IsTerminal;
    let tick = if std::io::stdout().is_terminal() {
        "\u{2714} "
    } else {
        ""
    };
    let secs = began.elapsed().as_secs_f64();
    println!("[{n}/6] {tick}{what} ({secs:.1}s)");
}

mod apps;
mod proc;
mod sites;
mod text;

use apps::*;
use proc::*;
use sites::*;
use text::*;

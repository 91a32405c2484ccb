//! Multi-site scenarios: each site is a control plane plus a router on a
//! loopback address of its own, unique to the test process, so RouterAccess
//! roles can use their default ports (55671) without two tests colliding.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::proxy::Sidecar;
use crate::{ControlPlane, StoreKind};

/// A loopback address for site `n` (1-250) of this test process:
/// `127.A.B.n`, with A.B taken from the process id (never `0.0`, which
/// the single-address tests use).
pub fn site_host(n: u8) -> String {
    let pid = std::process::id();
    let a = ((pid >> 8) % 254 + 1) as u8;
    let b = (pid % 256) as u8;
    format!("127.{a}.{b}.{n}")
}

/// A TCP port on `host` for a listener a child binds later (see
/// [`crate::ports::claim`]).
pub fn free_port_on(host: &str) -> u16 {
    crate::ports::claim(host)
}

/// One site: its control plane (maybe not started yet), the router's
/// token file (written once the control plane runs) and the router.
pub struct Site {
    /// The site's name.
    pub name: String,
    /// Its control plane.
    pub cp: ControlPlane,
    /// Its router, once spawned.
    pub router: Option<Sidecar>,
    /// Where the router reads its token.
    pub token_file: PathBuf,
    /// The network namespace its processes run in, if not the root one.
    netns: Option<String>,
    _dir: tempfile::TempDir,
}

impl Site {
    /// A site on `site_host(n)` whose control plane is not started yet.
    pub fn prepare(name: &str, n: u8) -> Site {
        Site::prepare_at(name, &site_host(n), None)
    }

    /// A site whose control plane and router bind and advertise `host`
    /// and run in network namespace `netns` (if given), not started yet.
    pub fn prepare_at(name: &str, host: &str, netns: Option<&str>) -> Site {
        let port = match netns {
            // Nothing else uses the namespace's addresses.
            Some(_) => 40000 + (std::process::id() % 20000) as u16,
            None => free_port_on(host),
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cp = ControlPlane::prepare_on(StoreKind::Sqlite, host, port);
        if let Some(ns) = netns {
            cp.set_netns(ns);
        }
        Site {
            name: name.to_owned(),
            cp,
            router: None,
            token_file: dir.path().join("router.token"),
            netns: netns.map(str::to_owned),
            _dir: dir,
        }
    }

    /// [`Site::start`] on `host`, in network namespace `netns` if given.
    pub fn start_at(name: &str, host: &str, netns: Option<&str>) -> Site {
        let mut site = Site::prepare_at(name, host, netns);
        site.start_cp();
        site.apply(&format!(
            "apiVersion: skupper.io/v2alpha1\nkind: Site\nmetadata: {{name: {name}}}\nspec: {{linkAccess: default}}\n"
        ));
        site.write_router_token();
        site.spawn_router();
        site.router
            .as_mut()
            .expect("spawned")
            .wait_ready(Duration::from_secs(60));
        site
    }

    /// A running interior site on `site_host(n)`: control plane, a v2
    /// Site with `linkAccess: default` (inter-router role on 55671), and
    /// a ready router.
    pub fn start(name: &str, n: u8) -> Site {
        Site::start_at(name, &site_host(n), None)
    }

    /// `meshlink apply -f -` of `yaml` on this site.
    pub fn apply(&self, yaml: &str) {
        self.cp
            .cli_stdin(&["apply", "-f", "-"], Some(yaml))
            .success();
    }

    /// Links this site to `to`: a token issued by `to`, redeemed here with
    /// `meshlink token redeem`, which waits until the link is Operational.
    /// Returns the Link's name.
    pub fn link_to(&self, to: &Site, cost: Option<u32>) -> String {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token.yaml");
        let file = file.to_str().expect("utf-8 path");
        to.cp.cli(&["token", "issue", file]).success();
        let name = format!("to-{}", to.name);
        let text = std::fs::read_to_string(file).expect("token written");
        let mut token: Value = serde_yaml_ng::from_str(&text).expect("token is YAML");
        token["metadata"]["name"] = Value::from(name.clone());
        if let Some(cost) = cost {
            token["spec"]["linkCost"] = Value::from(cost);
        }
        let text = serde_yaml_ng::to_string(&token).expect("YAML");
        write_atomically(Path::new(file), &text);
        self.cp
            .cli(&["token", "redeem", file, "--link-timeout", "60s"])
            .success();
        name
    }

    /// Waits until the Listener `name` has a matching connector in the
    /// network (`status.hasMatchingConnector`).
    pub fn wait_listener_matched(&self, name: &str, timeout: Duration) {
        crate::eventually(
            &format!("listener {name} matched in site {}", self.name),
            timeout,
            || {
                let (_, l) = self
                    .cp
                    .api("GET", &format!("/api/v1/listeners/{name}"), None);
                (l["status"]["hasMatchingConnector"] == true).then_some(())
            },
        );
    }

    /// The loopback address of the site.
    pub fn host(&self) -> &str {
        self.cp.host()
    }

    /// Starts the router (the control plane need not run, and the CA and
    /// token files need not exist yet).
    pub fn spawn_router(&mut self) {
        let args: Vec<std::ffi::OsString> = vec![
            "--mode".into(),
            "router".into(),
            "--cp".into(),
            format!("https://{}:{}", self.cp.host(), self.cp.xds_port()).into(),
            "--cp-ca".into(),
            self.cp.data_dir().join("cp-tls").join("ca.pem").into(),
            "--token-file".into(),
            self.token_file.clone().into(),
            "--bind-host".into(),
            self.cp.host().into(),
            // Tests share addresses: a free mesh ingress port each.
            "--mesh-port".into(),
            "0".into(),
            "--drain-timeout".into(),
            "5s".into(),
        ];
        let netns = self.netns.as_deref().map(|ns| (ns, self.cp.host()));
        self.router = Some(Sidecar::spawn_in(netns, &self.name, 0, &args));
    }

    /// Starts the control plane and waits until it is ready.
    pub fn start_cp(&mut self) {
        self.cp.spawn();
        self.cp.wait_ready();
    }

    /// Writes the router token (the Site must exist).
    pub fn write_router_token(&self) {
        let token = self.cp.router_token();
        write_atomically(&self.token_file, &token);
    }

    /// The router.
    pub fn router(&self) -> &Sidecar {
        self.router.as_ref().expect("router spawned")
    }

    /// Waits until the Link `name` is Operational in this site's status.
    pub fn wait_link_operational(&self, name: &str, timeout: Duration) -> Value {
        crate::eventually(
            &format!("link {name} operational in site {}", self.name),
            timeout,
            || {
                let (code, link) = self.cp.api("GET", &format!("/api/v1/links/{name}"), None);
                (code == 200 && condition(&link, "Operational") == Some(true)).then_some(link)
            },
        )
    }

    /// This site's Site resource (the one Site of its control plane).
    pub fn site(&self) -> Value {
        let (code, site) = self
            .cp
            .api("GET", &format!("/api/v1/sites/{}", self.name), None);
        assert_eq!(code, 200, "{site}");
        site
    }
}

/// Whether condition `ty` of `resource` is True (`None` when absent).
pub fn condition(resource: &Value, ty: &str) -> Option<bool> {
    resource["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
        .map(|c| c["status"] == "True")
}

/// Writes `text` to `path` through a temporary file and a rename, so a
/// reader never sees half of it.
pub fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

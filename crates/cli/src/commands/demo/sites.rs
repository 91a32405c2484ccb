//! The demo's second site: its control plane, both sites' routers, the
//! grant and token redemption that link them, and the service of site B
//! that web (in site A) reaches across the link.

use super::*;

/// The loopback address site B's control plane, router and app use.
pub(super) const SITE_B_HOST: &str = "127.0.0.2";
/// What site B's app answers.
pub(super) const SITE_B_BODY: &str = "hello from site B\n";
/// The routing key of site B's service.
pub(super) const ROUTING_KEY: &str = "backend-b";

/// Site A's network resources (appended to `demo.yaml`): the Site, a
/// RouterAccess on the demo's link port and a Listener for site B's
/// service.
pub(super) fn site_a_yaml(p: &Ports) -> String {
    format!(
        r#"---
apiVersion: skupper.io/v2alpha1
kind: Site
metadata: {{name: site-a}}
---
apiVersion: skupper.io/v2alpha1
kind: RouterAccess
metadata: {{name: skupper-router}}
spec:
  generateTlsCredentials: true
  issuer: skupper-site-ca
  tlsCredentials: skupper-site-server
  roles: [{{name: inter-router, port: {link}}}]
---
apiVersion: skupper.io/v2alpha1
kind: Listener
metadata: {{name: {ROUTING_KEY}}}
spec: {{routingKey: {ROUTING_KEY}, host: 127.0.0.1, port: {listener}}}
"#,
        link = p.a_link,
        listener = p.a_listener,
    )
}

/// Site B's resources (`site-b.yaml`): the Site and a Connector to its app.
pub(super) fn site_b_yaml(p: &Ports) -> String {
    format!(
        r#"# Applied to site B by `meshlink demo`.
apiVersion: skupper.io/v2alpha1
kind: Site
metadata: {{name: site-b}}
---
apiVersion: skupper.io/v2alpha1
kind: Connector
metadata: {{name: {ROUTING_KEY}}}
spec: {{routingKey: {ROUTING_KEY}, host: {SITE_B_HOST}, port: {app}}}
"#,
        app = p.b_app,
    )
}

impl Demo {
    /// Issues a router token for this control plane's Site and writes it.
    pub(super) async fn router_token(
        &self,
        client: &ApiClient,
        file: &str,
    ) -> Result<PathBuf, Failure> {
        let body = json!({ "validFor": "168h" });
        let resp = super::super::token::request_token(client, "router", &body).await?;
        let path = self.dir.join("tokens").join(file);
        write_private(&path, resp["token"].as_str().unwrap_or_default())?;
        Ok(path)
    }

    /// Starts one site's router.
    pub(super) fn spawn_router(
        &mut self,
        proxy_bin: &Path,
        site: &str,
        cp: (&str, u16),
        data_dir: &Path,
        token: &Path,
        admin: u16,
    ) -> Result<(), Failure> {
        let args = flags(&[
            ("--mode", "router".into()),
            ("--cp", format!("https://{}:{}", cp.0, cp.1)),
            ("--cp-ca", format!("{}/cp-tls/ca.pem", data_dir.display())),
            ("--token-file", token.display().to_string()),
            ("--bind-host", cp.0.to_owned()),
            // Any free mesh ingress port: the router reports it, and the
            // control plane points the sidecars at it.
            ("--mesh-port", "0".into()),
            ("--admin-addr", format!("127.0.0.1:{admin}")),
            ("--drain-timeout", "5s".into()),
        ]);
        self.spawn(
            &format!("meshlink-proxy router for {site}"),
            proxy_bin,
            &args,
            &format!("{site}-router.log"),
        )
    }

    /// Links site B to site A: a grant issued in A, its token redeemed in
    /// B; returns once the Link is Operational.
    pub(super) async fn link(&mut self, a: &ApiClient, b: &ApiClient) -> Result<(), Failure> {
        let file = self.dir.join("tokens").join("site-a-access-token.yaml");
        let file = file.display().to_string();
        super::super::grant::issue(a, &file, None, Some(1), Some("15m")).await?;
        let timeout = self.timeout;
        tokio::select! {
            r = super::super::grant::redeem(b, &file, timeout, timeout) => r,
            () = self.child_exit() => Err(Failure::Runtime(
                self.exited_child().unwrap_or_else(|| "a demo process exited".into()),
            )),
        }
    }

    /// Waits until `site`'s status (in `client`'s control plane) counts
    /// `n` sites in the network, so `network status` shows the link as
    /// soon as the demo says it is ready.
    pub(super) async fn wait_network(
        &mut self,
        client: &ApiClient,
        site: &str,
        n: u64,
    ) -> Result<(), Failure> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let s = client
                .call(
                    reqwest::Method::GET,
                    &format!("/api/v1/sites/{site}"),
                    &[],
                    None,
                    Duration::from_secs(10),
                )
                .await
                .map_err(|e| e.into_failure())?;
            let seen = s["status"]["sitesInNetwork"].as_u64().unwrap_or(0);
            if seen >= n {
                return Ok(());
            }
            if let Some(msg) = self.exited_child() {
                return Err(Failure::Runtime(msg));
            }
            if Instant::now() >= deadline {
                return Err(Failure::Runtime(format!(
                    "site {site} still sees {seen} of {n} sites in the network after {}; see the routers' logs in {}/logs",
                    humantime::format_duration(self.timeout),
                    self.dir.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Resolves when a child has exited (polled; for `select!`).
    async fn child_exit(&mut self) {
        loop {
            if self
                .procs
                .iter_mut()
                .any(|p| p.child.try_wait().ok().flatten().is_some())
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Writes a private file (0600).
pub(super) fn write_private(path: &Path, text: &str) -> Result<(), Failure> {
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(path)?;
        f.write_all(text.as_bytes())
    };
    write().map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))
}

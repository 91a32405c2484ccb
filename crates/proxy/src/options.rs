//! Command-line options of `meshlink-proxy run`, validated into
//! [`ProxyOptions`].
//!
//! Owns flag names, defaults and their environment variables
//! (`MESHLINK_PROXY_<FLAG>`), as DESIGN.md §5 lists them. Validation
//! reports every problem at once and names the flag: values are taken as
//! text and parsed here, not by clap, which would stop at the first bad one. Files named here are
//! not required to exist at start-up (the proxy waits for them), except
//! `--dataplane-file`, which says who the proxy is.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::cp::{CpEndpoints, CpTarget};

/// Proxy mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// One proxy per workload: mTLS, authorization, load balancing.
    Sidecar,
    /// One proxy per site linking sites: RouterAccess roles, Links,
    /// Listeners and Connectors.
    Router,
}

/// Flags of `meshlink-proxy run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Control-plane xDS/Certify URL; repeat the flag or separate URLs
    /// with commas to give several (a name may resolve to several
    /// addresses). A failed attempt moves to the next one.
    #[arg(
        long,
        env = "MESHLINK_PROXY_CP",
        default_value = "https://127.0.0.1:5678"
    )]
    pub cp: Vec<String>,
    /// CA (PEM) that verifies the control plane: <cp data-dir>/cp-tls/ca.pem.
    #[arg(long, env = "MESHLINK_PROXY_CP_CA")]
    pub cp_ca: Option<PathBuf>,
    /// File holding the proxy token (`meshlink token dataplane`).
    #[arg(long, env = "MESHLINK_PROXY_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// A Dataplane YAML naming this proxy (its mesh and name are used).
    #[arg(long, env = "MESHLINK_PROXY_DATAPLANE_FILE")]
    pub dataplane_file: Option<PathBuf>,
    /// Name of an existing Dataplane (sidecar mode).
    #[arg(long, env = "MESHLINK_PROXY_NAME")]
    pub name: Option<String>,
    /// Mesh of the Dataplane.
    #[arg(long, env = "MESHLINK_PROXY_MESH", default_value = "default")]
    pub mesh: String,
    /// Proxy mode: sidecar or router.
    #[arg(long, env = "MESHLINK_PROXY_MODE", default_value = "sidecar")]
    pub mode: String,
    /// Admin address: /ready, /config_dump, /metrics.
    #[arg(
        long,
        env = "MESHLINK_PROXY_ADMIN_ADDR",
        default_value = "127.0.0.1:9901"
    )]
    pub admin_addr: String,
    /// Once the admin endpoint listens, write its bound address here as JSON ({"adminAddr"}), atomically; useful with port 0.
    #[arg(long, env = "MESHLINK_PROXY_ADMIN_ADDR_FILE")]
    pub admin_addr_file: Option<PathBuf>,
    /// On SIGTERM, how long open connections may take to finish, e.g. 30s.
    #[arg(long, env = "MESHLINK_PROXY_DRAIN_TIMEOUT", default_value = "30s")]
    pub drain_timeout: String,
    /// Runtime worker threads; 1 runs everything on one thread (no
    /// hand-offs between threads per connection). Default: 2 for a
    /// sidecar, 1 for a router (see docs/operations.md).
    #[arg(long, env = "MESHLINK_PROXY_WORKER_THREADS")]
    pub worker_threads: Option<String>,
    /// Router mode: the address RouterAccess roles (and Listeners whose
    /// host is a name) bind unless they name their own.
    #[arg(long, env = "MESHLINK_PROXY_BIND_HOST", default_value = "0.0.0.0")]
    pub bind_host: String,
    /// Router mode: the port of the mesh ingress on --bind-host, where
    /// mesh sidecars reach routing keys over mTLS; 0 picks a free one (the
    /// router reports the bound address to the control plane).
    #[arg(long, env = "MESHLINK_PROXY_MESH_PORT", default_value = "15671")]
    pub mesh_port: String,
    /// Sidecar mode: how often each inbound's local application is probed
    /// (a TCP connect) while it answers, e.g. 5s; 0 probes only after a
    /// connection to it failed. An application that does not answer is
    /// probed with backoff until it does, and reported to the control
    /// plane, which steers other proxies' traffic away meanwhile.
    #[arg(long, env = "MESHLINK_PROXY_APP_PROBE_INTERVAL", default_value = "5s")]
    pub app_probe_interval: String,
    /// Sidecar mode: the resolv.conf whose nameservers the mesh DNS
    /// forwards non-mesh names to (read once at start): the workload
    /// namespace's own, before any capture. Used only when the control
    /// plane sends the mesh DNS listener (transparent proxying).
    #[arg(
        long,
        env = "MESHLINK_PROXY_DNS_RESOLV_CONF",
        default_value = "/etc/resolv.conf"
    )]
    pub dns_resolv_conf: PathBuf,
}

/// Validated options.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// Sidecar or router.
    pub mode: Mode,
    /// Router mode: the default bind address of roles and listeners.
    pub bind_host: String,
    /// Router mode: the mesh ingress port on `bind_host` (0: any free one).
    pub mesh_port: u16,
    /// Control plane and credential files.
    pub cp: CpTarget,
    /// Mesh of the Dataplane (sidecar mode).
    pub mesh: String,
    /// Dataplane name (sidecar mode; empty for a router).
    pub name: String,
    /// Admin address.
    pub admin_addr: SocketAddr,
    /// Where to write the bound admin address, if anywhere.
    pub admin_addr_file: Option<PathBuf>,
    /// Drain deadline.
    pub drain_timeout: Duration,
    /// Runtime worker threads (at least 1).
    pub worker_threads: usize,
    /// Sidecar mode: the period of the local applications' probes (zero:
    /// only after a failed connection).
    pub app_probe_interval: Duration,
    /// Sidecar mode: the resolv.conf the mesh DNS forwards to.
    pub dns_resolv_conf: PathBuf,
}

impl ProxyOptions {
    /// `node.id`: `<mesh>.<name>`.
    pub fn node_id(&self) -> String {
        meshlink_proto::NodeId::dataplane(&self.mesh, &self.name).to_string()
    }
}

impl RunArgs {
    /// Checks the flags; every problem is reported, each naming its flag.
    pub fn validate(self) -> Result<ProxyOptions, Vec<String>> {
        let mut errors = Vec::new();
        let mode = <Mode as clap::ValueEnum>::from_str(&self.mode, true)
            .map_err(|_| {
                errors.push(format!(
                    "--mode {:?}: expected sidecar or router",
                    self.mode
                ))
            })
            .unwrap_or(Mode::Sidecar);
        let router = mode == Mode::Router;
        if router && self.bind_host.parse::<std::net::IpAddr>().is_err() {
            errors.push(format!(
                "--bind-host {:?}: expected an IP address, e.g. 0.0.0.0 or 127.0.0.2",
                self.bind_host
            ));
        }
        let mesh_port = self.mesh_port.parse::<u16>().unwrap_or_else(|_| {
            errors.push(format!(
                "--mesh-port {:?}: expected a port, 0-65535 (0 picks a free one)",
                self.mesh_port
            ));
            0
        });
        if router && (self.name.is_some() || self.dataplane_file.is_some()) {
            errors.push(
                "--name and --dataplane-file are for sidecars; a router serves the site its \
                 router token names"
                    .into(),
            );
        }
        let admin_addr = self
            .admin_addr
            .parse::<SocketAddr>()
            .map_err(|e| {
                errors.push(format!(
                    "--admin-addr {:?}: {e}; expected IP:PORT, e.g. 127.0.0.1:9901",
                    self.admin_addr
                ))
            })
            .ok();
        let drain_timeout = humantime::parse_duration(&self.drain_timeout)
            .map_err(|e| {
                errors.push(format!(
                    "--drain-timeout {:?}: {e}; expected a duration, e.g. 30s",
                    self.drain_timeout
                ))
            })
            .ok();
        let cp_urls = crate::cp::parse_cp_values(&self.cp)
            .map_err(|e| errors.extend(e))
            .ok();
        if self.cp_ca.is_none() {
            errors.push(
                "--cp-ca is required: the control plane's CA, <cp data-dir>/cp-tls/ca.pem".into(),
            );
        }
        if self.token_file.is_none() {
            errors.push(if router {
                "--token-file is required: write `meshlink token router` to a file".into()
            } else {
                "--token-file is required: write `meshlink token dataplane --mesh M --name N` to a file".into()
            });
        }
        let (mut mesh, mut name) = (self.mesh.clone(), self.name.clone());
        if let Some(path) = &self.dataplane_file {
            match dataplane_identity(path) {
                Ok((m, n)) => {
                    if self.name.as_ref().is_some_and(|x| *x != n) {
                        errors.push(format!(
                            "--name {:?} disagrees with --dataplane-file ({n:?})",
                            self.name.as_deref().unwrap_or_default()
                        ));
                    }
                    mesh = m;
                    name = Some(n);
                }
                Err(e) => errors.push(format!("--dataplane-file {}: {e}", path.display())),
            }
        }
        if router {
            name = Some(String::new());
        } else if name.is_none() && self.dataplane_file.is_none() {
            errors.push(
                "--name (or --dataplane-file) is required: the Dataplane this proxy serves".into(),
            );
        }
        if mesh.is_empty() || mesh.contains('.') {
            errors.push(format!(
                "--mesh {mesh:?}: a mesh name is non-empty and has no dot"
            ));
        }
        // A router's flows meet its links' multiplexers on one thread:
        // no wake-ups across threads per flow (docs/BENCHMARKS.md).
        let default_threads = if router { "1" } else { "2" };
        let threads = self.worker_threads.as_deref().unwrap_or(default_threads);
        let worker_threads = threads
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=64).contains(n));
        if worker_threads.is_none() {
            errors.push(format!(
                "--worker-threads {threads:?}: expected a number of threads from 1 to 64"
            ));
        }
        if drain_timeout.is_some_and(|d| d.is_zero()) {
            errors.push("--drain-timeout must be positive, e.g. 30s".into());
        }
        let app_probe_interval = humantime::parse_duration(&self.app_probe_interval)
            .map_err(|e| {
                errors.push(format!(
                    "--app-probe-interval {:?}: {e}; expected a duration, e.g. 5s (0 probes only \
                     after a failed connection)",
                    self.app_probe_interval
                ))
            })
            .unwrap_or(crate::apps::DEFAULT_PROBE_INTERVAL);
        match (
            errors.is_empty(),
            cp_urls,
            self.cp_ca,
            self.token_file,
            name,
            admin_addr,
            drain_timeout,
            worker_threads,
        ) {
            (
                true,
                Some(cp_urls),
                Some(ca_file),
                Some(token_file),
                Some(name),
                Some(admin_addr),
                Some(drain_timeout),
                Some(worker_threads),
            ) => Ok(ProxyOptions {
                mode,
                bind_host: self.bind_host,
                mesh_port,
                cp: CpTarget {
                    endpoints: CpEndpoints::new(cp_urls),
                    ca_file,
                    token_file,
                    node: (mesh.clone(), name.clone()),
                    instance: crate::cp::new_instance_id(),
                },
                mesh,
                name,
                admin_addr,
                admin_addr_file: self.admin_addr_file,
                drain_timeout,
                worker_threads,
                app_probe_interval,
                dns_resolv_conf: self.dns_resolv_conf,
            }),
            _ => Err(errors),
        }
    }
}

/// Mesh and name of the (single) Dataplane in `path`.
fn dataplane_identity(path: &std::path::Path) -> Result<(String, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let docs = meshlink_api::parse::parse_documents(&text);
    let [doc] = docs.as_slice() else {
        return Err(format!(
            "expected one Dataplane document, found {}",
            docs.len()
        ));
    };
    let resource = doc.outcome.as_ref().map_err(|errs| {
        errs.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    if resource.kind() != meshlink_api::Kind::Dataplane {
        return Err(format!(
            "expected a Dataplane, found a {:?}",
            resource.kind()
        ));
    }
    Ok((
        resource.mesh().unwrap_or("default").to_owned(),
        resource.name().to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<ProxyOptions, Vec<String>> {
        let mut all = vec!["meshlink-proxy"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all)
            .expect("flags parse")
            .run
            .validate()
    }

    #[test]
    fn every_missing_flag_is_reported_at_once() {
        let errors = parse(&["--cp", "http://x:1"]).unwrap_err();
        let text = errors.join("\n");
        for flag in ["--cp ", "--cp-ca", "--token-file", "--name"] {
            assert!(text.contains(flag), "{flag} missing from:\n{text}");
        }
    }

    #[test]
    fn every_bad_value_is_reported_at_once() {
        let errors = parse(&[
            "--cp-ca",
            "ca.pem",
            "--token-file",
            "t",
            "--name",
            "web",
            "--admin-addr",
            "localhost",
            "--drain-timeout",
            "soon",
            "--mode",
            "gateway",
        ])
        .unwrap_err();
        let text = errors.join("\n");
        assert_eq!(errors.len(), 3, "{text}");
        for part in [
            "--admin-addr \"localhost\"",
            "--drain-timeout \"soon\"",
            "--mode \"gateway\": expected sidecar or router",
        ] {
            assert!(text.contains(part), "{part} missing from:\n{text}");
        }
    }

    #[test]
    fn cp_takes_repeated_flags_and_comma_lists() {
        let base = ["--cp-ca", "ca.pem", "--token-file", "t", "--name", "web"];
        let mut args = base.to_vec();
        args.extend([
            "--cp",
            "https://a:5678, https://b:5678",
            "--cp",
            "https://c:5678",
        ]);
        let o = parse(&args).unwrap();
        let urls: Vec<&str> = o.cp.endpoints.urls().iter().map(|u| u.as_str()).collect();
        assert_eq!(urls, ["https://a:5678", "https://b:5678", "https://c:5678"]);
        let default = parse(&base).unwrap();
        assert_eq!(default.cp.endpoints.to_string(), "https://127.0.0.1:5678");
    }

    #[test]
    fn worker_threads_are_checked_and_router_mode_needs_no_name() {
        let base = ["--cp-ca", "ca.pem", "--token-file", "t"];
        let mut args = base.to_vec();
        args.extend([
            "--mode",
            "router",
            "--worker-threads",
            "0",
            "--bind-host",
            "x",
        ]);
        let text = parse(&args).unwrap_err().join("\n");
        assert!(text.contains("--worker-threads \"0\""), "{text}");
        assert!(text.contains("--bind-host \"x\""), "{text}");
        let mut args = base.to_vec();
        args.extend(["--mode", "router", "--worker-threads", "3"]);
        let o = parse(&args).unwrap();
        assert_eq!((o.mode, o.worker_threads), (Mode::Router, 3));
        assert_eq!(o.bind_host, "0.0.0.0");
        // The defaults: one thread for a router, two for a sidecar.
        let mut args = base.to_vec();
        args.extend(["--mode", "router"]);
        assert_eq!(parse(&args).unwrap().worker_threads, 1);
        let mut args = base.to_vec();
        args.extend(["--mesh", "m", "--name", "n"]);
        assert_eq!(parse(&args).unwrap().worker_threads, 2);
    }

    #[test]
    fn app_probe_interval_is_a_duration_and_zero_turns_periodic_probes_off() {
        let base = ["--cp-ca", "ca.pem", "--token-file", "t", "--name", "web"];
        assert_eq!(
            parse(&base).unwrap().app_probe_interval,
            Duration::from_secs(5)
        );
        let mut args = base.to_vec();
        args.extend(["--app-probe-interval", "0"]);
        assert!(parse(&args).unwrap().app_probe_interval.is_zero());
        let mut args = base.to_vec();
        args.extend(["--app-probe-interval", "often"]);
        let text = parse(&args).unwrap_err().join("\n");
        assert!(text.contains("--app-probe-interval \"often\""), "{text}");
    }

    #[test]
    fn dns_resolv_conf_defaults_to_the_namespaces_own() {
        let base = ["--cp-ca", "ca.pem", "--token-file", "t", "--name", "web"];
        let o = parse(&base).unwrap();
        assert_eq!(o.dns_resolv_conf, PathBuf::from("/etc/resolv.conf"));
        let mut args = base.to_vec();
        args.extend(["--dns-resolv-conf", "/run/meshlink/resolv.conf"]);
        let o = parse(&args).unwrap();
        assert_eq!(
            o.dns_resolv_conf,
            PathBuf::from("/run/meshlink/resolv.conf")
        );
    }

    #[test]
    fn dataplane_file_names_the_proxy() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dp.yaml");
        std::fs::write(
            &file,
            "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {name: web-1, mesh: prod}\nspec:\n  networking:\n    address: 127.0.0.1\n    inbound: [{port: 10001, servicePort: 8080, tags: {kuma.io/service: web}}]\n",
        )
        .unwrap();
        let o = parse(&[
            "--cp-ca",
            "ca.pem",
            "--token-file",
            "t",
            "--dataplane-file",
            file.to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(o.node_id(), "prod.web-1");
    }
}

//! meshlink-cp: the control plane as a library, so tests can embed it.
//!
//! Wires the data dir, the store and the REST API together and owns their
//! lifecycle. [`ControlPlane::start`] returns once every listener is bound;
//! [`RunningControlPlane::stop`] drains them.

mod ads;
pub mod api;
pub mod config;
pub mod cp_tls;
pub mod data_dir;
pub mod identity;
pub mod resources;
mod xds_server;

use std::net::SocketAddr;
use std::sync::Arc;

use futures::StreamExt;
use meshlink_runtime::{MetricsRegistry, Shutdown};
use tokio::task::JoinSet;

pub use config::{ConfigError, ConfigOverrides, CpConfig};
use data_dir::{DataDir, DataDirError};
use resources::ResourceService;

/// Why the control plane could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum CpError {
    /// The data dir is unusable or locked.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// The store cannot be opened.
    #[error("cannot open store {url}: {source}")]
    Store {
        /// The store URL (credentials are not printed).
        url: String,
        /// The cause.
        source: meshlink_store::StoreError,
    },
    /// A listener cannot be bound.
    #[error(
        "cannot listen on {addr} ({what}): {source}; is another process using it? pass {flag} to pick another address"
    )]
    Bind {
        /// What the listener is for.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The flag that changes it.
        flag: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// A server task failed.
    #[error("{0}")]
    Serve(String),
    /// The xDS port's TLS material cannot be prepared.
    #[error(transparent)]
    CpTls(#[from] cp_tls::CpTlsError),
    /// The token signing key cannot be loaded or created.
    #[error("cannot load the proxy-token signing key: {0}")]
    Tokens(#[from] identity::tokens::TokenServiceError),
}

/// Entry point for starting a control plane.
pub struct ControlPlane;

/// A started control plane. Dropping it does not stop it; call [`Self::stop`]
/// or trigger the shutdown handle.
pub struct RunningControlPlane {
    /// The bound REST API address (useful with port 0).
    pub api_addr: SocketAddr,
    /// The bound xDS/Certify address.
    pub xds_addr: SocketAddr,
    /// The admin token.
    pub admin_token: String,
    /// Shared shutdown; SIGTERM/SIGINT trigger it in the binary.
    pub shutdown: Shutdown,
    tasks: JoinSet<Result<(), CpError>>,
    _data_dir: DataDir,
}

fn redact_url(url: &str) -> String {
    // postgres://user:password@host/db -> postgres://user:***@host/db
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

impl ControlPlane {
    /// Opens the data dir (taking its lock), the store, and binds the API.
    pub async fn start(config: CpConfig) -> Result<RunningControlPlane, CpError> {
        let data_dir = DataDir::open(&config.data_dir)?;
        let admin_token = data_dir.admin_token()?;
        let store = meshlink_store::open(&config.store)
            .await
            .map_err(|source| CpError::Store {
                url: redact_url(&config.store),
                source,
            })?;
        tracing::info!(backend = store.backend(), url = %redact_url(&config.store), "store opened");

        let registry = MetricsRegistry::new();
        let shutdown = Shutdown::new();
        let mut tasks = JoinSet::new();

        let start_rev = store
            .current_revision()
            .await
            .map_err(|source| CpError::Store {
                url: redact_url(&config.store),
                source,
            })?;
        let (rev_tx, rev_rx) = tokio::sync::watch::channel(start_rev);
        tasks.spawn(follow_revisions(
            store.clone(),
            start_rev,
            rev_tx,
            shutdown.clone(),
        ));

        let resources = ResourceService::new(store.clone());
        let tokens = Arc::new(identity::tokens::TokenService::load(store.as_ref()).await?);
        let advertised = config
            .advertised_host
            .clone()
            .unwrap_or_else(cp_tls::default_advertised_host);
        let tls = cp_tls::ensure(data_dir.path(), &advertised)?;
        let xds = XdsParts::new(&config, &resources, &tokens, &registry, &shutdown);
        tasks.spawn(ads::follow_changes(
            store.clone(),
            start_rev,
            xds.hub.clone(),
            shutdown.clone(),
        ));
        let (xds_addr, xds_serve) = xds_server::start(
            &config,
            &tls,
            resources.clone(),
            tokens.clone(),
            xds.server.clone(),
            &registry,
            shutdown.clone(),
        )
        .await?;
        let xds = xds.inspect;
        tasks.spawn(xds_serve);
        let (res, sd) = (resources.clone(), shutdown.clone());
        tasks.spawn(async move {
            identity::controller::run(res, sd).await;
            Ok(())
        });

        let (listener, api_addr) = bind(config.api_addr, "REST API", "--api-addr").await?;
        let state = api::ApiState {
            resources,
            tokens,
            cp_tls: Arc::new(tls),
            admin_token: Arc::from(admin_token.as_str()),
            revision: rev_rx,
            metrics: api::ApiMetrics::new(&registry),
            registry,
            token_hint: Arc::from(data_dir.path().join("admin-token").display().to_string()),
            xds,
        };
        let app = api::router(state);
        let sd = shutdown.clone();
        tasks.spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { sd.wait().await })
                .await
                .map_err(|e| CpError::Serve(format!("REST API server failed: {e}")))
        });
        tracing::info!(%api_addr, %xds_addr, data_dir = %config.data_dir.display(), "control plane started");
        Ok(RunningControlPlane {
            api_addr,
            xds_addr,
            admin_token,
            shutdown,
            tasks,
            _data_dir: data_dir,
        })
    }
}

/// The xDS machinery: owner registry, reconciler, ADS service, reports.
struct XdsParts {
    hub: meshlink_xds::hub::Hub,
    server: meshlink_xds::ads::AdsServer,
    inspect: api::XdsInspect,
}

impl XdsParts {
    fn new(
        config: &CpConfig,
        resources: &ResourceService,
        tokens: &Arc<identity::tokens::TokenService>,
        registry: &MetricsRegistry,
        shutdown: &Shutdown,
    ) -> Self {
        use meshlink_xds::ads::{AdsMetrics, AdsParts, AdsServer, Inspector};
        let owners = meshlink_xds::owner::OwnerRegistry::new();
        let clock = meshlink_identity::WallClock::start();
        let cancel = tokio_util::sync::CancellationToken::new();
        let on_shutdown = (shutdown.clone(), cancel.clone());
        tokio::spawn(async move {
            on_shutdown.0.wait().await;
            on_shutdown.1.cancel();
        });
        let source = Arc::new(ads::StoreSource::new(resources.clone()));
        let hub = meshlink_xds::hub::Hub::spawn(source, owners.clone(), clock, cancel);
        let metrics = AdsMetrics::default();
        registry.register_with("xds", |r| metrics.register(r));
        let inspector = Inspector::default();
        let instance = format!(
            "{}/{}",
            cp_tls::hostname().unwrap_or_else(|| "meshlink-cp".to_owned()),
            dialable(config.xds_addr, config.advertised_host.as_deref()),
        );
        let server = AdsServer::new(AdsParts {
            registry: owners.clone(),
            hub: hub.clone(),
            auth: Arc::new(ads::ProxyAuth {
                tokens: tokens.clone(),
                store: resources.store().clone(),
            }),
            inspector: inspector.clone(),
            metrics,
            clock,
            instance,
        });
        Self {
            hub,
            server,
            inspect: api::XdsInspect { inspector, owners },
        }
    }
}

/// Binds a listener, naming the flag that changes the address on failure.
pub(crate) async fn bind(
    addr: SocketAddr,
    what: &'static str,
    flag: &'static str,
) -> Result<(tokio::net::TcpListener, SocketAddr), CpError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| CpError::Bind {
            what,
            addr,
            flag,
            source,
        })?;
    let bound = listener
        .local_addr()
        .map_err(|e| CpError::Serve(e.to_string()))?;
    Ok((listener, bound))
}

/// Follows the store's change feed and publishes the newest revision, which
/// wakes long-poll watchers. Writes by other control planes sharing a
/// PostgreSQL store arrive here too.
async fn follow_revisions(
    store: Arc<dyn meshlink_store::Store>,
    from: u64,
    tx: tokio::sync::watch::Sender<u64>,
    shutdown: Shutdown,
) -> Result<(), CpError> {
    let mut after = from;
    loop {
        let mut feed = store.watch(after);
        loop {
            tokio::select! {
                _ = shutdown.wait() => return Ok(()),
                next = feed.next() => match next {
                    Some(Ok(change)) => {
                        after = change.revision;
                        tx.send_replace(after);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "change feed interrupted; resuming");
                        break;
                    }
                    None => break,
                }
            }
        }
        tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
    }
}

impl RunningControlPlane {
    /// Waits until shutdown is triggered and every server has drained.
    pub async fn wait(mut self) -> Result<(), CpError> {
        let mut result = Ok(());
        while let Some(joined) = self.tasks.join_next().await {
            let r = joined.unwrap_or_else(|e| Err(CpError::Serve(format!("task panicked: {e}"))));
            if let Err(e) = r {
                tracing::error!(error = %e, "control plane task failed");
                self.shutdown.trigger();
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        result
    }

    /// Triggers shutdown and waits for it to finish.
    pub async fn stop(self) -> Result<(), CpError> {
        self.shutdown.trigger();
        self.wait().await
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("sqlite://./x.db"), "sqlite://./x.db");
    }
}

/// An address a user can dial for `addr`: a wildcard bind (0.0.0.0, ::)
/// shows the advertised host (default: [`cp_tls::default_advertised_host`]).
fn dialable(addr: SocketAddr, advertised: Option<&str>) -> String {
    if !addr.ip().is_unspecified() {
        return addr.to_string();
    }
    let host = advertised.map_or_else(cp_tls::default_advertised_host, str::to_owned);
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, addr.port()).to_string(),
        Err(_) => format!("{host}:{}", addr.port()),
    }
}

#[cfg(test)]
mod dialable_tests {
    use super::*;

    #[test]
    fn a_wildcard_bind_shows_the_advertised_host() {
        let any: SocketAddr = "0.0.0.0:5678".parse().unwrap();
        assert_eq!(dialable(any, Some("10.0.0.7")), "10.0.0.7:5678");
        assert_eq!(dialable(any, Some("cp.example")), "cp.example:5678");
        assert_eq!(
            dialable("[::]:5678".parse().unwrap(), Some("fd00::1")),
            "[fd00::1]:5678"
        );
        assert_eq!(
            dialable("127.0.0.1:5678".parse().unwrap(), Some("x")),
            "127.0.0.1:5678"
        );
        assert!(!dialable(any, None).starts_with("0.0.0.0"));
    }
}

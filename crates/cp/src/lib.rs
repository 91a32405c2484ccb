//! meshlink-cp: the control plane as a library, so tests can embed it.
//!
//! Wires the data dir, the store and the REST API together and owns their
//! lifecycle. [`ControlPlane::start`] returns once every listener is bound;
//! [`RunningControlPlane::stop`] drains them.
//!
//! # Lifecycle
//!
//! Every task the control plane starts is owned: servers and feed followers
//! by a `JoinSet`, the reconciler and background store writes by a
//! `TaskTracker`, ADS streams by the ADS server's own tracker, per-proxy
//! timers by their owner lease. Shutdown (SIGTERM, SIGINT or
//! [`Shutdown::trigger`]) stops the listeners, ends every ADS stream with
//! `UNAVAILABLE`, lets in-flight REST and Certify requests finish, and waits
//! for all of the above up to the drain timeout; past it, the remaining
//! tasks are aborted and [`RunningControlPlane::wait`] returns
//! [`CpError::DrainTimeout`].

mod ads;
pub mod api;
mod coalesced_writes;
pub mod config;
pub mod cp_tls;
pub mod data_dir;
mod feed_compaction;
pub mod grants;
mod guarded_http;
pub mod identity;
pub mod ready_file;
mod references;
pub mod replicas;
mod report_stream;
pub mod resources;
mod router;
mod secret_check;
pub mod site;
pub mod status;
mod traffic;
pub mod vips;
mod xds_server;

use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;

use futures::StreamExt;
use meshlink_runtime::{MetricsRegistry, Shutdown};
use tokio::task::JoinSet;
use tokio_util::task::TaskTracker;

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
    /// A setting is unusable on this host (checked at start).
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The xDS port's TLS material cannot be prepared.
    #[error(transparent)]
    CpTls(#[from] cp_tls::CpTlsError),
    /// The replicas' shared material (xDS CA, admin token) cannot be set up.
    #[error(transparent)]
    Shared(#[from] replicas::shared::SharedError),
    /// The token signing key cannot be loaded or created.
    #[error("cannot load the proxy-token signing key: {0}")]
    Tokens(#[from] identity::tokens::TokenServiceError),
    /// Shutdown did not finish within the drain timeout; the rest was
    /// aborted.
    #[error(
        "shutdown did not finish within the drain timeout ({timeout:?}): {pending}; \
         forced the exit (raise --drain-timeout to wait longer)"
    )]
    DrainTimeout {
        /// The drain timeout.
        timeout: Duration,
        /// What was still running.
        pending: String,
    },
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
    /// The bound grant server address (HTTPS).
    pub grant_addr: SocketAddr,
    /// The admin token.
    pub admin_token: String,
    /// Shared shutdown; SIGTERM/SIGINT trigger it in the binary.
    pub shutdown: Shutdown,
    tasks: JoinSet<Result<(), CpError>>,
    /// The reconciler and background store writes.
    background: TaskTracker,
    ads: meshlink_xds::ads::AdsServer,
    drain_timeout: Duration,
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
        let store = open_store(&config.store).await?;
        tracing::info!(backend = store.backend(), url = %redact_url(&config.store), "store opened");
        let admin_token = replicas::shared::admin_token(store.as_ref(), &data_dir).await?;

        let registry = MetricsRegistry::new();
        let shutdown = Shutdown::new();
        let mut tasks = JoinSet::new();
        let background = TaskTracker::new();

        let start_rev = store
            .current_revision()
            .await
            .map_err(|source| CpError::Store {
                url: redact_url(&config.store),
                source,
            })?;
        let (rev_tx, rev_rx) = tokio::sync::watch::channel(start_rev);

        let resources = ResourceService::new(store.clone());
        // Loaded after `start_rev` was read: a revocation between the two is
        // both listed and replayed by the feed (noting it twice is harmless).
        let tokens = Arc::new(identity::tokens::TokenService::load(store.as_ref()).await?);
        let advertised = config
            .advertised_host
            .clone()
            .unwrap_or_else(cp_tls::default_advertised_host);
        let tls = replicas::shared::cp_tls(store.as_ref(), data_dir.path(), &advertised).await?;
        let xds_listener = bind_with_backlog(
            config.xds_addr,
            "xDS/Certify",
            "--xds-addr",
            xds_server::XDS_BACKLOG,
        )?;
        let replica = replicas::Replica::new(config.instance.clone().unwrap_or_else(|| {
            format!(
                "{}:{}",
                cp_tls::hostname().unwrap_or_else(|| "meshlink-cp".to_owned()),
                xds_listener.1.port()
            )
        }));
        let (leadership, election) = replicas::leader::election(
            store.clone(),
            replica.clone(),
            config.leader_lease,
            &registry,
        );
        let sd = shutdown.clone();
        tasks.spawn(async move {
            election.run(sd).await;
            Ok(())
        });
        let (s, l, r, sd) = (
            store.clone(),
            leadership.clone(),
            registry.clone(),
            shutdown.clone(),
        );
        let retention = config.feed_retention;
        tasks.spawn(async move {
            feed_compaction::run(s, retention, l, &r, sd).await;
            Ok(())
        });
        // One wall clock for every certificate time (hub SDS and Certify).
        let clock = meshlink_identity::WallClock::start();
        let (ca, ca_controller) =
            identity::controller::new(resources.clone(), clock, leadership.clone());
        let (status_handle, status_inbox) = status::channel();
        let xds = XdsParts::new(XdsInputs {
            config: &config,
            resources: &resources,
            tokens: &tokens,
            registry: &registry,
            shutdown: &shutdown,
            ca: &ca,
            background: &background,
            status: &status_handle,
            instance: &replica.instance,
        });
        let ads_server = xds.server.clone();
        tasks.spawn(follow_revisions(
            store.clone(),
            start_rev,
            rev_tx,
            Revocations {
                tokens: tokens.clone(),
                ads: ads_server.clone(),
            },
            shutdown.clone(),
        ));
        let mut issuance = identity::issuance::IssuanceHooks::default();
        issuance.add(status_handle.issuance_observer());
        let status_parts = status::StatusParts {
            resources: resources.clone(),
            inspector: xds.inspect.inspector.clone(),
            instance: xds.instance.clone(),
            start_revision: start_rev,
            registry: registry.clone(),
            leadership: leadership.clone(),
        };
        let sd = shutdown.clone();
        tasks.spawn(async move {
            status::run(status_parts, status_inbox, sd).await;
            Ok(())
        });
        let vip_ranges =
            vips::VipRanges::parse(&config.vip_range, &vips::range::interface_addresses())
                .map_err(|message| config::ConfigError::Invalid {
                    field: "--vip-range",
                    message,
                })?;
        let (res, l, sd) = (resources.clone(), leadership.clone(), shutdown.clone());
        tasks.spawn(async move {
            vips::allocator::run(res, vip_ranges, l, start_rev, sd).await;
            Ok(())
        });
        tasks.spawn(ads::follow_changes(
            store.clone(),
            start_rev,
            ads::Reconcilers {
                hub: xds.hub.clone(),
                routers: xds.routers.clone(),
                listeners: Default::default(),
                ingress: None,
            },
            shutdown.clone(),
        ));
        let (router_status, router_inbox) = router::status::channel();
        let (res, cfg, sd) = (resources.clone(), xds.routers.config(), shutdown.clone());
        let router_advertised = advertised.clone();
        let holder = router::holder::Holder {
            store: store.clone(),
            replica: replica.clone(),
        };
        tasks.spawn(async move {
            router::status::run(res, router_advertised, cfg, router_inbox, holder, sd).await;
            Ok(())
        });
        let traffic = traffic::TrafficBoard::default();
        let router_rpc = router::rpc::RouterStatusService {
            tokens: tokens.clone(),
            status: router_status,
            shutdown: shutdown.clone(),
            next_stream: std::sync::atomic::AtomicU64::new(0),
            traffic: traffic.clone(),
        };
        let (xds_addr, xds_serve) = xds_server::start(
            xds_listener,
            &tls,
            resources.clone(),
            tokens.clone(),
            xds.server.clone(),
            issuance,
            &registry,
            shutdown.clone(),
            ca.clone(),
            router_rpc,
            ads::DataplaneHealthService::new(
                ads::ProxyAuth {
                    tokens: tokens.clone(),
                },
                status_handle.clone(),
                traffic.clone(),
                shutdown.clone(),
            ),
        )
        .await?;
        let xds = xds.inspect;
        tasks.spawn(xds_serve);
        let sd = shutdown.clone();
        tasks.spawn(async move {
            ca_controller.run(sd).await;
            Ok(())
        });

        let http_metrics = guarded_http::HttpConnMetrics::new(&registry);
        let http_port = |name| guarded_http::Port {
            name,
            limits: config.http_limits,
            metrics: http_metrics.clone(),
        };
        let grant = grants::start(
            config.grant_addr,
            &resources,
            &advertised,
            http_port("grant"),
            shutdown.clone(),
        )
        .await?;
        let grant_addr = grant.addr;
        let renew_at = Arc::new(grant.renew_at);
        let sd = shutdown.clone();
        let grant_server = grant.server;
        tasks.spawn(async move {
            grant_server.await;
            Ok(())
        });
        let site_controller = grant.controller;
        tasks.spawn(async move {
            site_controller.run(start_rev, sd).await;
            Ok(())
        });

        let (listener, api_addr) = bind(config.api_addr, "REST API", "--api-addr").await?;
        replicas::start(replicas::ReplicaParts {
            store: store.clone(),
            resources: resources.clone(),
            replica: replica.clone(),
            leadership,
            addrs: replicas::record::Addresses {
                api: dialable(api_addr, config.advertised_host.as_deref()),
                xds: dialable(xds_addr, config.advertised_host.as_deref()),
                grant: dialable(grant_addr, config.advertised_host.as_deref()),
            },
            ads: ads_server.clone(),
            config: &config,
            registry: &registry,
            shutdown: &shutdown,
            tasks: &mut tasks,
        });
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
            ca,
            advertised_host: Arc::from(advertised.as_str()),
            renew_at,
            incarnation: Arc::from(replica.incarnation.as_str()),
            instance: Arc::from(replica.instance.as_str()),
            traffic,
        };
        let app = hyper_util::service::TowerToHyperService::new(api::router(state));
        let api_server = guarded_http::serve(
            listener,
            http_port("api"),
            shutdown.clone(),
            |tcp, _| std::future::ready(Some(tcp)),
            app,
        );
        tasks.spawn(async move {
            api_server.await;
            Ok(())
        });
        tracing::info!(%api_addr, %xds_addr, %grant_addr, data_dir = %config.data_dir.display(), "control plane started");
        Ok(RunningControlPlane {
            api_addr,
            xds_addr,
            grant_addr,
            admin_token,
            shutdown,
            tasks,
            background,
            ads: ads_server,
            drain_timeout: config.drain_timeout,
            _data_dir: data_dir,
        })
    }
}

/// Opens the store. A PostgreSQL server that cannot be reached yet is
/// waited for (a replica started before its database must not crash-loop),
/// with a log line naming the database and the reason every 10 attempts;
/// every other failure (a bad URL, a failed migration, an unusable SQLite
/// file) is returned at once.
async fn open_store(url: &str) -> Result<Arc<dyn meshlink_store::Store>, CpError> {
    let waits = !url.starts_with("sqlite://");
    let mut attempt: u32 = 0;
    loop {
        match meshlink_store::open(url).await {
            Ok(store) => {
                if attempt > 0 {
                    tracing::info!(url = %redact_url(url), attempts = attempt + 1, "the database is reachable");
                }
                return Ok(store);
            }
            Err(meshlink_store::StoreError::Unavailable(reason)) if waits => {
                if attempt.is_multiple_of(10) {
                    tracing::warn!(url = %redact_url(url), %reason,
                        "waiting for the database to accept connections; retrying every second");
                }
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(source) => {
                return Err(CpError::Store {
                    url: redact_url(url),
                    source,
                });
            }
        }
    }
}

/// The xDS machinery: owner registry, reconciler, ADS service, reports.
struct XdsParts {
    hub: meshlink_xds::hub::Hub,
    routers: meshlink_xds::router::RouterHub,
    server: meshlink_xds::ads::AdsServer,
    inspect: api::XdsInspect,
    instance: String,
}

/// What the xDS machinery is built from.
struct XdsInputs<'a> {
    config: &'a CpConfig,
    resources: &'a ResourceService,
    tokens: &'a Arc<identity::tokens::TokenService>,
    registry: &'a MetricsRegistry,
    shutdown: &'a Shutdown,
    /// The mesh CA controller's handle (CA reads, issuance events, clock).
    ca: &'a identity::CaHandle,
    /// Owns the reconciler, so shutdown waits for it.
    background: &'a TaskTracker,
    /// Receives stream views for the Dataplane status.
    status: &'a status::StatusHandle,
    /// This replica's `--instance`.
    instance: &'a str,
}

impl XdsParts {
    fn new(inputs: XdsInputs<'_>) -> Self {
        let XdsInputs {
            config,
            resources,
            tokens,
            registry,
            shutdown,
            ca,
            background,
            status,
            instance,
        } = inputs;
        use meshlink_xds::ads::{
            AdmissionConfig, AdsMetrics, AdsOptions, AdsParts, AdsServer, Inspector,
        };
        let owners = meshlink_xds::owner::OwnerRegistry::new();
        let clock = ca.clock();
        let source = Arc::new(ads::StoreSource::new(
            resources.clone(),
            ca.clone(),
            config.dns_domain.clone(),
        ));
        let hub = meshlink_xds::hub::Hub::spawn_on(
            background,
            source.clone(),
            owners.clone(),
            clock,
            shutdown.token(),
        );
        let metrics = AdsMetrics::default();
        registry.register_with("xds", |r| {
            metrics.register(r);
            hub.metrics().register(r);
        });
        let inspector = Inspector::with_observer(status.stream_observer());
        let instance = instance.to_owned();
        let routers = meshlink_xds::router::RouterHub::spawn_on(
            background,
            Arc::new(router::source::StoreSiteSource {
                resources: resources.clone(),
                meshes: Some(source.clone()),
            }),
            owners.clone(),
            shutdown.token(),
        );
        let options = AdsOptions {
            admission: Some(AdmissionConfig {
                burst: config.xds_stream_burst,
                per_second: config.xds_streams_per_second,
            }),
            routers: Some(routers.clone()),
        };
        let server = AdsServer::with_options(
            AdsParts {
                registry: owners.clone(),
                hub: hub.clone(),
                auth: Arc::new(ads::ProxyAuth {
                    tokens: tokens.clone(),
                }),
                inspector: inspector.clone(),
                metrics,
                clock,
                instance: instance.clone(),
            },
            options,
        );
        Self {
            hub,
            routers,
            server,
            inspect: api::XdsInspect { inspector, owners },
            instance,
        }
    }
}

/// Binds a listener, naming the flag that changes the address on failure.
pub(crate) async fn bind(
    addr: SocketAddr,
    what: &'static str,
    flag: &'static str,
) -> Result<(tokio::net::TcpListener, SocketAddr), CpError> {
    bind_with_backlog(addr, what, flag, 1024)
}

/// Binds a listener with an accept backlog of `backlog` connections (the
/// kernel caps it at `net.core.somaxconn`).
pub(crate) fn bind_with_backlog(
    addr: SocketAddr,
    what: &'static str,
    flag: &'static str,
    backlog: u32,
) -> Result<(tokio::net::TcpListener, SocketAddr), CpError> {
    let bind_error = |source| CpError::Bind {
        what,
        addr,
        flag,
        source,
    };
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(bind_error)?;
    socket.set_reuseaddr(true).map_err(bind_error)?;
    socket.bind(addr).map_err(bind_error)?;
    let listener = socket.listen(backlog).map_err(bind_error)?;
    let bound = listener
        .local_addr()
        .map_err(|e| CpError::Serve(e.to_string()))?;
    Ok((listener, bound))
}

/// Where token revocations from the change feed go.
struct Revocations {
    tokens: Arc<identity::tokens::TokenService>,
    ads: meshlink_xds::ads::AdsServer,
}

impl Revocations {
    fn on_change(&self, change: &meshlink_store::Change) {
        let key = &change.object.key;
        if key.kind == identity::secrets::REVOKED_TOKEN
            && change.change_type != meshlink_store::ChangeType::Deleted
        {
            self.tokens.note_revoked(&key.name);
            self.ads.revoke_token(&key.name);
        }
    }
}

/// Follows the store's change feed: publishes the newest revision, which
/// wakes long-poll watchers, and applies token revocations (cache, then the
/// open streams of the token). Writes by other control planes sharing a
/// PostgreSQL store arrive here too.
async fn follow_revisions(
    store: Arc<dyn meshlink_store::Store>,
    from: u64,
    tx: tokio::sync::watch::Sender<u64>,
    revocations: Revocations,
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
                        revocations.on_change(&change);
                        tx.send_replace(after);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "change feed interrupted; resuming");
                        if let Some(from) = meshlink_store::resync_revision(store.as_ref(), &e).await {
                            // Fell behind the feed's window: the reload
                            // below is the full list; go on after it.
                            after = from;
                            tx.send_replace(after);
                        }
                        break;
                    }
                    None => break,
                }
            }
        }
        // Revocations are idempotent: re-read them all after a gap.
        if let Err(e) = revocations.tokens.reload_revoked(store.as_ref()).await {
            tracing::warn!(error = %e, "cannot reload revoked tokens; keeping the cache");
        }
        tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
    }
}

impl RunningControlPlane {
    /// Waits until shutdown is triggered (or a server fails, which triggers
    /// it), then for every task to end, for at most the drain timeout.
    pub async fn wait(mut self) -> Result<(), CpError> {
        let mut result = Ok(());
        while !self.shutdown.is_triggered() {
            tokio::select! {
                () = self.shutdown.wait() => {}
                joined = self.tasks.join_next() => match joined {
                    Some(joined) => note_task_end(joined, &self.shutdown, &mut result),
                    None => self.shutdown.trigger(),
                },
            }
        }
        tracing::info!(drain_timeout = ?self.drain_timeout, "draining: ADS streams end with UNAVAILABLE, in-flight requests finish");
        // The xDS server's shutdown future drains the ADS streams too; this
        // covers a server that already stopped.
        self.ads.drain();
        self.background.close();
        let drained = tokio::time::timeout(self.drain_timeout, async {
            while let Some(joined) = self.tasks.join_next().await {
                note_task_end(joined, &self.shutdown, &mut result);
            }
            self.ads.wait_streams().await;
            self.background.wait().await;
        })
        .await;
        if drained.is_err() {
            let pending = format!(
                "{} servers, {} ADS streams, {} background tasks still running",
                self.tasks.len(),
                self.ads.live_streams(),
                self.background.len()
            );
            self.tasks.abort_all();
            return Err(CpError::DrainTimeout {
                timeout: self.drain_timeout,
                pending,
            });
        }
        result
    }

    /// Triggers shutdown and waits for it to finish.
    pub async fn stop(self) -> Result<(), CpError> {
        self.shutdown.trigger();
        self.wait().await
    }
}

/// Records a finished server task; a failure starts shutdown.
fn note_task_end(
    joined: Result<Result<(), CpError>, tokio::task::JoinError>,
    shutdown: &Shutdown,
    result: &mut Result<(), CpError>,
) {
    let r = joined.unwrap_or_else(|e| Err(CpError::Serve(format!("task panicked: {e}"))));
    if let Err(e) = r {
        tracing::error!(error = %e, "control plane task failed");
        shutdown.trigger();
        if result.is_ok() {
            *result = Err(e);
        }
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

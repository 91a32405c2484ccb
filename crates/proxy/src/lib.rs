//! meshlink-proxy: the data-plane proxy.
//!
//! In router mode ([`router`]) it links its site to other sites with the
//! `meshlink_link` transport; the rest of this overview is sidecar mode.
//!
//! In sidecar mode it gives one workload mTLS and authorization: it gets
//! an identity certificate through Certify ([`identity`]), follows its
//! configuration over delta ADS ([`xds`]), binds the listeners whose
//! references have arrived ([`listeners`], I2), and proxies connections
//! ([`connection`]) with load balancing and outlier ejection ([`lb`]).
//! [`health_check`] runs the clusters' active health checks and keeps
//! failing endpoints out of the balancer.
//! [`apps`] probes the local applications behind the inbounds and reports
//! them to the control plane. [`dns`] serves the mesh names (`*.mesh`,
//! the control plane's virtual IPs) to the application and forwards the
//! rest. [`admin`] serves `/ready`, `/config_dump`
//! and `/metrics`.
//!
//! Tasks (all tied to one cancellation token or the connection tracker):
//! identity actor, xDS client, listener manager (+ one accept loop per
//! bound listener), application monitor and its reporter, health checker
//! (+ one task per checked endpoint), mesh DNS server (+ its socket loops,
//! TCP connections and forwards), admin server, and one task per
//! connection. State flows
//! through `watch` channels: xDS → `ProxyConfig`, identity →
//! `WorkloadIdentity`, listener manager → `Dataplane` (what connections
//! read). Nothing is ever read from a lock across an await.

pub mod admin;
pub mod app_scrape;
pub mod apps;
pub mod backoff;
pub mod capture;
pub mod circuit;
pub mod connection;
pub mod counted;
pub mod cp;
pub mod dataplane;
pub mod dns;
pub mod drain;
pub mod hash_ring;
pub mod health_check;
pub mod http;
pub mod identity;
pub mod lb;
pub mod listeners;
pub mod log_limit;
pub mod metrics;
pub mod metrics_endpoint;
pub mod metrics_filter;
pub mod metrics_push;
pub mod model;
pub mod options;
pub mod otlp_metrics;
pub mod router;
pub mod tcp_copy;
pub mod wait;
pub mod xds;

use std::sync::Arc;

use meshlink_runtime::{MetricsRegistry, Shutdown};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use options::{Mode, ProxyOptions};

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The admin address cannot be bound.
    #[error("cannot listen on the admin address {addr}: {source}; pass another --admin-addr")]
    AdminBind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The bind error.
        source: std::io::Error,
    },
    /// `--admin-addr-file` cannot be written.
    #[error("cannot write --admin-addr-file {path}: {source}; pass a path in a writable directory")]
    AdminAddrFile {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every connection finished within the drain timeout.
    Clean,
    /// The drain timeout passed with connections still open; they were cut.
    DeadlinePassed,
}

/// Serves the admin endpoint on `socket` until `stop` fires.
async fn admin_serve(socket: tokio::net::TcpListener, app: axum::Router, stop: CancellationToken) {
    let serve =
        axum::serve(socket, app).with_graceful_shutdown(async move { stop.cancelled().await });
    if let Err(e) = serve.await {
        tracing::error!(error = %e, "admin server failed");
    }
}

/// Runs the proxy until `shutdown` fires, then drains: stops accepting,
/// waits for open connections up to `options.drain_timeout`, and returns.
pub async fn run(options: ProxyOptions, shutdown: Shutdown) -> Result<Drained, StartError> {
    let registry = MetricsRegistry::new();
    let metrics = Arc::new(metrics::ProxyMetrics::default());
    registry.register_with("proxy", |r| {
        metrics.register(r);
        options.cp.endpoints.register(r);
    });

    let admin_socket = tokio::net::TcpListener::bind(options.admin_addr)
        .await
        .map_err(|source| StartError::AdminBind {
            addr: options.admin_addr,
            source,
        })?;
    let admin_addr = admin_socket
        .local_addr()
        .map_err(|source| StartError::AdminBind {
            addr: options.admin_addr,
            source,
        })?;
    if let Some(path) = &options.admin_addr_file {
        admin::write_addr_file(path, admin_addr).map_err(|source| StartError::AdminAddrFile {
            path: path.clone(),
            source,
        })?;
    }
    if options.mode == Mode::Router {
        tracing::info!(
            admin = %admin_addr,
            cp = %options.cp.endpoints,
            bind_host = %options.bind_host,
            "meshlink-proxy starting (router)"
        );
        return Ok(router::run(options, admin_socket, registry, metrics, shutdown).await);
    }
    tracing::info!(
        admin = %admin_addr,
        cp = %options.cp.endpoints,
        node = %options.node_id(),
        "meshlink-proxy starting (sidecar)"
    );

    let tasks = CancellationToken::new();
    let stop_accepting = CancellationToken::new();
    let connections = TaskTracker::new();
    let drain = drain::ConnectionDrain::default();
    let (config_tx, config_rx) = watch::channel(Arc::new(model::ProxyConfig::default()));
    let (identity_tx, identity_rx) = watch::channel(None);
    let (dataplane_tx, dataplane_rx) = watch::channel(Arc::new(dataplane::Dataplane::default()));
    let (draining_tx, draining_rx) = watch::channel(false);
    let identity_status = identity::IdentityStatus::default();
    let xds_status = xds::SharedXdsStatus::default();
    let listener_states = listeners::SharedListenerStates::default();

    let (connection_tx, connection_rx) = watch::channel(None);
    let app_metrics = apps::AppMetrics::default();
    registry.register_with("proxy", |r| app_metrics.register(r));
    let (app_health, app_monitor) =
        apps::AppMonitor::new(config_rx.clone(), options.app_probe_interval, app_metrics);

    let background = TaskTracker::new();
    background.spawn(app_monitor.run(tasks.clone()));
    let (unhealthy_tx, unhealthy_rx) = watch::channel(Arc::default());
    background.spawn(apps::unhealthy::run(
        dataplane_rx.clone(),
        unhealthy_tx,
        tasks.clone(),
    ));
    background.spawn(apps::report::run(
        options.node_id(),
        connection_rx,
        apps::report::ReportSources {
            apps: app_health.clone(),
            unhealthy: unhealthy_rx,
            metrics: metrics.clone(),
        },
        tasks.clone(),
    ));
    background.spawn(identity::run(
        options.cp.clone(),
        identity_tx,
        identity_status.clone(),
        metrics.clone(),
        config_rx.clone(),
        tasks.clone(),
    ));
    background.spawn(
        xds::XdsClient {
            target: options.cp.clone(),
            node_id: xds::NodeId::Fixed(options.node_id()),
            config: config_tx,
            status: xds_status.clone(),
            metrics: metrics.clone(),
            connection: Some(connection_tx),
        }
        .run(tasks.clone()),
    );
    let manager = listeners::ListenerManager {
        config: config_rx.clone(),
        identity: identity_rx.clone(),
        dataplane: dataplane_tx,
        states: listener_states.clone(),
        connections: connections.clone(),
        drain: drain.clone(),
        metrics: metrics.clone(),
        apps: app_health.clone(),
        table: Default::default(),
    };
    let manager = background.spawn(manager.run(stop_accepting.clone()));
    background.spawn(
        health_check::HealthChecker {
            dataplane: dataplane_rx.clone(),
            metrics: metrics.clone(),
        }
        .run(tasks.clone()),
    );
    let dns_metrics = Arc::new(dns::DnsMetrics::default());
    registry.register_with("proxy", |r| dns_metrics.register(r));
    let upstreams = dns::resolv::upstreams(&options.dns_resolv_conf).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "mesh DNS: no upstream resolvers; names outside the mesh get SERVFAIL");
        Vec::new()
    });
    for listener in meshlink_proto::dns_listener::LISTENER_NAMES {
        background.spawn(
            dns::DnsServer {
                config: config_rx.clone(),
                listener,
                upstreams: upstreams.clone(),
                metrics: dns_metrics.clone(),
                bound: watch::channel(None).0,
            }
            .run(tasks.clone()),
        );
    }
    let scrapes = app_scrape::AppScrapeMetrics::default();
    registry.register_with("proxy", |r| scrapes.register(r));
    let metrics_source = metrics_endpoint::MetricsSource {
        registry,
        metrics,
        identity: identity_rx.clone(),
        config: config_rx.clone(),
        scrapes,
    };
    background.spawn(metrics_endpoint::serve_endpoints(
        metrics_source.clone(),
        options.node_id(),
        tasks.clone(),
    ));
    let admin_state = admin::AdminState {
        config: config_rx,
        identity: identity_rx,
        identity_status,
        dataplane: dataplane_rx,
        listeners: listener_states,
        xds: xds_status,
        metrics: metrics_source,
        draining: draining_rx,
        apps: app_health,
    };
    background.spawn(admin_serve(
        admin_socket,
        admin::router(admin_state),
        tasks.clone(),
    ));

    shutdown.wait().await;
    draining_tx.send_replace(true);
    drain.start();
    stop_accepting.cancel();
    let _ = manager.await;
    connections.close();
    let open = connections.len();
    tracing::info!(
        open_connections = open,
        deadline = %humantime::format_duration(options.drain_timeout),
        "draining: stopped accepting, waiting for open connections"
    );
    let drained = match tokio::time::timeout(options.drain_timeout, connections.wait()).await {
        Ok(()) => Drained::Clean,
        Err(_) => {
            tracing::warn!(
                open_connections = connections.len(),
                "drain deadline passed; closing the remaining connections"
            );
            // Every connection task stops at the deadline and is waited
            // for: none outlives this function.
            drain.force();
            connections.wait().await;
            Drained::DeadlinePassed
        }
    };
    tasks.cancel();
    background.close();
    background.wait().await;
    tracing::info!(?drained, "meshlink-proxy stopped");
    Ok(drained)
}

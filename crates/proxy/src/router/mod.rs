//! Router mode (`meshlink-proxy run --mode router`): one router per site,
//! linking it to other sites.
//!
//! Tasks: the delta ADS client, with the router's types and SDS Secrets
//! ([`resources`]); the driver that owns the link router and applies each
//! accepted configuration to it ([`driver`]); the status reporter
//! ([`report`]); and the admin server ([`admin`]). The link transport
//! itself is `meshlink_link`. Nothing here exits for lack of the control
//! plane, the CA file, the token or a credential (I2): each is waited for
//! and named on `/ready`.

pub mod admin;
pub mod driver;
pub mod report;
pub mod resources;

use std::sync::Arc;

use meshlink_link::LinkMetrics;
use meshlink_runtime::{MetricsRegistry, Shutdown};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use driver::RouterState;
pub use resources::RouterResources;

use crate::metrics::ProxyMetrics;
use crate::options::ProxyOptions;
use crate::xds::{NodeId, SharedXdsStatus, XdsClient};
use crate::{Drained, admin_serve};

/// Runs the router until `shutdown` fires, then closes its links and
/// flows (up to the drain timeout).
pub async fn run(
    options: ProxyOptions,
    admin_socket: tokio::net::TcpListener,
    registry: MetricsRegistry,
    metrics: Arc<ProxyMetrics>,
    shutdown: Shutdown,
) -> Drained {
    let link_metrics = Arc::new(LinkMetrics::default());
    registry.register_with("link", |r| link_metrics.register(r));
    let tasks = CancellationToken::new();
    let background = TaskTracker::new();
    let (resources_tx, resources_rx) = watch::channel(Arc::new(RouterResources::default()));
    let (state_tx, state_rx) = watch::channel(RouterState::default());
    let (draining_tx, draining_rx) = watch::channel(false);
    let xds_status = SharedXdsStatus::default();

    background.spawn(
        XdsClient {
            target: options.cp.clone(),
            node_id: NodeId::RouterOfToken,
            config: resources_tx,
            status: xds_status.clone(),
            metrics,
            connection: None,
        }
        .run(tasks.clone()),
    );
    let driver_stop = CancellationToken::new();
    let driver = background.spawn(driver::drive(
        resources_rx.clone(),
        options.bind_host.clone(),
        options.mesh_port,
        link_metrics,
        state_tx,
        driver_stop.clone(),
        options.drain_timeout,
    ));
    background.spawn(report::run(
        options.cp.clone(),
        state_rx.clone(),
        tasks.clone(),
    ));
    let admin = admin::RouterAdmin {
        resources: resources_rx,
        state: state_rx,
        xds: xds_status,
        registry,
        draining: draining_rx,
    };
    background.spawn(admin_serve(
        admin_socket,
        admin::router(admin),
        tasks.clone(),
    ));

    shutdown.wait().await;
    draining_tx.send_replace(true);
    tracing::info!(
        deadline = %humantime::format_duration(options.drain_timeout),
        "draining: closing links and flows"
    );
    driver_stop.cancel();
    let drained = match tokio::time::timeout(options.drain_timeout, driver).await {
        Ok(_) => Drained::Clean,
        Err(_) => Drained::DeadlinePassed,
    };
    tasks.cancel();
    background.close();
    background.wait().await;
    tracing::info!(?drained, "meshlink-proxy (router) stopped");
    drained
}

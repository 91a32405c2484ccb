//! Whether the local applications behind the sidecar's inbounds accept
//! connections, and telling the control plane (issue 35 §2).
//!
//! A refused connection to the local app looks, to a calling sidecar, like
//! an RBAC denial: the connection just closes. So the sidecar says what it
//! sees:
//! - [`monitor`]: one task owns the state of each inbound's application. It
//!   probes each one (a TCP connect, closed at once) when the inbound
//!   appears, every `--app-probe-interval` while it answers, at once when
//!   the data path reports a failed connect to it ([`AppHealth::refused`]),
//!   and with backoff while it does not answer, until it does.
//! - [`report`]: streams the state to the control plane
//!   (`meshlink.v1.DataplaneHealth/Report`) on the HTTP/2 connection of the
//!   current ADS stream, so the report reaches the replica that owns the
//!   Dataplane's status. The control plane writes `AppReachable` and
//!   `Ready`, and takes the inbound out of other proxies' endpoints while
//!   its application is unreachable.
//! - [`unhealthy`]: samples which endpoints of other services this
//!   sidecar keeps out of its balancers (a failing MeshHealthCheck, an
//!   outlier ejection), for the same reports; the control plane lists them
//!   in the Dataplane's `status.unhealthyEndpoints`.
//!
//! The admin endpoint shows it on `/ready` (which stays 200: the proxy
//! itself is ready) and `/config_dump`, and `meshlink_proxy_app_reachable`
//! per inbound. Nothing here ever refuses or reroutes a connection.

pub mod monitor;
pub mod report;
pub mod unhealthy;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::model::{Direction, Discovery, ListenerProtocol, ProxyConfig, route::RouteAction};

pub use monitor::AppMonitor;

/// Default `--app-probe-interval`.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// What the sidecar knows of one inbound's application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppState {
    /// Not probed yet.
    Unknown,
    /// It accepted the last probe.
    Reachable,
    /// It did not accept a connection since `since`; `error` is the last
    /// connect error.
    Unreachable {
        /// The OS error (e.g. `Connection refused (os error 111)`).
        error: String,
        /// When the first failed probe of this outage ended.
        since: Instant,
    },
}

/// One inbound and its application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundApp {
    /// The inbound's port (its listener's).
    pub port: u16,
    /// The application's address (the inbound's local cluster).
    pub address: SocketAddr,
    /// What the last probe found.
    pub state: AppState,
}

/// Every inbound's application, by inbound listener name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppStates {
    /// Whether the listeners have arrived and each inbound's application
    /// was probed once: only then is a report complete.
    pub settled: bool,
    /// By inbound listener name.
    pub inbounds: BTreeMap<String, InboundApp>,
}

impl AppStates {
    /// One line per unreachable application, for `/ready`.
    pub fn unreachable_lines(&self, now: Instant) -> Vec<String> {
        self.inbounds
            .iter()
            .filter_map(|(name, app)| match &app.state {
                AppState::Unreachable { error, since } => Some(format!(
                    "listener {name:?}: the application at {} is unreachable (for {}): {error}; \
                     the control plane steers other proxies' traffic away from this inbound",
                    app.address,
                    humantime::format_duration(Duration::from_secs(
                        now.saturating_duration_since(*since).as_secs()
                    )),
                )),
                _ => None,
            })
            .collect()
    }
}

/// The data path's and the readers' handle on the monitor; cheap to
/// clone. [`Default`] is a handle without a monitor (tests that build a
/// listener manager by hand): it reports nothing and shows no inbound.
#[derive(Debug, Clone)]
pub struct AppHealth {
    refused: Option<mpsc::Sender<String>>,
    states: watch::Receiver<Arc<AppStates>>,
}

impl Default for AppHealth {
    fn default() -> Self {
        AppHealth {
            refused: None,
            states: watch::channel(Arc::default()).1,
        }
    }
}

impl AppHealth {
    /// The data path could not connect to the application of inbound
    /// `listener`: probe it now. Never waits; a no-op while it is known
    /// unreachable (the monitor is probing it already) or the monitor is
    /// busy.
    pub fn refused(&self, listener: &str) {
        let Some(tx) = &self.refused else {
            return;
        };
        let known_down = matches!(
            self.states
                .borrow()
                .inbounds
                .get(listener)
                .map(|a| &a.state),
            Some(AppState::Unreachable { .. })
        );
        if !known_down {
            let _ = tx.try_send(listener.to_owned());
        }
    }

    /// The current states, and their changes.
    pub fn states(&self) -> watch::Receiver<Arc<AppStates>> {
        self.states.clone()
    }
}

/// `{inbound}`: an inbound listener's name.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InboundLabels {
    /// The inbound listener, e.g. `inbound:10.0.0.1:15000`.
    pub inbound: String,
}

/// The monitor's metric.
#[derive(Debug, Clone, Default)]
pub struct AppMetrics {
    /// 1 while the inbound's application accepts connections, 0 while it
    /// does not (no series before the first probe).
    pub reachable: Family<InboundLabels, Gauge>,
}

impl AppMetrics {
    /// Registers `app_reachable` (under the caller's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "app_reachable",
            "1 while the local application of the inbound accepts connections, 0 while it does not",
            self.reachable.clone(),
        );
    }
}

/// The application of every inbound listener of `config`: the inbound's
/// port and the first static endpoint of the local cluster it forwards to
/// (a TCP inbound's cluster, an HTTP inbound's routes' clusters).
pub fn targets(config: &ProxyConfig) -> BTreeMap<String, (u16, SocketAddr)> {
    let mut out = BTreeMap::new();
    for (name, listener) in &config.listeners {
        let spec = &listener.value;
        if spec.direction != Direction::Inbound {
            continue;
        }
        let clusters: Vec<String> = match &spec.protocol {
            ListenerProtocol::Tcp { .. } => {
                spec.tcp_clusters().into_iter().map(str::to_owned).collect()
            }
            ListenerProtocol::Http(http) => config
                .routes
                .get(&http.route_config)
                .into_iter()
                .flat_map(|r| r.value.virtual_hosts.iter())
                .flat_map(|v| v.routes.iter())
                .filter_map(|r| match &r.action {
                    RouteAction::Forward(f) => Some(f.backends.iter().map(|b| b.cluster.clone())),
                    RouteAction::Redirect(_) => None,
                })
                .flatten()
                .collect(),
        };
        let app = clusters
            .iter()
            .find_map(|c| match &config.clusters.get(c)?.value.discovery {
                Discovery::Static(list) => list.first().copied(),
                Discovery::Eds | Discovery::OriginalDst => None,
            });
        if let Some(app) = app {
            out.insert(name.clone(), (spec.address.port(), app));
        }
    }
    out
}

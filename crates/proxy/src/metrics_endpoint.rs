//! What a scrape of the sidecar answers, on the admin port's `/metrics`
//! and on every MeshMetric Prometheus endpoint: the proxy's own families
//! (filtered by the MeshMetric that selects the sidecar, if any), then
//! the applications' text.
//!
//! Owns the Prometheus endpoints and the OpenTelemetry pushers (one task
//! per backend, `metrics_push`, restarted when the policy changes): one
//! server per `port` of the policy's
//! Prometheus backends, bound while the policy names it and closed when
//! it no longer does (a moved port is a close and a bind). The admin
//! port keeps serving `/metrics`, `/ready` and `/config_dump` whatever
//! the policy says. A bind that fails (address in use) is logged and
//! retried every [`BIND_RETRY`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use meshlink_runtime::MetricsRegistry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::app_scrape::{self, AppScrapeMetrics};
use crate::identity::WorkloadIdentity;
use crate::metrics::ProxyMetrics;
use crate::model::ProxyConfig;
use crate::model::metrics::MetricsPolicy;

/// How long to wait before retrying a Prometheus endpoint's failed bind.
const BIND_RETRY: Duration = Duration::from_secs(1);

/// The OpenMetrics content type (the proxy's own text alone).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The Prometheus text content type (with applications' text appended,
/// which need not be OpenMetrics).
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Everything a scrape reads.
#[derive(Debug, Clone)]
pub struct MetricsSource {
    /// The registry holding the proxy's metrics.
    pub registry: MetricsRegistry,
    /// The proxy's metrics (the expiry gauge is refreshed on scrape).
    pub metrics: Arc<ProxyMetrics>,
    /// The current identity, for the expiry gauge.
    pub identity: watch::Receiver<Option<Arc<WorkloadIdentity>>>,
    /// The accepted configuration (its MeshMetric).
    pub config: watch::Receiver<Arc<ProxyConfig>>,
    /// The application scrapes' own metrics.
    pub scrapes: AppScrapeMetrics,
}

impl MetricsSource {
    /// The MeshMetric that selects the sidecar, if any.
    pub fn policy(&self) -> Option<Arc<MetricsPolicy>> {
        let config = self.config.borrow();
        config.metrics.values().next().map(|v| v.value.clone())
    }

    /// A scrape's answer.
    pub async fn respond(&self) -> Response {
        let (content_type, body) = self.text().await;
        ([(header::CONTENT_TYPE, content_type)], body).into_response()
    }

    /// What a scrape serves, and its content type: the registry (filtered
    /// by the policy, if any), then the policy's applications' text.
    pub async fn text(&self) -> (&'static str, String) {
        let expiry = self.identity.borrow().as_ref().map(|id| {
            match id.cert.not_after.duration_since(SystemTime::now()) {
                Ok(left) => left.as_secs() as i64,
                Err(past) => -(past.duration().as_secs() as i64),
            }
        });
        self.metrics.cert_expiry_seconds.set(expiry.unwrap_or(0));
        let text = self.registry.encode();
        let Some(policy) = self.policy() else {
            return (OPENMETRICS, text);
        };
        if policy.applications.is_empty() {
            return (
                OPENMETRICS,
                crate::metrics_filter::filter(&text, &policy, true),
            );
        }
        let mut body = crate::metrics_filter::filter(&text, &policy, false);
        for app in app_scrape::scrape_all(&policy.applications, &self.scrapes).await {
            body.push_str(&app);
        }
        (PROMETHEUS_TEXT, body)
    }
}

/// Serves the policy's Prometheus endpoints, and pushes to its
/// OpenTelemetry backends as `service` (`service.name`), until `stop`
/// fires.
pub async fn serve_endpoints(source: MetricsSource, service: String, stop: CancellationToken) {
    let mut config = source.config.clone();
    let mut bound: HashMap<SocketAddr, CancellationToken> = HashMap::new();
    let mut last: Option<Arc<MetricsPolicy>> = None;
    let mut pushers: Vec<CancellationToken> = Vec::new();
    let mut unbound: std::collections::HashSet<SocketAddr> = std::collections::HashSet::new();
    loop {
        config.borrow_and_update();
        let policy = source.policy();
        if policy != last {
            pushers.iter().for_each(CancellationToken::cancel);
            pushers = policy
                .iter()
                .flat_map(|p| &p.open_telemetry)
                .map(|backend| {
                    let pusher = stop.child_token();
                    tokio::spawn(crate::metrics_push::run(
                        source.clone(),
                        backend.clone(),
                        service.clone(),
                        pusher.clone(),
                    ));
                    pusher
                })
                .collect();
            last = policy.clone();
        }
        let wanted: Vec<SocketAddr> = policy
            .iter()
            .flat_map(|p| p.prometheus.iter().map(|e| e.address))
            .collect();
        bound.retain(|address, server| {
            let keep = wanted.contains(address);
            if !keep {
                server.cancel();
            }
            keep
        });
        let mut failed = false;
        for address in wanted {
            if bound.contains_key(&address) {
                continue;
            }
            match tokio::net::TcpListener::bind(address).await {
                Ok(socket) => {
                    let server = stop.child_token();
                    tokio::spawn(serve(socket, source.clone(), server.clone()));
                    unbound.remove(&address);
                    tracing::info!(%address, "serving MeshMetric Prometheus endpoint");
                    bound.insert(address, server);
                }
                Err(e) => {
                    failed = true;
                    // Once per address until it binds: the retries are
                    // every second.
                    if unbound.insert(address) {
                        tracing::warn!(%address, error = %e, "cannot bind the MeshMetric Prometheus endpoint; retrying every second");
                    }
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => break,
            changed = config.changed() => if changed.is_err() { break },
            () = tokio::time::sleep(BIND_RETRY), if failed => {}
        }
    }
    for server in bound.values().chain(&pushers) {
        server.cancel();
    }
}

async fn serve(socket: tokio::net::TcpListener, source: MetricsSource, stop: CancellationToken) {
    let port = socket.local_addr().map(|a| a.port()).unwrap_or_default();
    let app = axum::Router::new()
        .fallback(endpoint)
        .with_state((source, port));
    let serve =
        axum::serve(socket, app).with_graceful_shutdown(async move { stop.cancelled().await });
    if let Err(e) = serve.await {
        tracing::error!(error = %e, "MeshMetric Prometheus endpoint failed");
    }
}

/// A request to a Prometheus endpoint: the scrape on its `path`, 404
/// elsewhere.
async fn endpoint(
    State((source, port)): State<(MetricsSource, u16)>,
    uri: axum::http::Uri,
) -> Response {
    let path = source.policy().and_then(|p| {
        p.prometheus
            .iter()
            .find(|e| e.address.port() == port)
            .map(|e| e.path.clone())
    });
    match path {
        Some(path) if path == uri.path() => source.respond().await,
        Some(path) => (
            StatusCode::NOT_FOUND,
            format!("metrics are served on {path}\n"),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no MeshMetric endpoint here\n").into_response(),
    }
}

//! API metrics: requests by method, route and status code, request latency,
//! and apply outcomes.

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use meshlink_runtime::MetricsRegistry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::ApiState;
use crate::resources::ApplyOutcome;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApplyLabels {
    outcome: String,
}

/// Metrics of the REST API (`meshlink_api_*`).
#[derive(Clone)]
pub struct ApiMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Histogram,
    applies: Family<ApplyLabels, Counter>,
}

impl ApiMetrics {
    /// Creates the metrics and registers them.
    pub fn new(registry: &MetricsRegistry) -> Self {
        let m = ApiMetrics {
            requests: Family::default(),
            duration: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            applies: Family::default(),
        };
        registry.register_with("api", |r| {
            r.register(
                "requests",
                "REST API requests by method, route and status code",
                m.requests.clone(),
            );
            r.register(
                "request_duration_seconds",
                "REST API request latency",
                m.duration.clone(),
            );
            r.register(
                "apply",
                "apply requests by outcome (created, configured, unchanged)",
                m.applies.clone(),
            );
        });
        m
    }

    pub(crate) fn record_apply(&self, outcome: ApplyOutcome) {
        let outcome = match outcome {
            ApplyOutcome::Created => "created",
            ApplyOutcome::Configured => "configured",
            ApplyOutcome::Unchanged => "unchanged",
        };
        self.applies
            .get_or_create(&ApplyLabels {
                outcome: outcome.into(),
            })
            .inc();
    }
}

pub(super) async fn track(State(st): State<ApiState>, req: Request, next: Next) -> Response {
    let start = tokio::time::Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let resp = next.run(req).await;
    st.metrics
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            code: resp.status().as_u16(),
        })
        .inc();
    st.metrics.duration.observe(start.elapsed().as_secs_f64());
    resp
}

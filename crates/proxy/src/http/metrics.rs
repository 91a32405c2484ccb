//! The golden metrics of the HTTP listeners, per direction, destination
//! cluster and route: requests by status and `grpc-status`, a latency
//! histogram, retries, timeouts and requests in flight.
//!
//! Labels are bounded: a route's name (from the control plane, never the
//! request's path), a cluster's name, a status code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::DirectionLabels;
use crate::model::Direction;

/// Latency buckets, seconds: 0.5 ms to 30 s.
const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0,
    30.0,
];

/// `{direction, cluster, route}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `inbound` or `outbound`.
    pub direction: &'static str,
    /// Destination cluster (empty when the request never got one).
    pub cluster: String,
    /// Route name (`no_route`, `connect` for answers without one).
    pub route: String,
}

impl RequestLabels {
    /// Labels of a request on a listener of `direction`, before routing.
    pub fn new(direction: Direction) -> RequestLabels {
        RequestLabels {
            direction: direction.as_str(),
            cluster: String::new(),
            route: String::new(),
        }
    }
}

/// `{direction, cluster, route, code, grpc_status}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResponseLabels {
    /// `inbound` or `outbound`.
    pub direction: &'static str,
    /// Destination cluster.
    pub cluster: String,
    /// Route name.
    pub route: String,
    /// HTTP status code.
    pub code: String,
    /// `grpc-status` of a trailers-only answer (empty otherwise; a
    /// streamed call's status is in its trailers).
    pub grpc_status: String,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// HTTP status.
    pub status: u16,
    /// `grpc-status` in the response headers.
    pub grpc_status: Option<i32>,
}

/// The HTTP metrics.
///
/// Every request records a response count and a latency: the series of
/// each `{direction, cluster, route}` are found in their families once
/// and kept ([`RouteSeries`]), so a request costs one lookup in a small
/// map, not label strings built and hashed per series.
#[derive(Debug)]
pub struct HttpMetrics {
    requests: Family<ResponseLabels, Counter>,
    duration: Family<RequestLabels, Histogram, fn() -> Histogram>,
    retries: Family<RequestLabels, Counter>,
    retry_overflows: Family<RequestLabels, Counter>,
    timeouts: Family<RequestLabels, Counter>,
    active: Family<DirectionLabels, Gauge>,
    /// The in-flight gauge per direction (inbound, outbound), once used.
    active_by_direction: [OnceLock<Gauge>; 2],
    series: RwLock<HashMap<RequestLabels, Arc<RouteSeries>, foldhash::fast::RandomState>>,
}

/// A response's HTTP status and `grpc-status`.
type ResponseKey = (u16, Option<i32>);

/// The kept series of one `{direction, cluster, route}`.
#[derive(Debug)]
struct RouteSeries {
    duration: Histogram,
    /// Response counts by status and `grpc-status` (a handful per route).
    responses: Mutex<Vec<(ResponseKey, Counter)>>,
}

impl Default for HttpMetrics {
    fn default() -> Self {
        HttpMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(histogram),
            retries: Family::default(),
            retry_overflows: Family::default(),
            timeouts: Family::default(),
            active: Family::default(),
            active_by_direction: Default::default(),
            series: RwLock::default(),
        }
    }
}

/// Decrements the in-flight gauge when dropped.
pub struct ActiveRequest(Gauge);

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl HttpMetrics {
    /// Registers the metrics (under the caller's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "http_requests",
            "HTTP requests answered, by direction, cluster, route, status code and grpc-status",
            self.requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time from a request's arrival to its response headers",
            self.duration.clone(),
        );
        registry.register(
            "http_retries",
            "HTTP request tries after the first",
            self.retries.clone(),
        );
        registry.register(
            "http_retry_overflows",
            "HTTP retries not made because the cluster's retry budget was spent",
            self.retry_overflows.clone(),
        );
        registry.register(
            "http_timeouts",
            "HTTP requests answered 504 because the route's timeout passed",
            self.timeouts.clone(),
        );
        registry.register(
            "http_requests_active",
            "HTTP requests in flight",
            self.active.clone(),
        );
    }

    /// Counts a request in flight until the guard drops.
    pub fn active(&self, direction: Direction) -> ActiveRequest {
        let slot = match direction {
            Direction::Inbound => &self.active_by_direction[0],
            Direction::Outbound => &self.active_by_direction[1],
        };
        let gauge = slot
            .get_or_init(|| {
                self.active
                    .get_or_create(&DirectionLabels {
                        direction: direction.as_str().to_owned(),
                    })
                    .clone()
            })
            .clone();
        gauge.inc();
        ActiveRequest(gauge)
    }

    /// Records an answered request.
    pub fn record<B>(&self, labels: &RequestLabels, response: &http::Response<B>, took: Duration) {
        let key: ResponseKey = (
            response.status().as_u16(),
            super::retry::grpc_status(response.headers()),
        );
        let series = self.series_of(labels);
        series.duration.observe(took.as_secs_f64());
        let mut responses = series.responses.lock().expect("response series lock");
        if let Some((_, counter)) = responses.iter().find(|(k, _)| *k == key) {
            counter.inc();
            return;
        }
        let counter = self
            .requests
            .get_or_create(&ResponseLabels {
                direction: labels.direction,
                cluster: labels.cluster.clone(),
                route: labels.route.clone(),
                code: key.0.to_string(),
                grpc_status: key.1.map(|s| s.to_string()).unwrap_or_default(),
            })
            .clone();
        counter.inc();
        responses.push((key, counter));
    }

    /// The kept series of `labels`, found in the families on first use.
    fn series_of(&self, labels: &RequestLabels) -> Arc<RouteSeries> {
        if let Some(s) = self.series.read().expect("series lock").get(labels) {
            return s.clone();
        }
        let mut all = self.series.write().expect("series lock");
        all.entry(labels.clone())
            .or_insert_with(|| {
                Arc::new(RouteSeries {
                    duration: self.duration.get_or_create(labels).clone(),
                    responses: Mutex::default(),
                })
            })
            .clone()
    }

    /// Counts a retry.
    pub fn retried(&self, labels: &RequestLabels) {
        self.retries.get_or_create(labels).inc();
    }

    /// Counts a retry the budget refused.
    pub fn retry_overflowed(&self, labels: &RequestLabels) {
        self.retry_overflows.get_or_create(labels).inc();
    }

    /// Counts a request that ran out of time.
    pub fn timed_out(&self, labels: &RequestLabels) {
        self.timeouts.get_or_create(labels).inc();
    }
}

/// A histogram with [`BUCKETS`] (the family's constructor).
pub(crate) fn histogram() -> Histogram {
    Histogram::new(BUCKETS.iter().copied())
}

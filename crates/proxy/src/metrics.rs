//! The proxy's Prometheus metrics, registered under `meshlink_proxy_`.
//!
//! Owns metric definitions and label sets only; the data path increments
//! them. Names answer operators' questions: how many connections, how many
//! bytes, why handshakes fail, who RBAC refused, is xDS connected, when
//! does the certificate expire.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// `{listener, direction}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    /// Listener name.
    pub listener: String,
    /// `inbound` or `outbound`.
    pub direction: String,
}

/// `{direction}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabels {
    /// `inbound` or `outbound`.
    pub direction: String,
}

/// `{direction, reason}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// `inbound` or `outbound`.
    pub direction: String,
    /// Short reason, e.g. `bad_certificate`, `timeout`, `peer_identity`.
    pub reason: String,
}

/// `{listener}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    /// Listener name.
    pub listener: String,
}

/// `{listener, kind}`: a fault injected on a listener (`abort`, `delay`,
/// `response_rate_limit`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FaultLabels {
    /// Listener name.
    pub listener: String,
    /// The fault's kind.
    pub kind: &'static str,
}

/// `{cluster}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    /// Cluster name.
    pub cluster: String,
}

/// `{cluster, detector}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutlierLabels {
    /// Cluster name.
    pub cluster: String,
    /// The detector that ejected, e.g. `consecutive_5xx`.
    pub detector: String,
}

/// `{cluster, result}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HealthCheckLabels {
    /// Cluster name.
    pub cluster: String,
    /// `success`, or how the check failed (`connect_failure`,
    /// `unexpected_answer`, `broken_connection`, `timeout`).
    pub result: String,
}

/// `{cluster, limit}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OverflowLabels {
    /// Cluster name.
    pub cluster: String,
    /// The circuit-breaking limit, e.g. `max_requests`.
    pub limit: String,
}

/// `{type}` (short xDS type name).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    /// E.g. `Listener`.
    pub r#type: String,
}

/// Every `reason` label of `handshake_failures` ([`crate::connection`]
/// picks one of these), pre-created at 0 so alerts see the series at once.
pub const HANDSHAKE_FAILURE_REASONS: [&str; 7] = [
    "peer_identity",
    "certificate_expired",
    "unknown_issuer",
    "bad_certificate",
    "connection_closed",
    "protocol",
    "timeout",
];

/// How often "the local app refused the connection" is logged while it
/// repeats (the first at once).
pub const APP_DOWN_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Every metric the proxy exports, and the rate limits of the log lines
/// that go with the busiest counters.
#[derive(Debug)]
pub struct ProxyMetrics {
    /// Connections accepted, per listener.
    pub connections: Family<ListenerLabels, Counter>,
    /// Connections open now.
    pub connections_active: Family<DirectionLabels, Gauge>,
    /// Bytes proxied (both ways).
    pub bytes: Family<DirectionLabels, Counter>,
    /// Requests refused by the local rate limit, per listener.
    pub rate_limited: Family<NameLabels, Counter>,
    /// Access log entries dropped because their file's queue was full.
    pub access_log_dropped: Counter,
    /// Spans a collector took (MeshTrace).
    pub trace_spans_exported: Counter,
    /// Spans dropped: their collector's queue was full, or it did not
    /// take their batch.
    pub trace_spans_dropped: Counter,
    /// Connections closed by the network local rate limit, per listener.
    pub connections_rate_limited: Family<NameLabels, Counter>,
    /// Redirected connections a capture listener refused (the listener of
    /// their destination is warming, or they were not redirected), per
    /// capture listener.
    pub capture_refused: Family<NameLabels, Counter>,
    /// Faults injected by the fault filter, per listener and kind.
    pub faults: Family<FaultLabels, Counter>,
    /// Connections open now, per listener.
    pub listener_connections_active: Family<NameLabels, Gauge>,
    /// Bytes received on accepted (downstream) connections, TLS included,
    /// per listener (Envoy's `downstream_cx_rx_bytes_total`).
    pub listener_rx_bytes: Family<NameLabels, Counter>,
    /// Bytes sent on accepted (downstream) connections, TLS included, per
    /// listener (Envoy's `downstream_cx_tx_bytes_total`).
    pub listener_tx_bytes: Family<NameLabels, Counter>,
    /// TLS handshakes that failed, by reason.
    pub handshake_failures: Family<FailureLabels, Counter>,
    /// TCP connections closed by their idle or half-closed bound.
    pub tcp_timeouts: Family<FailureLabels, Counter>,
    /// Connections refused by RBAC.
    pub rbac_denied: Family<NameLabels, Counter>,
    /// Upstream connect attempts that failed.
    pub upstream_connect_failures: Family<ClusterLabels, Counter>,
    /// TCP connections refused because their cluster had no endpoint to
    /// try (Envoy's `upstream_cx_none_healthy`).
    pub upstream_none_healthy: Family<ClusterLabels, Counter>,
    /// Endpoints ejected by outlier detection, per detector.
    pub outlier_ejections: Family<OutlierLabels, Counter>,
    /// Requests, connections and retries a cluster's circuit breaker
    /// refused, per limit.
    pub upstream_overflow: Family<OverflowLabels, Counter>,
    /// Active health checks run, per cluster and result.
    pub health_checks: Family<HealthCheckLabels, Counter>,
    /// Endpoints the active health check finds unhealthy now, per cluster.
    pub health_check_unhealthy: Family<ClusterLabels, Gauge>,
    /// 1 while an xDS stream is healthy.
    pub xds_connected: Gauge,
    /// xDS responses accepted, per type.
    pub xds_updates: Family<TypeLabels, Counter>,
    /// xDS responses with rejected resources (NACKs), per type.
    pub xds_rejected: Family<TypeLabels, Counter>,
    /// Seconds until the identity certificate expires (updated on scrape).
    pub cert_expiry_seconds: Gauge,
    /// Identity certificates obtained (first one and every renewal).
    pub cert_rotations: Counter,
    /// Listeners bound and serving.
    pub listeners_active: Gauge,
    /// Listeners waiting for a reference (I2).
    pub listeners_warming: Gauge,
    /// Rate limit of the "local application refused the connection" log.
    pub app_down_log: crate::log_limit::SharedLogLimiter,
    /// The HTTP listeners' golden metrics.
    pub http: crate::http::metrics::HttpMetrics,
}

impl Default for ProxyMetrics {
    fn default() -> Self {
        ProxyMetrics {
            connections: Family::default(),
            connections_active: Family::default(),
            bytes: Family::default(),
            rate_limited: Family::default(),
            connections_rate_limited: Family::default(),
            capture_refused: Family::default(),
            access_log_dropped: Counter::default(),
            faults: Family::default(),
            trace_spans_exported: Counter::default(),
            trace_spans_dropped: Counter::default(),
            listener_connections_active: Family::default(),
            listener_rx_bytes: Family::default(),
            listener_tx_bytes: Family::default(),
            handshake_failures: Family::default(),
            tcp_timeouts: Family::default(),
            rbac_denied: Family::default(),
            upstream_connect_failures: Family::default(),
            upstream_none_healthy: Family::default(),
            outlier_ejections: Family::default(),
            upstream_overflow: Family::default(),
            health_checks: Family::default(),
            health_check_unhealthy: Family::default(),
            xds_connected: Gauge::default(),
            xds_updates: Family::default(),
            xds_rejected: Family::default(),
            cert_expiry_seconds: Gauge::default(),
            cert_rotations: Counter::default(),
            listeners_active: Gauge::default(),
            listeners_warming: Gauge::default(),
            app_down_log: crate::log_limit::SharedLogLimiter::new(APP_DOWN_LOG_INTERVAL),
            http: crate::http::metrics::HttpMetrics::default(),
        }
    }
}

impl ProxyMetrics {
    /// Counts an ejection of an endpoint of `cluster` by `detector`.
    pub fn ejected(&self, cluster: &str, detector: crate::lb::DetectorKind) {
        self.outlier_ejections
            .get_or_create(&OutlierLabels {
                cluster: cluster.to_owned(),
                detector: detector.as_str().to_owned(),
            })
            .inc();
    }

    /// Counts a refusal of `cluster`'s circuit breaker at `limit`.
    pub fn overflowed(&self, cluster: &str, limit: meshlink_runtime::Limit) {
        self.upstream_overflow
            .get_or_create(&OverflowLabels {
                cluster: cluster.to_owned(),
                limit: limit.as_str().to_owned(),
            })
            .inc();
    }

    /// Counts one active health check of an endpoint of `cluster`.
    pub fn health_checked(&self, cluster: &str, result: &str) {
        self.health_checks
            .get_or_create(&HealthCheckLabels {
                cluster: cluster.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    /// The gauge of `cluster`'s endpoints failing their active check.
    pub fn unhealthy_endpoints(&self, cluster: &str) -> Gauge {
        self.health_check_unhealthy
            .get_or_create(&ClusterLabels {
                cluster: cluster.to_owned(),
            })
            .clone()
    }

    /// Registers every metric in `registry` (under the caller's prefix) and
    /// creates the failure counters' known label sets at 0, so that they are
    /// exported from start-up, not only after their first event.
    pub fn register(&self, registry: &mut Registry) {
        self.precreate();
        registry.register(
            "connections",
            "Connections accepted",
            self.connections.clone(),
        );
        registry.register(
            "connections_active",
            "Connections open now",
            self.connections_active.clone(),
        );
        registry.register(
            "bytes",
            "Bytes proxied, both directions",
            self.bytes.clone(),
        );
        registry.register(
            "http_rate_limited",
            "HTTP requests refused by the local rate limit (envoy.filters.http.local_ratelimit), per listener",
            self.rate_limited.clone(),
        );
        registry.register(
            "access_log_dropped",
            "Access log entries dropped because their file's queue was full (logging never blocks a request)",
            self.access_log_dropped.clone(),
        );
        registry.register(
            "trace_spans_exported",
            "Spans (MeshTrace) taken by their collector",
            self.trace_spans_exported.clone(),
        );
        registry.register(
            "trace_spans_dropped",
            "Spans (MeshTrace) dropped because their collector's queue was full or it did not take their batch (tracing never blocks a request)",
            self.trace_spans_dropped.clone(),
        );
        registry.register(
            "connections_rate_limited",
            "Connections closed before their TLS handshake by the local rate limit (envoy.filters.network.local_ratelimit), per listener",
            self.connections_rate_limited.clone(),
        );
        registry.register(
            "capture_refused",
            "Redirected connections a transparent proxy's capture listener refused with a reset: the listener of their original destination is still warming (never passed through instead), or they were not redirected, per capture listener",
            self.capture_refused.clone(),
        );
        registry.register(
            "http_faults",
            "Faults injected by envoy.filters.http.fault (MeshFaultInjection), per listener and \
             kind: abort, delay, response_rate_limit",
            self.faults.clone(),
        );
        registry.register(
            "listener_connections_active",
            "Connections open now, per listener",
            self.listener_connections_active.clone(),
        );
        registry.register(
            "listener_rx_bytes",
            "Bytes received on accepted connections (TLS included), per listener",
            self.listener_rx_bytes.clone(),
        );
        registry.register(
            "listener_tx_bytes",
            "Bytes sent on accepted connections (TLS included), per listener",
            self.listener_tx_bytes.clone(),
        );
        registry.register(
            "handshake_failures",
            "TLS handshakes that failed, by reason",
            self.handshake_failures.clone(),
        );
        registry.register(
            "tcp_timeouts",
            "TCP connections closed because nothing moved for their idle or half-closed bound, by reason",
            self.tcp_timeouts.clone(),
        );
        registry.register(
            "rbac_denied",
            "Connections (TCP) and requests (HTTP) refused by RBAC",
            self.rbac_denied.clone(),
        );
        registry.register(
            "upstream_connect_failures",
            "Upstream connect attempts that failed",
            self.upstream_connect_failures.clone(),
        );
        registry.register(
            "upstream_none_healthy",
            "TCP connections closed because their cluster had no endpoint to try (Envoy's upstream_cx_none_healthy), per cluster; e.g. captured connections to destinations outside the mesh while the Mesh's passthrough is off (cluster outbound:passthrough:disabled)",
            self.upstream_none_healthy.clone(),
        );
        registry.register(
            "outlier_ejections",
            "Endpoints ejected by outlier detection, per cluster and detector",
            self.outlier_ejections.clone(),
        );
        registry.register(
            "upstream_overflow",
            "Requests, connections and retries refused by a cluster's circuit breaker, per limit (max_connections, max_pending_requests, max_requests, max_retries)",
            self.upstream_overflow.clone(),
        );
        registry.register(
            "health_check",
            "Active health checks (MeshHealthCheck) run, per cluster and result: success, \
             connect_failure, unexpected_answer, broken_connection, timeout",
            self.health_checks.clone(),
        );
        registry.register(
            "health_check_unhealthy_endpoints",
            "Endpoints the active health check finds unhealthy now (out of the balancer), per \
             cluster",
            self.health_check_unhealthy.clone(),
        );
        registry.register(
            "xds_connected",
            "1 while the xDS stream to the control plane is healthy",
            self.xds_connected.clone(),
        );
        registry.register(
            "xds_updates",
            "xDS responses accepted",
            self.xds_updates.clone(),
        );
        registry.register(
            "xds_rejected",
            "xDS responses with rejected resources (NACKed)",
            self.xds_rejected.clone(),
        );
        registry.register(
            "cert_expiry_seconds",
            "Seconds until the identity certificate expires",
            self.cert_expiry_seconds.clone(),
        );
        registry.register(
            "cert_rotations",
            "Identity certificates obtained",
            self.cert_rotations.clone(),
        );
        registry.register(
            "listeners_active",
            "Listeners serving",
            self.listeners_active.clone(),
        );
        registry.register(
            "listeners_warming",
            "Listeners waiting for a secret, cluster or endpoints",
            self.listeners_warming.clone(),
        );
        self.http.register(registry);
    }

    /// Counts a redirected connection capture listener `listener` refused.
    pub fn capture_refused(&self, listener: &str) {
        self.capture_refused
            .get_or_create(&NameLabels {
                listener: listener.to_owned(),
            })
            .inc();
    }

    /// Counts a connection or request RBAC refused on `listener`.
    pub fn rbac_denied_on(&self, listener: &str) {
        self.rbac_denied
            .get_or_create(&NameLabels {
                listener: listener.to_owned(),
            })
            .inc();
    }

    /// Creates at 0 every failure series whose labels are known up front:
    /// handshake failures per direction and reason, xDS rejections per type.
    fn precreate(&self) {
        for direction in [
            crate::model::Direction::Inbound,
            crate::model::Direction::Outbound,
        ] {
            for reason in HANDSHAKE_FAILURE_REASONS {
                let _ = self.handshake_failures.get_or_create(&FailureLabels {
                    direction: direction.as_str().to_owned(),
                    reason: reason.to_owned(),
                });
            }
            for reason in ["idle", "half_closed"] {
                let _ = self.tcp_timeouts.get_or_create(&FailureLabels {
                    direction: direction.as_str().to_owned(),
                    reason: reason.to_owned(),
                });
            }
        }
        for ty in crate::xds::apply::TYPES {
            let short = ty.rsplit('.').next().unwrap_or(ty).to_owned();
            let _ = self
                .xds_rejected
                .get_or_create(&TypeLabels { r#type: short });
        }
    }

    /// Creates a cluster's failure series (connect failures, ejections) at
    /// 0 when the cluster becomes known, so they are exported before the
    /// first failure.
    pub fn cluster_known(&self, cluster: &str) {
        let labels = ClusterLabels {
            cluster: cluster.to_owned(),
        };
        let _ = self.upstream_connect_failures.get_or_create(&labels);
        let _ = self.upstream_none_healthy.get_or_create(&labels);
        for detector in [
            crate::lb::DetectorKind::Consecutive5xx,
            crate::lb::DetectorKind::ConsecutiveGatewayFailure,
            crate::lb::DetectorKind::ConsecutiveLocalOriginFailure,
        ] {
            let _ = self.outlier_ejections.get_or_create(&OutlierLabels {
                cluster: cluster.to_owned(),
                detector: detector.as_str().to_owned(),
            });
        }
    }

    /// Counts one xDS response of type `short` (accepted or NACKed).
    pub fn xds_update(&self, short: &str, accepted: bool) {
        let labels = TypeLabels {
            r#type: short.to_owned(),
        };
        if accepted {
            self.xds_updates.get_or_create(&labels).inc();
        } else {
            self.xds_rejected.get_or_create(&labels).inc();
        }
    }

    /// Labels for `direction`.
    pub fn direction(direction: crate::model::Direction) -> DirectionLabels {
        DirectionLabels {
            direction: direction.as_str().to_owned(),
        }
    }

    /// Counts a failed handshake.
    pub fn handshake_failed(&self, direction: crate::model::Direction, reason: &str) {
        self.handshake_failures
            .get_or_create(&FailureLabels {
                direction: direction.as_str().to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts a TCP connection closed by its `reason` bound (`idle`,
    /// `half_closed`).
    pub fn tcp_timed_out(&self, direction: crate::model::Direction, reason: &str) {
        self.tcp_timeouts
            .get_or_create(&FailureLabels {
                direction: direction.as_str().to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(metrics: &ProxyMetrics) -> String {
        let mut registry = Registry::with_prefix("meshlink_proxy");
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        text
    }

    #[test]
    fn failure_counters_are_exported_at_zero_from_start_up() {
        let metrics = ProxyMetrics::default();
        let text = scrape(&metrics);
        for line in [
            r#"meshlink_proxy_handshake_failures_total{direction="inbound",reason="unknown_issuer"} 0"#,
            r#"meshlink_proxy_handshake_failures_total{direction="outbound",reason="timeout"} 0"#,
            r#"meshlink_proxy_xds_rejected_total{type="Listener"} 0"#,
            r#"meshlink_proxy_xds_rejected_total{type="Secret"} 0"#,
            r#"meshlink_proxy_xds_rejected_total{type="ClusterLoadAssignment"} 0"#,
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
        // Per-cluster series appear at 0 as soon as the cluster is known.
        metrics.cluster_known("backend");
        let mut registry = Registry::with_prefix("meshlink_proxy");
        registry.register(
            "upstream_connect_failures",
            "",
            metrics.upstream_connect_failures.clone(),
        );
        registry.register("outlier_ejections", "", metrics.outlier_ejections.clone());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            r#"meshlink_proxy_upstream_connect_failures_total{cluster="backend"} 0"#,
            r#"meshlink_proxy_outlier_ejections_total{cluster="backend",detector="consecutive_5xx"} 0"#,
            r#"meshlink_proxy_outlier_ejections_total{cluster="backend",detector="consecutive_gateway_failure"} 0"#,
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }
}

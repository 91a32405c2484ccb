//! A cluster's active health check as validated from Envoy's
//! `Cluster.health_checks[0]` (what Kuma's MeshHealthCheck becomes): the
//! check itself (HTTP, TCP or gRPC) and its timing, every unset field
//! filled with Envoy's default.
//!
//! Plain data; [`crate::health_check`] runs the checks and
//! [`crate::lb`] keeps failing endpoints out of the balancer.

use std::ops::Range;
use std::time::Duration;

use serde::Serialize;

/// What one check does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// `http_health_check`: a GET whose status must be expected.
    Http {
        /// The request's path.
        path: String,
        /// The request's `Host` (empty: the cluster's name).
        host: String,
        /// Headers set on the request (name lowercased, value; each replaces
        /// one of the same name).
        headers: Vec<(String, String)>,
        /// Statuses that pass, as half-open ranges (Envoy's default:
        /// 200 only).
        expected_statuses: Vec<Range<u16>>,
    },
    /// `tcp_health_check`: connect, send `send`, then read until every
    /// block of `receive` was seen in order (none: connecting passes).
    Tcp {
        /// Bytes written after connecting.
        send: Vec<u8>,
        /// Blocks expected back, in order, not necessarily adjacent.
        receive: Vec<Vec<u8>>,
    },
    /// `grpc_health_check`: `grpc.health.v1.Health/Check`, passing on
    /// `SERVING`.
    Grpc {
        /// The service asked about (empty: the server's overall health).
        service_name: String,
        /// The request's `:authority` (empty: the cluster's name).
        authority: String,
    },
}

impl CheckKind {
    /// The metrics and log label of the kind.
    pub fn as_str(&self) -> &'static str {
        match self {
            CheckKind::Http { .. } => "http",
            CheckKind::Tcp { .. } => "tcp",
            CheckKind::Grpc { .. } => "grpc",
        }
    }
}

/// `health_checks[0]` with Envoy's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthCheckSpec {
    /// The check.
    pub kind: CheckKind,
    /// How long one check may take (connecting included).
    #[serde(with = "super::humantime_serde_duration")]
    pub timeout: Duration,
    /// Time between checks.
    #[serde(with = "super::humantime_serde_duration")]
    pub interval: Duration,
    /// Time between checks of an unhealthy endpoint (Envoy's default:
    /// `interval`).
    #[serde(with = "super::humantime_serde_duration")]
    pub unhealthy_interval: Duration,
    /// Time between checks while the cluster has never carried traffic
    /// (Envoy's default: 60 s).
    #[serde(with = "super::humantime_serde_duration")]
    pub no_traffic_interval: Duration,
    /// A random delay before the first check, up to this.
    #[serde(with = "super::humantime_serde_duration")]
    pub initial_jitter: Duration,
    /// A random delay added to every interval, up to this.
    #[serde(with = "super::humantime_serde_duration")]
    pub interval_jitter: Duration,
    /// A random delay added to every interval, up to this share of it (%).
    pub interval_jitter_percent: u32,
    /// Failed checks in a row that make a healthy endpoint unhealthy.
    pub unhealthy_threshold: u32,
    /// Passed checks in a row that make an unhealthy endpoint healthy
    /// (the first check of a new endpoint needs one pass, as in Envoy).
    pub healthy_threshold: u32,
    /// Keep the check's connection between checks.
    pub reuse_connection: bool,
    /// Log every failed check, not only the first of a streak (the
    /// others are rate-limited).
    pub always_log_failures: bool,
    /// The file health events are appended to (`event_log_path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_log_path: Option<std::path::PathBuf>,
}

impl HealthCheckSpec {
    /// Envoy's no-traffic interval default.
    pub const DEFAULT_NO_TRAFFIC_INTERVAL: Duration = Duration::from_secs(60);

    /// Whether `status` passes an HTTP check with `expected` statuses.
    pub fn status_passes(expected: &[Range<u16>], status: u16) -> bool {
        expected.iter().any(|r| r.contains(&status))
    }
}

/// A TCP check (no payload) every `every`, one result deciding, without
/// jitter (tests of what runs checks).
#[cfg(test)]
pub(crate) fn tcp_check(every: Duration) -> HealthCheckSpec {
    HealthCheckSpec {
        kind: CheckKind::Tcp {
            send: Vec::new(),
            receive: Vec::new(),
        },
        timeout: Duration::from_secs(2),
        interval: every,
        unhealthy_interval: every,
        no_traffic_interval: every,
        initial_jitter: Duration::ZERO,
        interval_jitter: Duration::ZERO,
        interval_jitter_percent: 0,
        unhealthy_threshold: 1,
        healthy_threshold: 1,
        reuse_connection: false,
        always_log_failures: false,
        event_log_path: None,
    }
}

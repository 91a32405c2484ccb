//! The MeshHealthCheck kind: active health checks a caller's sidecar runs
//! against a destination's endpoints (`to[]`): `http` (path, expected
//! statuses, request headers), `tcp` (bytes sent, blocks expected back)
//! and `grpc` (`grpc.health.v1` with a service name), with their timing.
//!
//! Owns the spec's shape and its validation (durations, thresholds, base64
//! payloads, statuses 100-599). How policies combine belongs to
//! `crate::policy`; what the proxy does is the translator's.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::kuma_duration;
use super::policy_target::{self, ROUTE_TOP_KINDS};
use super::rate_limit::HeaderChanges;
use super::target_ref::TargetRef;
use crate::validate::Errors;

/// `spec` of a MeshHealthCheck.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshHealthCheckSpec {
    /// The callers configured (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Per set of destinations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<HealthCheckTo>,
}

/// `to[]`: destinations and their checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheckTo {
    /// `Mesh`, a `MeshService`, ….
    pub target_ref: TargetRef,
    /// The checks.
    #[serde(rename = "default", default)]
    pub default_: HealthCheckConf,
}

/// `default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheckConf {
    /// Time between checks (1m by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Time between checks of an unhealthy endpoint (`interval` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_interval: Option<String>,
    /// How long a check may take (15s by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Failed checks in a row that make an endpoint unhealthy (5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_threshold: Option<i32>,
    /// Passed checks in a row that make it healthy again (1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_threshold: Option<i32>,
    /// A random delay before the first check, up to this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_jitter: Option<String>,
    /// A random delay added to each interval, up to this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_jitter: Option<String>,
    /// A random delay added to each interval, up to this share of it (%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_jitter_percent: Option<i32>,
    /// Below this share of healthy endpoints (%), all are used (Kuma's
    /// older field; a number or a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_panic_threshold: Option<serde_json::Value>,
    /// In panic, fail requests instead of using every endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_traffic_on_panic: Option<bool>,
    /// A file for health check events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_log_path: Option<String>,
    /// Log every failed check, not only the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_log_health_check_failures: Option<bool>,
    /// Time between checks while the destination gets no traffic (60s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_traffic_interval: Option<String>,
    /// A TCP check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpCheck>,
    /// An HTTP check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpCheck>,
    /// A gRPC check (`grpc.health.v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcCheck>,
    /// Keep the check's connection between checks (true by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse_connection: Option<bool>,
}

/// `tcp`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpCheck {
    /// Turns a broader policy's check off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Bytes sent (base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    /// Blocks expected back in order, not necessarily adjacent (base64);
    /// none: connecting is enough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive: Option<Vec<String>>,
}

/// `http`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpCheck {
    /// Turns a broader policy's check off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// The path requested (`/` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Headers added to each check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers_to_add: Option<HeaderChanges>,
    /// Statuses that pass (200 only by default, as in Envoy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_statuses: Option<Vec<i32>>,
}

/// `grpc`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcCheck {
    /// Turns a broader policy's check off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// The service asked about (the server's overall health when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// The check's `:authority` (the cluster's name by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
}

// === impl TcpCheck ===

impl TcpCheck {
    /// `send`, decoded (`None`: unset or not base64, which validation
    /// refuses).
    pub fn send_bytes(&self) -> Option<Vec<u8>> {
        let b64 = base64::engine::general_purpose::STANDARD;
        self.send.as_ref().and_then(|s| b64.decode(s).ok())
    }

    /// `receive`, each block decoded (blocks that are not base64, which
    /// validation refuses, are left out).
    pub fn receive_bytes(&self) -> Vec<Vec<u8>> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let blocks = self.receive.iter().flatten();
        blocks.filter_map(|r| b64.decode(r).ok()).collect()
    }
}

// === impl MeshHealthCheckSpec ===

impl MeshHealthCheckSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), ROUTE_TOP_KINDS);
        policy_target::validate_to_entries(
            errs,
            &self.to,
            "[{targetRef: {kind: MeshService, name: backend}, default: {interval: 10s, http: \
             {path: /health}}}]",
            |e| &e.target_ref,
            |errs, e, at| e.default_.validate(errs, at),
        );
    }
}

impl HealthCheckConf {
    fn validate(&self, errs: &mut Errors, at: &str) {
        for (name, v) in [
            ("interval", &self.interval),
            ("unhealthyInterval", &self.unhealthy_interval),
            ("timeout", &self.timeout),
            ("noTrafficInterval", &self.no_traffic_interval),
        ] {
            kuma_duration::check_positive(errs, &format!("{at}.{name}"), v.as_deref());
        }
        for (name, v) in [
            ("initialJitter", &self.initial_jitter),
            ("intervalJitter", &self.interval_jitter),
        ] {
            kuma_duration::check_opt(errs, &format!("{at}.{name}"), v.as_deref());
        }
        for (name, v) in [
            ("unhealthyThreshold", self.unhealthy_threshold),
            ("healthyThreshold", self.healthy_threshold),
        ] {
            if v.is_some_and(|v| v < 1) {
                errs.add(format!("{at}.{name}"), "must be at least 1");
            }
        }
        if self
            .interval_jitter_percent
            .is_some_and(|p| !(0..=100).contains(&p))
        {
            errs.add(format!("{at}.intervalJitterPercent"), "must be 0 to 100");
        }
        if let Some(p) = &self.healthy_panic_threshold
            && super::load_balancing::decimal(p).is_none_or(|v| !(0.0..=100.0).contains(&v))
        {
            errs.add(
                format!("{at}.healthyPanicThreshold"),
                format!("{p} is not a percentage (0 to 100)"),
            );
        }
        if let Some(t) = &self.tcp {
            let b64 = base64::engine::general_purpose::STANDARD;
            if let Some(s) = &t.send
                && b64.decode(s).is_err()
            {
                errs.add(format!("{at}.tcp.send"), "not base64");
            }
            for (i, r) in t.receive.iter().flatten().enumerate() {
                if b64.decode(r).is_err() {
                    errs.add(format!("{at}.tcp.receive[{i}]"), "not base64");
                }
            }
        }
        if let Some(h) = &self.http {
            if let Some(p) = &h.path
                && !p.starts_with('/')
            {
                errs.add(
                    format!("{at}.http.path"),
                    format!("{p:?} must start with /"),
                );
            }
            for (i, s) in h.expected_statuses.iter().flatten().enumerate() {
                if !(100..=599).contains(s) {
                    errs.add(
                        format!("{at}.http.expectedStatuses[{i}]"),
                        format!("{s} is not an HTTP status (100-599)"),
                    );
                }
            }
        }
    }
}

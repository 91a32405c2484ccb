//! The MeshCircuitBreaker kind: Kuma's connection limits and outlier
//! detection, on the clusters of a proxy's destinations (`to[]`) and on
//! its local application cluster (`from[]`, and Kuma 2.10's `rules[]`).
//!
//! Owns the spec's shape and its validation, which follows Kuma's
//! (`validator.go`: limits above zero, positive durations, percentages up
//! to 100, at least one detector) and adds what meshlink-proxy cannot
//! enforce (`maxConnectionPools`). How policies combine belongs to
//! `crate::policy`; the Envoy fields they become are the translator's
//! (`meshlink_xds::translate`).

use serde::{Deserialize, Serialize};

use super::kuma_duration;
use super::policy_target::{self, TOP_KINDS};
use super::target_ref::{Position, TargetRef, TargetRefKind};
use crate::validate::Errors;

/// `spec` of a MeshCircuitBreaker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshCircuitBreakerSpec {
    /// The proxies configured (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Limits and detection per destination.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<CircuitBreakerEntry>,
    /// Limits and detection on the local application (Kuma's older form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<CircuitBreakerEntry>,
    /// Limits and detection on the local application (Kuma 2.10's form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<CircuitBreakerRule>,
}

/// `to[]` and `from[]`: one set of destinations (or clients) and the conf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitBreakerEntry {
    /// `Mesh` or a `MeshService` (`to[]`); `Mesh` (`from[]`).
    pub target_ref: TargetRef,
    /// The conf.
    #[serde(rename = "default", default)]
    pub default_: CircuitBreakerConf,
}

/// `rules[]`: the conf of every inbound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitBreakerRule {
    /// The conf.
    #[serde(rename = "default", default)]
    pub default_: CircuitBreakerConf,
}

/// `default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitBreakerConf {
    /// Concurrency limits of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_limits: Option<ConnectionLimits>,
    /// Passive health checking of the cluster's endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
}

/// `connectionLimits`; every unset limit is Envoy's (and Kuma's) default:
/// 1024 connections, pending requests and requests, 3 retries.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionLimits {
    /// Upstream connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    /// Connection pools (refused: meshlink-proxy keeps one per endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connection_pools: Option<u32>,
    /// Requests waiting for a connection (TCP: connections being made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pending_requests: Option<u32>,
    /// Retries in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Requests in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u32>,
}

/// `outlierDetection`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutlierDetection {
    /// Turns detection off (a broader policy's included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Time between sweeps (Envoy's default 10s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Ejection time per ejection so far (Envoy's default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ejection_time: Option<String>,
    /// Most endpoints ejected at once, in percent (default 10, at least one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ejection_percent: Option<u32>,
    /// Count connection failures apart from HTTP errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_external_and_local_errors: Option<bool>,
    /// The detectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectors: Option<Detectors>,
    /// Below this share of healthy endpoints (percent, default 50) every
    /// endpoint gets traffic again; 0 turns panic mode off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_panic_threshold: Option<Decimal>,
}

/// `outlierDetection.detectors`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Detectors {
    /// Consecutive 5xx (and, unsplit, connection failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_failures: Option<Consecutive>,
    /// Consecutive 502/503/504 (and, unsplit, connection failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_failures: Option<Consecutive>,
    /// Consecutive connection failures (split mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_origin_failures: Option<Consecutive>,
    /// Success rate below the mean by a number of standard deviations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_rate: Option<SuccessRate>,
    /// Failure percentage above a threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_percentage: Option<FailurePercentage>,
}

/// A consecutive-failures detector.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Consecutive {
    /// Failures in a row that eject (Envoy's default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive: Option<u32>,
}

/// `detectors.successRate`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuccessRate {
    /// Endpoints with enough requests needed to judge (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_hosts: Option<u32>,
    /// Requests an endpoint needs in an interval to be judged (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_volume: Option<u32>,
    /// Ejected below mean - factor × stdev (default 1.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standard_deviation_factor: Option<Decimal>,
}

/// `detectors.failurePercentage`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailurePercentage {
    /// Endpoints with enough requests needed to judge (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_hosts: Option<u32>,
    /// Requests an endpoint needs in an interval to be judged (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_volume: Option<u32>,
    /// Ejected at or above this failure percentage (default 85).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u32>,
}

/// Kubernetes' `IntOrString` holding a decimal: `1.9`, `"1.9"` or `50`,
/// stored as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Decimal(serde_json::Value);

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        match v {
            serde_json::Value::Number(_) | serde_json::Value::String(_) => Ok(Decimal(v)),
            _ => Err(serde::de::Error::custom(
                "expected a number or a string holding one, e.g. 1.9 or \"1.9\"",
            )),
        }
    }
}

impl Decimal {
    /// The number, if it is one.
    pub fn value(&self) -> Option<f64> {
        match &self.0 {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
        .filter(|v: &f64| v.is_finite())
    }
}

/// `to[]` kinds (Kuma's `validateTo`).
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh, TargetRefKind::MeshService];
/// `from[]` kinds (Kuma's `validateFrom`).
const FROM_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh];

// === impl MeshCircuitBreakerSpec ===

impl MeshCircuitBreakerSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), TOP_KINDS);
        if self.to.is_empty() && self.from.is_empty() && self.rules.is_empty() {
            errs.add(
                "spec",
                "at least one of to, from or rules is required, e.g. to: [{targetRef: {kind: \
                 Mesh}, default: {connectionLimits: {maxRequests: 1024}}}]",
            );
        }
        for (position, list, allowed) in [
            (Position::To, &self.to, TO_KINDS),
            (Position::From, &self.from, FROM_KINDS),
        ] {
            policy_target::validate_entries(
                errs,
                position,
                list,
                allowed,
                |e| &e.target_ref,
                |errs, e, at| e.default_.validate(errs, at),
            );
        }
        for (i, rule) in self.rules.iter().enumerate() {
            rule.default_
                .validate(errs, &format!("spec.rules[{i}].default"));
        }
    }
}

// === impl CircuitBreakerConf ===

impl CircuitBreakerConf {
    /// Reports every invalid field at `at`.
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        if self.connection_limits.is_none() && self.outlier_detection.is_none() {
            errs.add(
                at,
                "set connectionLimits, outlierDetection or both, e.g. connectionLimits: \
                 {maxRequests: 1024}",
            );
        }
        if let Some(l) = &self.connection_limits {
            let at = format!("{at}.connectionLimits");
            for (field, value) in [
                ("maxConnections", l.max_connections),
                ("maxPendingRequests", l.max_pending_requests),
                ("maxRetries", l.max_retries),
                ("maxRequests", l.max_requests),
            ] {
                above_zero(errs, &format!("{at}.{field}"), value);
            }
            if l.max_connection_pools.is_some() {
                errs.add(
                    format!("{at}.maxConnectionPools"),
                    "not supported: meshlink-proxy keeps one connection pool per endpoint; \
                     remove it (maxConnections bounds the connections)",
                );
            }
        }
        if let Some(o) = &self.outlier_detection {
            o.validate(errs, &format!("{at}.outlierDetection"));
        }
    }
}

// === impl OutlierDetection ===

impl OutlierDetection {
    fn validate(&self, errs: &mut Errors, at: &str) {
        for (field, value) in [
            ("interval", &self.interval),
            ("baseEjectionTime", &self.base_ejection_time),
        ] {
            let path = format!("{at}.{field}");
            if let Some(v) = value
                && kuma_duration::check(errs, &path, v).is_some_and(|d| d.is_zero())
            {
                errs.add(path, "must be greater than zero, e.g. 10s");
            }
        }
        percent(
            errs,
            &format!("{at}.maxEjectionPercent"),
            self.max_ejection_percent,
        );
        if let Some(t) = &self.healthy_panic_threshold {
            let path = format!("{at}.healthyPanicThreshold");
            match t.value() {
                Some(v) if (0.0..=100.0).contains(&v) => {}
                _ => errs.add(path, "must be a percentage from 0 to 100, e.g. 50"),
            }
        }
        let at = format!("{at}.detectors");
        let Some(d) = &self.detectors else {
            errs.add(
                at,
                "required: set at least one of totalFailures, gatewayFailures, \
                 localOriginFailures, successRate, failurePercentage",
            );
            return;
        };
        if d.total_failures.is_none()
            && d.gateway_failures.is_none()
            && d.local_origin_failures.is_none()
            && d.success_rate.is_none()
            && d.failure_percentage.is_none()
        {
            errs.add(
                &at,
                "set at least one of totalFailures, gatewayFailures, localOriginFailures, \
                 successRate, failurePercentage",
            );
        }
        for (field, c) in [
            ("totalFailures", &d.total_failures),
            ("gatewayFailures", &d.gateway_failures),
            ("localOriginFailures", &d.local_origin_failures),
        ] {
            if let Some(c) = c {
                above_zero(errs, &format!("{at}.{field}.consecutive"), c.consecutive);
            }
        }
        if let Some(s) = &d.success_rate {
            let at = format!("{at}.successRate");
            above_zero(errs, &format!("{at}.minimumHosts"), s.minimum_hosts);
            above_zero(errs, &format!("{at}.requestVolume"), s.request_volume);
            if let Some(f) = &s.standard_deviation_factor
                && !f.value().is_some_and(|v| v > 0.0)
            {
                errs.add(
                    format!("{at}.standardDeviationFactor"),
                    "must be a number greater than zero, e.g. 1.9",
                );
            }
        }
        if let Some(f) = &d.failure_percentage {
            let at = format!("{at}.failurePercentage");
            above_zero(errs, &format!("{at}.minimumHosts"), f.minimum_hosts);
            above_zero(errs, &format!("{at}.requestVolume"), f.request_volume);
            percent(errs, &format!("{at}.threshold"), f.threshold);
        }
    }
}

fn above_zero(errs: &mut Errors, at: &str, value: Option<u32>) {
    if value == Some(0) {
        errs.add(at, "must be greater than zero");
    }
}

fn percent(errs: &mut Errors, at: &str, value: Option<u32>) {
    if let Some(v) = value
        && v > 100
    {
        errs.add(at, format!("{v} is not a percentage; use 0-100"));
    }
}

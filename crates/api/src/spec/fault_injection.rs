//! The MeshFaultInjection kind: Kuma's HTTP faults on a proxy's inbounds,
//! per set of callers (`from[]`), or on the selected proxy's own calls
//! (`to[]`: a proxyless gRPC client's, a gateway's outbounds).
//! `default.http` is an ordered list; each entry may `abort` (answer with
//! a status), `delay` (wait before forwarding) and limit the
//! `responseBandwidth`, each for a `percentage` of the requests the
//! previous entries let through.
//!
//! Owns the spec's shape and its validation (Kuma's rules, tightened
//! where Envoy would refuse the result: an abort status of 200-599, a
//! delay above zero). Percentages are kept as the user wrote them (Kuma's
//! int-or-string); [`Percentage::per_million`] reads them. How policies
//! combine belongs to `crate::policy`; what the proxy enforces is the
//! translator's (`meshlink_xds::translate`).

use serde::{Deserialize, Serialize};

use super::kuma_duration;
use super::policy_target::{self, ROUTE_TOP_KINDS};
use super::target_ref::{Position, TargetRef, TargetRefKind};
use crate::validate::Errors;

mod percentage;

pub use percentage::{Bandwidth, Percentage};

/// `spec` of a MeshFaultInjection.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshFaultInjectionSpec {
    /// The proxies configured (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Faults per set of callers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<FaultEntry>,
    /// Faults on the selected proxy's own calls (`targetRef: {kind:
    /// Mesh}`): a proxyless gRPC client's channels, a gateway's outbounds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<FaultEntry>,
}

/// `from[]` (and `to[]`): one set of callers and their faults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultEntry {
    /// `Mesh`, a `MeshSubset`, a `MeshService` or a `MeshServiceSubset`.
    pub target_ref: TargetRef,
    /// The faults.
    #[serde(rename = "default", default)]
    pub default_: FaultConf,
}

/// `default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultConf {
    /// The HTTP faults, in the order they apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Vec<HttpFault>>,
}

/// `default.http[]`: one step of faults.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpFault {
    /// Answer with a status instead of forwarding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<AbortFault>,
    /// Wait before forwarding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<DelayFault>,
    /// Slow the response body down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bandwidth: Option<BandwidthFault>,
}

/// `abort`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AbortFault {
    /// The answer's status (200-599).
    pub http_status: i64,
    /// The share of requests aborted, 0-100.
    pub percentage: Percentage,
}

/// `delay`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelayFault {
    /// How long, e.g. `5s` (Go syntax, above zero).
    pub value: String,
    /// The share of requests delayed, 0-100.
    pub percentage: Percentage,
}

/// `responseBandwidth`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BandwidthFault {
    /// The limit, e.g. `50Mbps` (`Gbps`, `Mbps` or `kbps`).
    pub limit: String,
    /// The share of responses limited, 0-100.
    pub percentage: Percentage,
}

/// `from[]` kinds (Kuma 2.6's list; later Kuma drops `MeshService`, kept
/// so its older documents apply).
const FROM_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
];

/// `to[]` kinds: only `Mesh` (every call of the selected proxy).
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh];

// === impl MeshFaultInjectionSpec ===

impl MeshFaultInjectionSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), ROUTE_TOP_KINDS);
        if self.from.is_empty() && self.to.is_empty() {
            errs.add(
                "spec",
                "at least one of from or to is required, e.g. from: [{targetRef: {kind: Mesh}, \
                 default: {http: [{abort: {httpStatus: 500, percentage: 50}}]}}]",
            );
        }
        for (position, list, allowed) in [
            (Position::From, &self.from, FROM_KINDS),
            (Position::To, &self.to, TO_KINDS),
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
    }
}

// === impl FaultConf ===

impl FaultConf {
    /// Reports every invalid fault at `at`.
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        let Some(http) = &self.http else {
            errs.add(
                format!("{at}.http"),
                "required: the list of HTTP faults, e.g. [{abort: {httpStatus: 500, percentage: \
                 50}}]",
            );
            return;
        };
        for (i, fault) in http.iter().enumerate() {
            fault.validate(errs, &format!("{at}.http[{i}]"));
        }
    }
}

// === impl HttpFault ===

impl HttpFault {
    fn validate(&self, errs: &mut Errors, at: &str) {
        if self.abort.is_none() && self.delay.is_none() && self.response_bandwidth.is_none() {
            errs.add(at, "set abort, delay, responseBandwidth or several of them");
        }
        if let Some(a) = &self.abort {
            if !(200..=599).contains(&a.http_status) {
                errs.add(
                    format!("{at}.abort.httpStatus"),
                    format!(
                        "{} is not a status Envoy's fault filter can answer with; use 200-599",
                        a.http_status
                    ),
                );
            }
            a.percentage
                .validate(errs, &format!("{at}.abort.percentage"));
        }
        if let Some(d) = &self.delay {
            let path = format!("{at}.delay.value");
            if kuma_duration::check(errs, &path, &d.value).is_some_and(|v| v.is_zero()) {
                errs.add(
                    path,
                    "must be greater than zero (Envoy refuses a zero fixed delay), e.g. 5s",
                );
            }
            d.percentage
                .validate(errs, &format!("{at}.delay.percentage"));
        }
        if let Some(b) = &self.response_bandwidth {
            Bandwidth::check(errs, &format!("{at}.responseBandwidth.limit"), &b.limit);
            b.percentage
                .validate(errs, &format!("{at}.responseBandwidth.percentage"));
        }
    }
}

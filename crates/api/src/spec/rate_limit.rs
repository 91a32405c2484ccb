//! The MeshRateLimit kind: Kuma's local rate limits on a proxy's inbounds,
//! for HTTP requests (`local.http.requestRate`, answered with
//! `onRateLimit`) and TCP connections (`local.tcp.connectionRate`), per
//! client set (`from[]`, and Kuma 2.10's `rules[]`) or on a gateway's
//! outbounds (`to[]`).
//!
//! Owns the spec's shape and its validation (intervals in Go syntax, at
//! least 50 ms as Envoy requires; a status code of an error). How policies
//! combine belongs to `crate::policy`; what the proxy enforces is the
//! translator's (`meshlink_xds::translate`).

use serde::{Deserialize, Serialize};

use super::kuma_duration;
use super::permission_rules::ClientMatch;
use super::policy_target::{self, FROM_KINDS, ROUTE_TOP_KINDS};
use super::target_ref::{Position, TargetRef, TargetRefKind};
use crate::validate::Errors;

/// The shortest `interval` (Envoy's least fill interval).
pub(crate) const MIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// `spec` of a MeshRateLimit.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshRateLimitSpec {
    /// The proxies configured (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Limits per set of clients (Kuma's older form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<RateLimitFrom>,
    /// Limits on a gateway's outbounds (`targetRef: {kind: Mesh}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<RateLimitFrom>,
    /// Limits on the inbounds (Kuma 2.10's form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RateLimitRule>,
}

/// `from[]` (and `to[]`): one set of clients and their limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitFrom {
    /// `Mesh`, a `MeshSubset` or a `MeshService`.
    pub target_ref: TargetRef,
    /// The limits.
    #[serde(rename = "default", default)]
    pub default_: RateLimitConf,
}

/// `rules[]`: limits, optionally for matching clients only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitRule {
    /// Clients by SPIFFE ID (every client when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<ClientMatch>>,
    /// The limits.
    #[serde(rename = "default", default)]
    pub default_: RateLimitConf,
}

/// `default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitConf {
    /// Limits the proxy applies by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalLimits>,
}

/// `default.local`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalLimits {
    /// HTTP requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpLimit>,
    /// TCP connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpLimit>,
}

/// `local.http`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpLimit {
    /// Turns off a limit a broader policy set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// How many requests per interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<Rate>,
    /// The answer to a limited request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_rate_limit: Option<OnRateLimit>,
}

/// `local.tcp`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpLimit {
    /// Turns off a limit a broader policy set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// How many connections per interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_rate: Option<Rate>,
}

/// `requestRate` / `connectionRate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rate {
    /// How many per interval (at least 1).
    pub num: u32,
    /// The interval, e.g. `10s` (at least 50ms).
    pub interval: String,
}

/// `onRateLimit`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OnRateLimit {
    /// The answer's status (default 429).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u32>,
    /// Headers added to the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<HeaderChanges>,
}

/// `onRateLimit.headers`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderChanges {
    /// Headers set (replacing a value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<NameValue>,
    /// Headers appended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<NameValue>,
}

/// One header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NameValue {
    /// Header name.
    pub name: String,
    /// Header value.
    pub value: String,
}

/// `to[]` kinds: only `Mesh` (a gateway's outbounds).
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh];

// === impl MeshRateLimitSpec ===

impl MeshRateLimitSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), ROUTE_TOP_KINDS);
        if self.to.is_empty() && self.from.is_empty() && self.rules.is_empty() {
            errs.add(
                "spec",
                "at least one of from, to or rules is required, e.g. from: [{targetRef: {kind: \
                 Mesh}, default: {local: {http: {requestRate: {num: 5, interval: 10s}}}}}]",
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
        for (i, rule) in self.rules.iter().enumerate() {
            super::permission_rules::validate_rule_matches(errs, i, rule.matches.as_ref());
            rule.default_
                .validate(errs, &format!("spec.rules[{i}].default"));
        }
    }
}

// === impl RateLimitConf ===

impl RateLimitConf {
    /// Reports every invalid limit at `at`.
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        let Some(local) = &self.local else {
            errs.add(
                format!("{at}.local"),
                "required: meshlink implements local rate limits (local.http, local.tcp)",
            );
            return;
        };
        if local.http.is_none() && local.tcp.is_none() {
            errs.add(format!("{at}.local"), "set http, tcp or both");
        }
        if let Some(http) = &local.http {
            let at = format!("{at}.local.http");
            check_rate(
                errs,
                &format!("{at}.requestRate"),
                http.request_rate.as_ref(),
                http.disabled,
            );
            let status = http.on_rate_limit.as_ref().and_then(|o| o.status);
            if let Some(s) = status
                && !(400..=599).contains(&s)
            {
                errs.add(
                    format!("{at}.onRateLimit.status"),
                    format!("{s} is not an error status; use 400-599 (default 429)"),
                );
            }
            let headers = http.on_rate_limit.as_ref().and_then(|o| o.headers.as_ref());
            for (list, name) in headers
                .into_iter()
                .flat_map(|h| [(&h.set, "set"), (&h.add, "add")])
            {
                for (i, h) in list.iter().enumerate() {
                    if !is_token(&h.name) {
                        errs.add(
                            format!("{at}.onRateLimit.headers.{name}[{i}].name"),
                            format!("{:?} is not a valid header name", h.name),
                        );
                    }
                    if h.value.chars().any(|c| c.is_control() && c != '\t') {
                        errs.add(
                            format!("{at}.onRateLimit.headers.{name}[{i}].value"),
                            "not a valid header value (control characters?)",
                        );
                    }
                }
            }
        }
        if let Some(tcp) = &local.tcp {
            check_rate(
                errs,
                &format!("{at}.local.tcp.connectionRate"),
                tcp.connection_rate.as_ref(),
                tcp.disabled,
            );
        }
    }
}

/// A rate must be set unless the limit is disabled; `num` at least 1 and
/// `interval` at least [`MIN_INTERVAL`].
fn check_rate(errs: &mut Errors, at: &str, rate: Option<&Rate>, disabled: Option<bool>) {
    let Some(rate) = rate else {
        if disabled != Some(true) {
            errs.add(
                at,
                "required unless disabled: true, e.g. {num: 5, interval: 10s}",
            );
        }
        return;
    };
    if rate.num == 0 {
        errs.add(format!("{at}.num"), "must be at least 1");
    }
    let path = format!("{at}.interval");
    if let Some(d) = kuma_duration::check(errs, &path, &rate.interval)
        && d < MIN_INTERVAL
    {
        errs.add(
            path,
            format!(
                "{:?} is shorter than 50ms, the least Envoy accepts",
                rate.interval
            ),
        );
    }
}

/// Whether `name` is an HTTP field name (RFC 9110 `token`).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

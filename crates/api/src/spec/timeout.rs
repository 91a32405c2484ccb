//! The MeshTimeout kind: Kuma's connection, idle and HTTP timeouts,
//! outbound (`to[]`, per route with `kind: MeshHTTPRoute`) and inbound
//! (`from[]`, and Kuma 2.10's `rules[]`).
//!
//! Owns the spec's shape, its validation (every duration in Go syntax) and
//! Kuma's defaults ([`TimeoutDefaults::KUMA`]). Stored specs hold what the
//! user wrote; defaults are only computed. How policies combine belongs to
//! `crate::policy`; meshlink-proxy does not enforce these timeouts yet.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::kuma_duration;
use super::permission_rules::ClientMatch;
use super::policy_target::{self, FROM_KINDS, TIMEOUT_TO_KINDS, TOP_KINDS};
use super::target_ref::{Position, TargetRef};
use crate::validate::Errors;

/// `spec` of a MeshTimeout.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshTimeoutSpec {
    /// The proxies configured (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Outbound timeouts per destination (or route).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<TimeoutTo>,
    /// Inbound timeouts per client (Kuma's older form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<TimeoutFrom>,
    /// Inbound timeouts (Kuma 2.10's form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<TimeoutRule>,
}

/// `to[]`: one destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeoutTo {
    /// `Mesh`, a `MeshService` or a `MeshHTTPRoute`.
    pub target_ref: TargetRef,
    /// The timeouts.
    #[serde(rename = "default", default)]
    pub default_: TimeoutConf,
}

/// `from[]`: one set of clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeoutFrom {
    /// `Mesh`, a `MeshSubset` or a `MeshService`.
    pub target_ref: TargetRef,
    /// The timeouts.
    #[serde(rename = "default", default)]
    pub default_: TimeoutConf,
}

/// `rules[]`: inbound timeouts, optionally for matching clients only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeoutRule {
    /// Clients by SPIFFE ID (every client when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<ClientMatch>>,
    /// The timeouts.
    #[serde(rename = "default", default)]
    pub default_: TimeoutConf,
}

/// `default` of every entry. Durations are Go-style strings (`5s`, `1h`,
/// `0s`); `0s` disables a timeout, except `connectionTimeout`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeoutConf {
    /// How long to wait for a TCP connection (Kuma's default 5s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_timeout: Option<String>,
    /// How long a connection may carry no bytes (Kuma's default 1h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<String>,
    /// HTTP timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpTimeouts>,
}

/// `default.http`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpTimeouts {
    /// Time for the whole request (Kuma's default 15s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout: Option<String>,
    /// Time a stream may see no activity (Kuma's default 30m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_idle_timeout: Option<String>,
    /// Longest lifetime of a stream (disabled by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stream_duration: Option<String>,
    /// Longest lifetime of a connection (disabled by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connection_duration: Option<String>,
    /// Time to receive the request headers (disabled by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers_timeout: Option<String>,
}

/// The timeouts a proxy uses where no MeshTimeout sets one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutDefaults {
    /// `connectionTimeout`.
    pub connection_timeout: Duration,
    /// `idleTimeout`.
    pub idle_timeout: Duration,
    /// `http.requestTimeout`.
    pub request_timeout: Duration,
    /// `http.streamIdleTimeout`.
    pub stream_idle_timeout: Duration,
}

impl TimeoutDefaults {
    /// Kuma's documented defaults: connectionTimeout 5s, idleTimeout 1h,
    /// http.requestTimeout 15s, http.streamIdleTimeout 30m (the
    /// `mesh-timeout-all-default` policy's `to[]`); maxStreamDuration,
    /// maxConnectionDuration and requestHeadersTimeout are disabled.
    pub const KUMA: TimeoutDefaults = TimeoutDefaults {
        connection_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(3600),
        request_timeout: Duration::from_secs(15),
        stream_idle_timeout: Duration::from_secs(30 * 60),
    };
}

// === impl MeshTimeoutSpec ===

impl MeshTimeoutSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), TOP_KINDS);
        if self.to.is_empty() && self.from.is_empty() && self.rules.is_empty() {
            errs.add(
                "spec",
                "at least one of to, from or rules is required, e.g. to: [{targetRef: {kind: \
                 Mesh}, default: {idleTimeout: 1h}}]",
            );
        }
        policy_target::validate_to_list(
            errs,
            self.to.iter().map(|t| &t.target_ref),
            TIMEOUT_TO_KINDS,
        );
        for (i, to) in self.to.iter().enumerate() {
            to.default_.validate(errs, &format!("spec.to[{i}].default"));
        }
        for (i, from) in self.from.iter().enumerate() {
            let at = format!("spec.from[{i}]");
            from.target_ref.validate_allowed(
                errs,
                &format!("{at}.targetRef"),
                Position::From,
                FROM_KINDS,
            );
            from.default_.validate(errs, &format!("{at}.default"));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            super::permission_rules::validate_rule_matches(errs, i, rule.matches.as_ref());
            rule.default_
                .validate(errs, &format!("spec.rules[{i}].default"));
        }
    }
}

// === impl TimeoutConf ===

impl TimeoutConf {
    /// Reports every unparsable duration at `at`.
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        kuma_duration::check_positive(
            errs,
            &format!("{at}.connectionTimeout"),
            self.connection_timeout.as_deref(),
        );
        kuma_duration::check_opt(
            errs,
            &format!("{at}.idleTimeout"),
            self.idle_timeout.as_deref(),
        );
        let Some(http) = &self.http else { return };
        for (field, value) in [
            ("requestTimeout", &http.request_timeout),
            ("streamIdleTimeout", &http.stream_idle_timeout),
            ("maxStreamDuration", &http.max_stream_duration),
            ("maxConnectionDuration", &http.max_connection_duration),
            ("requestHeadersTimeout", &http.request_headers_timeout),
        ] {
            kuma_duration::check_opt(errs, &format!("{at}.http.{field}"), value.as_deref());
        }
    }
}

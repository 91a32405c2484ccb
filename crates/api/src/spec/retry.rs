//! The MeshRetry kind: Kuma's retries per destination (or route) for HTTP,
//! gRPC and TCP.
//!
//! Owns the spec's shape, its validation (every `retryOn` value Kuma
//! defines, status codes, durations, ranges) and what applies when
//! `retryOn` is unset ([`default_http_retry_on`], [`default_grpc_retry_on`]).
//! How policies combine belongs to `crate::policy`; meshlink-proxy does not
//! retry by these yet.

use serde::{Deserialize, Serialize};

use super::Tags;
use super::header_match::HeaderMatch;
use super::policy_target::{self, RETRY_TO_KINDS, TOP_KINDS};
use super::string_enum::string_enum;
use super::target_ref::TargetRef;
use crate::validate::Errors;

/// Every named HTTP `retryOn` value Kuma defines (besides status codes).
/// `5XX` is accepted as a spelling of `5xx` (Kuma's docs use both).
pub const HTTP_RETRY_ON: &[&str] = &[
    "5xx",
    "5XX",
    "GatewayError",
    "Reset",
    "Retriable4xx",
    "ConnectFailure",
    "EnvoyRatelimited",
    "RefusedStream",
    "Http3PostConnectFailure",
    "HttpMethodConnect",
    "HttpMethodDelete",
    "HttpMethodGet",
    "HttpMethodHead",
    "HttpMethodOptions",
    "HttpMethodPatch",
    "HttpMethodPost",
    "HttpMethodPut",
    "HttpMethodTrace",
];

/// The lowest and highest status code `retryOn` accepts.
pub const RETRY_STATUS_CODES: std::ops::RangeInclusive<u16> = 300..=599;

/// What HTTP retries on when `retryOn` is unset: Kuma's default
/// (`gateway-error,connect-failure,refused-stream` in Envoy's terms), so a
/// POST is retried only when the upstream never saw it or answered
/// 502/503/504.
pub fn default_http_retry_on() -> Vec<String> {
    ["GatewayError", "ConnectFailure", "RefusedStream"]
        .map(String::from)
        .to_vec()
}

/// What gRPC retries on when `retryOn` is unset: Kuma's default, in
/// Kuma's names where it has one (`Canceled`, `ResourceExhausted`,
/// `Unavailable`); Kuma also retries on Envoy's `connect-failure`,
/// `gateway-error`, `refused-stream` and `reset`, which its gRPC `retryOn`
/// cannot name.
pub fn default_grpc_retry_on() -> Vec<GrpcRetryOn> {
    vec![
        GrpcRetryOn::Canceled,
        GrpcRetryOn::ResourceExhausted,
        GrpcRetryOn::Unavailable,
    ]
}

string_enum! {
    /// A gRPC status that triggers a retry.
    pub enum GrpcRetryOn ("gRPC retryOn value") {
        /// CANCELLED (1).
        Canceled = "Canceled",
        /// DEADLINE_EXCEEDED (4).
        DeadlineExceeded = "DeadlineExceeded",
        /// INTERNAL (13).
        Internal = "Internal",
        /// RESOURCE_EXHAUSTED (8).
        ResourceExhausted = "ResourceExhausted",
        /// UNAVAILABLE (14).
        Unavailable = "Unavailable",
    }
}

string_enum! {
    /// How a rate-limit reset header is read.
    pub enum ResetHeaderFormat ("reset header format") {
        /// Seconds to wait.
        Seconds = "Seconds",
        /// A Unix timestamp (seconds) to wait until.
        UnixTimestamp = "UnixTimestamp",
    }
}

string_enum! {
    /// A retry host-selection predicate.
    pub enum HostPredicate ("host selection predicate") {
        /// Avoid hosts already tried.
        OmitPreviousHosts = "OmitPreviousHosts",
        /// Avoid hosts carrying `tags`.
        OmitHostsWithTags = "OmitHostsWithTags",
        /// Avoid priorities already tried.
        OmitPreviousPriorities = "OmitPreviousPriorities",
    }
}

/// `spec` of a MeshRetry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshRetrySpec {
    /// The proxies configured (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Retries per destination (or route); at least one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<RetryTo>,
}

/// `to[]`: one destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryTo {
    /// `Mesh`, a `MeshService` or a `MeshHTTPRoute`.
    pub target_ref: TargetRef,
    /// The retry settings, per protocol.
    #[serde(rename = "default", default)]
    pub default_: RetryConf,
}

/// `to[].default`: one block per protocol.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryConf {
    /// TCP connection attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpRetry>,
    /// HTTP retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpRetry>,
    /// gRPC retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcRetry>,
}

/// `default.tcp`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRetry {
    /// Connection attempts before giving up (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connect_attempt: Option<i64>,
}

/// `default.http`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRetry {
    /// Retries after the first attempt (Envoy's default 1; 0 disables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_retries: Option<i64>,
    /// Time limit of each attempt (`0s` disables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<String>,
    /// Exponential back-off between attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_off: Option<BackOff>,
    /// Back-off read from the upstream's rate-limit headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limited_back_off: Option<RateLimitedBackOff>,
    /// Conditions that trigger a retry ([`HTTP_RETRY_ON`] or a status
    /// code); [`default_http_retry_on`] when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_on: Option<Vec<String>>,
    /// Response headers that trigger a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retriable_response_headers: Option<Vec<HeaderMatch>>,
    /// Request headers required for a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retriable_request_headers: Option<Vec<HeaderMatch>>,
    /// How hosts are picked for a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_selection: Option<Vec<HostSelection>>,
    /// Host selection attempts before using the last host picked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_selection_max_attempts: Option<i64>,
}

/// `default.grpc`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRetry {
    /// Retries after the first attempt (Envoy's default 1; 0 disables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_retries: Option<i64>,
    /// Time limit of each attempt (`0s` disables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<String>,
    /// Exponential back-off between attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_off: Option<BackOff>,
    /// Back-off read from the upstream's rate-limit headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limited_back_off: Option<RateLimitedBackOff>,
    /// gRPC statuses that trigger a retry; [`default_grpc_retry_on`] when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_on: Option<Vec<GrpcRetryOn>>,
}

/// Exponential back-off with jitter.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackOff {
    /// The base interval (Envoy's default 25ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_interval: Option<String>,
    /// The cap (default 10 times `baseInterval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval: Option<String>,
}

/// Back-off taken from rate-limit response headers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitedBackOff {
    /// Headers to read, in order (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_headers: Option<Vec<ResetHeader>>,
    /// The cap (default 300s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval: Option<String>,
}

/// One rate-limit reset header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResetHeader {
    /// The header name, e.g. `retry-after`.
    pub name: String,
    /// `Seconds` or `UnixTimestamp`.
    pub format: ResetHeaderFormat,
}

/// One host-selection predicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostSelection {
    /// The predicate.
    pub predicate: HostPredicate,
    /// `OmitHostsWithTags` only (required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// `OmitPreviousPriorities` only: how often priorities are updated
    /// (Kuma's default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_frequency: Option<i64>,
}

// === impl MeshRetrySpec ===

impl MeshRetrySpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), TOP_KINDS);
        if self.to.is_empty() {
            errs.add(
                "spec.to",
                "at least one entry is required (as in Kuma), e.g. to: [{targetRef: {kind: \
                 Mesh}, default: {http: {numRetries: 3}}}]",
            );
        }
        policy_target::validate_to_list(
            errs,
            self.to.iter().map(|t| &t.target_ref),
            RETRY_TO_KINDS,
        );
        for (i, to) in self.to.iter().enumerate() {
            to.default_.validate(errs, &format!("spec.to[{i}].default"));
        }
    }
}

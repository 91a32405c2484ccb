//! MeshRetry `http` and `grpc` blocks as an Envoy route retry policy.
//!
//! Owns Kuma's defaults: a mesh gets Kuma's `mesh-retry-all-default`
//! (numRetries 5, perTryTimeout 16s, back-off 25ms to 250ms) underneath
//! whatever MeshRetry applies, field by field, and Kuma's `retryOn` when
//! none is given (HTTP `gateway-error,connect-failure,refused-stream`;
//! gRPC `cancelled,connect-failure,gateway-error,refused-stream,reset,
//! resource-exhausted,unavailable`, Kuma's configurer). `numRetries: 0`
//! means no retries. Host-selection predicates are not emitted yet.

use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, RetryPolicy, header_matcher::HeaderMatchSpecifier, retry_policy,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::google::protobuf::{Duration, UInt32Value};
use meshlink_api::spec::{
    BackOff, GrpcRetry, GrpcRetryOn, HttpRetry, RateLimitedBackOff, ResetHeaderFormat, RetryConf,
};

use super::http::kuma_duration;
use super::protocol::Protocol;

/// Kuma's default HTTP `retryOn`, in Envoy's terms.
const HTTP_RETRY_ON_DEFAULT: &str = "gateway-error,connect-failure,refused-stream";

/// Kuma's default gRPC `retryOn`, in Envoy's terms.
const GRPC_RETRY_ON_DEFAULT: &str =
    "cancelled,connect-failure,gateway-error,refused-stream,reset,resource-exhausted,unavailable";

/// Kuma's `mesh-retry-all-default` values.
const DEFAULT_NUM_RETRIES: u32 = 5;
const DEFAULT_PER_TRY_TIMEOUT: &str = "16s";
const DEFAULT_BASE_INTERVAL: &str = "25ms";
const DEFAULT_MAX_INTERVAL: &str = "250ms";

/// The retry policy of a route to a `protocol` destination under `conf`
/// (the MeshRetry conf that applies, if any).
pub(super) fn retry_policy(conf: Option<&RetryConf>, protocol: Protocol) -> Option<RetryPolicy> {
    if protocol == Protocol::Grpc {
        let g = conf.and_then(|c| c.grpc.as_ref());
        return grpc(g.cloned().unwrap_or_default());
    }
    let h = conf.and_then(|c| c.http.as_ref());
    http(h.cloned().unwrap_or_default())
}

fn base(
    num_retries: Option<i64>,
    per_try: Option<&str>,
    back_off: Option<&BackOff>,
    rate_limited: Option<&RateLimitedBackOff>,
    retry_on: &str,
) -> Option<RetryPolicy> {
    let num = num_retries.map_or(DEFAULT_NUM_RETRIES, |n| {
        u32::try_from(n.max(0)).unwrap_or(u32::MAX)
    });
    if num == 0 {
        return None;
    }
    let back_off = back_off.cloned().unwrap_or_default();
    Some(RetryPolicy {
        retry_on: retry_on.to_owned(),
        num_retries: Some(UInt32Value { value: num }),
        per_try_timeout: kuma_duration(Some(per_try.unwrap_or(DEFAULT_PER_TRY_TIMEOUT))),
        retry_back_off: Some(retry_policy::RetryBackOff {
            base_interval: duration(back_off.base_interval.as_deref(), DEFAULT_BASE_INTERVAL),
            max_interval: duration(back_off.max_interval.as_deref(), DEFAULT_MAX_INTERVAL),
        }),
        rate_limited_retry_back_off: rate_limited.map(rate_limited_back_off),
        ..Default::default()
    })
}

fn duration(text: Option<&str>, default: &str) -> Option<Duration> {
    kuma_duration(text).or_else(|| kuma_duration(Some(default)))
}

fn rate_limited_back_off(r: &RateLimitedBackOff) -> retry_policy::RateLimitedRetryBackOff {
    retry_policy::RateLimitedRetryBackOff {
        reset_headers: r
            .reset_headers
            .iter()
            .flatten()
            .map(|h| retry_policy::ResetHeader {
                name: h.name.clone(),
                format: match h.format {
                    ResetHeaderFormat::UnixTimestamp => {
                        retry_policy::ResetHeaderFormat::UnixTimestamp as i32
                    }
                    _ => retry_policy::ResetHeaderFormat::Seconds as i32,
                },
            })
            .collect(),
        max_interval: kuma_duration(r.max_interval.as_deref()),
    }
}

fn http(h: HttpRetry) -> Option<RetryPolicy> {
    let mut on = Vec::new();
    let mut codes = Vec::new();
    let mut methods = Vec::new();
    for item in h.retry_on.iter().flatten() {
        if let Ok(code) = item.parse::<u32>() {
            codes.push(code);
        } else if let Some(method) = item.strip_prefix("HttpMethod") {
            methods.push(method.to_ascii_uppercase());
        } else {
            on.push(http_retry_on(item));
        }
    }
    if !codes.is_empty() {
        on.push("retriable-status-codes".to_owned());
    }
    let retry_on = if on.is_empty() {
        HTTP_RETRY_ON_DEFAULT.to_owned()
    } else {
        on.join(",")
    };
    let mut policy = base(
        h.num_retries,
        h.per_try_timeout.as_deref(),
        h.back_off.as_ref(),
        h.rate_limited_back_off.as_ref(),
        &retry_on,
    )?;
    policy.retriable_status_codes = codes;
    policy.retriable_request_headers = methods
        .into_iter()
        .map(|m| exact_header(":method", m))
        .collect();
    let headers = |list: &Option<Vec<meshlink_api::spec::HeaderMatch>>| -> Vec<HeaderMatcher> {
        list.iter()
            .flatten()
            .map(|m| {
                let route = meshlink_api::spec::HttpRouteMatch {
                    headers: vec![m.clone()],
                    ..Default::default()
                };
                super::route_match::route_match(&route).headers.remove(0)
            })
            .collect()
    };
    policy
        .retriable_request_headers
        .extend(headers(&h.retriable_request_headers));
    policy.retriable_headers = headers(&h.retriable_response_headers);
    if let Some(n) = h.host_selection_max_attempts {
        policy.host_selection_retry_max_attempts = n;
    }
    Some(policy)
}

fn exact_header(name: &str, value: String) -> HeaderMatcher {
    HeaderMatcher {
        name: name.to_owned(),
        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(MatchPattern::Exact(value)),
            ignore_case: false,
        })),
        ..Default::default()
    }
}

/// Kuma's HTTP `retryOn` name in Envoy's terms.
fn http_retry_on(item: &str) -> String {
    match item {
        "5xx" | "5XX" => "5xx",
        "GatewayError" => "gateway-error",
        "Reset" => "reset",
        "Retriable4xx" => "retriable-4xx",
        "ConnectFailure" => "connect-failure",
        "EnvoyRatelimited" => "envoy-ratelimited",
        "RefusedStream" => "refused-stream",
        "Http3PostConnectFailure" => "http3-post-connect-failure",
        other => other,
    }
    .to_owned()
}

fn grpc(g: GrpcRetry) -> Option<RetryPolicy> {
    let on: Vec<&str> = g
        .retry_on
        .iter()
        .flatten()
        .filter_map(|r| match r {
            GrpcRetryOn::Canceled => Some("cancelled"),
            GrpcRetryOn::DeadlineExceeded => Some("deadline-exceeded"),
            GrpcRetryOn::Internal => Some("internal"),
            GrpcRetryOn::ResourceExhausted => Some("resource-exhausted"),
            GrpcRetryOn::Unavailable => Some("unavailable"),
            GrpcRetryOn::Unknown(_) => None,
        })
        .collect();
    let retry_on = if on.is_empty() {
        GRPC_RETRY_ON_DEFAULT.to_owned()
    } else {
        on.join(",")
    };
    base(
        g.num_retries,
        g.per_try_timeout.as_deref(),
        g.back_off.as_ref(),
        g.rate_limited_back_off.as_ref(),
        &retry_on,
    )
}

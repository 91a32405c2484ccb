//! When a try is retried, and how long to wait first: Envoy's `retry_on`
//! semantics over the proxy's typed errors and the upstream's response.
//!
//! Pure (the caller passes the random number), so every rule is
//! unit-tested with no clock.

use std::time::Duration;

use http::HeaderMap;
use meshlink_runtime::{ErrorKind, ProxyError};

use crate::model::route::{ResetFormat, RetryOn, RetrySpec};

/// Envoy's default back-off base when a policy sets none.
const DEFAULT_BASE: Duration = Duration::from_millis(25);

/// Whether `spec` retries a try that failed with `error` (no response).
pub fn retries_error(spec: &RetrySpec, error: &ProxyError) -> bool {
    let on = |c: RetryOn| spec.retry_on.contains(&c);
    match error.kind() {
        ErrorKind::ConnectFailed
        | ErrorKind::ConnectTimeout
        | ErrorKind::HandshakeTimeout
        | ErrorKind::Handshake(_) => {
            on(RetryOn::ConnectFailure) || on(RetryOn::FiveXx) || on(RetryOn::GatewayError)
        }
        ErrorKind::Reset => on(RetryOn::Reset) || on(RetryOn::FiveXx) || on(RetryOn::GatewayError),
        // A per-try timeout: Envoy counts it as a 504.
        ErrorKind::Timeout => {
            on(RetryOn::FiveXx) || on(RetryOn::GatewayError) || on(RetryOn::Reset)
        }
        _ => false,
    }
}

/// Whether `spec` retries a response with `status` and `headers` (for
/// gRPC, a trailers-only answer's `grpc-status` is in the headers).
pub fn retries_response(spec: &RetrySpec, status: u16, headers: &HeaderMap) -> bool {
    spec.retry_on.iter().any(|on| match on {
        RetryOn::FiveXx => status >= 500,
        RetryOn::GatewayError => (502..=504).contains(&status),
        RetryOn::Retriable4xx => status == 409,
        RetryOn::RetriableStatusCodes => spec.retriable_status_codes.contains(&status),
        RetryOn::RetriableHeaders => spec
            .retriable_response_headers
            .iter()
            .any(|h| super::route_select::header_matches(h, "", headers)),
        RetryOn::EnvoyRatelimited => status == 429 && headers.contains_key("x-envoy-ratelimited"),
        RetryOn::Cancelled => grpc_status(headers) == Some(1),
        RetryOn::DeadlineExceeded => grpc_status(headers) == Some(4),
        RetryOn::ResourceExhausted => grpc_status(headers) == Some(8),
        RetryOn::Internal => grpc_status(headers) == Some(13),
        RetryOn::Unavailable => grpc_status(headers) == Some(14),
        RetryOn::Reset
        | RetryOn::ConnectFailure
        | RetryOn::RefusedStream
        | RetryOn::Http3PostConnectFailure => false,
    })
}

/// Whether the request may be retried at all: when the policy lists
/// retriable request headers, one must match.
pub fn request_is_retriable(spec: &RetrySpec, method: &str, headers: &HeaderMap) -> bool {
    spec.retriable_request_headers.is_empty()
        || spec
            .retriable_request_headers
            .iter()
            .any(|h| super::route_select::header_matches(h, method, headers))
}

/// The `grpc-status` in `headers`, if any.
pub fn grpc_status(headers: &HeaderMap) -> Option<i32> {
    const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
    headers.get(GRPC_STATUS)?.to_str().ok()?.parse().ok()
}

/// Envoy's cap of a rate-limited back-off when the policy sets none.
const DEFAULT_RATE_LIMITED_MAX: Duration = Duration::from_secs(300);

/// How long a rate-limited answer asks to wait (its first reset header
/// the policy names: seconds, or a Unix time), capped by the policy.
pub fn rate_limited_wait(
    spec: &RetrySpec,
    headers: &HeaderMap,
    now: std::time::SystemTime,
) -> Option<Duration> {
    let cap = spec.rate_limited_max.unwrap_or(DEFAULT_RATE_LIMITED_MAX);
    spec.rate_limited_reset_headers
        .iter()
        .find_map(|(name, format)| {
            let value: u64 = headers
                .get(name.as_str())?
                .to_str()
                .ok()?
                .trim()
                .parse()
                .ok()?;
            let wait = match format {
                ResetFormat::Seconds => Duration::from_secs(value),
                ResetFormat::UnixTimestamp => {
                    let at = std::time::UNIX_EPOCH + Duration::from_secs(value);
                    at.duration_since(now).unwrap_or(Duration::ZERO)
                }
            };
            Some(wait.min(cap))
        })
}

/// The wait before retry number `retry` (1 for the first retry): full
/// jitter over an exponential back-off, `random` in `0..=u32::MAX`.
pub fn backoff(spec: &RetrySpec, retry: u32, random: u32) -> Duration {
    let base = spec.backoff_base.unwrap_or(DEFAULT_BASE);
    let max = spec.backoff_max.unwrap_or(base * 10);
    let exp = base.saturating_mul(1u32 << retry.saturating_sub(1).min(16));
    let ceiling = exp.min(max);
    ceiling.mul_f64(f64::from(random) / f64::from(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(on: &[RetryOn]) -> RetrySpec {
        RetrySpec {
            retry_on: on.to_vec(),
            retriable_status_codes: vec![418],
            num_retries: 3,
            per_try_timeout: None,
            backoff_base: None,
            backoff_max: None,
            rate_limited_reset_headers: Vec::new(),
            rate_limited_max: None,
            retriable_request_headers: Vec::new(),
            retriable_response_headers: Vec::new(),
        }
    }

    fn grpc(code: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("grpc-status", code.parse().unwrap());
        h
    }

    #[test]
    fn status_conditions_follow_envoy() {
        let none = HeaderMap::new();
        let five = spec(&[RetryOn::FiveXx]);
        assert!(retries_response(&five, 503, &none));
        assert!(retries_response(&five, 500, &none));
        assert!(!retries_response(&five, 404, &none));
        let gw = spec(&[RetryOn::GatewayError]);
        assert!(retries_response(&gw, 502, &none));
        assert!(!retries_response(&gw, 500, &none));
        assert!(retries_response(
            &spec(&[RetryOn::Retriable4xx]),
            409,
            &none
        ));
        assert!(retries_response(
            &spec(&[RetryOn::RetriableStatusCodes]),
            418,
            &none
        ));
        assert!(!retries_response(
            &spec(&[RetryOn::RetriableStatusCodes]),
            419,
            &none
        ));
    }

    #[test]
    fn grpc_conditions_read_the_grpc_status() {
        let s = spec(&[RetryOn::Unavailable, RetryOn::Cancelled]);
        assert!(retries_response(&s, 200, &grpc("14")));
        assert!(retries_response(&s, 200, &grpc("1")));
        assert!(!retries_response(&s, 200, &grpc("4")));
        assert!(!retries_response(&s, 200, &HeaderMap::new()));
    }

    #[test]
    fn errors_are_retried_by_their_kind() {
        let refused = ProxyError::upstream(ErrorKind::ConnectFailed, "refused");
        let reset = ProxyError::upstream(ErrorKind::Reset, "reset");
        assert!(retries_error(&spec(&[RetryOn::ConnectFailure]), &refused));
        assert!(!retries_error(&spec(&[RetryOn::ConnectFailure]), &reset));
        assert!(retries_error(&spec(&[RetryOn::FiveXx]), &reset));
        assert!(!retries_error(
            &spec(&[RetryOn::FiveXx]),
            &ProxyError::downstream(ErrorKind::BadRequest, "x")
        ));
    }

    #[test]
    fn a_rate_limited_answer_sets_the_wait_capped_by_the_policy() {
        let mut s = spec(&[RetryOn::RetriableStatusCodes]);
        s.rate_limited_reset_headers = vec![
            ("retry-after".into(), ResetFormat::Seconds),
            ("x-ratelimit-reset".into(), ResetFormat::UnixTimestamp),
        ];
        s.rate_limited_max = Some(Duration::from_secs(30));
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut h = HeaderMap::new();
        assert_eq!(rate_limited_wait(&s, &h, now), None);
        h.insert("x-ratelimit-reset", "1010".parse().unwrap());
        assert_eq!(
            rate_limited_wait(&s, &h, now),
            Some(Duration::from_secs(10))
        );
        h.insert("retry-after", "120".parse().unwrap());
        assert_eq!(
            rate_limited_wait(&s, &h, now),
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn backoff_grows_to_its_cap_with_full_jitter() {
        let s = spec(&[]);
        assert_eq!(backoff(&s, 1, u32::MAX), Duration::from_millis(25));
        assert_eq!(backoff(&s, 2, u32::MAX), Duration::from_millis(50));
        assert_eq!(backoff(&s, 10, u32::MAX), Duration::from_millis(250));
        assert_eq!(backoff(&s, 3, 0), Duration::ZERO);
    }
}

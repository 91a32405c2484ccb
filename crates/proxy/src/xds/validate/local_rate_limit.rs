//! Validation of `envoy.filters.http.local_ratelimit` (what Kuma's
//! MeshRateLimit `local.http` becomes): one token bucket for the whole
//! listener, always enforced, answered with `status` (429 when unset) and
//! `response_headers_to_add`; and of its network twin
//! `envoy.filters.network.local_ratelimit` (`local.tcp.connectionRate`):
//! one bucket of connections per listener, unshared, always enabled.
//!
//! Refused, naming the field, rather than silently ignored: descriptors
//! and rate limit actions, a bucket per downstream connection, a bucket
//! shared across the cluster, partial enabling or enforcement (a runtime
//! fraction other than 100 %), and `x-ratelimit-*` headers.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit as PbLocalRateLimit;
use envoy_types::pb::envoy::extensions::filters::network::local_ratelimit::v3::LocalRateLimit as PbConnectionRateLimit;
use envoy_types::pb::envoy::r#type::v3::TokenBucket as PbTokenBucket;
use envoy_types::pb::envoy::r#type::v3::fractional_percent::DenominatorType;
use envoy_types::pb::google::protobuf::Any;
use tokio::time::Instant;

use super::{Invalid, decode, invalid};
use crate::model::rate_limit::{ConnectionRateLimit, LocalRateLimit, TokenBucket};

/// Envoy refuses a shorter fill interval.
const MIN_FILL_INTERVAL: Duration = Duration::from_millis(50);

/// Reads the filter's `typed_config` at `field`.
pub(super) fn local_rate_limit(any: &Any, field: &str) -> Result<LocalRateLimit, Invalid> {
    let f: PbLocalRateLimit = decode(any, field)?;
    let unsupported = [
        (!f.descriptors.is_empty(), "descriptors"),
        (!f.rate_limits.is_empty(), "rate_limits"),
        (
            f.local_rate_limit_per_downstream_connection,
            "local_rate_limit_per_downstream_connection",
        ),
        (
            f.local_cluster_rate_limit.is_some(),
            "local_cluster_rate_limit",
        ),
        (
            f.enable_x_ratelimit_headers != 0,
            "enable_x_ratelimit_headers",
        ),
        (
            !f.request_headers_to_add_when_not_enforced.is_empty(),
            "request_headers_to_add_when_not_enforced",
        ),
    ];
    if let Some((_, name)) = unsupported.iter().find(|(set, _)| *set) {
        return Err(invalid(
            format!("{field}.{name}"),
            "not supported by meshlink-proxy: it keeps one token bucket per listener, \
             always enforced (token_bucket, status, response_headers_to_add)",
        ));
    }
    whole(
        f.filter_enabled.as_ref(),
        &format!("{field}.filter_enabled"),
    )?;
    whole(
        f.filter_enforced.as_ref(),
        &format!("{field}.filter_enforced"),
    )?;
    let (max_tokens, tokens_per_fill, fill_interval) =
        token_bucket(f.token_bucket, &format!("{field}.token_bucket"))?;
    let status = match f.status.map(|s| s.code) {
        None | Some(0) => 429,
        Some(code) => u16::try_from(code)
            .ok()
            .filter(|c| (400..=599).contains(c))
            .ok_or_else(|| {
                invalid(
                    format!("{field}.status.code"),
                    format!("{code} is not an error status (400-599)"),
                )
            })?,
    };
    let response_headers = super::route::mutation(
        f.response_headers_to_add,
        Vec::new(),
        &format!("{field}.response_headers_to_add"),
    )?;
    Ok(LocalRateLimit {
        max_tokens,
        tokens_per_fill,
        fill_interval,
        status,
        response_headers,
        bucket: Arc::new(TokenBucket::new(max_tokens, fill_interval, Instant::now())),
    })
}

/// Reads a network local rate limit filter's `typed_config` at `field`.
pub(super) fn connection_rate_limit(
    any: &Any,
    field: &str,
) -> Result<ConnectionRateLimit, Invalid> {
    let f: PbConnectionRateLimit = decode(any, field)?;
    if !f.share_key.is_empty() {
        return Err(invalid(
            format!("{field}.share_key"),
            "not supported by meshlink-proxy: each listener keeps its own bucket",
        ));
    }
    if let Some(flag) = &f.runtime_enabled
        && flag.default_value.as_ref().is_some_and(|v| !v.value)
    {
        return Err(invalid(
            format!("{field}.runtime_enabled.default_value"),
            "false disables the filter; leave the filter out instead",
        ));
    }
    let (max_tokens, tokens_per_fill, fill_interval) =
        token_bucket(f.token_bucket, &format!("{field}.token_bucket"))?;
    Ok(ConnectionRateLimit {
        max_tokens,
        tokens_per_fill,
        fill_interval,
        bucket: Arc::new(TokenBucket::new(max_tokens, fill_interval, Instant::now())),
    })
}

/// Reads a required token bucket at `field`: its size, tokens per fill
/// (1 when unset, as in Envoy) and fill interval (at least 50 ms).
fn token_bucket(b: Option<PbTokenBucket>, field: &str) -> Result<(u32, u32, Duration), Invalid> {
    let Some(b) = b else {
        return Err(invalid(field, "required"));
    };
    if b.max_tokens == 0 {
        return Err(invalid(format!("{field}.max_tokens"), "must be at least 1"));
    }
    let tokens_per_fill = b.tokens_per_fill.map_or(1, |v| v.value);
    if tokens_per_fill == 0 {
        return Err(invalid(
            format!("{field}.tokens_per_fill"),
            "must be at least 1 when set",
        ));
    }
    let Some(interval) = b.fill_interval else {
        return Err(invalid(format!("{field}.fill_interval"), "required"));
    };
    let fill_interval = super::duration(&interval, format!("{field}.fill_interval"))?;
    if fill_interval < MIN_FILL_INTERVAL {
        return Err(invalid(
            format!("{field}.fill_interval"),
            format!("must be at least {MIN_FILL_INTERVAL:?}, as in Envoy"),
        ));
    }
    Ok((b.max_tokens, tokens_per_fill, fill_interval))
}

/// Accepts an unset runtime fraction or one of 100 %.
fn whole(p: Option<&RuntimeFractionalPercent>, field: &str) -> Result<(), Invalid> {
    let Some(percent) = p.and_then(|p| p.default_value.as_ref()) else {
        return Ok(());
    };
    let denominator = match DenominatorType::try_from(percent.denominator) {
        Ok(DenominatorType::Hundred) => 100,
        Ok(DenominatorType::TenThousand) => 10_000,
        Ok(DenominatorType::Million) => 1_000_000,
        Err(_) => {
            return Err(invalid(
                format!("{field}.default_value.denominator"),
                "unknown",
            ));
        }
    };
    if percent.numerator < denominator {
        return Err(invalid(
            format!("{field}.default_value"),
            format!(
                "{}/{denominator}: meshlink-proxy limits every request or none; \
                 use 100% (or leave it unset)",
                percent.numerator
            ),
        ));
    }
    Ok(())
}

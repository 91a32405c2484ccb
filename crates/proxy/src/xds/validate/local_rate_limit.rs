//! Validation of `envoy.filters.http.local_ratelimit` (what Kuma's
//! MeshRateLimit `local.http` becomes): one token bucket for the whole
//! listener, always enforced, answered with `status` (429 when unset) and
//! `response_headers_to_add`.
//!
//! Refused, naming the field, rather than silently ignored: descriptors
//! and rate limit actions, a bucket per downstream connection, a bucket
//! shared across the cluster, partial enabling or enforcement (a runtime
//! fraction other than 100 %), and `x-ratelimit-*` headers.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit as PbLocalRateLimit;
use envoy_types::pb::envoy::r#type::v3::fractional_percent::DenominatorType;
use envoy_types::pb::google::protobuf::Any;
use tokio::time::Instant;

use super::{Invalid, decode, invalid};
use crate::model::rate_limit::{LocalRateLimit, TokenBucket};

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
    let bucket_field = format!("{field}.token_bucket");
    let Some(b) = f.token_bucket else {
        return Err(invalid(bucket_field, "required"));
    };
    if b.max_tokens == 0 {
        return Err(invalid(
            format!("{bucket_field}.max_tokens"),
            "must be at least 1",
        ));
    }
    let tokens_per_fill = b.tokens_per_fill.map_or(1, |v| v.value);
    if tokens_per_fill == 0 {
        return Err(invalid(
            format!("{bucket_field}.tokens_per_fill"),
            "must be at least 1 when set",
        ));
    }
    let Some(interval) = b.fill_interval else {
        return Err(invalid(format!("{bucket_field}.fill_interval"), "required"));
    };
    let fill_interval = super::duration(&interval, format!("{bucket_field}.fill_interval"))?;
    if fill_interval < MIN_FILL_INTERVAL {
        return Err(invalid(
            format!("{bucket_field}.fill_interval"),
            format!("must be at least {MIN_FILL_INTERVAL:?}, as in Envoy"),
        ));
    }
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
        max_tokens: b.max_tokens,
        tokens_per_fill,
        fill_interval,
        status,
        response_headers,
        bucket: Arc::new(TokenBucket::new(
            b.max_tokens,
            fill_interval,
            Instant::now(),
        )),
    })
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

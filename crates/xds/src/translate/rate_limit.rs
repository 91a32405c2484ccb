//! MeshRateLimit `local.http` as Envoy's local rate limit HTTP filter
//! (`envoy.filters.http.local_ratelimit`) on an inbound's connection
//! manager, as Kuma translates it: a bucket of `num` tokens refilled with
//! `num` every `interval`, always enforced, answered with
//! `onRateLimit.status` (429 when unset) and its headers; and `local.tcp`
//! as the network filter (`envoy.filters.network.local_ratelimit`) first
//! in the inbound's filter chain, for TCP and HTTP inbounds alike.

use envoy_types::pb::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, RuntimeFractionalPercent, header_value_option,
};
use envoy_types::pb::envoy::config::listener::v3::{Filter, filter};
use envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::local_ratelimit::v3::LocalRateLimit as ConnectionRateLimit;
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, HttpStatus, TokenBucket};
use envoy_types::pb::google::protobuf::UInt32Value;
use envoy_types::util::pack_any;
use meshlink_api::spec::{HeaderChanges, HttpLimit, TcpLimit};

use super::http::kuma_duration;

/// The filter's name.
pub(super) const LOCAL_RATE_LIMIT_FILTER: &str = "envoy.filters.http.local_ratelimit";

/// The network filter's name.
pub(super) const CONNECTION_RATE_LIMIT_FILTER: &str = "envoy.filters.network.local_ratelimit";

/// The network filter for `limit` (which has a `connectionRate`): a
/// bucket of `num` connections refilled with `num` every `interval`.
pub(super) fn connection_filter(limit: &TcpLimit) -> Option<Filter> {
    let rate = limit.connection_rate.as_ref()?;
    let config = ConnectionRateLimit {
        stat_prefix: "tcp_rate_limit".into(),
        token_bucket: Some(TokenBucket {
            max_tokens: rate.num,
            tokens_per_fill: Some(UInt32Value { value: rate.num }),
            fill_interval: kuma_duration(Some(&rate.interval)),
        }),
        ..Default::default()
    };
    Some(Filter {
        name: CONNECTION_RATE_LIMIT_FILTER.to_owned(),
        config_type: Some(filter::ConfigType::TypedConfig(pack_any(config))),
    })
}

/// The filter for `limit` (which has a `requestRate`); `None` without one.
pub(super) fn filter(limit: &HttpLimit) -> Option<HttpFilter> {
    let rate = limit.request_rate.as_ref()?;
    let every = || {
        Some(RuntimeFractionalPercent {
            default_value: Some(FractionalPercent {
                numerator: 100,
                denominator: 0,
            }),
            runtime_key: String::new(),
        })
    };
    let on = limit.on_rate_limit.as_ref();
    let response_headers_to_add = on
        .and_then(|o| o.headers.as_ref())
        .map(header_options)
        .unwrap_or_default();
    let config = LocalRateLimit {
        stat_prefix: "rate_limit".into(),
        status: on
            .and_then(|o| o.status)
            .and_then(|s| i32::try_from(s).ok())
            .map(|code| HttpStatus { code }),
        token_bucket: Some(TokenBucket {
            max_tokens: rate.num,
            tokens_per_fill: Some(UInt32Value { value: rate.num }),
            fill_interval: kuma_duration(Some(&rate.interval)),
        }),
        filter_enabled: every(),
        filter_enforced: every(),
        response_headers_to_add,
        ..Default::default()
    };
    Some(HttpFilter {
        name: LOCAL_RATE_LIMIT_FILTER.to_owned(),
        config_type: Some(http_filter::ConfigType::TypedConfig(pack_any(config))),
        ..Default::default()
    })
}

/// `headers` as Envoy header options: `set` overwrites, `add` appends
/// (names lowercased).
pub(super) fn header_options(headers: &HeaderChanges) -> Vec<HeaderValueOption> {
    let header = |h: &meshlink_api::spec::NameValue, action| HeaderValueOption {
        header: Some(HeaderValue {
            key: h.name.to_ascii_lowercase(),
            value: h.value.clone(),
            ..Default::default()
        }),
        append_action: action as i32,
        ..Default::default()
    };
    let set = header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd;
    let add = header_value_option::HeaderAppendAction::AppendIfExistsOrAdd;
    (headers.set.iter().map(|h| header(h, set)))
        .chain(headers.add.iter().map(|h| header(h, add)))
        .collect()
}

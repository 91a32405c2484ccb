//! Validation of the HTTP parts of a Listener and a Cluster: the
//! `http_connection_manager` network filter (RDS only, HTTP RBAC filters,
//! the router last) and a cluster's upstream HTTP protocol.
//!
//! Like the rest of the validator it refuses what meshlink-proxy would
//! otherwise silently ignore: an inline route table, any HTTP filter but
//! RBAC, the local rate limit, fault injection (after both) and the router, and protocol selection by the downstream's
//! protocol or by ALPN.

use std::collections::HashMap;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit;
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::CodecType,
    http_connection_manager::RouteSpecifier, http_filter,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options::ExplicitHttpConfig,
    http_protocol_options::UpstreamProtocolOptions,
    http_protocol_options::explicit_http_config::ProtocolConfig,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Name;

use super::{Invalid, decode, invalid, rbac_rules};
use crate::model::RbacFilter;
use crate::model::http::HttpListener;

/// The key of [`HttpProtocolOptions`] in a cluster's
/// `typed_extension_protocol_options`.
pub(super) const HTTP_PROTOCOL_OPTIONS: &str =
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// Reads an `http_connection_manager`: its HTTP RBAC filters (in order)
/// and what the HTTP listener needs.
pub(super) fn connection_manager(
    any: &Any,
    field: &str,
) -> Result<(Vec<RbacFilter>, HttpListener), Invalid> {
    let hcm: HttpConnectionManager = decode(any, field)?;
    match CodecType::try_from(hcm.codec_type) {
        Ok(CodecType::Auto | CodecType::Http1 | CodecType::Http2) => {}
        _ => {
            return Err(invalid(
                format!("{field}.codec_type"),
                "only AUTO, HTTP1 and HTTP2 are supported (meshlink-proxy serves both HTTP/1.1 and HTTP/2 on every HTTP listener)",
            ));
        }
    }
    let route_config = match hcm.route_specifier {
        Some(RouteSpecifier::Rds(rds)) if !rds.route_config_name.is_empty() => {
            if let Some(source) = &rds.config_source
                && !matches!(
                    source.config_source_specifier,
                    None | Some(ConfigSourceSpecifier::Ads(_))
                )
            {
                return Err(invalid(
                    format!("{field}.rds.config_source"),
                    "only ADS is supported: routes arrive on the same stream as everything else",
                ));
            }
            rds.route_config_name
        }
        _ => {
            return Err(invalid(
                format!("{field}.route_specifier"),
                "an RDS reference (`rds.route_config_name`) is required; inline route_config and scoped routes are not supported",
            ));
        }
    };
    let mut rbac = Vec::new();
    let mut router = false;
    let mut local_rate_limit = None;
    let mut faults = Vec::new();
    for (i, f) in hcm.http_filters.iter().enumerate() {
        let ffield = format!("{field}.http_filters[{i}]");
        if router {
            return Err(invalid(ffield, "the router must be the last HTTP filter"));
        }
        if f.disabled {
            return Err(invalid(
                format!("{ffield}.disabled"),
                "disabled filters (enabled per route) are not supported",
            ));
        }
        let Some(http_filter::ConfigType::TypedConfig(any)) = &f.config_type else {
            return Err(invalid(
                ffield,
                format!("HTTP filter {:?} has no typed_config", f.name),
            ));
        };
        let before_faults = |what: &str| {
            invalid(
                &ffield,
                format!(
                    "{what} after a fault filter: meshlink-proxy checks RBAC and the local rate \
                     limit before injecting faults, so they must come first"
                ),
            )
        };
        if super::fault::is_fault(any) {
            faults.push(super::fault::fault(any, &format!("{ffield}.typed_config"))?);
        } else if any.type_url == HttpRbac::type_url() {
            if !faults.is_empty() {
                return Err(before_faults("an RBAC filter"));
            }
            let r: HttpRbac = decode(any, &ffield)?;
            if r.shadow_rules.is_some() || r.matcher.is_some() || r.shadow_matcher.is_some() {
                return Err(invalid(
                    format!("{ffield}.typed_config"),
                    "only `rules` is supported (no shadow rules or matchers)",
                ));
            }
            rbac.push(rbac_rules(r.rules, &format!("{ffield}.typed_config"))?);
        } else if any.type_url == LocalRateLimit::type_url() {
            if !faults.is_empty() {
                return Err(before_faults("a local rate limit filter"));
            }
            if local_rate_limit.is_some() {
                return Err(invalid(
                    ffield,
                    "a second local rate limit filter; meshlink-proxy takes one per listener",
                ));
            }
            local_rate_limit = Some(super::local_rate_limit::local_rate_limit(
                any,
                &format!("{ffield}.typed_config"),
            )?);
        } else if any.type_url == Router::type_url() {
            router = true;
        } else {
            return Err(invalid(
                format!("{ffield}.typed_config"),
                format!(
                    "unsupported HTTP filter {:?}; meshlink-proxy supports envoy.filters.http.rbac, envoy.filters.http.local_ratelimit, envoy.filters.http.fault and envoy.filters.http.router",
                    any.type_url
                ),
            ));
        }
    }
    if !router {
        return Err(invalid(
            format!("{field}.http_filters"),
            "the last HTTP filter must be envoy.filters.http.router",
        ));
    }
    let common = hcm.common_http_protocol_options.unwrap_or_default();
    let http = HttpListener {
        route_config,
        use_remote_address: hcm.use_remote_address.is_some_and(|b| b.value),
        idle_timeout: duration(common.idle_timeout.as_ref(), field, "idle_timeout")?,
        stream_idle_timeout: duration(
            hcm.stream_idle_timeout.as_ref(),
            field,
            "stream_idle_timeout",
        )?,
        request_headers_timeout: duration(
            hcm.request_headers_timeout.as_ref(),
            field,
            "request_headers_timeout",
        )?,
        max_connection_duration: duration(
            common.max_connection_duration.as_ref(),
            field,
            "common_http_protocol_options.max_connection_duration",
        )?,
        local_rate_limit,
        access_logs: super::access_log::access_logs(
            &hcm.access_log,
            &format!("{field}.access_log"),
        )?,
        faults,
        tracing: hcm
            .tracing
            .as_ref()
            .map(|t| super::trace::tracing(t, &format!("{field}.tracing")).map(Box::new))
            .transpose()?,
    };
    Ok((rbac, http))
}

/// A timeout: `None` when unset or zero (Envoy: disabled).
fn duration(
    d: Option<&envoy_types::pb::google::protobuf::Duration>,
    field: &str,
    name: &str,
) -> Result<Option<Duration>, Invalid> {
    let d = d
        .map(|d| super::duration(d, format!("{field}.{name}")))
        .transpose()?;
    Ok(d.filter(|d| !d.is_zero()))
}

/// Whether a cluster's HTTP requests travel as HTTP/2, from its
/// `typed_extension_protocol_options`.
pub(super) fn upstream_http2(options: &HashMap<String, Any>) -> Result<bool, Invalid> {
    let mut http2 = false;
    for (key, any) in options {
        let field = format!("typed_extension_protocol_options[{key:?}]");
        if key != HTTP_PROTOCOL_OPTIONS {
            return Err(invalid(
                field,
                format!("only {HTTP_PROTOCOL_OPTIONS:?} is supported"),
            ));
        }
        let o: HttpProtocolOptions = decode(any, &field)?;
        http2 = match o.upstream_protocol_options {
            None => false,
            Some(UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(_)),
            })) => true,
            Some(UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::HttpProtocolOptions(_)),
            })) => false,
            Some(_) => {
                return Err(invalid(
                    format!("{field}.upstream_protocol_options"),
                    "only explicit_http_config with http_protocol_options or http2_protocol_options is supported",
                ));
            }
        };
    }
    Ok(http2)
}

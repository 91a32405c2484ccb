//! The HTTP shape of a sidecar listener: one `http_connection_manager`
//! filter whose routes come over RDS (the RouteConfiguration named like
//! the listener), for inbounds and destinations of the HTTP family.
//!
//! Owns the HCM (codec, timeouts, HTTP filters: RBAC then the router),
//! the inbound's RouteConfiguration and the upstream HTTP/2 protocol
//! options of clusters. It is a contract with meshlink-proxy, which
//! consumes exactly this shape: change it only together with the proxy.
//! It must never emit anything for a `tcp` service (the L4 path stays as
//! it was, byte for byte).

use std::collections::HashMap;

use envoy_types::pb::envoy::config::core::v3::{
    Http2ProtocolOptions, HttpProtocolOptions as CommonHttpOptions,
};
use envoy_types::pb::envoy::config::listener::v3::{Filter, filter};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route, route_action,
    route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager::CodecType,
    http_connection_manager::RouteSpecifier, http_filter,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options::ExplicitHttpConfig,
    http_protocol_options::UpstreamProtocolOptions, http_protocol_options::explicit_http_config,
};
use envoy_types::pb::google::protobuf::{Any, BoolValue, Duration};
use envoy_types::util::pack_any;
use meshlink_api::spec::{TimeoutConf, TimeoutDefaults, parse_kuma_duration};

use super::tls;

/// Envoy's name of the HTTP connection manager filter.
const HCM_FILTER: &str = "envoy.filters.network.http_connection_manager";

/// Envoy's name of the router HTTP filter.
const ROUTER_FILTER: &str = "envoy.filters.http.router";

/// The key of upstream HTTP protocol options in a Cluster's
/// `typed_extension_protocol_options`.
const HTTP_PROTOCOL_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// ALPN an HTTP inbound offers: `h2` for other sidecars, `http/1.1` else.
pub(super) const INBOUND_ALPN: &[&str] = &["h2", "http/1.1"];

/// ALPN a sidecar asks an HTTP destination for.
pub(super) const UPSTREAM_ALPN: &[&str] = &["h2"];

/// A protobuf Duration from a std one (saturating).
pub(super) fn pb_duration(d: std::time::Duration) -> Duration {
    Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A Kuma duration field as a protobuf Duration (`None` when unset or
/// unparsable; validation refuses the latter).
pub(super) fn kuma_duration(text: Option<&str>) -> Option<Duration> {
    text.and_then(parse_kuma_duration).map(pb_duration)
}

/// A MeshTimeout field, or its Kuma default.
pub(super) fn or_default(text: Option<&str>, default: std::time::Duration) -> Duration {
    kuma_duration(text).unwrap_or_else(|| pb_duration(default))
}

/// `http.requestTimeout` of `conf`, else Kuma's 15s.
pub(super) fn request_timeout(conf: &TimeoutConf) -> Duration {
    let http = conf.http.as_ref();
    or_default(
        http.and_then(|h| h.request_timeout.as_deref()),
        TimeoutDefaults::KUMA.request_timeout,
    )
}

/// The HCM filter of listener `name`: RDS for the RouteConfiguration of
/// the same name over ADS, `http_filters` then the router, timeouts from
/// `timeouts` (MeshTimeout) or Kuma's defaults. `inbound` appends the
/// peer's address to `x-forwarded-for`. `tracing` is MeshTrace's (see
/// [`super::trace`]).
pub(super) fn hcm(
    name: &str,
    mut http_filters: Vec<HttpFilter>,
    timeouts: &TimeoutConf,
    inbound: bool,
    access_log: Vec<envoy_types::pb::envoy::config::accesslog::v3::AccessLog>,
    tracing: Option<
        envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::Tracing,
    >,
) -> Filter {
    http_filters.push(HttpFilter {
        name: ROUTER_FILTER.to_owned(),
        config_type: Some(http_filter::ConfigType::TypedConfig(pack_any(
            Router::default(),
        ))),
        ..Default::default()
    });
    let http = timeouts.http.as_ref();
    let hcm = HttpConnectionManager {
        stat_prefix: name.to_owned(),
        codec_type: CodecType::Auto as i32,
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(tls::ads()),
            route_config_name: name.to_owned(),
        })),
        http_filters,
        access_log,
        tracing,
        use_remote_address: Some(BoolValue { value: inbound }),
        common_http_protocol_options: Some(CommonHttpOptions {
            idle_timeout: Some(or_default(
                timeouts.idle_timeout.as_deref(),
                TimeoutDefaults::KUMA.idle_timeout,
            )),
            max_connection_duration: kuma_duration(
                http.and_then(|h| h.max_connection_duration.as_deref()),
            ),
            ..Default::default()
        }),
        stream_idle_timeout: Some(or_default(
            http.and_then(|h| h.stream_idle_timeout.as_deref()),
            TimeoutDefaults::KUMA.stream_idle_timeout,
        )),
        request_headers_timeout: kuma_duration(
            http.and_then(|h| h.request_headers_timeout.as_deref()),
        ),
        ..Default::default()
    };
    Filter {
        name: HCM_FILTER.to_owned(),
        config_type: Some(filter::ConfigType::TypedConfig(pack_any(hcm))),
    }
}

/// The RouteConfiguration `name` of an HTTP inbound of `service`: every
/// request to the local application cluster `local`, within `timeout`.
pub(super) fn inbound_routes(
    name: String,
    service: &str,
    local: String,
    timeout: Duration,
) -> RouteConfiguration {
    let route = Route {
        name: "inbound".to_owned(),
        r#match: Some(prefix_all()),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(local)),
            timeout: Some(timeout),
            ..Default::default()
        })),
        ..Default::default()
    };
    route_configuration(name, service, vec![route])
}

/// A RouteConfiguration `name` of one virtual host `host` (every domain).
pub(super) fn route_configuration(
    name: String,
    host: &str,
    routes: Vec<Route>,
) -> RouteConfiguration {
    RouteConfiguration {
        name,
        virtual_hosts: vec![VirtualHost {
            name: host.to_owned(),
            domains: vec!["*".to_owned()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The match of every request (prefix `/`).
pub(super) fn prefix_all() -> RouteMatch {
    RouteMatch {
        path_specifier: Some(route_match::PathSpecifier::Prefix("/".to_owned())),
        ..Default::default()
    }
}

/// `typed_extension_protocol_options` that make a cluster speak HTTP/2
/// to its hosts.
pub(super) fn upstream_h2() -> HashMap<String, Any> {
    let options = HttpProtocolOptions {
        upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                protocol_config: Some(explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                    Http2ProtocolOptions::default(),
                )),
            },
        )),
        ..Default::default()
    };
    HashMap::from([(HTTP_PROTOCOL_OPTIONS.to_owned(), pack_any(options))])
}

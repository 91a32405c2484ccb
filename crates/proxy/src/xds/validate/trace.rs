//! Validation of a connection manager's `tracing`: the provider must be
//! `envoy.tracers.opentelemetry` (OTLP over HTTP with
//! `http_service.http_uri.uri`, or over gRPC with
//! `grpc_service.google_grpc.target_uri`) or `envoy.tracers.zipkin` (v2
//! JSON to `collector_hostname` + `collector_endpoint`); the collector's
//! address is read from there, not from a cluster. Custom tags are
//! literals or request headers. What meshlink-proxy cannot do (Datadog,
//! Envoy's gRPC client, samplers, resource detectors, TLS collectors,
//! Zipkin protobuf, environment and metadata tags) is refused, naming the
//! field.

use envoy_types::pb::envoy::config::core::v3::grpc_service;
use envoy_types::pb::envoy::config::trace::v3::{
    OpenTelemetryConfig, ZipkinConfig, tracing::http::ConfigType,
    zipkin_config::CollectorEndpointVersion,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::Tracing as PbTracing;
use envoy_types::pb::envoy::r#type::tracing::v3::custom_tag;
use envoy_types::pb::envoy::r#type::v3::Percent;
use prost::Name as _;

use super::{Invalid, decode, invalid};
use crate::http::trace_export::Exporter;
use crate::model::trace::{Collector, Sampling, Tag, TagValue, Tracing};

/// Reads the `tracing` at `field`.
pub(super) fn tracing(t: &PbTracing, field: &str) -> Result<Tracing, Invalid> {
    let provider = t
        .provider
        .as_ref()
        .ok_or_else(|| invalid(format!("{field}.provider"), "required"))?;
    let at = format!("{field}.provider.typed_config");
    let Some(ConfigType::TypedConfig(any)) = &provider.config_type else {
        return Err(invalid(at, "required"));
    };
    let (collector, service_name) = if any.type_url == OpenTelemetryConfig::type_url() {
        opentelemetry(&decode(any, &at)?, &at)?
    } else if any.type_url == ZipkinConfig::type_url() {
        (zipkin(&decode(any, &at)?, &at)?, String::new())
    } else {
        return Err(invalid(
            at,
            format!(
                "unsupported tracer {:?}; meshlink-proxy supports envoy.tracers.opentelemetry and \
                 envoy.tracers.zipkin (Datadog is not supported yet: send spans to an \
                 OpenTelemetry collector's Datadog exporter)",
                any.type_url
            ),
        ));
    };
    let percent = |p: &Option<Percent>, name: &str| -> Result<f64, Invalid> {
        match p {
            None => Ok(100.0),
            Some(p) if (0.0..=100.0).contains(&p.value) => Ok(p.value),
            Some(p) => Err(invalid(
                format!("{field}.{name}.value"),
                format!("{} is not a percentage between 0 and 100", p.value),
            )),
        }
    };
    let sampling = Sampling {
        overall: percent(&t.overall_sampling, "overall_sampling")?,
        client: percent(&t.client_sampling, "client_sampling")?,
        random: percent(&t.random_sampling, "random_sampling")?,
    };
    let tags = t
        .custom_tags
        .iter()
        .enumerate()
        .map(|(i, tag)| {
            let at = format!("{field}.custom_tags[{i}]");
            let value = match &tag.r#type {
                Some(custom_tag::Type::Literal(l)) => TagValue::Literal(l.value.as_str().into()),
                Some(custom_tag::Type::RequestHeader(h)) => TagValue::Header {
                    name: http::HeaderName::try_from(h.name.as_str()).map_err(|_| {
                        invalid(format!("{at}.request_header.name"), "not a header name")
                    })?,
                    default: Some(h.default_value.as_str())
                        .filter(|d| !d.is_empty())
                        .map(Into::into),
                },
                _ => {
                    return Err(invalid(
                        format!("{at}.type"),
                        "only literal and request_header tags are supported",
                    ));
                }
            };
            Ok(Tag {
                name: tag.tag.as_str().into(),
                value,
            })
        })
        .collect::<Result<_, _>>()?;
    let exporter = Exporter::for_collector(&collector);
    Ok(Tracing {
        collector,
        service_name: service_name.into(),
        sampling,
        tags,
        exporter,
    })
}

fn opentelemetry(o: &OpenTelemetryConfig, at: &str) -> Result<(Collector, String), Invalid> {
    for (set, name) in [
        (o.exporter.is_some(), "exporter"),
        (!o.resource_detectors.is_empty(), "resource_detectors"),
        (o.sampler.is_some(), "sampler"),
    ] {
        if set {
            return Err(invalid(
                format!("{at}.{name}"),
                "not supported by meshlink-proxy; leave it unset",
            ));
        }
    }
    let collector = match (&o.http_service, &o.grpc_service) {
        (Some(h), None) => {
            let uri = h.http_uri.as_ref().map(|u| u.uri.as_str()).unwrap_or("");
            let parsed: http::Uri = uri.parse().map_err(|_| {
                invalid(
                    format!("{at}.http_service.http_uri.uri"),
                    format!("{uri:?} is not a URL"),
                )
            })?;
            if parsed.scheme_str() != Some("http") || parsed.host().is_none() {
                return Err(invalid(
                    format!("{at}.http_service.http_uri.uri"),
                    format!(
                        "{uri:?}: meshlink-proxy sends OTLP/HTTP to http://host:port/path \
                         collectors (not https yet)"
                    ),
                ));
            }
            Collector::OtlpHttp {
                uri: uri.to_owned(),
            }
        }
        (None, Some(g)) => match &g.target_specifier {
            Some(grpc_service::TargetSpecifier::GoogleGrpc(google))
                if !google.target_uri.is_empty() =>
            {
                Collector::OtlpGrpc {
                    target: google.target_uri.clone(),
                }
            }
            _ => {
                return Err(invalid(
                    format!("{at}.grpc_service"),
                    "meshlink-proxy dials the collector itself: set google_grpc.target_uri \
                     (host:port), not envoy_grpc's cluster",
                ));
            }
        },
        _ => {
            return Err(invalid(
                at,
                "set exactly one of http_service and grpc_service",
            ));
        }
    };
    Ok((collector, o.service_name.clone()))
}

fn zipkin(z: &ZipkinConfig, at: &str) -> Result<Collector, Invalid> {
    if z.collector_hostname.is_empty() {
        return Err(invalid(
            format!("{at}.collector_hostname"),
            "required: meshlink-proxy dials the collector at this host:port (it does not read \
             collector_cluster)",
        ));
    }
    if z.collector_endpoint_version != CollectorEndpointVersion::HttpJson as i32 {
        return Err(invalid(
            format!("{at}.collector_endpoint_version"),
            "only HTTP_JSON (Zipkin v2 JSON) is supported",
        ));
    }
    if !z.collector_endpoint.starts_with('/') {
        return Err(invalid(
            format!("{at}.collector_endpoint"),
            "a path, e.g. /api/v2/spans",
        ));
    }
    Ok(Collector::Zipkin {
        host: z.collector_hostname.clone(),
        path: z.collector_endpoint.clone(),
        trace_id_128bit: z.trace_id_128bit,
        shared_span_context: z.shared_span_context.is_none_or(|b| b.value),
    })
}

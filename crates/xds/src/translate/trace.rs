//! MeshTrace as Envoy's HCM `tracing` on a sidecar's HTTP inbounds and
//! outbounds: one provider (`envoy.tracers.opentelemetry`,
//! `envoy.tracers.zipkin` or `envoy.tracers.datadog`), the sampling
//! percentages (`overall_sampling`, `client_sampling`, `random_sampling`,
//! 100 % when unset) and the custom tags (literal, or a request header
//! with its default).
//!
//! The collector's address travels in the provider config, not in a
//! Cluster: `grpc_service.google_grpc.target_uri` for OTLP/gRPC (Envoy's
//! Google gRPC client needs no cluster), `http_service.http_uri.uri` for
//! OTLP/HTTP, `collector_hostname` plus `collector_endpoint` for Zipkin
//! and `collector_hostname` for Datadog. The `cluster` names those carry
//! ([`COLLECTOR_CLUSTER`]) are not sent: meshlink-proxy dials the address
//! itself (docs/resources.md#meshtrace).
//!
//! MeshTrace policies are single-item (one top-level `targetRef`, one
//! `default`): every one that selects the Dataplane is folded, least
//! specific first ([`meshlink_api::policy::compare_policies`]), with
//! JSON merge patch, as Kuma folds single-item policies.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::{
    GrpcService, HttpService, HttpUri, grpc_service, http_uri,
};
use envoy_types::pb::envoy::config::trace::v3::{
    DatadogConfig, OpenTelemetryConfig, ZipkinConfig, tracing::Http as Provider,
    tracing::http::ConfigType, zipkin_config::CollectorEndpointVersion,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::Tracing;
use envoy_types::pb::envoy::r#type::tracing::v3::{CustomTag, custom_tag};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::BoolValue;
use envoy_types::util::pack_any;
use meshlink_api::Kind;
use meshlink_api::spec::{DataplaneSpec, TraceConf, TracePercentage as Percentage, url_host_port};

use super::policies::ViewPolicy;

/// The cluster name the providers carry (Envoy requires one); the
/// collector's address is in the provider itself.
pub(super) const COLLECTOR_CLUSTER: &str = "meshtrace_collector";

/// OTLP/HTTP's path for traces, added to an endpoint without a path.
const OTLP_TRACES_PATH: &str = "/v1/traces";

/// The folded MeshTrace `default` for Dataplane `name`; `None` when no
/// MeshTrace selects it or it has no backend.
pub(super) fn dataplane_trace(
    policies: &[ViewPolicy],
    name: &str,
    labels: &BTreeMap<String, String>,
    dp: &DataplaneSpec,
) -> Option<TraceConf> {
    let conf = super::policies::single_item_default(policies, Kind::MeshTrace, name, labels, dp);
    let conf: TraceConf = serde_json::from_value(conf).ok()?;
    conf.backends.as_ref().filter(|b| !b.is_empty())?;
    Some(conf)
}

/// The HCM `tracing` of a listener of `service` for `conf`; `inbound`
/// names Datadog's split service.
pub(super) fn tracing(
    conf: &TraceConf,
    service: &str,
    inbound: bool,
    dest: &str,
) -> Option<Tracing> {
    let backend = conf.backends.as_ref()?.first()?;
    let provider = match backend.kind()? {
        "OpenTelemetry" => {
            let o = backend.open_telemetry.as_ref()?;
            let mut otel = OpenTelemetryConfig {
                service_name: service.to_owned(),
                ..Default::default()
            };
            if o.endpoint.contains("://") {
                let (_, _, path) = url_host_port(&o.endpoint)?;
                let uri = if path.is_empty() || path == "/" {
                    format!("{}{OTLP_TRACES_PATH}", o.endpoint.trim_end_matches('/'))
                } else {
                    o.endpoint.clone()
                };
                otel.http_service = Some(HttpService {
                    http_uri: Some(HttpUri {
                        uri,
                        http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(
                            COLLECTOR_CLUSTER.to_owned(),
                        )),
                        timeout: Some(super::http::pb_duration(std::time::Duration::from_secs(5))),
                    }),
                    ..Default::default()
                });
            } else {
                otel.grpc_service = Some(GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::GoogleGrpc(
                        grpc_service::GoogleGrpc {
                            target_uri: o.endpoint.clone(),
                            stat_prefix: COLLECTOR_CLUSTER.to_owned(),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                });
            }
            Provider {
                name: "envoy.tracers.opentelemetry".to_owned(),
                config_type: Some(ConfigType::TypedConfig(pack_any(otel))),
            }
        }
        "Zipkin" => {
            let z = backend.zipkin.as_ref()?;
            let (host, port, path) = url_host_port(&z.url)?;
            let version = if z.api_version.as_deref() == Some("httpProto") {
                CollectorEndpointVersion::HttpProto
            } else {
                CollectorEndpointVersion::HttpJson
            };
            let zipkin = ZipkinConfig {
                collector_cluster: COLLECTOR_CLUSTER.to_owned(),
                collector_endpoint: if path.is_empty() { "/" } else { path }.to_owned(),
                trace_id_128bit: z.trace_id128bit,
                shared_span_context: z.shared_span_context.map(|value| BoolValue { value }),
                collector_endpoint_version: version as i32,
                collector_hostname: format!("{host}:{}", port.unwrap_or(80)),
                ..Default::default()
            };
            Provider {
                name: "envoy.tracers.zipkin".to_owned(),
                config_type: Some(ConfigType::TypedConfig(pack_any(zipkin))),
            }
        }
        "Datadog" => {
            let d = backend.datadog.as_ref()?;
            let (host, port, _) = url_host_port(&d.url)?;
            let service_name = match (d.split_service, inbound) {
                (false, _) => service.to_owned(),
                (true, true) => format!("{service}_INBOUND"),
                (true, false) => format!("{service}_OUTBOUND_{dest}"),
            };
            let datadog = DatadogConfig {
                collector_cluster: COLLECTOR_CLUSTER.to_owned(),
                service_name,
                collector_hostname: format!("{host}:{}", port.unwrap_or(8126)),
                ..Default::default()
            };
            Provider {
                name: "envoy.tracers.datadog".to_owned(),
                config_type: Some(ConfigType::TypedConfig(pack_any(datadog))),
            }
        }
        _ => return None,
    };
    let sampling = conf.sampling.clone().unwrap_or_default();
    let percent = |p: &Option<Percentage>| {
        Some(Percent {
            value: p.as_ref().and_then(Percentage::value).unwrap_or(100.0),
        })
    };
    let custom_tags = conf
        .tags
        .iter()
        .flatten()
        .filter_map(|t| {
            let r#type = match (&t.literal, &t.header) {
                (Some(value), _) => custom_tag::Type::Literal(custom_tag::Literal {
                    value: value.clone(),
                }),
                (None, Some(h)) => custom_tag::Type::RequestHeader(custom_tag::Header {
                    name: h.name.clone(),
                    default_value: h.default.clone().unwrap_or_default(),
                }),
                (None, None) => return None,
            };
            Some(CustomTag {
                tag: t.name.clone(),
                r#type: Some(r#type),
            })
        })
        .collect();
    Some(Tracing {
        overall_sampling: percent(&sampling.overall),
        client_sampling: percent(&sampling.client),
        random_sampling: percent(&sampling.random),
        custom_tags,
        provider: Some(provider),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::Any;
    use prost::Message as _;
    use serde_json::Value;

    fn conf(json: Value) -> TraceConf {
        serde_json::from_value(json).expect("a TraceConf")
    }

    fn unpack<T: prost::Message + Default>(any: &Any) -> T {
        T::decode(any.value.as_slice()).expect("decodes")
    }

    #[test]
    fn otlp_http_endpoint_gets_the_traces_path_and_sampling_defaults_to_100() {
        let c = conf(serde_json::json!({
            "backends": [{"type": "OpenTelemetry", "openTelemetry": {"endpoint": "http://collector:4318"}}],
            "sampling": {"overall": "12.5"},
            "tags": [{"name": "env", "header": {"name": "x-env", "default": "prod"}}],
        }));
        let t = tracing(&c, "web", false, "backend").expect("tracing");
        assert_eq!(t.overall_sampling.map(|p| p.value), Some(12.5));
        assert_eq!(t.random_sampling.map(|p| p.value), Some(100.0));
        let provider = t.provider.expect("provider");
        assert_eq!(provider.name, "envoy.tracers.opentelemetry");
        let Some(ConfigType::TypedConfig(any)) = provider.config_type else {
            panic!("typed config");
        };
        let otel: OpenTelemetryConfig = unpack(&any);
        assert_eq!(otel.service_name, "web");
        let uri = otel.http_service.and_then(|s| s.http_uri).expect("uri");
        assert_eq!(uri.uri, "http://collector:4318/v1/traces");
        assert_eq!(
            t.custom_tags[0].r#type,
            Some(custom_tag::Type::RequestHeader(custom_tag::Header {
                name: "x-env".into(),
                default_value: "prod".into()
            }))
        );
    }

    #[test]
    fn zipkin_url_becomes_hostname_and_endpoint() {
        let c = conf(serde_json::json!({
            "backends": [{"zipkin": {
                "url": "http://jaeger:9411/api/v2/spans",
                "traceId128bit": true,
                "sharedSpanContext": false,
            }}],
        }));
        let t = tracing(&c, "web", true, "web").expect("tracing");
        let Some(ConfigType::TypedConfig(any)) = t.provider.expect("provider").config_type else {
            panic!("typed config");
        };
        let z: ZipkinConfig = unpack(&any);
        assert_eq!(z.collector_hostname, "jaeger:9411");
        assert_eq!(z.collector_endpoint, "/api/v2/spans");
        assert!(z.trace_id_128bit);
        assert_eq!(z.shared_span_context, Some(BoolValue { value: false }));
        assert_eq!(
            z.collector_endpoint_version,
            CollectorEndpointVersion::HttpJson as i32
        );
        let _ = z.encode_to_vec();
    }
}

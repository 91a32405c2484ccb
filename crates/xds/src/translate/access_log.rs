//! MeshAccessLog as Envoy `access_log` entries on a listener's HTTP
//! connection manager: each `File` backend becomes an
//! `envoy.access_loggers.file` with its `Plain` template (one line, `\n`
//! added) or `Json` object (a `json_format` struct), or Kuma's default
//! HTTP line when it has no format.
//!
//! Kuma's `%KUMA_*%` placeholders are replaced here, as Kuma's control
//! plane does, with what the translator knows of the listener: the mesh,
//! the direction, and on an outbound the source (this Dataplane's service
//! and address) and destination. On an inbound the caller is known only
//! to the proxy, so `%KUMA_SOURCE_SERVICE%` becomes
//! `%DOWNSTREAM_PEER_URI_SAN%` (the caller's SPIFFE ID) and
//! `%KUMA_SOURCE_ADDRESS_WITHOUT_PORT%` the caller's address.
//!
//! A `Tcp` backend becomes meshlink's own logger
//! (`meshlink.v1.TcpAccessLog`, the same formats) for meshlink-proxy;
//! Envoy has no raw-TCP logger (Kuma relies on kuma-dp for it), so an
//! Envoy sidecar gets none. `OpenTelemetry` backends are validated and
//! stored, and skipped here: OTLP export is not built yet
//! (docs/resources.md).

use envoy_types::pb::envoy::config::accesslog::v3::{AccessLog, access_log};
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, SubstitutionFormatString, data_source, substitution_format_string,
};
use envoy_types::pb::envoy::extensions::access_loggers::file::v3::{
    FileAccessLog, file_access_log,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value};
use envoy_types::util::pack_any;
use meshlink_api::spec::{AccessLogConf, DEFAULT_HTTP_FORMAT, LogFormat, TcpBackend};
use meshlink_proto::certify::{AccessLogJsonField, TcpAccessLog};

/// The file logger's name.
pub(super) const FILE_ACCESS_LOG: &str = "envoy.access_loggers.file";

/// What the translator knows of a listener's traffic, for Kuma's
/// placeholders.
#[derive(Debug, Clone, Copy)]
pub(super) struct LogContext<'a> {
    /// The mesh.
    pub(super) mesh: &'a str,
    /// Whether the listener is an inbound.
    pub(super) inbound: bool,
    /// This Dataplane's service (the source on an outbound, the
    /// destination on an inbound).
    pub(super) service: &'a str,
    /// The destination service of an outbound.
    pub(super) destination: &'a str,
    /// This Dataplane's address.
    pub(super) address: &'a str,
    /// The client takes meshlink's TCP access logger (meshlink-proxy).
    pub(super) tcp_logger: bool,
}

/// meshlink's TCP access logger's name.
pub(super) const TCP_ACCESS_LOG: &str = "meshlink.access_loggers.tcp";

/// The `access_log` entries for `conf`: its File backends, and its Tcp
/// backends for meshlink-proxy.
pub(super) fn access_logs(conf: Option<&AccessLogConf>, ctx: LogContext<'_>) -> Vec<AccessLog> {
    let Some(backends) = conf.and_then(|c| c.backends.as_ref()) else {
        return Vec::new();
    };
    let entry = |name: &str, config| AccessLog {
        name: name.to_owned(),
        config_type: Some(access_log::ConfigType::TypedConfig(config)),
        ..Default::default()
    };
    backends
        .iter()
        .filter_map(|b| match (b.type_.as_str(), &b.file, &b.tcp) {
            ("File", Some(file), _) => {
                let log = FileAccessLog {
                    path: file.path.clone(),
                    access_log_format: Some(file_access_log::AccessLogFormat::LogFormat(
                        substitution_format(file.format.as_ref(), ctx),
                    )),
                };
                Some(entry(FILE_ACCESS_LOG, pack_any(log)))
            }
            ("Tcp", _, Some(tcp)) if ctx.tcp_logger => {
                Some(entry(TCP_ACCESS_LOG, pack_any(tcp_access_log(tcp, ctx))))
            }
            _ => None,
        })
        .collect()
}

/// meshlink's TCP logger for `tcp`, its JSON keys in the policy's order.
fn tcp_access_log(tcp: &TcpBackend, ctx: LogContext<'_>) -> TcpAccessLog {
    let mut log = TcpAccessLog {
        address: tcp.address.clone(),
        omit_empty_values: tcp.format.as_ref().is_some_and(|f| f.omit_empty_values),
        ..Default::default()
    };
    match tcp.format.as_ref() {
        Some(f) if f.type_ == "Json" => {
            log.json_format = f
                .json
                .iter()
                .flatten()
                .map(|kv| AccessLogJsonField {
                    key: kv.key.clone(),
                    value: placeholders(&kv.value, ctx),
                })
                .collect();
        }
        f => {
            let plain = f
                .and_then(|f| f.plain.as_deref())
                .unwrap_or(DEFAULT_HTTP_FORMAT);
            log.text_format = format!("{}\n", placeholders(plain, ctx));
        }
    }
    log
}

fn substitution_format(
    format: Option<&LogFormat>,
    ctx: LogContext<'_>,
) -> SubstitutionFormatString {
    let text = |t: &str| {
        substitution_format_string::Format::TextFormatSource(DataSource {
            specifier: Some(data_source::Specifier::InlineString(format!(
                "{}\n",
                placeholders(t, ctx)
            ))),
            ..Default::default()
        })
    };
    let (format, omit_empty_values) = match format {
        None => (text(DEFAULT_HTTP_FORMAT), false),
        Some(f) => match (&f.plain, &f.json) {
            (_, Some(json)) if f.type_ == "Json" => {
                let fields = json
                    .iter()
                    .map(|kv| {
                        let v = Value {
                            kind: Some(value::Kind::StringValue(placeholders(&kv.value, ctx))),
                        };
                        (kv.key.clone(), v)
                    })
                    .collect();
                (
                    substitution_format_string::Format::JsonFormat(Struct { fields }),
                    f.omit_empty_values,
                )
            }
            (Some(plain), _) => (text(plain), f.omit_empty_values),
            _ => (text(DEFAULT_HTTP_FORMAT), f.omit_empty_values),
        },
    };
    SubstitutionFormatString {
        format: Some(format),
        omit_empty_values,
        ..Default::default()
    }
}

/// `template` with Kuma's placeholders replaced for `ctx`.
fn placeholders(template: &str, ctx: LogContext<'_>) -> String {
    let (direction, source, destination, source_address, source_address_only) = if ctx.inbound {
        (
            "INBOUND",
            "%DOWNSTREAM_PEER_URI_SAN%",
            ctx.service,
            "%DOWNSTREAM_REMOTE_ADDRESS%",
            "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
        )
    } else {
        (
            "OUTBOUND",
            ctx.service,
            ctx.destination,
            ctx.address,
            ctx.address,
        )
    };
    [
        ("%KUMA_MESH%", ctx.mesh),
        ("%KUMA_TRAFFIC_DIRECTION%", direction),
        ("%KUMA_SOURCE_SERVICE%", source),
        ("%KUMA_DESTINATION_SERVICE%", destination),
        ("%KUMA_SOURCE_ADDRESS_WITHOUT_PORT%", source_address_only),
        ("%KUMA_SOURCE_ADDRESS%", source_address),
    ]
    .iter()
    .fold(template.to_owned(), |t, (from, to)| t.replace(from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_backend_goes_to_meshlink_proxy_only() {
        let conf: AccessLogConf = serde_json::from_value(serde_json::json!({
            "backends": [
                {"type": "File", "file": {"path": "/dev/stdout"}},
                {"type": "Tcp", "tcp": {"address": "logs:5000",
                    "format": {"type": "Json", "json": [{"key": "b", "value": "%KUMA_MESH%"}, {"key": "a", "value": "x"}]}}},
                {"type": "OpenTelemetry", "openTelemetry": {"endpoint": "otel:4317"}}
            ]
        }))
        .unwrap();
        let ctx = LogContext {
            mesh: "default",
            inbound: true,
            service: "backend",
            destination: "backend",
            address: "10.0.0.1",
            tcp_logger: true,
        };
        let names = |ctx| -> Vec<String> {
            access_logs(Some(&conf), ctx)
                .into_iter()
                .map(|l| l.name)
                .collect()
        };
        assert_eq!(names(ctx), [FILE_ACCESS_LOG, TCP_ACCESS_LOG]);
        let envoy = LogContext {
            tcp_logger: false,
            ..ctx
        };
        assert_eq!(names(envoy), [FILE_ACCESS_LOG]);
        let tcp = tcp_access_log(
            conf.backends.as_ref().unwrap()[1].tcp.as_ref().unwrap(),
            ctx,
        );
        let keys: Vec<(&str, &str)> = tcp
            .json_format
            .iter()
            .map(|f| (f.key.as_str(), f.value.as_str()))
            .collect();
        assert_eq!(
            keys,
            [("b", "default"), ("a", "x")],
            "in the policy's order"
        );
    }

    #[test]
    fn kuma_placeholders_are_filled_per_direction() {
        let out = LogContext {
            mesh: "default",
            inbound: false,
            service: "web",
            destination: "backend",
            address: "10.0.0.1",
            tcp_logger: true,
        };
        let t = "%KUMA_MESH% %KUMA_TRAFFIC_DIRECTION% %KUMA_SOURCE_SERVICE%->%KUMA_DESTINATION_SERVICE% %KUMA_SOURCE_ADDRESS_WITHOUT_PORT% %RESPONSE_CODE%";
        assert_eq!(
            placeholders(t, out),
            "default OUTBOUND web->backend 10.0.0.1 %RESPONSE_CODE%"
        );
        let inbound = LogContext {
            inbound: true,
            service: "backend",
            ..out
        };
        assert_eq!(
            placeholders(t, inbound),
            "default INBOUND %DOWNSTREAM_PEER_URI_SAN%->backend \
             %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %RESPONSE_CODE%"
        );
    }
}

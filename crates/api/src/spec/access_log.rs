//! The MeshAccessLog kind: Kuma's access logs, per destination (`to[]`),
//! per client set (`from[]`) or for the inbounds (`rules[]`), each entry a
//! list of backends: a `File` (a path, or `/dev/stdout`), a `Tcp` address
//! or an `OpenTelemetry` collector, with a `Plain` or `Json` format of
//! Envoy command operators and Kuma's `%KUMA_*%` placeholders.
//!
//! Owns the spec's shape and its validation (every format is parsed, and an
//! unknown operator is refused with its name). How policies combine belongs
//! to `crate::policy`; what the proxy writes is the translator's
//! (`meshlink_xds::translate::access_log`).

use serde::{Deserialize, Serialize};

use super::access_log_format;
use super::permission_rules::ClientMatch;
use super::policy_target::{self, FROM_KINDS, ROUTE_TOP_KINDS, TIMEOUT_TO_KINDS};
use super::target_ref::{Position, TargetRef};
use crate::validate::Errors;

/// `spec` of a MeshAccessLog.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshAccessLogSpec {
    /// The proxies configured (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Logs of the traffic to some destinations (outbound).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<AccessLogEntry>,
    /// Logs of the traffic from some clients (inbound, Kuma's older form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<AccessLogEntry>,
    /// Logs of the inbound traffic (Kuma 2.10's form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<AccessLogRule>,
}

/// `to[]` or `from[]`: a set of destinations or clients and their backends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessLogEntry {
    /// The destinations (`to`) or clients (`from`).
    pub target_ref: TargetRef,
    /// The backends.
    #[serde(rename = "default", default)]
    pub default_: AccessLogConf,
}

/// `rules[]`: backends, optionally for matching clients only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessLogRule {
    /// Clients by SPIFFE ID (every client when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<ClientMatch>>,
    /// The backends.
    #[serde(rename = "default", default)]
    pub default_: AccessLogConf,
}

/// `default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessLogConf {
    /// Where each log line goes (none: logging off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<AccessLogBackend>>,
}

/// One backend: `type` names the one block that is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessLogBackend {
    /// `File`, `Tcp` or `OpenTelemetry`.
    #[serde(rename = "type")]
    pub type_: String,
    /// A file (or `/dev/stdout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileBackend>,
    /// A TCP address that receives one line per entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpBackend>,
    /// An OpenTelemetry collector (OTLP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_telemetry: Option<OtelBackend>,
}

/// `file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileBackend {
    /// The file, appended to (created when missing).
    pub path: String,
    /// The line format (Kuma's default when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<LogFormat>,
}

/// `tcp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpBackend {
    /// `host:port`.
    pub address: String,
    /// The line format (Kuma's default when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<LogFormat>,
}

/// `openTelemetry`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OtelBackend {
    /// The collector's OTLP gRPC address, `host:port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// A MeshOpenTelemetryBackend by name (Kuma 2.12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_ref: Option<serde_json::Value>,
    /// Log record attributes; values may hold operators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<KeyValue>,
    /// The log record's body (a string or an OTLP AnyValue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
}

/// `format`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogFormat {
    /// `Plain` or `Json`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The `Plain` template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain: Option<String>,
    /// The `Json` object's keys and templates, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Vec<KeyValue>>,
    /// Leave out the keys (Json) or fields whose value is empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub omit_empty_values: bool,
}

/// A key and a template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value, with command operators.
    pub value: String,
}

/// Kuma's default line for HTTP traffic.
pub const DEFAULT_HTTP_FORMAT: &str = "[%START_TIME%] %KUMA_MESH% \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%KUMA_SOURCE_SERVICE%\" \"%KUMA_DESTINATION_SERVICE%\" \"%KUMA_SOURCE_ADDRESS_WITHOUT_PORT%\" \"%UPSTREAM_HOST%\"";

/// Kuma's default line for TCP traffic.
pub const DEFAULT_TCP_FORMAT: &str = "[%START_TIME%] %RESPONSE_FLAGS% %KUMA_MESH% %KUMA_SOURCE_ADDRESS_WITHOUT_PORT%(%KUMA_SOURCE_SERVICE%)->%UPSTREAM_HOST%(%KUMA_DESTINATION_SERVICE%) took %DURATION%ms, sent %BYTES_SENT% bytes, received: %BYTES_RECEIVED% bytes";

// === impl MeshAccessLogSpec ===

impl MeshAccessLogSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), ROUTE_TOP_KINDS);
        if self.to.is_empty() && self.from.is_empty() && self.rules.is_empty() {
            errs.add(
                "spec",
                "at least one of to, from or rules is required, e.g. from: [{targetRef: {kind: \
                 Mesh}, default: {backends: [{type: File, file: {path: /dev/stdout}}]}}]",
            );
        }
        for (position, list, allowed) in [
            (Position::To, &self.to, TIMEOUT_TO_KINDS),
            (Position::From, &self.from, FROM_KINDS),
        ] {
            policy_target::validate_entries(
                errs,
                position,
                list,
                allowed,
                |e| &e.target_ref,
                |errs, e, at| e.default_.validate(errs, at),
            );
        }
        for (i, rule) in self.rules.iter().enumerate() {
            super::permission_rules::validate_rule_matches(errs, i, rule.matches.as_ref());
            rule.default_
                .validate(errs, &format!("spec.rules[{i}].default"));
        }
    }
}

impl AccessLogConf {
    fn validate(&self, errs: &mut Errors, at: &str) {
        for (i, b) in self.backends.iter().flatten().enumerate() {
            b.validate(errs, &format!("{at}.backends[{i}]"));
        }
    }
}

impl AccessLogBackend {
    fn validate(&self, errs: &mut Errors, at: &str) {
        let set = [
            ("File", "file", self.file.is_some()),
            ("Tcp", "tcp", self.tcp.is_some()),
            (
                "OpenTelemetry",
                "openTelemetry",
                self.open_telemetry.is_some(),
            ),
        ];
        let Some((_, block, _)) = set.iter().find(|(t, _, _)| *t == self.type_) else {
            errs.add(
                format!("{at}.type"),
                format!(
                    "{:?} is not a backend type; use File, Tcp or OpenTelemetry",
                    self.type_
                ),
            );
            return;
        };
        for (t, other, present) in set {
            if present && t != self.type_ {
                errs.add(
                    format!("{at}.{other}"),
                    format!("set, but type is {}: set only {block}", self.type_),
                );
            }
        }
        if let Some(f) = &self.file {
            if f.path.is_empty() {
                errs.add(format!("{at}.file.path"), "required, e.g. /dev/stdout");
            }
            check_format(errs, &format!("{at}.file.format"), f.format.as_ref());
        }
        if let Some(t) = &self.tcp {
            if !is_host_port(&t.address) {
                errs.add(
                    format!("{at}.tcp.address"),
                    format!("{:?} is not host:port, e.g. 127.0.0.1:5000", t.address),
                );
            }
            check_format(errs, &format!("{at}.tcp.format"), t.format.as_ref());
        }
        if let Some(o) = &self.open_telemetry {
            if o.endpoint.is_none() && o.backend_ref.is_none() {
                errs.add(
                    format!("{at}.openTelemetry.endpoint"),
                    "required (or backendRef), e.g. otel-collector:4317",
                );
            }
            for (i, kv) in o.attributes.iter().enumerate() {
                if let Err(e) = access_log_format::parse(&kv.value) {
                    errs.add(format!("{at}.openTelemetry.attributes[{i}].value"), e);
                }
            }
        }
        if self.type_.is_empty() {
            errs.add(format!("{at}.type"), "required");
        }
    }
}

/// Checks a format: its type names the one template that is set, and every
/// template parses.
fn check_format(errs: &mut Errors, at: &str, format: Option<&LogFormat>) {
    let Some(f) = format else { return };
    match f.type_.as_str() {
        "Plain" => match &f.plain {
            None => errs.add(format!("{at}.plain"), "required when type is Plain"),
            Some(p) => {
                if let Err(e) = access_log_format::parse(p) {
                    errs.add(format!("{at}.plain"), e);
                }
            }
        },
        "Json" => match &f.json {
            None => errs.add(format!("{at}.json"), "required when type is Json"),
            Some(list) => {
                for (i, kv) in list.iter().enumerate() {
                    if kv.key.is_empty() {
                        errs.add(format!("{at}.json[{i}].key"), "required");
                    }
                    if let Err(e) = access_log_format::parse(&kv.value) {
                        errs.add(format!("{at}.json[{i}].value"), e);
                    }
                }
            }
        },
        other => errs.add(
            format!("{at}.type"),
            format!("{other:?} is not a format type; use Plain or Json"),
        ),
    }
    if f.type_ == "Plain" && f.json.is_some() {
        errs.add(format!("{at}.json"), "set, but type is Plain");
    }
    if f.type_ == "Json" && f.plain.is_some() {
        errs.add(format!("{at}.plain"), "set, but type is Json");
    }
}

/// Whether `s` is `host:port` with a port of 1-65535.
fn is_host_port(s: &str) -> bool {
    s.rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0))
}

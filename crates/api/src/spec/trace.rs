//! The MeshTrace kind: Kuma's request tracing. One top-level `targetRef`
//! (the proxies traced) and one `default`: a single backend (`Zipkin`,
//! `Datadog` or `OpenTelemetry`), `sampling` percentages and custom
//! `tags` (a literal, or a request header with a default).
//!
//! Owns the spec's shape and its validation. Kuma's documents before 2.3
//! set no backend `type`; the one block that is set names it
//! ([`TraceBackend::kind`]). How policies combine belongs to
//! `crate::policy`; what the proxies do is the translator's
//! (`meshlink_xds::translate::trace`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::policy_target::{self, ROUTE_TOP_KINDS};
use crate::validate::Errors;

use super::target_ref::TargetRef;

/// `spec` of a MeshTrace.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshTraceSpec {
    /// The proxies traced (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// The tracing configuration.
    #[serde(rename = "default", default, skip_serializing_if = "Option::is_none")]
    pub default_: Option<TraceConf>,
}

/// `default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceConf {
    /// At most one backend (none: tracing off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<TraceBackend>>,
    /// Sampling percentages (each 100 % by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// Tags added to every span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<TraceTag>>,
}

/// One backend: `type` (or, in Kuma's older form, the one block set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceBackend {
    /// `Zipkin`, `Datadog` or `OpenTelemetry`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// A Zipkin collector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zipkin: Option<ZipkinBackend>,
    /// A Datadog agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datadog: Option<DatadogBackend>,
    /// An OpenTelemetry collector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_telemetry: Option<OtelTraceBackend>,
}

/// `zipkin`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZipkinBackend {
    /// The collector's URL, e.g. `http://jaeger-collector:9411/api/v2/spans`.
    pub url: String,
    /// 128-bit trace IDs (default: 64-bit).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trace_id128bit: bool,
    /// `httpJson` (default) or `httpProto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Client and server spans share one span context (default: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_span_context: Option<bool>,
}

/// `datadog`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatadogBackend {
    /// The agent's URL, `http://host:port`.
    pub url: String,
    /// Service names split by direction and destination.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub split_service: bool,
}

/// `openTelemetry`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OtelTraceBackend {
    /// `host:port` (OTLP/gRPC) or `http(s)://host:port[/path]` (OTLP/HTTP).
    pub endpoint: String,
}

/// `sampling`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sampling {
    /// The upper limit on everything traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall: Option<Percentage>,
    /// Requests with `x-client-trace-id` that are traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Percentage>,
    /// Other requests that start a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<Percentage>,
}

/// A percentage as Kuma writes it: an integer or a decimal string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Percentage {
    /// `80`.
    Int(i64),
    /// `"80"`, `"0.5"`.
    Text(String),
}

/// `tags[]`: a literal or a request header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceTag {
    /// The tag's name.
    pub name: String,
    /// A fixed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literal: Option<String>,
    /// A request header's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<HeaderTag>,
}

/// `tags[].header`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderTag {
    /// The header.
    pub name: String,
    /// The value when the header is missing (none: no tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

// === impl Percentage ===

impl Percentage {
    /// The value, `None` when it is not a number.
    pub fn value(&self) -> Option<f64> {
        match self {
            Percentage::Int(i) => Some(*i as f64),
            Percentage::Text(t) => t.trim().parse::<f64>().ok().filter(|v| v.is_finite()),
        }
    }
}

impl Serialize for Percentage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Percentage::Int(i) => s.serialize_i64(*i),
            Percentage::Text(t) => s.serialize_str(t),
        }
    }
}

impl<'de> Deserialize<'de> for Percentage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Number(n) if n.is_i64() => {
                Ok(Percentage::Int(n.as_i64().unwrap_or_default()))
            }
            serde_json::Value::String(s) => Ok(Percentage::Text(s)),
            other => Err(serde::de::Error::custom(format!(
                "{other} is not a percentage; use an integer 0-100 or a decimal string, e.g. 80 \
                 or \"0.5\""
            ))),
        }
    }
}

// === impl TraceBackend ===

impl TraceBackend {
    /// The backend's type: `type`, else the one block that is set.
    pub fn kind(&self) -> Option<&str> {
        if let Some(t) = &self.type_ {
            return Some(t);
        }
        match (&self.zipkin, &self.datadog, &self.open_telemetry) {
            (Some(_), None, None) => Some("Zipkin"),
            (None, Some(_), None) => Some("Datadog"),
            (None, None, Some(_)) => Some("OpenTelemetry"),
            _ => None,
        }
    }
}

// === impl MeshTraceSpec ===

impl MeshTraceSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), ROUTE_TOP_KINDS);
        let Some(conf) = &self.default_ else {
            errs.add(
                "spec.default",
                "required, e.g. default: {backends: [{type: OpenTelemetry, openTelemetry: \
                 {endpoint: otel-collector:4317}}]}",
            );
            return;
        };
        let backends = conf.backends.as_deref().unwrap_or_default();
        if backends.len() > 1 {
            errs.add(
                "spec.default.backends",
                format!(
                    "{} backends; a proxy sends its spans to one backend: keep one",
                    backends.len()
                ),
            );
        }
        for (i, b) in backends.iter().enumerate() {
            b.validate(errs, &format!("spec.default.backends[{i}]"));
        }
        if let Some(s) = &conf.sampling {
            for (name, p) in [
                ("overall", &s.overall),
                ("client", &s.client),
                ("random", &s.random),
            ] {
                let Some(p) = p else { continue };
                if !p.value().is_some_and(|v| (0.0..=100.0).contains(&v)) {
                    errs.add(
                        format!("spec.default.sampling.{name}"),
                        format!(
                            "{} is not a percentage between 0 and 100",
                            serde_json::to_string(p).unwrap_or_default()
                        ),
                    );
                }
            }
        }
        for (i, t) in conf.tags.iter().flatten().enumerate() {
            let at = format!("spec.default.tags[{i}]");
            if t.name.is_empty() {
                errs.add(format!("{at}.name"), "required");
            }
            match (&t.literal, &t.header) {
                (Some(_), Some(_)) => errs.add(
                    at,
                    "both literal and header are set; set one (a fixed value or a header's)",
                ),
                (None, None) => errs.add(
                    at,
                    "set literal (a fixed value) or header (a request header's value)",
                ),
                (None, Some(h)) if !is_header_name(&h.name) => errs.add(
                    format!("{at}.header.name"),
                    format!("{:?} is not a header name", h.name),
                ),
                _ => {}
            }
        }
    }
}

impl TraceBackend {
    fn validate(&self, errs: &mut Errors, at: &str) {
        let set = [
            ("Zipkin", "zipkin", self.zipkin.is_some()),
            ("Datadog", "datadog", self.datadog.is_some()),
            (
                "OpenTelemetry",
                "openTelemetry",
                self.open_telemetry.is_some(),
            ),
        ];
        let Some(kind) = self.kind() else {
            errs.add(
                format!("{at}.type"),
                "required: Zipkin, Datadog or OpenTelemetry, with its block (zipkin, datadog or \
                 openTelemetry)",
            );
            return;
        };
        let Some((_, block, present)) = set.iter().find(|(t, _, _)| *t == kind) else {
            errs.add(
                format!("{at}.type"),
                format!("{kind:?} is not a backend type; use Zipkin, Datadog or OpenTelemetry"),
            );
            return;
        };
        if !present {
            errs.add(
                format!("{at}.{block}"),
                format!("required when type is {kind}"),
            );
        }
        for (t, other, present) in set {
            if present && t != kind {
                errs.add(
                    format!("{at}.{other}"),
                    format!("set, but type is {kind}: set only {block}"),
                );
            }
        }
        if let Some(z) = &self.zipkin {
            if url_host_port(&z.url).is_none() {
                errs.add(
                    format!("{at}.zipkin.url"),
                    format!(
                        "{:?} is not an http URL, e.g. http://jaeger-collector:9411/api/v2/spans",
                        z.url
                    ),
                );
            }
            if let Some(v) = &z.api_version
                && !matches!(v.as_str(), "httpJson" | "httpProto")
            {
                errs.add(
                    format!("{at}.zipkin.apiVersion"),
                    format!("{v:?} is not a Zipkin API version; use httpJson or httpProto"),
                );
            }
        }
        if let Some(d) = &self.datadog {
            let ok = d.url.starts_with("http://")
                && url_host_port(&d.url)
                    .is_some_and(|(_, port, path)| port.is_some() && path.is_empty());
            if !ok {
                errs.add(
                    format!("{at}.datadog.url"),
                    format!(
                        "{:?} is not http://host:port (a port, no path), e.g. http://127.0.0.1:8126",
                        d.url
                    ),
                );
            }
        }
        if let Some(o) = &self.open_telemetry {
            let ok = if o.endpoint.contains("://") {
                url_host_port(&o.endpoint).is_some()
            } else {
                o.endpoint
                    .rsplit_once(':')
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0))
            };
            if !ok {
                errs.add(
                    format!("{at}.openTelemetry.endpoint"),
                    format!(
                        "{:?} is neither host:port (OTLP/gRPC, e.g. otel-collector:4317) nor an \
                         http(s) URL (OTLP/HTTP, e.g. http://otel-collector:4318)",
                        o.endpoint
                    ),
                );
            }
        }
    }
}

/// `http(s)://host[:port][/path]` as (host, port, path); `None` when `url`
/// is not one.
pub fn url_host_port(url: &str) -> Option<(&str, Option<u16>, &str)> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
            (h, Some(p.parse::<u16>().ok().filter(|p| *p > 0)?))
        }
        _ => (authority, None),
    };
    if host.is_empty() || host.contains(['@', '?', '#', ' ']) || path.contains(['?', '#']) {
        return None;
    }
    Some((host, port, path))
}

/// Whether `name` is an HTTP header name (an RFC 9110 token).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

//! Validation of a Cluster's active health check (what Kuma's
//! MeshHealthCheck becomes): `health_checks`, at most one, with an HTTP,
//! TCP or gRPC checker and its timing.
//!
//! Refused, naming the field, rather than silently ignored: a second
//! check, `alt_port`, the edge and no-traffic-healthy intervals, event
//! loggers and services (`event_log_path` is served), `always_log_health_check_success`, `tls_options`,
//! transport socket matching, custom checkers, and, per checker, what
//! meshlink-proxy does not send or match (HTTP: a body, a method other
//! than GET, removed headers, retriable statuses, an HTTP/3 codec,
//! service-name matching; TCP: PROXY protocol; gRPC: initial metadata).

use std::ops::Range;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::health_check::{
    HealthChecker, HttpHealthCheck, Payload, payload,
};
use envoy_types::pb::envoy::config::core::v3::{HealthCheck, RequestMethod};
use envoy_types::pb::envoy::r#type::v3::CodecClientType;

use super::{Invalid, duration, invalid};
use crate::model::health_check::{CheckKind, HealthCheckSpec};

/// What meshlink-proxy runs instead of what is refused.
const SUPPORTED: &str = "meshlink-proxy runs one HTTP, TCP or gRPC check with timeout, interval, \
                         jitter, thresholds, no_traffic_interval, unhealthy_interval, \
                         reuse_connection and event_log_path";

/// Reads `health_checks` (`None`: empty).
pub(super) fn health_checks(checks: &[HealthCheck]) -> Result<Option<HealthCheckSpec>, Invalid> {
    match checks {
        [] => Ok(None),
        [one] => health_check(one, "health_checks[0]").map(Some),
        _ => Err(invalid(
            "health_checks[1]",
            format!("more than one health check; {SUPPORTED}"),
        )),
    }
}

#[allow(deprecated)] // `event_log_path`: Kuma's `eventLogPath` still sets it.
fn health_check(hc: &HealthCheck, at: &str) -> Result<HealthCheckSpec, Invalid> {
    let unsupported = [
        (hc.alt_port.is_some(), "alt_port"),
        (
            hc.no_traffic_healthy_interval.is_some(),
            "no_traffic_healthy_interval",
        ),
        (
            hc.unhealthy_edge_interval.is_some(),
            "unhealthy_edge_interval",
        ),
        (hc.healthy_edge_interval.is_some(), "healthy_edge_interval"),
        (!hc.event_logger.is_empty(), "event_logger"),
        (hc.event_service.is_some(), "event_service"),
        (
            hc.always_log_health_check_success,
            "always_log_health_check_success",
        ),
        (hc.tls_options.is_some(), "tls_options"),
        (
            hc.transport_socket_match_criteria.is_some(),
            "transport_socket_match_criteria",
        ),
    ];
    if let Some((_, name)) = unsupported.iter().find(|(set, _)| *set) {
        return Err(invalid(
            format!("{at}.{name}"),
            format!("not supported; {SUPPORTED}"),
        ));
    }
    let required = |d: &Option<envoy_types::pb::google::protobuf::Duration>, name: &str| {
        let field = format!("{at}.{name}");
        let d = d
            .as_ref()
            .ok_or_else(|| invalid(&field, "required (Envoy has no default)"))?;
        let d = duration(d, &field)?;
        if d.is_zero() {
            return Err(invalid(field, "must be positive"));
        }
        Ok(d)
    };
    let optional = |d: &Option<envoy_types::pb::google::protobuf::Duration>, name: &str| {
        d.as_ref()
            .map(|d| duration(d, format!("{at}.{name}")))
            .transpose()
    };
    let threshold = |v: &Option<envoy_types::pb::google::protobuf::UInt32Value>, name: &str| match v
        .as_ref()
        .map(|v| v.value)
    {
        Some(n) if n >= 1 => Ok(n),
        Some(_) => Err(invalid(format!("{at}.{name}"), "must be at least 1")),
        None => Err(invalid(
            format!("{at}.{name}"),
            "required (Envoy has no default)",
        )),
    };
    let interval = required(&hc.interval, "interval")?;
    if hc.interval_jitter_percent > 100 {
        return Err(invalid(
            format!("{at}.interval_jitter_percent"),
            format!("{} is not a percentage (0-100)", hc.interval_jitter_percent),
        ));
    }
    let no_traffic = optional(&hc.no_traffic_interval, "no_traffic_interval")?;
    let unhealthy = optional(&hc.unhealthy_interval, "unhealthy_interval")?;
    Ok(HealthCheckSpec {
        kind: checker(hc.health_checker.as_ref(), at)?,
        timeout: required(&hc.timeout, "timeout")?,
        interval,
        unhealthy_interval: unhealthy.filter(|d| !d.is_zero()).unwrap_or(interval),
        no_traffic_interval: no_traffic
            .filter(|d| !d.is_zero())
            .unwrap_or(HealthCheckSpec::DEFAULT_NO_TRAFFIC_INTERVAL),
        initial_jitter: optional(&hc.initial_jitter, "initial_jitter")?.unwrap_or(Duration::ZERO),
        interval_jitter: optional(&hc.interval_jitter, "interval_jitter")?
            .unwrap_or(Duration::ZERO),
        interval_jitter_percent: hc.interval_jitter_percent,
        unhealthy_threshold: threshold(&hc.unhealthy_threshold, "unhealthy_threshold")?,
        healthy_threshold: threshold(&hc.healthy_threshold, "healthy_threshold")?,
        reuse_connection: hc.reuse_connection.is_none_or(|v| v.value),
        always_log_failures: hc.always_log_health_check_failures,
        event_log_path: (!hc.event_log_path.is_empty())
            .then(|| std::path::PathBuf::from(&hc.event_log_path)),
    })
}

fn checker(checker: Option<&HealthChecker>, at: &str) -> Result<CheckKind, Invalid> {
    match checker {
        Some(HealthChecker::HttpHealthCheck(h)) => http(h, &format!("{at}.http_health_check")),
        Some(HealthChecker::TcpHealthCheck(t)) => {
            let at = format!("{at}.tcp_health_check");
            if t.proxy_protocol_config.is_some() {
                return Err(invalid(
                    format!("{at}.proxy_protocol_config"),
                    "not supported: meshlink-proxy sends no PROXY protocol header",
                ));
            }
            let receive = t.receive.iter().enumerate();
            Ok(CheckKind::Tcp {
                send: t
                    .send
                    .as_ref()
                    .map(|p| payload_bytes(p, &format!("{at}.send")))
                    .transpose()?
                    .unwrap_or_default(),
                receive: receive
                    .map(|(i, p)| payload_bytes(p, &format!("{at}.receive[{i}]")))
                    .collect::<Result<_, _>>()?,
            })
        }
        Some(HealthChecker::GrpcHealthCheck(g)) => {
            if !g.initial_metadata.is_empty() {
                return Err(invalid(
                    format!("{at}.grpc_health_check.initial_metadata"),
                    "not supported: meshlink-proxy sends no metadata with the check",
                ));
            }
            Ok(CheckKind::Grpc {
                service_name: g.service_name.clone(),
                authority: g.authority.clone(),
            })
        }
        Some(HealthChecker::CustomHealthCheck(_)) => Err(invalid(
            format!("{at}.custom_health_check"),
            format!("not supported; {SUPPORTED}"),
        )),
        None => Err(invalid(
            format!("{at}.health_checker"),
            "required: an http_health_check, tcp_health_check or grpc_health_check",
        )),
    }
}

fn http(h: &HttpHealthCheck, at: &str) -> Result<CheckKind, Invalid> {
    let unsupported = [
        (h.send.is_some(), "send"),
        (!h.receive.is_empty(), "receive"),
        (h.response_buffer_size.is_some(), "response_buffer_size"),
        (
            !h.request_headers_to_remove.is_empty(),
            "request_headers_to_remove",
        ),
        (!h.retriable_statuses.is_empty(), "retriable_statuses"),
        (
            h.codec_client_type == CodecClientType::Http3 as i32,
            "codec_client_type",
        ),
        (h.service_name_matcher.is_some(), "service_name_matcher"),
        (
            !matches!(
                RequestMethod::try_from(h.method),
                Ok(RequestMethod::MethodUnspecified | RequestMethod::Get)
            ),
            "method",
        ),
    ];
    if let Some((_, name)) = unsupported.iter().find(|(set, _)| *set) {
        return Err(invalid(
            format!("{at}.{name}"),
            "not supported: meshlink-proxy's HTTP check is a GET of path with host, added \
             headers and expected statuses",
        ));
    }
    if !h.path.starts_with('/') {
        return Err(invalid(
            format!("{at}.path"),
            format!("{:?} must start with /", h.path),
        ));
    }
    let mut headers = Vec::new();
    for (i, o) in h.request_headers_to_add.iter().enumerate() {
        let Some(header) = &o.header else {
            return Err(invalid(
                format!("{at}.request_headers_to_add[{i}].header"),
                "required",
            ));
        };
        headers.push((header.key.to_ascii_lowercase(), header.value.clone()));
    }
    let mut expected: Vec<Range<u16>> = Vec::new();
    for (i, r) in h.expected_statuses.iter().enumerate() {
        let (Ok(start), Ok(end)) = (u16::try_from(r.start), u16::try_from(r.end)) else {
            return Err(invalid(
                format!("{at}.expected_statuses[{i}]"),
                "statuses must be 100-599",
            ));
        };
        if !(100..=599).contains(&start) || end <= start || end > 600 {
            return Err(invalid(
                format!("{at}.expected_statuses[{i}]"),
                format!(
                    "[{start}, {end}) is not a range of HTTP statuses (100-599, end exclusive)"
                ),
            ));
        }
        expected.push(start..end);
    }
    if expected.is_empty() {
        expected.push(200..201);
    }
    Ok(CheckKind::Http {
        path: h.path.clone(),
        host: h.host.clone(),
        headers,
        expected_statuses: expected,
    })
}

/// A payload's bytes (`text` is hex, as in Envoy).
fn payload_bytes(p: &Payload, at: &str) -> Result<Vec<u8>, Invalid> {
    match &p.payload {
        Some(payload::Payload::Binary(b)) => Ok(b.clone()),
        Some(payload::Payload::Text(text)) => hex::decode(text).map_err(|_| {
            invalid(
                format!("{at}.text"),
                format!("{text:?} is not hex (e.g. \"000000FF\")"),
            )
        }),
        None => Err(invalid(at, "a payload needs text or binary")),
    }
}

#[cfg(test)]
#[path = "health_check_tests.rs"]
mod tests;

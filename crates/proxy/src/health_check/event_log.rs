//! `event_log_path` (Kuma's `eventLogPath`): one JSON line per health
//! event of an endpoint appended to a file, in the shape of Envoy's
//! `HealthCheckEvent`: `eject_unhealthy_event` when a healthy endpoint
//! turns unhealthy, `add_healthy_event` (with `first_check`) when it
//! turns healthy, and `health_check_failure_event` for a failed check of
//! a healthy endpoint.
//!
//! Owns only the line's shape and the append. It runs in the checking
//! task, never on the data path; a write that fails is logged and the
//! check goes on.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::SystemTime;

use serde_json::{Value, json};

use crate::lb::CheckedHealth;

/// The event a check of an endpoint standing at `before` caused (now at
/// `after`), if any.
pub(super) fn event(before: CheckedHealth, after: CheckedHealth, passed: bool) -> Option<Value> {
    let first_check = before == CheckedHealth::Pending;
    match (before, after) {
        (CheckedHealth::Healthy, CheckedHealth::Unhealthy) => {
            Some(json!({"eject_unhealthy_event": {"failure_type": "ACTIVE"}}))
        }
        (b, CheckedHealth::Healthy) if b != CheckedHealth::Healthy => {
            Some(json!({"add_healthy_event": {"first_check": first_check}}))
        }
        (CheckedHealth::Healthy, CheckedHealth::Healthy) if !passed => Some(json!({
            "health_check_failure_event": {"failure_type": "ACTIVE", "first_check": false}
        })),
        _ => None,
    }
}

/// Appends `event` about `endpoint` of `cluster` (checker `kind`) to
/// `path`.
pub(super) fn append(path: &Path, kind: &str, cluster: &str, endpoint: SocketAddr, event: Value) {
    let mut line = json!({
        "health_checker_type": kind.to_ascii_uppercase(),
        "host": {"socket_address": {
            "address": endpoint.ip().to_string(),
            "port_value": endpoint.port(),
        }},
        "cluster_name": cluster,
        "timestamp": humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
    });
    if let (Some(line), Value::Object(event)) = (line.as_object_mut(), event) {
        line.extend(event);
    }
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), cluster, "cannot write the health check event log: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_and_failures_of_healthy_endpoints_are_events() {
        use CheckedHealth::*;
        let key = |v: Option<Value>| v.and_then(|v| v.as_object()?.keys().next().cloned());
        assert_eq!(
            key(event(Pending, Healthy, true)).as_deref(),
            Some("add_healthy_event")
        );
        assert_eq!(
            key(event(Healthy, Unhealthy, false)).as_deref(),
            Some("eject_unhealthy_event")
        );
        assert_eq!(
            key(event(Healthy, Healthy, false)).as_deref(),
            Some("health_check_failure_event")
        );
        assert_eq!(event(Healthy, Healthy, true), None);
        assert_eq!(event(Unhealthy, Unhealthy, false), None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hc.log");
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        append(
            &path,
            "http",
            "backend",
            addr,
            event(Pending, Healthy, true).unwrap(),
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let line: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(line["health_checker_type"], "HTTP");
        assert_eq!(line["host"]["socket_address"]["port_value"], 9);
        assert_eq!(line["add_healthy_event"]["first_check"], true);
    }
}

//! The "Unhealthy endpoints" section of `meshlink inspect dataplane`: the
//! endpoints of other services that the dataplane's own sidecar keeps out
//! of its balancers (a failing MeshHealthCheck, an outlier ejection), from
//! the Dataplane's `status.unhealthyEndpoints`.
//!
//! It only formats what the status says; the list is what this sidecar
//! (the caller) sees, and another caller may see the same endpoint
//! healthy. Nothing is printed when the list is empty.

use std::fmt::Write as _;
use std::time::SystemTime;

use serde_json::Value;

use super::inspect::{relative, rfc3339};
use super::table::{aligned, text};

/// The section for the Dataplane status `status` at `now`, e.g.
/// `Unhealthy endpoints (as this sidecar sees them):` and
/// `  backend   127.0.0.1:5001   failing its health check since
/// 2026-12-05T23:10:00Z (3m ago)`; empty when none.
pub(super) fn unhealthy_endpoints(status: &Value, now: SystemTime) -> String {
    let Some(list) = status["unhealthyEndpoints"]
        .as_array()
        .filter(|l| !l.is_empty())
    else {
        return String::new();
    };
    let rows: Vec<[String; 3]> = list
        .iter()
        .map(|e| {
            let why = match e["reason"].as_str() {
                Some("HealthCheck") => "failing its health check".to_owned(),
                Some("Outlier") => "ejected by outlier detection".to_owned(),
                _ => text(&e["reason"]),
            };
            let since = match e["since"]
                .as_str()
                .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            {
                Some(t) => format!(" since {} ({})", rfc3339(t), relative(t, now)),
                None => String::new(),
            };
            [
                text(&e["cluster"]),
                text(&e["address"]),
                format!("{why}{since}"),
            ]
        })
        .collect();
    let mut out = "Unhealthy endpoints (as this sidecar sees them):\n".to_owned();
    for line in aligned(&rows).lines() {
        let _ = writeln!(out, "  {line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use serde_json::json;

    use super::*;

    #[test]
    fn each_endpoint_is_named_with_its_cluster_reason_and_since() {
        let now = humantime::parse_rfc3339("2026-12-05T23:13:00Z").unwrap();
        let status = json!({"unhealthyEndpoints": [
            {"cluster": "backend", "address": "127.0.0.1:5001", "reason": "HealthCheck",
             "since": "2026-12-05T23:10:00Z"},
            {"cluster": "db", "address": "10.0.0.12:5432", "reason": "Outlier",
             "since": "2026-12-05T23:12:59Z"}]});
        assert_eq!(
            unhealthy_endpoints(&status, now),
            "Unhealthy endpoints (as this sidecar sees them):\n\
             \x20 backend   127.0.0.1:5001   failing its health check since 2026-12-05T23:10:00Z (3m ago)\n\
             \x20 db        10.0.0.12:5432   ejected by outlier detection since 2026-12-05T23:12:59Z (just now)\n"
        );
    }

    #[test]
    fn nothing_is_printed_without_unhealthy_endpoints() {
        let now = UNIX_EPOCH + Duration::from_secs(1_796_000_000);
        assert_eq!(unhealthy_endpoints(&json!({"online": true}), now), "");
        assert_eq!(
            unhealthy_endpoints(&json!({"unhealthyEndpoints": []}), now),
            ""
        );
        assert_eq!(unhealthy_endpoints(&Value::Null, now), "");
    }
}

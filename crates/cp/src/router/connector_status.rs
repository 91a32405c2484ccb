//! A Connector's `Ready`: whether the site's router can connect to its
//! targets. The router records every connection to a target (a flow's,
//! and its own probe's: each target when the Connector is configured,
//! then, while it fails, with backoff) and reports the targets whose last
//! connection failed, with the OS error and since when
//! (`RouterReport.connector_failures`). Ready is False while any target
//! fails, or while there is none (a `selector` that picks no Dataplane),
//! or while the router is not reporting; Unknown (`Probing`) while the
//! router has a target it has not tried yet (`connectors_probing`); True
//! once every target answered.
//!
//! Owns only this rule; the router status task ([`super::status`]) calls
//! it in its flush. It never writes the Connector's other fields.

use std::time::{Duration, UNIX_EPOCH};

use meshlink_api::{Condition, ConditionStatus, Resource};
use meshlink_xds::certify::{ConnectorFailure, RouterReport};

/// A Connector's `Ready`. `targets` is how many addresses the router was
/// given for it (1 with `host`, else the Dataplanes its selector picked);
/// `router_down` says why the router is not reporting, if it is not.
pub(crate) fn connector_ready(
    c: &Resource,
    targets: usize,
    report: Option<&RouterReport>,
    router_down: Option<&str>,
) -> Condition {
    let Some(report) = report else {
        return Condition::now(
            "Ready",
            ConditionStatus::False,
            "RouterNotConnected",
            router_down.unwrap_or("this site's router is not reporting"),
        );
    };
    let spec = c.spec.as_connector();
    if targets == 0 {
        let selector = spec.and_then(|s| s.selector.clone()).unwrap_or_default();
        return Condition::now(
            "Ready",
            ConditionStatus::False,
            "NoTargets",
            format!(
                "selector {selector:?} picks no online Dataplane in this site, so the router has \
                 nowhere to connect; start one whose inbound tags match (or set \
                 includeNotReady)"
            ),
        );
    }
    let failing: Vec<&ConnectorFailure> = report
        .connector_failures
        .iter()
        .filter(|f| f.name == c.name())
        .collect();
    if failing.is_empty() {
        let to = match spec.and_then(|s| s.host.as_ref().map(|h| (h, s.port.get()))) {
            Some((host, port)) => format!("{host}:{port}"),
            None => format!("its {targets} target(s)"),
        };
        if report.connectors_probing.iter().any(|n| n == c.name()) {
            return Condition::now(
                "Ready",
                ConditionStatus::Unknown,
                "Probing",
                format!(
                    "the site's router is trying {to} for the first time (at most 5 s per target)"
                ),
            );
        }
        return Condition::now(
            "Ready",
            ConditionStatus::True,
            "TargetReachable",
            format!("the site's router connects to {to}"),
        );
    }
    let each: Vec<String> = failing
        .iter()
        .map(|f| {
            format!(
                "{}: {} (failing since {})",
                f.target,
                f.message,
                since(f.since_unix_seconds)
            )
        })
        .collect();
    let message = if targets == 1 {
        format!("the site's router cannot connect to {}", each.join("; "))
    } else {
        format!(
            "the site's router cannot connect to {} of its {targets} targets: {}",
            failing.len(),
            each.join("; ")
        )
    };
    Condition::now(
        "Ready",
        ConditionStatus::False,
        "TargetUnreachable",
        message,
    )
}

/// Unix seconds as RFC 3339.
fn since(unix_seconds: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_secs(u64::try_from(unix_seconds).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn connector(spec: serde_json::Value) -> Resource {
        Resource::from_json(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": "db"}, "spec": spec,
        }))
        .unwrap()
    }

    fn failure(target: &str) -> ConnectorFailure {
        ConnectorFailure {
            name: "db".into(),
            target: target.into(),
            message: "Connection refused (os error 111)".into(),
            since_unix_seconds: 1_700_000_000,
        }
    }

    #[test]
    fn a_refused_target_names_the_address_the_os_error_and_since_when() {
        let c = connector(json!({"routingKey": "db", "host": "127.0.0.1", "port": 5432}));
        let mut report = RouterReport::default();
        let ok = connector_ready(&c, 1, Some(&report), None);
        assert_eq!(ok.status, ConditionStatus::True);
        assert_eq!(ok.message, "the site's router connects to 127.0.0.1:5432");
        report.connector_failures.push(failure("127.0.0.1:5432"));
        // Another Connector's failure is not this one's.
        report.connector_failures.push(ConnectorFailure {
            name: "other".into(),
            ..failure("127.0.0.1:1")
        });
        let bad = connector_ready(&c, 1, Some(&report), None);
        assert_eq!(
            (bad.status, bad.reason.as_str(), bad.message.as_str()),
            (
                ConditionStatus::False,
                "TargetUnreachable",
                "the site's router cannot connect to 127.0.0.1:5432: Connection refused (os \
                 error 111) (failing since 2023-11-14T22:13:20Z)"
            )
        );
    }

    #[test]
    fn a_selector_counts_its_targets_and_one_with_none_is_not_ready() {
        let c = connector(json!({"routingKey": "db", "port": 8080, "selector": "app=db"}));
        let report = RouterReport {
            connector_failures: vec![failure("10.0.0.2:8080")],
            ..Default::default()
        };
        let bad = connector_ready(&c, 3, Some(&report), None);
        assert!(
            bad.message.starts_with(
                "the site's router cannot connect to 1 of its 3 targets: 10.0.0.2:8080"
            ),
            "{}",
            bad.message
        );
        let none = connector_ready(&c, 0, Some(&RouterReport::default()), None);
        assert_eq!(
            (none.status, none.reason.as_str()),
            (ConditionStatus::False, "NoTargets")
        );
        assert!(none.message.contains("\"app=db\""), "{}", none.message);
    }

    #[test]
    fn a_target_not_tried_yet_is_neither_reachable_nor_unreachable() {
        let c = connector(json!({"routingKey": "db", "host": "127.0.0.1", "port": 5432}));
        let mut report = RouterReport {
            connectors_probing: vec!["db".into()],
            ..Default::default()
        };
        let probing = connector_ready(&c, 1, Some(&report), None);
        assert_eq!(
            (probing.status, probing.reason.as_str()),
            (ConditionStatus::Unknown, "Probing")
        );
        // A failure of another target says more than a probe in flight.
        report.connector_failures.push(failure("127.0.0.1:5432"));
        let bad = connector_ready(&c, 1, Some(&report), None);
        assert_eq!(bad.reason, "TargetUnreachable");
    }

    #[test]
    fn without_a_report_nothing_is_known() {
        let c = connector(json!({"routingKey": "db", "host": "db", "port": 5432}));
        let down = connector_ready(&c, 1, None, Some("not reporting (since T)"));
        assert_eq!(
            (down.status, down.reason.as_str(), down.message.as_str()),
            (
                ConditionStatus::False,
                "RouterNotConnected",
                "not reporting (since T)"
            )
        );
    }
}

//! Unit tests of `app_reachable.rs`: reports, the newest stream's end,
//! declared health, and the merge keeping the stored list without a claim
//! or a report.

use super::*;

const T0: Duration = Duration::from_secs(1_800_000_000);

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + T0 + Duration::from_secs(secs)
}

fn app(port: u16, reachable: bool, down_for: u64) -> ReportedApp {
    ReportedApp {
        port,
        address: format!("127.0.0.1:{}", port + 1000),
        reachable,
        error: if reachable {
            String::new()
        } else {
            "Connection refused (os error 111)".into()
        },
        unreachable_for: Duration::from_secs(down_for),
    }
}

#[test]
fn a_report_sets_the_condition_and_keeps_since_while_it_lasts() {
    let mut f = AppFacts::default();
    assert!(f.condition().is_none(), "no report: nothing to say");
    assert!(f.apply_report(1, &[app(8080, true, 0)], &[], at(0)));
    let c = f.condition().expect("a condition");
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::True, "Reachable")
    );
    assert!(f.not_ready().is_none());

    assert!(f.apply_report(1, &[app(8080, false, 3)], &[], at(10)));
    let c = f.condition().expect("a condition");
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, "AppUnreachable")
    );
    for part in [
        "inbound 8080",
        "127.0.0.1:9080",
        "os error 111",
        &rfc3339(at(7)),
    ] {
        assert!(c.message.contains(part), "{part} missing: {}", c.message);
    }
    assert_eq!(f.not_ready().map(|r| r.0), Some("AppUnreachable"));
    // The same outage reported again (a new stream says 20 s): same since.
    assert!(!f.apply_report(2, &[app(8080, false, 20)], &[], at(30)));
    assert_eq!(f.unreachable()[0].since, rfc3339(at(7)));
    // A report of an older stream is stale.
    assert!(!f.apply_report(1, &[app(8080, true, 0)], &[], at(31)));
    assert_eq!(f.unreachable().len(), 1);
    // Back.
    assert!(f.apply_report(2, &[app(8080, true, 0)], &[], at(40)));
    assert!(f.unreachable().is_empty());
    assert_eq!(f.condition().unwrap().status, ConditionStatus::True);
}

#[test]
fn only_the_newest_streams_end_clears_the_report() {
    let mut f = AppFacts::default();
    f.apply_report(3, &[app(8080, false, 0)], &[], at(0));
    assert!(!f.stream_ended(2), "an older stream");
    assert!(f.condition().is_some());
    assert!(f.stream_ended(3));
    assert!(f.condition().is_none(), "the stored condition stands");
    assert!(f.not_ready().is_none());
}

fn spec(health: serde_json::Value) -> DataplaneSpec {
    let r = meshlink_api::Resource::from_json(serde_json::json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": "b", "mesh": "default"},
        "spec": {"networking": {"address": "10.0.0.1", "inbound": [
            {"port": 8080, "name": "http", "health": health, "tags": {"kuma.io/service": "b"}},
            {"port": 8081, "tags": {"kuma.io/service": "b"}},
        ]}},
    }))
    .expect("valid");
    r.spec.as_dataplane().cloned().expect("a Dataplane")
}

#[test]
fn a_declared_not_ready_inbound_is_named_after_an_unreachable_app() {
    let mut f = AppFacts::default();
    assert!(f.set_declared(&spec(serde_json::json!({"ready": false}))));
    assert!(!f.set_declared(&spec(serde_json::json!({"ready": false}))));
    let (reason, msg) = f.not_ready().expect("not ready");
    assert_eq!(reason, "InboundNotReady");
    assert!(msg.contains("inbound 8080 (http)"), "{msg}");
    f.apply_report(1, &[app(8081, false, 0)], &[], at(0));
    assert_eq!(f.not_ready().map(|r| r.0), Some("AppUnreachable"));
    assert!(f.set_declared(&spec(serde_json::json!({"ready": true}))));
    f.apply_report(1, &[app(8081, true, 0)], &[], at(1));
    assert!(f.not_ready().is_none());
}

#[test]
fn without_the_claim_or_a_report_the_stored_list_stands() {
    let stored = DataplaneStatus {
        unreachable_apps: vec![UnreachableApp {
            port: 8080,
            address: "127.0.0.1:9080".into(),
            error: "refused".into(),
            since: rfc3339(at(0)),
        }],
        unhealthy_endpoints: vec![UnhealthyEndpoint {
            cluster: "backend".into(),
            address: "10.0.0.2:15000".into(),
            reason: "HealthCheck".into(),
            since: rfc3339(at(0)),
        }],
        ..Default::default()
    };
    let c = Condition::now(APP_REACHABLE, ConditionStatus::True, "Reachable", "ok");
    for (claimed, app) in [(false, Some(&c)), (true, None)] {
        let mut m = DataplaneStatus::default();
        assert!(merged(app, &stored, &mut m, claimed).is_none());
        assert_eq!(m.unreachable_apps, stored.unreachable_apps);
        assert_eq!(m.unhealthy_endpoints, stored.unhealthy_endpoints);
    }
    let mut m = DataplaneStatus::default();
    assert_eq!(merged(Some(&c), &stored, &mut m, true), Some(c));
    assert!(
        m.unreachable_apps.is_empty() && m.unhealthy_endpoints.is_empty(),
        "the report's lists are written"
    );
}

#[test]
fn unhealthy_endpoints_change_the_facts_and_keep_since_while_they_last() {
    let failing = |for_secs| ReportedEndpoint {
        cluster: "backend".into(),
        address: "10.0.0.2:15000".into(),
        reason: "HealthCheck".into(),
        unhealthy_for: Duration::from_secs(for_secs),
    };
    let mut f = AppFacts::default();
    assert!(f.apply_report(1, &[app(8080, true, 0)], &[], at(0)));
    assert!(f.unhealthy_endpoints().is_empty());
    // Only the endpoints changed: still a change to write.
    assert!(f.apply_report(1, &[app(8080, true, 0)], &[failing(2)], at(10)));
    let listed = f.unhealthy_endpoints();
    assert_eq!(
        (listed[0].address.as_str(), listed[0].since.clone()),
        ("10.0.0.2:15000", rfc3339(at(8)))
    );
    // A later report (a new stream too) of the same endpoint: no change.
    assert!(!f.apply_report(2, &[app(8080, true, 0)], &[failing(25)], at(30)));
    assert_eq!(f.unhealthy_endpoints()[0].since, rfc3339(at(8)));
    // The stream ends: nothing to write (the stored list stands).
    assert!(f.stream_ended(2));
    assert!(f.unhealthy_endpoints().is_empty() && f.condition().is_none());
    // The sidecar's next stream reports it still failing: the same since.
    assert!(f.apply_report(3, &[app(8080, true, 0)], &[failing(33)], at(42)));
    assert_eq!(f.unhealthy_endpoints()[0].since, rfc3339(at(8)));
    // It passes again: the next report's list is empty.
    assert!(f.apply_report(3, &[app(8080, true, 0)], &[], at(50)));
    assert!(f.unhealthy_endpoints().is_empty() && f.condition().is_some());
}

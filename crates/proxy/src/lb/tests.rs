//! The balancer: policies, ejection, panic and active health checks.

use std::time::Duration;

use super::*;

fn addrs(n: u16) -> Vec<SocketAddr> {
    (0..n)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], 1000 + i)))
        .collect()
}

fn builtin(n: u16) -> Balancer {
    Balancer::new(
        LbPolicy::RoundRobin,
        &addrs(n),
        OutlierSpec::builtin(),
        None,
    )
}

#[tokio::test(start_paused = true)]
async fn round_robin_spreads_and_skips_ejected_endpoints() {
    let b = builtin(2);
    let now = Instant::now();
    let firsts: Vec<_> = (0..4)
        .map(|_| b.attempt_order(now)[0].addr.port())
        .collect();
    assert_eq!(firsts, [1000, 1001, 1000, 1001]);
    let bad = b.attempt_order(now)[0].clone();
    assert!(b.record(&bad, Event::ConnectFailed, now).is_empty());
    assert_eq!(
        b.record(&bad, Event::ConnectFailed, now),
        [(bad.addr, DetectorKind::ConsecutiveGatewayFailure)],
        "the built-in rule: a second failure in a row ejects"
    );
    for _ in 0..4 {
        assert_ne!(b.attempt_order(now)[0].addr, bad.addr);
        assert_ne!(b.pick(now).unwrap().addr, bad.addr);
    }
    tokio::time::advance(Duration::from_secs(5) + Duration::from_millis(1)).await;
    assert!(!bad.is_ejected(Instant::now()), "ejection ends");
}

#[tokio::test(start_paused = true)]
async fn all_ejected_are_still_tried_and_health_survives_updates() {
    let b = builtin(1);
    let now = Instant::now();
    let e = b.attempt_order(now)[0].clone();
    b.record(&e, Event::ConnectFailed, now);
    b.record(&e, Event::ConnectFailed, now);
    assert!(e.is_ejected(now));
    assert_eq!(
        b.attempt_order(now).len(),
        1,
        "the only endpoint is still tried"
    );
    assert_eq!(b.pick(now).unwrap().addr, e.addr);
    let rebuilt = Balancer::new(
        LbPolicy::RoundRobin,
        &addrs(2),
        OutlierSpec::builtin(),
        Some(&b),
    );
    assert!(rebuilt.attempt_order(now).last().unwrap().is_ejected(now));
}

#[tokio::test(start_paused = true)]
async fn below_the_panic_threshold_ejected_endpoints_take_traffic_again() {
    let spec = OutlierSpec {
        consecutive_5xx: 1,
        max_ejection_percent: 100,
        ..OutlierSpec::default()
    };
    let b = Balancer::new(LbPolicy::RoundRobin, &addrs(4), spec, None);
    let now = Instant::now();
    let (one, two) = (b.endpoints[0].clone(), b.endpoints[1].clone());
    b.record(&one, Event::Response(500), now);
    // 3 of 4 healthy (75 % >= 50 %): the ejected one is skipped.
    assert!((0..8).all(|_| b.pick(now).unwrap().addr != one.addr));
    b.record(&two, Event::Response(500), now);
    b.record(&b.endpoints[2].clone(), Event::Response(500), now);
    // 1 of 4 healthy (25 % < 50 %): panic, every endpoint in turn.
    let picked: std::collections::BTreeSet<_> = (0..8).map(|_| b.pick(now).unwrap().addr).collect();
    assert_eq!(picked.len(), 4, "{picked:?}");
}

#[test]
fn least_request_prefers_the_idle_endpoint() {
    let b = Balancer::new(
        LbPolicy::LeastRequest,
        &addrs(2),
        OutlierSpec::builtin(),
        None,
    );
    let now = Instant::now();
    let busy = b.endpoints[0].clone();
    let _guards: Vec<_> = (0..10).map(|_| busy.start()).collect();
    let idle_first = (0..200)
        .filter(|_| b.attempt_order(now)[0].addr == b.endpoints[1].addr)
        .count();
    // Two random choices pick the busy one only when both draws are it.
    assert!(idle_first > 100, "idle endpoint first in {idle_first}/200");
}

#[test]
fn with_active_checks_only_endpoints_that_passed_take_traffic() {
    let b = builtin(3).with_active_checks(true);
    let now = Instant::now();
    let [good, pending, bad] = [0, 1, 2].map(|i| b.endpoints[i].clone());
    assert!(!b.has_carried_traffic());
    // No check done yet: none passes, so all are tried anyway.
    let picked: std::collections::BTreeSet<_> = (0..6).map(|_| b.pick(now).unwrap().addr).collect();
    assert_eq!(picked.len(), 3);
    assert!(b.has_carried_traffic());
    good.set_checked_health(CheckedHealth::Healthy);
    bad.set_checked_health(CheckedHealth::Unhealthy);
    for _ in 0..6 {
        assert_eq!(
            b.pick(now).unwrap().addr,
            good.addr,
            "pending and unhealthy are out"
        );
        assert_eq!(b.attempt_order(now)[0].addr, good.addr);
    }
    pending.set_checked_health(CheckedHealth::Healthy);
    for _ in 0..6 {
        assert_ne!(b.pick(now).unwrap().addr, bad.addr);
        assert_eq!(b.attempt_order(now).last().unwrap().addr, bad.addr);
    }
    let rebuilt = Balancer::new(
        LbPolicy::RoundRobin,
        &addrs(3),
        OutlierSpec::builtin(),
        Some(&b),
    );
    assert!(rebuilt.has_carried_traffic(), "kept across rebuilds");
    assert!(
        rebuilt.is_eligible(&bad, now),
        "without active checks the standing is ignored"
    );
}

#[test]
fn endpoints_failing_active_checks_count_against_the_panic_threshold() {
    let spec = OutlierSpec {
        healthy_panic_threshold: 5000,
        ..OutlierSpec::builtin()
    };
    let b = Balancer::new(LbPolicy::RoundRobin, &addrs(3), spec, None).with_active_checks(true);
    let now = Instant::now();
    b.endpoints[0].set_checked_health(CheckedHealth::Healthy);
    b.endpoints[2].set_checked_health(CheckedHealth::Unhealthy);
    // One of three healthy is below 50 %: panic, every endpoint in turn.
    let bad = b.endpoints[2].addr;
    assert_eq!(
        (0..6).filter(|_| b.pick(now).unwrap().addr == bad).count(),
        2
    );
    b.endpoints[1].set_checked_health(CheckedHealth::Healthy);
    assert_eq!(
        (0..6).filter(|_| b.pick(now).unwrap().addr == bad).count(),
        0
    );
}

#[test]
fn fail_traffic_on_panic_gives_no_endpoint_in_panic() {
    let spec = OutlierSpec {
        healthy_panic_threshold: 5000,
        fail_traffic_on_panic: true,
        ..OutlierSpec::builtin()
    };
    let b = Balancer::new(LbPolicy::RoundRobin, &addrs(2), spec, None).with_active_checks(true);
    let now = Instant::now();
    b.endpoints[0].set_checked_health(CheckedHealth::Healthy);
    assert_eq!(
        b.pick(now).unwrap().addr,
        b.endpoints[0].addr,
        "50 %: no panic"
    );
    b.endpoints[0].set_checked_health(CheckedHealth::Unhealthy);
    assert!(b.pick(now).is_none(), "in panic requests fail");
    assert!(b.attempt_order(now).is_empty());
}

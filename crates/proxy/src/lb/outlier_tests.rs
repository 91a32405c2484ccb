//! The detectors' arithmetic on paused time: consecutive counts and what
//! resets them, split and unsplit local failures, ejection times and their
//! cap, `max_ejection_percent`, and the interval sweeps (success rate and
//! failure percentage with their minimum hosts and volumes).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::super::Balancer;
use super::*;
use crate::model::LbPolicy;

fn balancer(n: u16, spec: OutlierSpec) -> Balancer {
    let addrs: Vec<SocketAddr> = (0..n)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], 2000 + i)))
        .collect();
    Balancer::new(LbPolicy::RoundRobin, &addrs, spec, None)
}

/// Only `kind`'s detector enforced, every endpoint ejectable.
fn only(kind: DetectorKind) -> OutlierSpec {
    let mut s = OutlierSpec {
        max_ejection_percent: 100,
        enforcing_consecutive_5xx: 0,
        enforcing_consecutive_gateway_failure: 0,
        enforcing_consecutive_local_origin_failure: 0,
        enforcing_success_rate: 0,
        enforcing_local_origin_success_rate: 0,
        enforcing_failure_percentage: 0,
        enforcing_failure_percentage_local_origin: 0,
        ..OutlierSpec::default()
    };
    match kind {
        DetectorKind::Consecutive5xx => s.enforcing_consecutive_5xx = 100,
        DetectorKind::ConsecutiveGatewayFailure => s.enforcing_consecutive_gateway_failure = 100,
        DetectorKind::ConsecutiveLocalOriginFailure => {
            s.enforcing_consecutive_local_origin_failure = 100
        }
        DetectorKind::SuccessRate => s.enforcing_success_rate = 100,
        DetectorKind::SuccessRateLocalOrigin => s.enforcing_local_origin_success_rate = 100,
        DetectorKind::FailurePercentage => s.enforcing_failure_percentage = 100,
        DetectorKind::FailurePercentageLocalOrigin => {
            s.enforcing_failure_percentage_local_origin = 100
        }
    }
    s
}

#[tokio::test(start_paused = true)]
async fn consecutive_5xx_ejects_on_the_nth_and_a_success_starts_the_count_again() {
    let spec = OutlierSpec {
        consecutive_5xx: 3,
        ..only(DetectorKind::Consecutive5xx)
    };
    let b = balancer(2, spec);
    let e = b.endpoints[0].clone();
    let now = Instant::now();
    b.record(&e, Event::Response(500), now);
    b.record(&e, Event::Response(503), now);
    b.record(&e, Event::Response(200), now);
    b.record(&e, Event::Response(500), now);
    b.record(&e, Event::Response(500), now);
    assert!(!e.is_ejected(now), "the 200 started the count again");
    assert_eq!(
        b.record(&e, Event::Response(502), now),
        [(e.addr, DetectorKind::Consecutive5xx)]
    );
    assert!(e.is_ejected(now));
    // 4xx are answers, not failures.
    let other = b.endpoints[1].clone();
    for _ in 0..5 {
        assert!(b.record(&other, Event::Response(404), now).is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn gateway_failures_count_502_to_504_and_unsplit_connect_failures() {
    let spec = OutlierSpec {
        consecutive_gateway_failure: 3,
        ..only(DetectorKind::ConsecutiveGatewayFailure)
    };
    let b = balancer(2, spec);
    let e = b.endpoints[0].clone();
    let now = Instant::now();
    b.record(&e, Event::Response(503), now);
    b.record(&e, Event::Response(500), now);
    b.record(&e, Event::Response(504), now);
    b.record(&e, Event::ConnectFailed, now);
    assert!(
        !e.is_ejected(now),
        "a 500 is not a gateway error and resets"
    );
    // A connection made for a request is no answer: it resets nothing.
    b.record(&e, Event::Connected { last: false }, now);
    assert_eq!(
        b.record(&e, Event::TimedOut, now),
        [(e.addr, DetectorKind::ConsecutiveGatewayFailure)],
        "unsplit, a timeout counts as 504"
    );
}

#[tokio::test(start_paused = true)]
async fn split_mode_counts_local_failures_apart_from_answers() {
    let spec = OutlierSpec {
        split_external_local_origin_errors: true,
        consecutive_local_origin_failure: 2,
        consecutive_5xx: 2,
        enforcing_consecutive_5xx: 100,
        ..only(DetectorKind::ConsecutiveLocalOriginFailure)
    };
    let b = balancer(3, spec);
    let now = Instant::now();
    let e = b.endpoints[0].clone();
    b.record(&e, Event::ConnectFailed, now);
    b.record(&e, Event::Response(500), now);
    assert!(!e.is_ejected(now), "one of each kind ejects nothing");
    b.record(&e, Event::Connected { last: false }, now);
    b.record(&e, Event::ConnectFailed, now);
    assert!(
        !e.is_ejected(now),
        "a connection made reset the local count"
    );
    assert_eq!(
        b.record(&e, Event::TimedOut, now),
        [(e.addr, DetectorKind::ConsecutiveLocalOriginFailure)]
    );
    let f = b.endpoints[1].clone();
    b.record(&f, Event::Response(500), now);
    assert_eq!(
        b.record(&f, Event::Response(500), now),
        [(f.addr, DetectorKind::Consecutive5xx)]
    );
}

#[tokio::test(start_paused = true)]
async fn ejection_time_grows_with_each_ejection_up_to_the_cap() {
    let spec = OutlierSpec {
        consecutive_5xx: 1,
        base_ejection_time: Duration::from_secs(30),
        max_ejection_time: Duration::from_secs(75),
        interval: Duration::from_secs(3600),
        ..only(DetectorKind::Consecutive5xx)
    };
    let b = balancer(2, spec);
    let e = b.endpoints[0].clone();
    for (n, lasts) in [(1, 30), (2, 60), (3, 75)] {
        let start = Instant::now();
        b.record(&e, Event::Response(500), start);
        assert!(e.is_ejected(start), "ejection {n}");
        let until = start + Duration::from_secs(lasts);
        assert!(
            e.is_ejected(until - Duration::from_millis(1)),
            "ejection {n}"
        );
        assert!(!e.is_ejected(until), "ejection {n} lasts {lasts}s");
        tokio::time::advance(Duration::from_secs(lasts)).await;
    }
    // While ejected, failures count for nothing.
    let now = Instant::now();
    b.record(&e, Event::Response(500), now);
    assert!(b.record(&e, Event::Response(500), now).is_empty());
}

#[tokio::test(start_paused = true)]
async fn max_ejection_percent_bounds_ejections_but_one_is_always_allowed() {
    let spec = OutlierSpec {
        consecutive_5xx: 1,
        max_ejection_percent: 10,
        ..only(DetectorKind::Consecutive5xx)
    };
    let b = balancer(4, spec);
    let now = Instant::now();
    let ejected: usize = b
        .endpoints
        .clone()
        .iter()
        .map(|e| b.record(e, Event::Response(500), now).len())
        .sum();
    assert_eq!(ejected, 1, "10 % of 4 allows none, but one always");
    let spec = OutlierSpec {
        consecutive_5xx: 1,
        max_ejection_percent: 50,
        ..only(DetectorKind::Consecutive5xx)
    };
    let b = balancer(4, spec);
    let ejected: usize = b
        .endpoints
        .clone()
        .iter()
        .map(|e| b.record(e, Event::Response(500), now).len())
        .sum();
    assert_eq!(ejected, 2, "half of 4");
}

/// Sends `ok` successes and `failed` 503s to endpoint `i`.
fn traffic(b: &Balancer, i: usize, ok: u32, failed: u32, now: Instant) {
    let e = b.endpoints[i].clone();
    for _ in 0..ok {
        b.record(&e, Event::Response(200), now);
    }
    for _ in 0..failed {
        b.record(&e, Event::Response(503), now);
    }
}

#[tokio::test(start_paused = true)]
async fn success_rate_ejects_below_mean_minus_factor_stdevs_at_the_interval() {
    let spec = OutlierSpec {
        interval: Duration::from_secs(10),
        success_rate_minimum_hosts: 5,
        success_rate_request_volume: 10,
        success_rate_stdev_factor: 1000,
        ..only(DetectorKind::SuccessRate)
    };
    let b = balancer(5, spec.clone());
    let now = Instant::now();
    for i in 0..4 {
        traffic(&b, i, 20, 0, now);
    }
    traffic(&b, 4, 10, 10, now);
    assert!(
        !b.endpoints[4].is_ejected(now),
        "nothing before the interval"
    );
    tokio::time::advance(Duration::from_secs(10)).await;
    let now = Instant::now();
    // Rates 100,100,100,100,50: mean 90, stdev 20, threshold 70.
    let ejected = b.record(&b.endpoints[0].clone(), Event::Response(200), now);
    assert_eq!(ejected, [(b.endpoints[4].addr, DetectorKind::SuccessRate)]);

    // Too few endpoints with enough volume: nobody is judged.
    let b = balancer(5, spec);
    let now = Instant::now();
    for i in 0..3 {
        traffic(&b, i, 20, 0, now);
    }
    traffic(&b, 3, 9, 0, now);
    traffic(&b, 4, 10, 10, now);
    tokio::time::advance(Duration::from_secs(10)).await;
    let now = Instant::now();
    assert!(
        b.record(&b.endpoints[0].clone(), Event::Response(200), now)
            .is_empty(),
        "only 4 endpoints reached the volume"
    );
}

#[tokio::test(start_paused = true)]
async fn failure_percentage_ejects_at_the_threshold_with_enough_volume() {
    let spec = OutlierSpec {
        interval: Duration::from_secs(5),
        failure_percentage_minimum_hosts: 2,
        failure_percentage_request_volume: 10,
        failure_percentage_threshold: 50,
        ..only(DetectorKind::FailurePercentage)
    };
    let b = balancer(3, spec);
    let now = Instant::now();
    traffic(&b, 0, 10, 0, now);
    traffic(&b, 1, 5, 5, now);
    traffic(&b, 2, 0, 9, now);
    tokio::time::advance(Duration::from_secs(5)).await;
    let now = Instant::now();
    let ejected = b.record(&b.endpoints[0].clone(), Event::Response(200), now);
    assert_eq!(
        ejected,
        [(b.endpoints[1].addr, DetectorKind::FailurePercentage)],
        "50 % failures ejects; 9 requests are below the volume"
    );
    // The windows started again: the next interval judges only new traffic.
    traffic(&b, 2, 10, 0, now);
    tokio::time::advance(Duration::from_secs(5)).await;
    let now = Instant::now();
    assert!(
        b.record(&b.endpoints[0].clone(), Event::Response(200), now)
            .is_empty()
    );
}

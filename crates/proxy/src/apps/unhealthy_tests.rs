//! Unit tests of `unhealthy.rs`: which endpoints are listed and why, the
//! first-seen instant kept while an entry stays, and the sampler
//! publishing only changes (paused time).

use std::collections::BTreeMap;

use super::*;
use crate::lb::Event;
use crate::model::circuit_breaker::OutlierSpec;
use crate::model::health_check::tcp_check;
use crate::model::{ClusterSpec, Discovery, LbPolicy, ProxyConfig, Versioned};

fn cluster(name: &str, addrs: &[SocketAddr], checked: bool) -> (String, Versioned<ClusterSpec>) {
    let spec = ClusterSpec {
        name: name.into(),
        discovery: Discovery::Static(addrs.to_vec()),
        tls: None,
        connect_timeout: Duration::from_secs(2),
        lb: LbPolicy::RoundRobin,
        http2: false,
        circuit_breakers: None,
        outlier_detection: OutlierSpec::builtin(),
        health_check: checked.then(|| tcp_check(Duration::from_secs(1))),
    };
    (
        name.to_owned(),
        Versioned {
            version: "v1".into(),
            value: Arc::new(spec),
        },
    )
}

/// A view with checked cluster `backend` over `b1` and `b2`, and
/// unchecked cluster `db` over `db`.
fn view(b1: SocketAddr, b2: SocketAddr, db: SocketAddr) -> Arc<Dataplane> {
    let config = ProxyConfig {
        clusters: BTreeMap::from([
            cluster("backend", &[b1, b2], true),
            cluster("db", &[db], false),
        ]),
        ..Default::default()
    };
    Arc::new(Dataplane::build(Arc::new(config), None, None))
}

fn endpoint(view: &Dataplane, cluster: &str, addr: SocketAddr) -> Arc<crate::lb::Endpoint> {
    let c = view.clusters.get(cluster).expect("cluster");
    let e = c.balancer.endpoints().iter().find(|e| e.addr == addr);
    e.expect("endpoint").clone()
}

/// Ejects `addr` of `cluster` with the built-in detector (two gateway
/// failures in a row).
fn eject(view: &Dataplane, cluster: &str, addr: SocketAddr) {
    let c = view.clusters.get(cluster).expect("cluster");
    let e = endpoint(view, cluster, addr);
    for _ in 0..2 {
        c.balancer.record(&e, Event::ConnectFailed, Instant::now());
    }
    assert!(e.is_ejected(Instant::now()), "ejected");
}

fn listed(u: &UnhealthyEndpoints) -> Vec<(String, String, &'static str, Instant)> {
    u.iter()
        .map(|((c, a, r), t)| (c.clone(), a.to_string(), r.as_str(), t))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn failing_checks_and_ejections_are_listed_with_when_first_seen_pending_never() {
    let (b1, b2, db) = (
        "10.0.0.1:15000".parse().unwrap(),
        "10.0.0.2:15000".parse().unwrap(),
        "10.0.0.3:5432".parse().unwrap(),
    );
    let v = view(b1, b2, db);
    let mut u = UnhealthyEndpoints::default();
    assert!(
        !u.observe(&v, Instant::now()),
        "pending endpoints are not unhealthy"
    );
    assert!(u.is_empty());

    let t0 = Instant::now();
    endpoint(&v, "backend", b1).set_checked_health(CheckedHealth::Unhealthy);
    endpoint(&v, "backend", b2).set_checked_health(CheckedHealth::Healthy);
    assert!(u.observe(&v, t0));
    assert_eq!(
        listed(&u),
        [(
            "backend".to_owned(),
            "10.0.0.1:15000".to_owned(),
            "HealthCheck",
            t0
        )]
    );
    tokio::time::advance(Duration::from_secs(3)).await;
    assert!(!u.observe(&v, Instant::now()), "time alone is no change");
    assert_eq!(listed(&u)[0].3, t0, "the first instant stays");

    // An ejection on the unchecked cluster, and on b1 too: one entry per
    // reason.
    let t1 = Instant::now();
    eject(&v, "db", db);
    eject(&v, "backend", b1);
    assert!(u.observe(&v, t1));
    assert_eq!(
        listed(&u),
        [
            (
                "backend".to_owned(),
                "10.0.0.1:15000".to_owned(),
                "HealthCheck",
                t0
            ),
            (
                "backend".to_owned(),
                "10.0.0.1:15000".to_owned(),
                "Outlier",
                t1
            ),
            ("db".to_owned(), "10.0.0.3:5432".to_owned(), "Outlier", t1),
        ]
    );

    // The ejections end (the built-in base ejection time is 5 s) and b1
    // passes: nothing is listed.
    tokio::time::advance(Duration::from_secs(6)).await;
    endpoint(&v, "backend", b1).set_checked_health(CheckedHealth::Healthy);
    assert!(u.observe(&v, Instant::now()));
    assert!(u.is_empty(), "{:?}", listed(&u));
}

#[tokio::test(start_paused = true)]
async fn the_sampler_publishes_a_change_within_a_tick_and_only_changes() {
    let (b1, b2, db) = (
        "10.0.0.1:15000".parse().unwrap(),
        "10.0.0.2:15000".parse().unwrap(),
        "10.0.0.3:5432".parse().unwrap(),
    );
    let v = view(b1, b2, db);
    let (_view_tx, view_rx) = watch::channel(v.clone());
    let (tx, mut rx) = watch::channel(Arc::new(UnhealthyEndpoints::default()));
    let cancel = CancellationToken::new();
    let task = tokio::spawn(run(view_rx, tx, cancel.clone()));

    endpoint(&v, "backend", b2).set_checked_health(CheckedHealth::Unhealthy);
    rx.changed().await.expect("a change");
    let first = rx.borrow_and_update().clone();
    assert_eq!(listed(&first).len(), 1);
    assert_eq!(listed(&first)[0].1, "10.0.0.2:15000");

    // Ten ticks without a change publish nothing.
    tokio::time::advance(SAMPLE_EVERY * 10).await;
    tokio::task::yield_now().await;
    assert!(!rx.has_changed().unwrap());

    endpoint(&v, "backend", b2).set_checked_health(CheckedHealth::Healthy);
    rx.changed().await.expect("a change");
    assert!(rx.borrow().is_empty());
    cancel.cancel();
    task.await.expect("the sampler ends");
}

//! The checker's tasks follow the view: one per checked endpoint, an
//! endpoint's standing follows its checks (a TCP check of a listening
//! port passes, of a closed one fails), and a cluster that goes away
//! takes its tasks with it.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::model::circuit_breaker::OutlierSpec;
use crate::model::health_check::tcp_check;
use crate::model::{ClusterSpec, Discovery, LbPolicy, ProxyConfig, Versioned};

/// A failure deadline, never a timing bound.
const DEADLINE: Duration = Duration::from_secs(20);

/// A view with static cluster `backend` over `addrs` (with `tcp_check`'s
/// check when `checked`), keeping the endpoints of `previous`.
fn view(addrs: &[SocketAddr], checked: bool, previous: Option<&Dataplane>) -> Arc<Dataplane> {
    let cluster = ClusterSpec {
        name: "backend".into(),
        discovery: Discovery::Static(addrs.to_vec()),
        tls: None,
        connect_timeout: Duration::from_secs(2),
        lb: LbPolicy::RoundRobin,
        http2: false,
        circuit_breakers: None,
        outlier_detection: OutlierSpec::builtin(),
        health_check: checked.then(|| tcp_check(Duration::from_millis(20))),
    };
    let config = ProxyConfig {
        clusters: BTreeMap::from([(
            "backend".to_owned(),
            Versioned {
                version: "v1".into(),
                value: Arc::new(cluster),
            },
        )]),
        ..Default::default()
    };
    Arc::new(Dataplane::build(Arc::new(config), None, previous))
}

async fn standing(rx: &watch::Receiver<Arc<Dataplane>>, addr: SocketAddr) -> CheckedHealth {
    let dp = rx.borrow().clone();
    let cluster = dp.clusters.get("backend").expect("cluster");
    let e = cluster.balancer.endpoints().iter().find(|e| e.addr == addr);
    e.expect("endpoint").checked_health()
}

#[tokio::test]
async fn tasks_follow_the_view_and_endpoints_their_checks() {
    let listening = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = listening.local_addr().unwrap();
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (tx, rx) = watch::channel(view(&[up, down], true, None));
    let checker = HealthChecker {
        dataplane: rx.clone(),
        metrics: Arc::new(ProxyMetrics::default()),
    };
    let stop = CancellationToken::new();
    let mut running = HashMap::new();
    let mut tasks = JoinSet::new();
    checker.reconcile(&rx.borrow().clone(), &mut running, &mut tasks, &stop);
    assert_eq!(
        (running.len(), tasks.len()),
        (2, 2),
        "one task per endpoint"
    );
    let accept = tokio::spawn(async move {
        loop {
            let _ = listening.accept().await;
        }
    });
    tokio::time::timeout(DEADLINE, async {
        while (standing(&rx, up).await, standing(&rx, down).await)
            != (CheckedHealth::Healthy, CheckedHealth::Unhealthy)
        {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the listening endpoint healthy, the closed one unhealthy");
    let dp = rx.borrow().clone();
    let balancer = &dp.clusters["backend"].balancer;
    let now = tokio::time::Instant::now();
    for _ in 0..4 {
        assert_eq!(balancer.pick(now).unwrap().addr, up, "only the healthy one");
    }

    // Same endpoints, same check: nothing restarts.
    tx.send_replace(view(&[up, down], true, Some(&dp)));
    checker.reconcile(&rx.borrow().clone(), &mut running, &mut tasks, &stop);
    assert_eq!(tasks.len(), 2);
    // The check removed: both tasks end, and the standing is forgotten.
    let same = rx.borrow().clone();
    tx.send_replace(view(&[up, down], false, Some(&same)));
    checker.reconcile(&rx.borrow().clone(), &mut running, &mut tasks, &stop);
    assert!(running.is_empty());
    tokio::time::timeout(DEADLINE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await
    .expect("the cancelled tasks end");
    assert_eq!(standing(&rx, up).await, CheckedHealth::Pending);
    accept.abort();
}

//! A connector whose target refuses connections shows in the router's
//! status with the OS error, found by the router's own probe without any
//! flow; it clears once the target accepts (probe or flow), and a flow
//! that fails puts it back. Real TCP on loopback.

mod support;

use std::net::SocketAddr;

use meshlink_link::{ConnectorConfig, ConnectorTarget, Router, RouterConfig, RouterStatus};
use support::*;
use tokio::net::TcpListener;

/// A loopback port nothing listens on (bound, then released).
async fn closed_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

fn config(addr: SocketAddr) -> RouterConfig {
    RouterConfig {
        connectors: vec![ConnectorConfig {
            name: "db".into(),
            routing_key: "db".into(),
            targets: vec![ConnectorTarget {
                host: addr.ip().to_string(),
                port: addr.port(),
            }],
        }],
        ..Default::default()
    }
}

fn failure(s: &RouterStatus, addr: SocketAddr) -> Option<String> {
    s.connector_failures
        .get("db")
        .and_then(|f| f.get(&addr.to_string()))
        .map(|f| f.error.clone())
}

async fn wait_failing(r: &Router, addr: SocketAddr) -> String {
    let s = wait_status(r, "connector db failing", |s| failure(s, addr).is_some()).await;
    failure(&s, addr).unwrap()
}

async fn wait_healthy(r: &Router) {
    wait_status(r, "no connector failing", |s| {
        s.connector_failures.is_empty()
    })
    .await;
}

#[tokio::test]
async fn a_refusing_target_is_reported_without_traffic_and_clears_once_it_accepts() {
    let addr = closed_port().await;
    let r = router("r");
    assert!(r.apply(&config(addr)).is_empty());
    let error = wait_failing(&r, addr).await;
    assert!(error.to_lowercase().contains("refused"), "{error}");

    // The target starts: the probe (backing off from 1 s) finds it.
    let _target = TcpListener::bind(addr).await.unwrap();
    wait_healthy(&r).await;
    r.shutdown(DEADLINE).await;
}

#[tokio::test]
async fn a_failed_flow_reports_the_target_and_a_removed_connector_takes_its_failure_along() {
    let target = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = target.local_addr().unwrap();
    let r = router("r");
    assert!(r.apply(&config(addr)).is_empty());
    wait_watch(r.routes(), "the local key routed", |t| {
        t.destinations.contains_key("db")
    })
    .await;
    assert!(r.status().borrow().connector_failures.is_empty());

    // The target goes: the next flow fails and says why.
    drop(target);
    let err = r.open_flow("db").await.expect_err("nothing listens");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
    let error = wait_failing(&r, addr).await;
    assert!(error.to_lowercase().contains("refused"), "{error}");

    // The Connector is removed: its failure goes with it.
    assert!(r.apply(&RouterConfig::default()).is_empty());
    wait_healthy(&r).await;
    r.shutdown(DEADLINE).await;
}

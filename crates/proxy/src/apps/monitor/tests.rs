//! The monitor against real sockets: an application that listens is
//! reachable, one that stops is found unreachable at once after a
//! data-path report (with the OS error), and reachable again when it
//! listens again; the inbounds come from the configuration. Waits are on
//! the state channel, with a deadline that only fails the test.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::AppMonitor;
use crate::apps::{AppMetrics, AppState, AppStates, targets};
use crate::model::{
    ClusterSpec, Direction, Discovery, LbPolicy, ListenerProtocol, ListenerSpec, ProxyConfig,
    Versioned,
};
use crate::xds::apply::LISTENER;

/// Fails the test, never a timing bound.
const DEADLINE: Duration = Duration::from_secs(20);

fn versioned<T>(value: T) -> Versioned<T> {
    Versioned {
        version: "v1".into(),
        value: Arc::new(value),
    }
}

fn listener(name: &str, port: u16, direction: Direction, cluster: &str) -> Versioned<ListenerSpec> {
    versioned(ListenerSpec {
        name: name.into(),
        address: format!("127.0.0.1:{port}").parse().unwrap(),
        direction,
        tls: None,
        connection_rate_limit: None,
        rbac: Vec::new(),
        rbac_per_request: false,
        bind: true,
        original_dst: false,
        protocol: ListenerProtocol::Tcp {
            cluster: cluster.into(),
            weighted: Vec::new(),
            max_connect_attempts: None,
            idle_timeout: None,
        },
    })
}

fn cluster(name: &str, discovery: Discovery) -> Versioned<ClusterSpec> {
    versioned(ClusterSpec {
        name: name.into(),
        discovery,
        tls: None,
        connect_timeout: Duration::from_secs(1),
        lb: LbPolicy::RoundRobin,
        http2: false,
        circuit_breakers: None,
        outlier_detection: crate::model::circuit_breaker::OutlierSpec::builtin(),
        health_check: None,
    })
}

/// An inbound on 15000 to the app at `app`, and an outbound (not probed).
fn config(app: SocketAddr) -> ProxyConfig {
    ProxyConfig {
        listeners: BTreeMap::from([
            (
                "inbound:127.0.0.1:15000".to_owned(),
                listener(
                    "inbound:127.0.0.1:15000",
                    15000,
                    Direction::Inbound,
                    "local",
                ),
            ),
            (
                "outbound:127.0.0.1:10001".to_owned(),
                listener(
                    "outbound:127.0.0.1:10001",
                    10001,
                    Direction::Outbound,
                    "backend",
                ),
            ),
        ]),
        clusters: BTreeMap::from([
            (
                "local".to_owned(),
                cluster("local", Discovery::Static(vec![app])),
            ),
            ("backend".to_owned(), cluster("backend", Discovery::Eds)),
        ]),
        received: BTreeSet::from([LISTENER.to_owned()]),
        ..ProxyConfig::default()
    }
}

#[test]
fn only_inbounds_are_targets_with_their_local_app() {
    let app: SocketAddr = "127.0.0.1:9080".parse().unwrap();
    let t = targets(&config(app));
    assert_eq!(
        t,
        BTreeMap::from([("inbound:127.0.0.1:15000".to_owned(), (15000, app))])
    );
}

async fn wait_for(
    rx: &mut watch::Receiver<Arc<AppStates>>,
    what: &str,
    f: impl FnMut(&Arc<AppStates>) -> bool,
) -> Arc<AppStates> {
    match tokio::time::timeout(DEADLINE, rx.wait_for(f)).await {
        Ok(r) => r.expect("monitor running").clone(),
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

fn state_of(s: &AppStates) -> Option<&AppState> {
    s.inbounds.get("inbound:127.0.0.1:15000").map(|a| &a.state)
}

#[tokio::test]
async fn an_app_that_stops_is_unreachable_after_a_refusal_and_reachable_when_it_is_back() {
    let app = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = app.local_addr().unwrap();
    let (_config_tx, config_rx) = watch::channel(Arc::new(config(addr)));
    // No periodic probes: only the data path's report finds the outage.
    let metrics = AppMetrics::default();
    let (health, monitor) = AppMonitor::new(config_rx, Duration::ZERO, metrics.clone());
    let cancel = CancellationToken::new();
    let task = tokio::spawn(monitor.run(cancel.clone()));
    let mut rx = health.states();

    let s = wait_for(&mut rx, "the first probe", |s| s.settled).await;
    assert_eq!(state_of(&s), Some(&AppState::Reachable));
    assert_eq!(s.inbounds.len(), 1, "the outbound is not probed: {s:?}");

    drop(app);
    health.refused("inbound:127.0.0.1:15000");
    let s = wait_for(&mut rx, "the outage", |s| {
        matches!(state_of(s), Some(AppState::Unreachable { .. }))
    })
    .await;
    let Some(AppState::Unreachable { error, .. }) = state_of(&s) else {
        unreachable!()
    };
    assert!(error.contains("refused"), "{error}");
    let lines = s.unreachable_lines(tokio::time::Instant::now());
    assert!(lines[0].contains(&addr.to_string()), "{lines:?}");
    let labels = crate::apps::InboundLabels {
        inbound: "inbound:127.0.0.1:15000".into(),
    };
    assert_eq!(metrics.reachable.get_or_create(&labels).get(), 0);

    // Back on the same port: the backoff probes find it.
    let _app = TcpListener::bind(addr).await.unwrap();
    wait_for(&mut rx, "the application to be back", |s| {
        state_of(s) == Some(&AppState::Reachable)
    })
    .await;
    assert_eq!(metrics.reachable.get_or_create(&labels).get(), 1);
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn not_settled_before_the_listeners_arrive() {
    let mut empty = ProxyConfig::default();
    empty.received.clear();
    let (config_tx, config_rx) = watch::channel(Arc::new(empty));
    let (health, monitor) = AppMonitor::new(config_rx, Duration::ZERO, AppMetrics::default());
    let cancel = CancellationToken::new();
    let task = tokio::spawn(monitor.run(cancel.clone()));
    let mut rx = health.states();
    assert!(!rx.borrow_and_update().settled);
    // A port nothing listens on: one probe settles it, as unreachable.
    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = dead.local_addr().unwrap();
    drop(dead);
    config_tx.send_replace(Arc::new(config(addr)));
    let s = wait_for(&mut rx, "a settled report", |s| s.settled).await;
    assert!(
        matches!(state_of(&s), Some(AppState::Unreachable { .. })),
        "{s:?}"
    );
    cancel.cancel();
    task.await.unwrap();
}

//! Drain per connection, in process: a connection that is still open when
//! the drain deadline fires is closed then, its task ends, and both of its
//! peers see the close. Nothing outlives the drain (before, `run()` could
//! return with connection tasks still copying).
//!
//! The listener manager runs on a hand-built configuration (a plain-TCP
//! outbound listener to a static cluster), so no control plane is needed.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use meshlink_proxy::dataplane::Dataplane;
use meshlink_proxy::drain::ConnectionDrain;
use meshlink_proxy::listeners::{ListenerManager, SharedListenerStates};
use meshlink_proxy::metrics::ProxyMetrics;
use meshlink_proxy::model::{
    ClusterSpec, Direction, Discovery, LbPolicy, ListenerProtocol, ListenerSpec, ProxyConfig,
    Versioned,
};
use tokio::io::AsyncReadExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use support::{DEADLINE, dead_port, eventually};

fn versioned<T>(value: T) -> Versioned<T> {
    Versioned {
        version: "v1".into(),
        value: Arc::new(value),
    }
}

#[tokio::test]
async fn a_connection_open_at_the_drain_deadline_is_closed_and_its_task_ends() {
    // A backend that accepts and then neither writes nor closes.
    let backend = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backend_addr = backend.local_addr().unwrap();
    let listen: std::net::SocketAddr = format!("127.0.0.1:{}", dead_port()).parse().unwrap();

    let config = ProxyConfig {
        listeners: BTreeMap::from([(
            "out".to_owned(),
            versioned(ListenerSpec {
                name: "out".into(),
                address: listen,
                direction: Direction::Outbound,
                tls: None,
                rbac: Vec::new(),
                rbac_per_request: false,
                connection_rate_limit: None,
                bind: true,
                original_dst: false,
                protocol: ListenerProtocol::Tcp {
                    cluster: "backend".into(),
                    weighted: Vec::new(),
                    max_connect_attempts: None,
                    idle_timeout: None,
                },
            }),
        )]),
        clusters: BTreeMap::from([(
            "backend".to_owned(),
            versioned(ClusterSpec {
                name: "backend".into(),
                discovery: Discovery::Static(vec![backend_addr]),
                tls: None,
                connect_timeout: Duration::from_secs(5),
                lb: LbPolicy::RoundRobin,
                http2: false,
                circuit_breakers: None,
                outlier_detection: meshlink_proxy::model::circuit_breaker::OutlierSpec::builtin(),
                health_check: None,
            }),
        )]),
        ..ProxyConfig::default()
    };
    let (_config_tx, config_rx) = watch::channel(Arc::new(config));
    let (_identity_tx, identity_rx) = watch::channel(None);
    let (dataplane_tx, _dataplane_rx) = watch::channel(Arc::new(Dataplane::default()));
    let connections = TaskTracker::new();
    let drain = ConnectionDrain::default();
    let stop_accepting = CancellationToken::new();
    let manager = tokio::spawn(
        ListenerManager {
            config: config_rx,
            identity: identity_rx,
            dataplane: dataplane_tx,
            states: SharedListenerStates::default(),
            connections: connections.clone(),
            drain: drain.clone(),
            metrics: Arc::new(ProxyMetrics::default()),
            apps: Default::default(),
            table: Default::default(),
        }
        .run(stop_accepting.clone()),
    );

    let mut client = eventually("the listener to accept", || async {
        TcpStream::connect(listen).await.ok()
    })
    .await;
    let (mut upstream, _) = tokio::time::timeout(DEADLINE, backend.accept())
        .await
        .expect("the proxy connects to the backend")
        .unwrap();

    // Draining: no new connections, the open one goes on.
    drain.start();
    stop_accepting.cancel();
    manager.await.unwrap();
    connections.close();
    assert_eq!(
        connections.len(),
        1,
        "only the open connection's task is left"
    );

    // The deadline: it is cut, and its task ends.
    drain.force();
    tokio::time::timeout(DEADLINE, connections.wait())
        .await
        .expect("every connection task ends at the deadline");
    let mut buf = [0u8; 16];
    let client_read = tokio::time::timeout(DEADLINE, client.read(&mut buf)).await;
    assert!(
        matches!(client_read, Ok(Ok(0)) | Ok(Err(_))),
        "the app sees its connection closed: {client_read:?}"
    );
    let upstream_read = tokio::time::timeout(DEADLINE, upstream.read(&mut buf)).await;
    assert!(
        matches!(upstream_read, Ok(Ok(0)) | Ok(Err(_))),
        "the backend sees the connection closed: {upstream_read:?}"
    );
}

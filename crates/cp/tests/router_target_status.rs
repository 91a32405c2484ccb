//! What the router reports it cannot reach or bind becomes the object's
//! own `Ready` (issue 35 §2): a Connector target it cannot connect to
//! (`RouterReport.connector_failures`) and a MultiKeyListener port it
//! cannot bind (`bind_failures`, listener `multikeylistener/<name>`); both
//! recover when the next report no longer has them.

mod support;

use meshlink_xds::certify::router_status_client::RouterStatusClient;
use meshlink_xds::certify::{BindFailure, ConnectorFailure, RouterReport};
use serde_json::json;
use support::{TestCp, eventually, with_token};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

async fn setup(cp: &TestCp) -> String {
    for (plural, doc) in [
        (
            "sites",
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Site",
            "metadata": {"name": "dmz-a"}, "spec": {}}),
        ),
        (
            "connectors",
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": "pg"},
            "spec": {"routingKey": "postgres", "host": "127.0.0.1", "port": 5432}}),
        ),
        (
            "multikeylisteners",
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "MultiKeyListener",
            "metadata": {"name": "db"},
            "spec": {"host": "127.0.0.2", "port": 5432,
                     "strategy": {"priority": {"routingKeys": ["postgres"]}}}}),
        ),
    ] {
        cp.must_apply(plural, &doc).await;
    }
    cp.router_token().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_connector_target_and_an_unbound_multikeylistener_are_not_ready() {
    let cp = TestCp::start().await;
    let token = setup(&cp).await;
    let (tx, rx) = mpsc::channel(4);
    let failing = RouterReport {
        site: "dmz-a".into(),
        connector_failures: vec![ConnectorFailure {
            name: "pg".into(),
            target: "127.0.0.1:5432".into(),
            message: "Connection refused (os error 111)".into(),
            since_unix_seconds: 1_700_000_000,
        }],
        bind_failures: vec![BindFailure {
            what: "listener".into(),
            name: "multikeylistener/db".into(),
            message: "binding 127.0.0.2:5432: Address already in use (os error 98); retrying \
                      every second"
                .into(),
        }],
        ..Default::default()
    };
    tx.send(failing).await.expect("queue");
    let mut client = RouterStatusClient::new(cp.xds_channel().await);
    let call = tokio::spawn(async move {
        client
            .report(with_token(ReceiverStream::new(rx), &token))
            .await
    });
    let c = eventually("the Connector not Ready", || async {
        let c = cp.condition("/api/v1/connectors/pg", "Ready").await;
        (c["reason"] == "TargetUnreachable").then_some(c)
    })
    .await;
    assert_eq!(
        c["message"],
        "the site's router cannot connect to 127.0.0.1:5432: Connection refused (os error 111) \
         (failing since 2023-11-14T22:13:20Z)"
    );
    let m = eventually("the MultiKeyListener not Ready", || async {
        let m = cp.condition("/api/v1/multikeylisteners/db", "Ready").await;
        (m["reason"] == "BindFailed").then_some(m)
    })
    .await;
    assert_eq!(
        m["message"],
        "port 5432 on 127.0.0.2 is not bound: binding 127.0.0.2:5432: Address already in use \
         (os error 98); retrying every second"
    );

    // The next report has neither: both recover.
    tx.send(RouterReport {
        site: "dmz-a".into(),
        ..Default::default()
    })
    .await
    .expect("queue");
    eventually("the Connector Ready", || async {
        let c = cp.condition("/api/v1/connectors/pg", "Ready").await;
        (c["status"] == "True" && c["reason"] == "TargetReachable").then_some(())
    })
    .await;
    eventually("the MultiKeyListener bound", || async {
        let m = cp.condition("/api/v1/multikeylisteners/db", "Ready").await;
        (m["reason"] == "Operational").then_some(())
    })
    .await;

    // The router goes: nothing is known about the target.
    drop(tx);
    call.await.expect("joined").expect("a clean end");
    eventually("the Connector's Ready follows the router", || async {
        let c = cp.condition("/api/v1/connectors/pg", "Ready").await;
        (c["reason"] == "RouterNotConnected").then_some(())
    })
    .await;
    cp.stop().await;
}

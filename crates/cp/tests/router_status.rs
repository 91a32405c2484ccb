//! What a site's router reports becomes status: Link (remote site,
//! Operational, Ready), Site (network, sitesInNetwork, Running), Listener
//! `hasMatchingConnector` and `Ready` (bound or not) and Connector
//! `hasMatchingListener`; when the report stream ends, every link goes
//! `Down` (naming the router as the cause, keeping its last peer) and the
//! network shrinks to this site within 2 s. A Connector `selector` lists the online
//! Dataplanes it picked in `selectedPods`.

mod support;

use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use meshlink_xds::certify::router_status_client::RouterStatusClient;
use meshlink_xds::certify::{
    BindFailure, LinkRecord, LinkState, RouterReport, ServiceRecord, SiteRecord,
};
use meshlink_xds::translate::SECRET_TYPE;
use serde_json::{Value, json};
use support::{DEADLINE, TestCp, apply_xds_mesh, eventually, node, with_token};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// DESIGN.md §9: status is current within 2 s of any change, removal too.
const STATUS_DEADLINE: Duration = Duration::from_secs(2);

async fn setup_site(cp: &TestCp) -> String {
    for (plural, doc) in [
        (
            "sites",
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Site",
            "metadata": {"name": "dmz-a"}, "spec": {}}),
        ),
        (
            "links",
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Link",
            "metadata": {"name": "to-dmz-b"},
            "spec": {"endpoints": [{"name": "inter-router", "host": "127.0.0.3", "port": 55671}],
                     "tlsCredentials": "dmz-b-client", "cost": 2}}),
        ),
        (
            "listeners",
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Listener",
            "metadata": {"name": "redis"},
            "spec": {"routingKey": "redis", "host": "127.0.0.2", "port": 6379}}),
        ),
        (
            "connectors",
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": "pg"},
            "spec": {"routingKey": "postgres", "host": "127.0.0.1", "port": 5432}}),
        ),
    ] {
        cp.must_apply(plural, &doc).await;
    }
    cp.router_token().await
}

async fn get(cp: &TestCp, path: &str) -> Value {
    let (status, body) = cp.api("GET", path, None).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

fn condition<'a>(r: &'a Value, type_: &str) -> &'a Value {
    r["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

/// The router's view with the link up: dmz-a and dmz-b, dmz-b serving
/// `redis` and listening for `postgres`.
fn report_up() -> RouterReport {
    RouterReport {
        site: "dmz-a".into(),
        links: vec![LinkState {
            name: "to-dmz-b".into(),
            operational: true,
            remote_site_id: "id-b".into(),
            remote_site_name: "dmz-b".into(),
            cost: 2,
            message: String::new(),
        }],
        network: vec![
            SiteRecord {
                id: "id-a".into(),
                name: "dmz-a".into(),
                platform: "meshlink".into(),
                links: vec![LinkRecord {
                    name: "to-dmz-b".into(),
                    remote_site_id: "id-b".into(),
                    remote_site_name: "dmz-b".into(),
                    operational: true,
                }],
                services: vec![
                    ServiceRecord {
                        routing_key: "redis".into(),
                        listeners: vec!["redis".into()],
                        ..Default::default()
                    },
                    ServiceRecord {
                        routing_key: "postgres".into(),
                        connectors: vec!["pg".into()],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            SiteRecord {
                id: "id-b".into(),
                name: "dmz-b".into(),
                platform: "meshlink".into(),
                services: vec![
                    ServiceRecord {
                        routing_key: "redis".into(),
                        connectors: vec!["redis-server".into()],
                        ..Default::default()
                    },
                    ServiceRecord {
                        routing_key: "postgres".into(),
                        listeners: vec!["pg-client".into()],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
        ],
        mesh_ingress_address: "127.0.0.2:15671".into(),
        bind_failures: Vec::new(),
        accepted_links: Vec::new(),
        traffic: Vec::new(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_become_status_and_are_cleared_when_the_router_goes() {
    let cp = TestCp::start().await;
    let token = setup_site(&cp).await;
    // Before any report: the link is down, the network is this site alone,
    // the Link says which Secret it waits for.
    let link = eventually("the Link's first status", || async {
        let l = get(&cp, "/api/v1/links/to-dmz-b").await;
        (condition(&l, "Operational")["status"] == "False").then_some(l)
    })
    .await;
    // Down, and why: the missing Secret comes first.
    assert_eq!(link["status"]["status"], "Down", "{link}");
    assert_eq!(
        condition(&link, "Operational")["reason"],
        "CredentialsMissing"
    );
    assert_eq!(
        condition(&link, "Operational")["message"],
        link["status"]["message"]
    );
    assert!(
        condition(&link, "Configured")["message"]
            .as_str()
            .is_some_and(|m| m.contains("Secret \"dmz-b-client\" not found")),
        "{link}"
    );

    let (tx, rx) = mpsc::channel(4);
    tx.send(report_up()).await.expect("queue");
    let mut client = RouterStatusClient::new(cp.xds_channel().await);
    let call = tokio::spawn(async move {
        client
            .report(with_token(ReceiverStream::new(rx), &token))
            .await
    });

    let link = eventually("Link Operational", || async {
        let l = get(&cp, "/api/v1/links/to-dmz-b").await;
        (condition(&l, "Operational")["status"] == "True").then_some(l)
    })
    .await;
    assert_eq!(link["status"]["remoteSiteName"], "dmz-b");
    assert_eq!(link["status"]["remoteSiteId"], "id-b");
    assert_eq!(link["status"]["status"], "Operational");
    assert_eq!(condition(&link, "Ready")["status"], "True");
    let site = eventually("Site network of 2", || async {
        let s = get(&cp, "/api/v1/sites/dmz-a").await;
        (s["status"]["sitesInNetwork"] == 2).then_some(s)
    })
    .await;
    assert_eq!(condition(&site, "Running")["status"], "True");
    let names: Vec<&str> = site["status"]["network"]
        .as_array()
        .expect("network")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["dmz-a", "dmz-b"]);
    assert_eq!(
        site["status"]["network"][1]["services"][0]["routingKey"],
        "redis"
    );
    assert!(site["status"]["siteId"].is_string(), "{site}");
    // The router's bound mesh ingress is where the site's sidecars dial.
    assert_eq!(site["status"]["meshIngress"], "127.0.0.2:15671", "{site}");
    let listener = eventually("Listener matched", || async {
        let l = get(&cp, "/api/v1/listeners/redis").await;
        (l["status"]["hasMatchingConnector"] == true).then_some(l)
    })
    .await;
    assert_eq!(listener["status"]["matchingConnectorCount"], 1);
    // The router bound it (it reported no failure for it).
    assert_eq!(
        condition(&listener, "Ready")["status"],
        "True",
        "{listener}"
    );
    let connector = eventually("Connector matched", || async {
        let c = get(&cp, "/api/v1/connectors/pg").await;
        (c["status"]["hasMatchingListener"] == true).then_some(c)
    })
    .await;
    assert_eq!(connector["status"]["matchingListenerCount"], 1);

    // The router goes away: its stream ends.
    drop(tx);
    let summary = call.await.expect("joined").expect("a clean end");
    assert_eq!(summary.into_inner().reports, 1);
    let ended = tokio::time::Instant::now();
    let cleared = tokio::time::timeout(STATUS_DEADLINE, async {
        loop {
            let l = get(&cp, "/api/v1/links/to-dmz-b").await;
            let s = get(&cp, "/api/v1/sites/dmz-a").await;
            let li = get(&cp, "/api/v1/listeners/redis").await;
            if condition(&l, "Operational")["status"] == "False"
                && s["status"]["sitesInNetwork"] == 1
                && condition(&s, "Running")["status"] == "False"
                && s["status"]["meshIngress"].is_null()
                && li["status"]["hasMatchingConnector"] == false
            {
                return (l, s);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let (link, site) = cleared.unwrap_or_else(|_| {
        panic!("status not cleared {STATUS_DEADLINE:?} after the report stream ended")
    });
    assert!(ended.elapsed() <= STATUS_DEADLINE);
    // Down, with the last peer it reached kept, here and in the network.
    assert_eq!(link["status"]["status"], "Down", "{link}");
    assert_eq!(link["status"]["remoteSiteName"], "dmz-b", "{link}");
    assert_eq!(site["status"]["network"][0]["name"], "dmz-a");
    assert_eq!(
        site["status"]["network"][0]["links"][0]["operational"],
        false
    );
    assert_eq!(
        site["status"]["network"][0]["links"][0]["remoteSiteName"], "dmz-b",
        "{site}"
    );
    // The Site names the cause and since when; so does the Listener.
    let running = condition(&site, "Running")["message"].as_str().unwrap();
    assert!(
        running.starts_with("this site's router is not reporting to this control plane (since 20"),
        "{running}"
    );
    let li = eventually("the Listener's Ready follows", || async {
        let l = get(&cp, "/api/v1/listeners/redis").await;
        (condition(&l, "Ready")["reason"] == "RouterNotConnected").then_some(l)
    })
    .await;
    assert_eq!(condition(&li, "Ready")["message"], running);
    cp.stop().await;
}

/// A port the router cannot bind (already taken) becomes `Ready=False`
/// on the Listener with the OS error, and the Site is not Ready while it
/// lasts; once bound, both recover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_the_router_cannot_bind_is_not_ready_and_neither_is_the_site() {
    let cp = TestCp::start().await;
    let token = setup_site(&cp).await;
    let (tx, rx) = mpsc::channel(4);
    let mut clash = report_up();
    clash.bind_failures.push(BindFailure {
        what: "listener".into(),
        name: "redis".into(),
        message: "bind 127.0.0.2:6379: Address already in use (os error 98)".into(),
    });
    tx.send(clash).await.expect("queue");
    let mut client = RouterStatusClient::new(cp.xds_channel().await);
    let call = tokio::spawn(async move {
        client
            .report(with_token(ReceiverStream::new(rx), &token))
            .await
    });
    let listener = eventually("the Listener not Ready", || async {
        let l = get(&cp, "/api/v1/listeners/redis").await;
        (condition(&l, "Ready")["reason"] == "BindFailed").then_some(l)
    })
    .await;
    assert_eq!(
        condition(&listener, "Ready")["message"],
        "port 6379 on 127.0.0.2 is not bound: bind 127.0.0.2:6379: Address already in use (os error 98)"
    );
    let site = eventually("the Site not Ready", || async {
        let s = get(&cp, "/api/v1/sites/dmz-a").await;
        (condition(&s, "Bound")["status"] == "False" && condition(&s, "Ready")["status"] == "False")
            .then_some(s)
    })
    .await;
    assert_eq!(condition(&site, "Running")["status"], "True");
    assert!(
        site["status"]["message"].as_str().unwrap().contains(
            "listener \"redis\" is not bound: bind 127.0.0.2:6379: Address already in use"
        ),
        "{site}"
    );
    // Bound now: everything recovers.
    tx.send(report_up()).await.expect("queue");
    eventually("the Listener Ready", || async {
        let l = get(&cp, "/api/v1/listeners/redis").await;
        (condition(&l, "Ready")["status"] == "True").then_some(())
    })
    .await;
    eventually("the Site Bound again", || async {
        let s = get(&cp, "/api/v1/sites/dmz-a").await;
        (condition(&s, "Bound")["status"] == "True").then_some(())
    })
    .await;
    drop(tx);
    call.await.expect("joined").expect("a clean end");
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_that_leaves_the_report_goes_not_operational() {
    let cp = TestCp::start().await;
    let token = setup_site(&cp).await;
    let (tx, rx) = mpsc::channel(4);
    tx.send(report_up()).await.expect("queue");
    let mut client = RouterStatusClient::new(cp.xds_channel().await);
    let call = tokio::spawn(async move {
        client
            .report(with_token(ReceiverStream::new(rx), &token))
            .await
    });
    cp.wait_condition("/api/v1/links/to-dmz-b", "Operational", "True")
        .await;
    // The next report has no link and only this site.
    let mut down = report_up();
    down.links.clear();
    down.network.truncate(1);
    down.network[0].links.clear();
    tx.send(down).await.expect("queue");
    let cleared = tokio::time::timeout(STATUS_DEADLINE, async {
        loop {
            let l = get(&cp, "/api/v1/links/to-dmz-b").await;
            let s = get(&cp, "/api/v1/sites/dmz-a").await;
            if condition(&l, "Operational")["status"] == "False"
                && s["status"]["sitesInNetwork"] == 1
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        cleared.is_ok(),
        "status not updated within {STATUS_DEADLINE:?}"
    );
    // The stream is still open: the site is running.
    assert_eq!(
        cp.condition("/api/v1/sites/dmz-a", "Running").await["status"],
        "True"
    );
    drop(tx);
    call.await.expect("joined").expect("clean end");
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_selector_lists_online_dataplanes_only() {
    let cp = TestCp::start().await;
    apply_xds_mesh(&cp).await;
    cp.must_apply(
        "sites",
        &json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Site",
                "metadata": {"name": "dmz-a"}, "spec": {}}),
    )
    .await;
    cp.must_apply(
        "connectors",
        &json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Connector",
                "metadata": {"name": "backend"},
                "spec": {"routingKey": "backend", "port": 8080,
                         "selector": "kuma.io/service=backend"}}),
    )
    .await;
    // backend-1 (127.0.0.2) is not connected: nothing selected.
    let c = eventually("Connector status", || async {
        let c = get(&cp, "/api/v1/connectors/backend").await;
        c["status"]["hasMatchingListener"].is_boolean().then_some(c)
    })
    .await;
    assert!(c["status"].get("selectedPods").is_none(), "{c}");

    // Its proxy connects: it is online and selected.
    let token = cp.dataplane_token("default", "backend-1").await;
    let (tx, rx) = mpsc::channel(4);
    tx.send(DeltaDiscoveryRequest {
        node: Some(node("default", "backend-1", "meshlink-proxy")),
        type_url: SECRET_TYPE.into(),
        ..Default::default()
    })
    .await
    .expect("queue");
    let mut ads = AggregatedDiscoveryServiceClient::new(cp.xds_channel().await);
    let mut stream = ads
        .delta_aggregated_resources(with_token(ReceiverStream::new(rx), &token))
        .await
        .expect("stream")
        .into_inner();
    tokio::time::timeout(DEADLINE, stream.message())
        .await
        .expect("an answer")
        .expect("ok");
    let c = eventually("backend-1 selected", || async {
        let c = get(&cp, "/api/v1/connectors/backend").await;
        (c["status"]["selectedPods"][0]["name"] == "default/backend-1").then_some(c)
    })
    .await;
    assert_eq!(c["status"]["selectedPods"][0]["IP"], "127.0.0.2");

    // It goes offline: no longer selected.
    drop((tx, stream, ads));
    eventually("backend-1 deselected", || async {
        let c = get(&cp, "/api/v1/connectors/backend").await;
        c["status"].get("selectedPods").is_none().then_some(())
    })
    .await;
    cp.stop().await;
}

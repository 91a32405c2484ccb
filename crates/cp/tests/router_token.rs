//! `meshlink token router` through the REST API and the xDS port: a router
//! token names the site (node.id `site.<site>`), gets the router's
//! resources over ADS, and is refused on a dataplane's stream, as a
//! dataplane token is refused on a router's stream and by RouterStatus,
//! each with a status that names the token to use.

mod support;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use meshlink_xds::certify::router_status_client::RouterStatusClient;
use meshlink_xds::certify::{RouterReport, Site};
use meshlink_xds::translate::SITE_TYPE;
use prost::Message;
use serde_json::json;
use support::{DEADLINE, TestCp, apply_xds_mesh, node, with_token};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

async fn apply_site(cp: &TestCp) {
    cp.must_apply(
        "sites",
        &json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Site",
                "metadata": {"name": "dmz-a"}, "spec": {}}),
    )
    .await;
}

async fn router_token(cp: &TestCp) -> String {
    let (status, body) = cp
        .api("POST", "/api/v1/tokens/router", Some(&json!({})))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["site"], "dmz-a");
    assert_eq!(body["nodeId"], "site.dmz-a");
    body["token"].as_str().expect("token").to_owned()
}

type Delta = envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse;

/// Opens a delta stream with `token` whose first request carries `node_id`
/// and asks for `type_url`; returns the first response that holds a
/// resource (the first answer may be empty while the change that created
/// it is still on its way to the reconciler), or the refusal.
async fn first_delta(
    cp: &TestCp,
    token: &str,
    node_id: &str,
    type_url: &str,
) -> Result<Delta, tonic::Status> {
    let (tx, rx) = mpsc::channel(4);
    tx.send(DeltaDiscoveryRequest {
        node: Some(Node {
            id: node_id.to_owned(),
            ..node("x", "y", "meshlink-proxy")
        }),
        type_url: type_url.to_owned(),
        ..Default::default()
    })
    .await
    .expect("queue");
    let mut client = AggregatedDiscoveryServiceClient::new(cp.xds_channel().await);
    let mut stream = client
        .delta_aggregated_resources(with_token(ReceiverStream::new(rx), token))
        .await?
        .into_inner();
    loop {
        let next = tokio::time::timeout(DEADLINE, stream.message())
            .await
            .expect("an answer within the deadline")?
            .expect("a response");
        if !next.resources.is_empty() {
            drop(tx);
            return Ok(next);
        }
        tx.send(DeltaDiscoveryRequest {
            type_url: type_url.to_owned(),
            response_nonce: next.nonce.clone(),
            ..Default::default()
        })
        .await
        .expect("ack");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_token_needs_a_site_and_names_it() {
    let cp = TestCp::start().await;
    let (status, body) = cp
        .api("POST", "/api/v1/tokens/router", Some(&json!({})))
        .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body.to_string().contains("no Site; apply one first"),
        "{body}"
    );
    apply_site(&cp).await;
    let (status, body) = cp
        .api(
            "POST",
            "/api/v1/tokens/router",
            Some(&json!({"site": "nope"})),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = cp
        .api(
            "POST",
            "/api/v1/tokens/router",
            Some(&json!({"validFor": "soon"})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("validFor"), "{body}");
    router_token(&cp).await;
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_token_gets_the_site_over_ads() {
    let cp = TestCp::start().await;
    apply_site(&cp).await;
    let token = router_token(&cp).await;
    let resp = first_delta(&cp, &token, "site.dmz-a", SITE_TYPE)
        .await
        .expect("served");
    assert_eq!(resp.type_url, SITE_TYPE);
    let site = Site::decode(
        resp.resources[0]
            .resource
            .as_ref()
            .expect("resource")
            .value
            .as_slice(),
    )
    .expect("a meshlink.v1.Site");
    assert_eq!(site.name, "dmz-a");
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_and_dataplane_tokens_do_not_mix() {
    let cp = TestCp::start().await;
    apply_xds_mesh(&cp).await;
    apply_site(&cp).await;
    let router = router_token(&cp).await;
    let dataplane = cp.dataplane_token("default", "web-1").await;

    let refused = first_delta(&cp, &router, "default.web-1", SITE_TYPE)
        .await
        .expect_err("a router token on a dataplane's stream");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("meshlink token dataplane"),
        "{refused:?}"
    );

    let refused = first_delta(&cp, &dataplane, "site.dmz-a", SITE_TYPE)
        .await
        .expect_err("a dataplane token on a router's stream");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("meshlink token router"),
        "{refused:?}"
    );

    // RouterStatus takes only router tokens, for their own site.
    let mut status = RouterStatusClient::new(cp.xds_channel().await);
    let report = RouterReport {
        site: "dmz-a".into(),
        ..Default::default()
    };
    let refused = status
        .report(with_token(
            tokio_stream::iter(vec![report.clone()]),
            &dataplane,
        ))
        .await
        .expect_err("a dataplane token on RouterStatus");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("meshlink token router"),
        "{refused:?}"
    );

    let other = RouterReport {
        site: "dmz-b".into(),
        ..Default::default()
    };
    let refused = status
        .report(with_token(tokio_stream::iter(vec![other]), &router))
        .await
        .expect_err("a report for another site");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("dmz-b"), "{refused:?}");

    let refused = status
        .report(tonic::Request::new(tokio_stream::iter(vec![report])))
        .await
        .expect_err("no token");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    cp.stop().await;
}

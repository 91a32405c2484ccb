//! ADS against an in-process control plane, through tonic with the
//! data dir's cp-tls CA and a proxy token: a SotW stream (Envoy client:
//! identity with its key over SDS) and a delta stream (meshlink-proxy
//! client: trust bundle only) both receive Secrets, Clusters and
//! Listeners, and a stream without a token is refused.

mod support;

use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use meshlink_xds::translate::{CLUSTER_TYPE, LISTENER_TYPE, SECRET_TYPE};
use prost::Message;
use support::{DEADLINE, TestCp, apply_xds_mesh, node, with_token};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

async fn next<T>(rx: &mut Streaming<T>) -> T {
    tokio::time::timeout(DEADLINE, rx.message())
        .await
        .expect("a response within the deadline")
        .expect("the stream is healthy")
        .expect("the stream is open")
}

fn sotw(type_url: &str, names: &[&str], ack_of: Option<&DiscoveryResponse>) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.to_owned(),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        response_nonce: ack_of.map(|r| r.nonce.clone()).unwrap_or_default(),
        version_info: ack_of.map(|r| r.version_info.clone()).unwrap_or_default(),
        ..Default::default()
    }
}

fn delta(type_url: &str, ack_of: Option<&DeltaDiscoveryResponse>) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: type_url.to_owned(),
        response_nonce: ack_of.map(|r| r.nonce.clone()).unwrap_or_default(),
        ..Default::default()
    }
}

fn delta_names(r: &DeltaDiscoveryResponse) -> Vec<&str> {
    r.resources.iter().map(|r| r.name.as_str()).collect()
}

/// Opens a SotW stream with `token` whose first request is `first`;
/// returns the request sender (keep it to keep the stream open) and the
/// responses.
async fn open_sotw(
    cp: &TestCp,
    token: &str,
    first: DiscoveryRequest,
) -> (mpsc::Sender<DiscoveryRequest>, Streaming<DiscoveryResponse>) {
    let (tx, rx) = mpsc::channel(16);
    tx.send(first).await.expect("queue");
    let mut client = AggregatedDiscoveryServiceClient::new(cp.xds_channel().await);
    let responses = client
        .stream_aggregated_resources(with_token(ReceiverStream::new(rx), token))
        .await
        .expect("stream accepted")
        .into_inner();
    (tx, responses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_envoy_client_gets_secrets_clusters_and_listeners() {
    let cp = TestCp::start().await;
    apply_xds_mesh(&cp).await;
    let token = cp.dataplane_token("default", "web-1").await;
    let first = DiscoveryRequest {
        node: Some(node("default", "web-1", "envoy")),
        ..sotw(CLUSTER_TYPE, &[], None)
    };
    let (tx, mut responses) = open_sotw(&cp, &token, first).await;

    let cds = next(&mut responses).await;
    assert_eq!(cds.type_url, CLUSTER_TYPE);
    assert_eq!(
        cds.resources.len(),
        2,
        "backend + web's inbound cluster: {cds:?}"
    );
    tx.send(sotw(CLUSTER_TYPE, &[], Some(&cds)))
        .await
        .expect("ack");

    let names = ["identity_cert:web", "mesh_ca:default"];
    tx.send(sotw(SECRET_TYPE, &names, None)).await.expect("sds");
    let sds = next(&mut responses).await;
    assert_eq!(sds.type_url, SECRET_TYPE);
    let secrets: Vec<Secret> = sds
        .resources
        .iter()
        .map(|a| Secret::decode(a.value.as_slice()).expect("a Secret"))
        .collect();
    let mut got: Vec<&str> = secrets.iter().map(|s| s.name.as_str()).collect();
    got.sort();
    assert_eq!(got, names);
    let identity: String = sds
        .resources
        .iter()
        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
        .collect();
    assert!(
        identity.contains("BEGIN CERTIFICATE") && identity.contains("PRIVATE KEY"),
        "an Envoy client gets its identity with the key over SDS"
    );
    tx.send(sotw(SECRET_TYPE, &names, Some(&sds)))
        .await
        .expect("ack");

    tx.send(sotw(LISTENER_TYPE, &[], None)).await.expect("lds");
    let lds = next(&mut responses).await;
    assert_eq!(lds.type_url, LISTENER_TYPE);
    assert_eq!(lds.resources.len(), 2, "inbound and outbound: {lds:?}");
    assert_ne!(lds.nonce, cds.nonce, "every response has its own nonce");
    drop((tx, responses));
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_meshlink_proxy_client_gets_the_trust_bundle_clusters_and_listeners() {
    let cp = TestCp::start().await;
    apply_xds_mesh(&cp).await;
    let token = cp.dataplane_token("default", "web-1").await;
    let (tx, rx) = mpsc::channel(16);
    tx.send(DeltaDiscoveryRequest {
        node: Some(node("default", "web-1", "meshlink-proxy")),
        ..delta(SECRET_TYPE, None)
    })
    .await
    .expect("queue");
    let mut client = AggregatedDiscoveryServiceClient::new(cp.xds_channel().await);
    let mut responses = client
        .delta_aggregated_resources(with_token(ReceiverStream::new(rx), &token))
        .await
        .expect("stream accepted")
        .into_inner();

    let sds = next(&mut responses).await;
    assert_eq!(sds.type_url, SECRET_TYPE);
    assert_eq!(
        delta_names(&sds),
        ["mesh_ca:default"],
        "a meshlink-proxy gets the trust bundle and never a key: {sds:?}"
    );
    tx.send(delta(SECRET_TYPE, Some(&sds))).await.expect("ack");

    tx.send(delta(CLUSTER_TYPE, None)).await.expect("cds");
    let cds = next(&mut responses).await;
    assert_eq!(cds.type_url, CLUSTER_TYPE);
    let mut clusters = delta_names(&cds);
    clusters.sort();
    assert_eq!(clusters.len(), 2, "{cds:?}");
    assert!(clusters.contains(&"backend"), "{clusters:?}");
    tx.send(delta(CLUSTER_TYPE, Some(&cds))).await.expect("ack");

    tx.send(delta(LISTENER_TYPE, None)).await.expect("lds");
    let lds = next(&mut responses).await;
    assert_eq!(lds.type_url, LISTENER_TYPE);
    assert!(
        delta_names(&lds).contains(&"outbound:127.0.0.1:9001"),
        "{lds:?}"
    );
    assert_eq!(lds.resources.len(), 2, "inbound and outbound: {lds:?}");
    assert!(lds.resources.iter().all(|r| !r.version.is_empty()));
    drop((tx, responses, client));
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_a_token_is_refused_with_a_reason() {
    let cp = TestCp::start().await;
    apply_xds_mesh(&cp).await;
    let (tx, rx) = mpsc::channel(1);
    tx.send(DiscoveryRequest {
        node: Some(node("default", "web-1", "envoy")),
        ..sotw(CLUSTER_TYPE, &[], None)
    })
    .await
    .expect("queue");
    let mut client = AggregatedDiscoveryServiceClient::new(cp.xds_channel().await);
    let refused = match client
        .stream_aggregated_resources(tonic::Request::new(ReceiverStream::new(rx)))
        .await
    {
        Err(status) => status,
        Ok(resp) => resp
            .into_inner()
            .message()
            .await
            .expect_err("no response without a credential"),
    };
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    assert!(!refused.message().is_empty(), "{refused:?}");
    drop((tx, client));
    cp.stop().await;
}

/// The xDS port decodes requests into a buffer that exists only while a
/// message arrives, and encodes each response into a buffer of its size:
/// a 64 KiB first request (Envoy's node carries its build and extension
/// list; this one spans several HTTP/2 DATA frames) is decoded, and the
/// identity Secret is encoded, on one stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_larger_than_an_http2_frame_pass_both_ways() {
    const KIB: usize = 1024;
    let cp = TestCp::start().await;
    apply_xds_mesh(&cp).await;
    let token = cp.dataplane_token("default", "web-1").await;
    let mut big_node = node("default", "web-1", "envoy");
    big_node.user_agent_name = "x".repeat(64 * KIB);
    let first = DiscoveryRequest {
        node: Some(big_node),
        ..sotw(SECRET_TYPE, &["identity_cert:web"], None)
    };
    assert!(first.encoded_len() > 64 * KIB);
    let (tx, mut responses) = open_sotw(&cp, &token, first).await;
    let sds = next(&mut responses).await;
    assert_eq!(sds.type_url, SECRET_TYPE);
    assert!(
        sds.encoded_len() > KIB,
        "the identity Secret (certificate chain and key) is more than a KiB"
    );
    drop((tx, responses));
    cp.stop().await;
}

//! Lowering a Mesh's certificate lifetime over ADS (issue 35 §2), in
//! process: an Envoy-style client (certificate and key over SDS) is pushed
//! a certificate of the new lifetime soon after the Mesh changes, and a
//! meshlink-proxy client that lists the identity policy feature is sent
//! the mesh's current lifetime (a client that does not list it gets
//! nothing new).

mod support;

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, secret};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use meshlink_identity::{TlsPairInfo, check_tls_pair};
use meshlink_proto::identity_policy::{IDENTITY_POLICY_FEATURE, Policy, from_secret};
use meshlink_xds::translate::SECRET_TYPE;
use prost::Message;
use serde_json::{Value, json};
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

/// The test mesh (`support::mesh`, ca-1 enabled) with ca-1's certificates
/// living `lifetime`.
fn mesh(lifetime: &str) -> Value {
    let mut m = support::mesh("default", "ca-1");
    m["spec"]["mtls"]["backends"][0]["dpCert"]["rotation"]["expiration"] = json!(lifetime);
    m
}

fn secrets<'a>(resources: impl Iterator<Item = &'a [u8]>) -> Vec<Secret> {
    resources
        .map(|b| Secret::decode(b).expect("a Secret"))
        .collect()
}

/// The identity certificate's validity in `s` (a `tls_certificate`).
fn identity(s: &Secret) -> (String, TlsPairInfo) {
    let Some(secret::Type::TlsCertificate(tls)) = &s.r#type else {
        panic!("{} is not a tls_certificate", s.name);
    };
    let text = |d: &Option<envoy_types::pb::envoy::config::core::v3::DataSource>| match d
        .as_ref()
        .and_then(|d| d.specifier.as_ref())
    {
        Some(Specifier::InlineString(s)) => s.clone(),
        Some(Specifier::InlineBytes(b)) => String::from_utf8(b.clone()).expect("PEM"),
        other => panic!("unexpected data source {other:?}"),
    };
    let chain = text(&tls.certificate_chain);
    let info = check_tls_pair(&chain, &text(&tls.private_key)).expect("a usable pair");
    (chain, info)
}

fn lifetime_of(info: &TlsPairInfo) -> Duration {
    // notBefore is backdated 60 s.
    info.not_after
        .duration_since(info.not_before)
        .expect("notAfter after notBefore")
        - Duration::from_secs(60)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envoy_is_pushed_a_certificate_of_the_lowered_lifetime() {
    let cp = TestCp::start().await;
    apply_xds_mesh(&cp).await;
    let token = cp.dataplane_token("default", "web-1").await;
    let names = vec!["identity_cert:web".to_owned()];
    let sds = |ack_of: Option<&DiscoveryResponse>| DiscoveryRequest {
        type_url: SECRET_TYPE.to_owned(),
        resource_names: names.clone(),
        response_nonce: ack_of.map(|r| r.nonce.clone()).unwrap_or_default(),
        version_info: ack_of.map(|r| r.version_info.clone()).unwrap_or_default(),
        ..Default::default()
    };
    let (tx, rx) = mpsc::channel(16);
    tx.send(DiscoveryRequest {
        node: Some(node("default", "web-1", "envoy")),
        ..sds(None)
    })
    .await
    .expect("queue");
    let mut client = AggregatedDiscoveryServiceClient::new(cp.xds_channel().await);
    let mut responses = client
        .stream_aggregated_resources(with_token(ReceiverStream::new(rx), &token))
        .await
        .expect("stream accepted")
        .into_inner();

    let first = next(&mut responses).await;
    let got = secrets(first.resources.iter().map(|a| a.value.as_slice()));
    assert_eq!(got.len(), 1, "{got:?}");
    let (old_pem, old) = identity(&got[0]);
    assert_eq!(lifetime_of(&old), Duration::from_secs(3600));
    tx.send(sds(Some(&first))).await.expect("ack");

    cp.must_apply("meshes", &mesh("30s")).await;

    // The hub moves the renewal into the first fifth of the new lifetime;
    // the stream's timer then asks for the new certificate.
    let pushed = next(&mut responses).await;
    let got = secrets(pushed.resources.iter().map(|a| a.value.as_slice()));
    let (new_pem, new) = identity(&got[0]);
    assert_ne!(new_pem, old_pem, "a fresh certificate");
    assert_eq!(lifetime_of(&new), Duration::from_secs(30));
    assert!(new.not_after < old.not_after);
    tx.send(sds(Some(&pushed))).await.expect("ack");

    // Status shows the new certificate (Envoy's comes over SDS).
    let expires = humantime::format_rfc3339_seconds(new.not_after).to_string();
    support::eventually("web-1's status to show the new certificate", || async {
        let (_, dp) = cp
            .api("GET", "/api/v1/dataplanes/web-1?mesh=default", None)
            .await;
        (dp["status"]["mtls"]["certificateExpirationTime"] == expires.as_str()).then_some(())
    })
    .await;
    drop((tx, responses, client));
    cp.stop().await;
}

/// Opens a delta Secret stream for `name` whose node lists `features`.
async fn delta_secrets(
    cp: &TestCp,
    name: &str,
    features: &[&str],
) -> (
    mpsc::Sender<DeltaDiscoveryRequest>,
    Streaming<DeltaDiscoveryResponse>,
) {
    let token = cp.dataplane_token("default", name).await;
    let mut n = node("default", name, "meshlink-proxy");
    n.client_features = features.iter().map(|f| f.to_string()).collect();
    let (tx, rx) = mpsc::channel(16);
    tx.send(DeltaDiscoveryRequest {
        node: Some(n),
        type_url: SECRET_TYPE.to_owned(),
        ..Default::default()
    })
    .await
    .expect("queue");
    let mut client = AggregatedDiscoveryServiceClient::new(cp.xds_channel().await);
    let responses = client
        .delta_aggregated_resources(with_token(ReceiverStream::new(rx), &token))
        .await
        .expect("stream accepted")
        .into_inner();
    (tx, responses)
}

fn ack(r: &DeltaDiscoveryResponse) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: SECRET_TYPE.to_owned(),
        response_nonce: r.nonce.clone(),
        ..Default::default()
    }
}

fn policies(r: &DeltaDiscoveryResponse) -> Vec<Policy> {
    secrets(
        r.resources
            .iter()
            .filter_map(|r| Some(r.resource.as_ref()?.value.as_slice())),
    )
    .iter()
    .filter_map(|s| from_secret(s).map(|p| p.expect("a valid policy")))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meshlink_proxy_listing_the_feature_is_sent_the_current_lifetime() {
    let cp = TestCp::start().await;
    apply_xds_mesh(&cp).await;
    let (tx, mut with) = delta_secrets(&cp, "web-1", &[IDENTITY_POLICY_FEATURE]).await;
    let (plain_tx, mut without) = delta_secrets(&cp, "backend-1", &[]).await;

    let first = next(&mut with).await;
    let mut names: Vec<&str> = first.resources.iter().map(|r| r.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["identity_policy:default", "mesh_ca:default"]);
    assert_eq!(
        policies(&first),
        [Policy {
            mesh: "default".into(),
            certificate_lifetime: Duration::from_secs(3600),
        }]
    );
    tx.send(ack(&first)).await.expect("ack");
    let plain = next(&mut without).await;
    let names: Vec<&str> = plain.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["mesh_ca:default"], "no policy without the feature");
    plain_tx.send(ack(&plain)).await.expect("ack");

    cp.must_apply("meshes", &mesh("30s")).await;
    let pushed = next(&mut with).await;
    assert_eq!(
        policies(&pushed),
        [Policy {
            mesh: "default".into(),
            certificate_lifetime: Duration::from_secs(30),
        }]
    );
    drop((tx, with, plain_tx, without));
    cp.stop().await;
}

//! The end of a stream's life, through the real ADS server and hub: drain
//! (every stream ends with UNAVAILABLE), token revocation (the token's
//! streams end with PERMISSION_DENIED, other streams are untouched, the
//! token binds no new stream), node.id checked before takeover (a wrong
//! node.id leaves the current owner alone), and admission (a real tonic
//! server refuses streams past its bucket with RESOURCE_EXHAUSTED and a
//! `retry-after-ms` hint).

mod ads_support;

use std::sync::Arc;
use std::time::Duration;

use ads_support::{Harness, MESH, MemorySource, Stream, identity_pem};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryServiceServer;
use meshlink_xds::ads::{
    AdmissionConfig, AdsMetrics, AdsOptions, AdsParts, AdsServer, Authenticate, Inspector,
    RETRY_AFTER_MS,
};
use meshlink_xds::owner::ProxyKey;
use tonic::{Code, Status};

fn harness() -> Harness {
    Harness::new(MemorySource::new(4, Duration::from_secs(3600)))
}

/// Sends the first request and expects the identity Secret (then ACKs it).
async fn served(s: &mut Stream) {
    s.request(None).await;
    let r = s.next().await.expect("a response").expect("served");
    assert!(
        identity_pem(&r).is_some(),
        "first response carries the identity"
    );
    s.request(Some(&r)).await;
}

/// Reads until the stream ends; returns its status.
async fn end_status(s: &mut Stream) -> Status {
    loop {
        match s.next().await {
            Some(Ok(_)) => continue,
            Some(Err(status)) => return status,
            None => panic!("stream ended without a status"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_ends_every_stream_with_unavailable_and_waits_for_cleanup() {
    let h = harness();
    let mut streams = Vec::new();
    for i in 0..3 {
        let mut s = h.open(&format!("web-{i}"));
        served(&mut s).await;
        streams.push(s);
    }
    // One stream that has not sent its first request yet.
    let mut idle = h.open("web-3");
    h.server.drain();
    for s in streams.iter_mut().chain([&mut idle]) {
        let status = end_status(s).await;
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(status.message().contains("shutting down"), "{status:?}");
    }
    tokio::time::timeout(Duration::from_secs(10), h.server.wait_streams())
        .await
        .expect("every stream task ends after the drain");
    assert_eq!(h.server.live_streams(), 0);
    assert_eq!(h.registry.len(), 0, "owner records released");
    let mut late = h.open("web-0");
    late.request(None).await;
    assert_eq!(end_status(&mut late).await.code(), Code::Unavailable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_ends_its_streams_only_and_binds_no_new_one() {
    let h = harness();
    let mut revoked = h.open_with("web-0", Some("jti-0"));
    served(&mut revoked).await;
    let mut other = h.open_with("web-1", Some("jti-1"));
    served(&mut other).await;
    let other_owner = h.registry.owner(&ProxyKey::new(MESH, "web-1"));

    assert_eq!(h.server.revoke_token("jti-0"), 1, "one open stream ended");
    let status = end_status(&mut revoked).await;
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("token jti-0 was revoked"),
        "{status:?}"
    );
    revoked.close_and_cleanup().await;
    assert_eq!(h.registry.owner(&ProxyKey::new(MESH, "web-0")), None);

    // The other proxy keeps its stream, and still gets new identities.
    assert_eq!(h.registry.owner(&ProxyKey::new(MESH, "web-1")), other_owner);
    let ca = h.source.rotate();
    h.hub.mesh_changed(MESH);
    loop {
        let r = other
            .next()
            .await
            .expect("a response")
            .expect("still served");
        other.request(Some(&r)).await;
        if identity_pem(&r).is_some_and(|pem| h.source.lookup(&pem).is_some_and(|(_, f)| f == ca)) {
            break;
        }
    }

    // A stream whose credential check passed just before the revocation is
    // refused when it registers, before it can be served.
    let mut raced = h.open_with("web-0", Some("jti-0"));
    raced.request(None).await;
    let status = end_status(&mut raced).await;
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    raced.close_and_cleanup().await;
    other.close_and_cleanup().await;
    assert_eq!(h.server.bound_tokens(), 0, "no binding outlives its stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_node_id_is_refused_before_it_can_take_over() {
    let h = harness();
    let key = ProxyKey::new(MESH, "web-0");
    let mut owner = h.open_with("web-0", Some("jti-0"));
    served(&mut owner).await;
    let before = h.registry.owner(&key);

    // Same credential, but node.id names another dataplane.
    let mut wrong = h.open_with("web-0", Some("jti-0"));
    wrong.name = "web-2".to_owned();
    wrong.request(None).await;
    let status = end_status(&mut wrong).await;
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let msg = status.message();
    assert!(
        msg.contains(&format!("node.id \"{MESH}.web-2\"")) && msg.contains("--name"),
        "{msg}"
    );
    wrong.close_and_cleanup().await;

    assert_eq!(h.registry.owner(&key), before, "the owner is untouched");
    assert_eq!(h.registry.takeovers(), 0);
    let ca = h.source.rotate();
    h.hub.mesh_changed(MESH);
    loop {
        let r = owner
            .next()
            .await
            .expect("a response")
            .expect("still served");
        owner.request(Some(&r)).await;
        if identity_pem(&r).is_some_and(|pem| h.source.lookup(&pem).is_some_and(|(_, f)| f == ca)) {
            break;
        }
    }
    owner.close_and_cleanup().await;
}

/// Accepts every stream as `web-0` (admission runs before this).
struct AnyAuth;

#[tonic::async_trait]
impl Authenticate for AnyAuth {
    async fn authenticate(
        &self,
        _metadata: &tonic::metadata::MetadataMap,
        _peer_certs: Option<&[tonic::transport::CertificateDer<'static>]>,
    ) -> Result<ProxyKey, Status> {
        Ok(ProxyKey::new(MESH, "web-0"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_past_the_admission_bucket_get_resource_exhausted_with_a_hint() {
    let h = harness();
    let server = AdsServer::with_options(
        AdsParts {
            registry: h.registry.clone(),
            hub: h.hub.clone(),
            auth: Arc::new(AnyAuth),
            inspector: Inspector::default(),
            metrics: AdsMetrics::default(),
            clock: h.clock,
            instance: "admission-test".into(),
        },
        AdsOptions {
            // A refill so slow that no token comes back during the test.
            admission: Some(AdmissionConfig {
                burst: 2,
                per_second: 0.001,
            }),
            ..Default::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let stop = tokio_util::sync::CancellationToken::new();
    let serve = tokio::spawn({
        let stop = stop.clone();
        let server = server.clone();
        tonic::transport::Server::builder()
            .add_service(AggregatedDiscoveryServiceServer::new(server))
            .serve_with_incoming_shutdown(incoming, async move { stop.cancelled().await })
    });
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut admitted = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..5 {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let mut client = AggregatedDiscoveryServiceClient::new(channel.clone());
        match client
            .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
        {
            Ok(stream) => admitted.push((tx, stream)),
            Err(status) => refused.push(status),
        }
    }
    assert_eq!(admitted.len(), 2, "the burst is admitted");
    assert_eq!(refused.len(), 3, "the rest is refused");
    let mut hints = Vec::new();
    for status in &refused {
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert!(status.message().contains("retry in"), "{status:?}");
        let ms: u64 = status
            .metadata()
            .get(RETRY_AFTER_MS)
            .expect("retry hint")
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        hints.push(ms);
    }
    assert!(
        hints.windows(2).all(|w| w[0] < w[1]),
        "refused streams are spread over later slots: {hints:?}"
    );
    drop(admitted);
    server.drain();
    stop.cancel();
    serve.await.unwrap().unwrap();
}

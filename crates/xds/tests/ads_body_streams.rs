//! Streams as the xDS port serves them: the stream's loop runs inside its
//! HTTP/2 response body ([`AdsService`] over a real tonic server and
//! client). A served stream gets its identity and ends with the drain's
//! status; a stream whose client resets it is cleaned up; and a stream
//! whose client stopped reading (its flow-control window full, so hyper no
//! longer polls the body) is still cleaned up once it is stopped, so a
//! drain, a revocation or a takeover does not wait on a stalled client.

mod ads_support;

use std::sync::Arc;
use std::time::Duration;

use ads_support::{Harness, MESH, MemorySource, identity_pem, sds_request};
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use meshlink_xds::ads::{
    AdsMetrics, AdsParts, AdsServer, AdsService, Authenticate, Credential, Inspector,
};
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::CLUSTER_TYPE;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status};

const NAME: &str = "web-0";

/// Accepts every stream as `web-0`, bound to token `jti-0`.
struct OneProxy;

#[tonic::async_trait]
impl Authenticate for OneProxy {
    async fn authenticate(
        &self,
        _metadata: &tonic::metadata::MetadataMap,
        _peer_certs: Option<&[tonic::transport::CertificateDer<'static>]>,
    ) -> Result<ProxyKey, Status> {
        Ok(ProxyKey::new(MESH, NAME))
    }

    async fn credential(
        &self,
        _metadata: &tonic::metadata::MetadataMap,
        _peer_certs: Option<&[tonic::transport::CertificateDer<'static>]>,
    ) -> Result<Credential, Status> {
        Ok(Credential {
            key: ProxyKey::new(MESH, NAME),
            token_id: Some("jti-0".into()),
            peer: None,
        })
    }
}

/// The harness's hub and registry behind a real xDS-port service on a
/// loopback port.
struct Served {
    h: Harness,
    server: AdsServer,
    inspector: Inspector,
    addr: std::net::SocketAddr,
    stop: tokio_util::sync::CancellationToken,
}

impl Served {
    async fn start() -> Self {
        let h = Harness::new(MemorySource::new(4, Duration::from_secs(3600)));
        let inspector = Inspector::default();
        let server = AdsServer::new(AdsParts {
            registry: h.registry.clone(),
            hub: h.hub.clone(),
            auth: Arc::new(OneProxy),
            inspector: inspector.clone(),
            metrics: AdsMetrics::default(),
            clock: h.clock,
            instance: "body-test".into(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn({
            let stop = stop.clone();
            tonic::transport::Server::builder()
                .add_service(AdsService::new(server.clone()))
                .serve_with_incoming_shutdown(incoming, async move { stop.cancelled().await })
        });
        Self {
            h,
            server,
            inspector,
            addr,
            stop,
        }
    }

    /// A client whose streams' flow-control windows are `window` bytes.
    async fn client(
        &self,
        window: u32,
    ) -> AggregatedDiscoveryServiceClient<tonic::transport::Channel> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .initial_stream_window_size(window)
            .connect()
            .await
            .unwrap();
        AggregatedDiscoveryServiceClient::new(channel)
    }

    /// Why the stream of `web-0` closed, once it did.
    fn close_reason(&self) -> Option<String> {
        self.inspector
            .report(&ProxyKey::new(MESH, NAME))
            .filter(|r| !r.connected)
            .and_then(|r| r.close_reason)
    }

    fn owner(&self) -> Option<meshlink_xds::owner::OwnerId> {
        self.h.registry.owner(&ProxyKey::new(MESH, NAME))
    }

    /// Polls `done` until it holds; panics after 10 s.
    async fn until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !done(self) {
            assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Opens a SotW stream and sends the first SDS request.
async fn open(
    client: &mut AggregatedDiscoveryServiceClient<tonic::transport::Channel>,
) -> (
    mpsc::Sender<DiscoveryRequest>,
    tonic::Streaming<envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse>,
) {
    let (tx, rx) = mpsc::channel(4);
    tx.send(sds_request(NAME, "", "")).await.unwrap();
    let responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .expect("stream admitted")
        .into_inner();
    (tx, responses)
}

/// Opens a stream whose client never reads, with a window far smaller than
/// one response, and asks for a second type: the body's second response
/// then waits for window the client never gives back, so hyper stops
/// polling the body.
async fn stalled(s: &Served) -> (mpsc::Sender<DiscoveryRequest>, impl Sized) {
    let mut client = s.client(64).await;
    let (tx, unread) = open(&mut client).await;
    s.until("the stream registered as the owner", |s| {
        s.owner().is_some()
    })
    .await;
    let mut clusters = sds_request(NAME, "", "");
    clusters.type_url = CLUSTER_TYPE.to_owned();
    clusters.resource_names.clear();
    tx.send(clusters).await.unwrap();
    s.until("the Cluster response was sent (into a full window)", |s| {
        s.inspector
            .report(&ProxyKey::new(MESH, NAME))
            .and_then(|r| r.types.get("Cluster").map(|t| t.responses))
            .is_some_and(|n| n > 0)
    })
    .await;
    (tx, (client, unread))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_stream_gets_its_identity_and_ends_with_the_drains_status() {
    let s = Served::start().await;
    let mut client = s.client(1 << 20).await;
    let (tx, mut responses) = open(&mut client).await;
    let first = responses.message().await.expect("a response").expect("one");
    assert!(identity_pem(&first).is_some(), "the identity is served");
    tx.send(sds_request(NAME, &first.nonce, &first.version_info))
        .await
        .unwrap();
    assert!(s.owner().is_some(), "the stream owns its key");

    s.server.drain();
    let status = loop {
        match responses.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended without a status"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("shutting down"), "{status:?}");
    tokio::time::timeout(Duration::from_secs(10), s.server.wait_streams())
        .await
        .expect("the drain waits for the stream's cleanup only");
    assert_eq!(s.owner(), None, "the owner record was released");
    assert_eq!(s.server.live_streams(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_its_client_resets_is_cleaned_up() {
    let s = Served::start().await;
    let mut client = s.client(1 << 20).await;
    let (tx, mut responses) = open(&mut client).await;
    responses.message().await.expect("a response").expect("one");
    assert!(s.owner().is_some());
    // Dropping the response stream resets the HTTP/2 stream; hyper drops
    // the body, and with it the stream's loop.
    drop(responses);
    drop(tx);
    s.until("the reset stream released its key", |s| s.owner().is_none())
        .await;
    s.until("no stream is counted as open", |s| {
        s.server.live_streams() == 0
    })
    .await;
    assert_eq!(s.server.bound_tokens(), 0, "the token binding went too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_stream_whose_client_stopped_reading_is_still_cleaned_up() {
    let s = Served::start().await;
    let _stalled = stalled(&s).await;

    assert_eq!(s.server.revoke_token("jti-0"), 1);
    s.until("the stalled stream released its key", |s| {
        s.owner().is_none()
    })
    .await;
    s.until("no stream is counted as open", |s| {
        s.server.live_streams() == 0
    })
    .await;
    // Ended by its loop (the status queued for a client that will not read
    // it) or, if the loop was not polled, by the watcher.
    let reason = s.close_reason().expect("the stream is reported closed");
    assert!(
        reason.contains("not reading") || reason.contains("jti-0 was revoked"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_does_not_wait_on_a_client_that_stopped_reading() {
    let s = Served::start().await;
    let _stalled = stalled(&s).await;

    s.server.drain();
    tokio::time::timeout(Duration::from_secs(10), s.server.wait_streams())
        .await
        .expect("the stalled stream's cleanup ran after the drain");
    assert_eq!(s.owner(), None);
    // Ended by its loop (the drain's status queued for a client that will
    // not read it) or, if the loop was not polled, by the watcher.
    let reason = s.close_reason().expect("the stream is reported closed");
    assert!(
        reason.contains("not reading") || reason.contains("shutting down"),
        "{reason}"
    );
}

/// The watcher's path on its own: a body taken out of the service and
/// never polled again after its first frame (nothing runs the stream's
/// loop any more). Revoking the token stops the stream; the watcher ends
/// it a moment later, and the close reason says the client was not
/// reading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_stream_whose_body_is_not_polled_is_ended_by_its_watcher() {
    use http_body_util::BodyExt;
    use prost::Message;
    use tonic::codegen::{Service, http};

    let s = Served::start().await;
    let first = sds_request(NAME, "", "").encode_to_vec();
    let mut framed = vec![0];
    framed.extend_from_slice(&u32::try_from(first.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(&first);
    let (tx, rx) = futures::channel::mpsc::unbounded();
    tx.unbounded_send(Ok::<_, Status>(http_body::Frame::data(bytes::Bytes::from(
        framed,
    ))))
    .unwrap();
    let request = http::Request::builder()
        .uri("/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources")
        .header("content-type", "application/grpc")
        .body(http_body_util::StreamBody::new(rx))
        .unwrap();
    let mut service = AdsService::new(s.server.clone());
    let response = service.call(request).await.unwrap();
    let mut body = response.into_body();
    let frame = body.frame().await.expect("a frame").expect("no error");
    assert!(frame.is_data(), "the identity response comes first");
    s.until("the stream registered as the owner", |s| {
        s.owner().is_some()
    })
    .await;

    assert_eq!(s.server.revoke_token("jti-0"), 1);
    s.until("the unpolled stream released its key", |s| {
        s.owner().is_none()
    })
    .await;
    s.until("no stream is counted as open", |s| {
        s.server.live_streams() == 0
    })
    .await;
    let reason = s.close_reason().expect("the stream is reported closed");
    assert!(reason.contains("not reading"), "{reason}");
    drop((body, tx));
}

//! A raw ADS client for tests: TLS to the control plane's xDS port, one
//! SotW or delta stream, with helpers to build requests and wait for
//! responses (every wait has a deadline; nothing sleeps).

use std::collections::HashMap;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tonic::{Status, Streaming};

use crate::ControlPlane;

/// How long a test waits for one response before failing.
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(10);

pub use meshlink_xds::translate::{
    CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE,
};

/// A two-worker tokio runtime, for driving ADS streams from a sync test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A control plane (SQLite) with `fixtures/xds-mesh.yaml` applied: the mesh
/// `default` with mTLS, web-1 and backend-1.
pub fn start_xds_mesh() -> ControlPlane {
    let cp = ControlPlane::start(crate::StoreKind::Sqlite);
    cp.cli(&[
        "apply",
        "-f",
        crate::fixture("xds-mesh.yaml").to_str().unwrap(),
    ])
    .success();
    cp
}

/// An xDS node for `<mesh>.<name>` with `meshlink.dev/client` = `client`.
pub fn node(mesh: &str, name: &str, client: &str) -> Node {
    let fields = HashMap::from([(
        "meshlink.dev/client".to_owned(),
        Value {
            kind: Some(Kind::StringValue(client.to_owned())),
        },
    )]);
    Node {
        id: format!("{mesh}.{name}"),
        metadata: Some(Struct { fields }),
        ..Default::default()
    }
}

/// TLS to the cp's xDS port, optionally presenting a client certificate
/// `(cert_pem, key_pem)`.
pub async fn connect(cp: &ControlPlane, client_cert: Option<(String, String)>) -> Channel {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(cp.xds_ca_pem()))
        .domain_name("localhost");
    if let Some((cert, key)) = client_cert {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Channel::from_shared(cp.xds_url())
        .expect("URL")
        .tls_config(tls)
        .expect("TLS config")
        .connect()
        .await
        .expect("connect to the xDS port")
}

fn with_token<T>(msg: T, token: Option<&str>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Some(t) = token {
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {t}").parse().expect("metadata value"),
        );
    }
    req
}

/// A SotW request for `type_url` naming `names`, answering `nonce`.
pub fn sotw_request(
    type_url: &str,
    names: &[&str],
    nonce: &str,
    version: &str,
) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.to_owned(),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        response_nonce: nonce.to_owned(),
        version_info: version.to_owned(),
        ..Default::default()
    }
}

/// A NACK of `resp` with `detail`.
pub fn sotw_nack(resp: &DiscoveryResponse, names: &[&str], detail: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        error_detail: Some(RpcStatus {
            code: 3,
            message: detail.to_owned(),
            details: Vec::new(),
        }),
        ..sotw_request(&resp.type_url, names, &resp.nonce, "")
    }
}

/// One SotW stream.
pub struct Sotw {
    tx: mpsc::Sender<DiscoveryRequest>,
    rx: Streaming<DiscoveryResponse>,
}

impl Sotw {
    /// Opens a stream; the first request is sent with `node`.
    pub async fn open(
        channel: Channel,
        token: Option<&str>,
        node: Node,
        first: DiscoveryRequest,
    ) -> Result<Sotw, Status> {
        let (tx, rx) = mpsc::channel(64);
        tx.send(DiscoveryRequest {
            node: Some(node),
            ..first
        })
        .await
        .expect("queue first request");
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        let rx = client
            .stream_aggregated_resources(with_token(ReceiverStream::new(rx), token))
            .await?
            .into_inner();
        Ok(Sotw { tx, rx })
    }

    /// Sends a request.
    pub async fn send(&self, req: DiscoveryRequest) {
        self.tx.send(req).await.expect("stream open");
    }

    /// The next response, or the status the stream ended with.
    pub async fn next(&mut self) -> Result<DiscoveryResponse, Status> {
        match tokio::time::timeout(RESPONSE_DEADLINE, self.rx.message()).await {
            Ok(Ok(Some(r))) => Ok(r),
            Ok(Ok(None)) => Err(Status::cancelled("stream ended without a status")),
            Ok(Err(s)) => Err(s),
            Err(_) => panic!("no response within {RESPONSE_DEADLINE:?}"),
        }
    }

    /// The next response, which must be of `type_url`.
    pub async fn expect(&mut self, type_url: &str) -> DiscoveryResponse {
        let r = self.next().await.expect("a response");
        assert_eq!(r.type_url, type_url, "unexpected response {r:?}");
        r
    }

    /// ACKs `resp`, keeping `names` subscribed.
    pub async fn ack(&self, resp: &DiscoveryResponse, names: &[&str]) {
        self.send(sotw_request(
            &resp.type_url,
            names,
            &resp.nonce,
            &resp.version_info,
        ))
        .await;
    }
}

/// One delta stream.
pub struct Delta {
    tx: mpsc::Sender<DeltaDiscoveryRequest>,
    rx: Streaming<DeltaDiscoveryResponse>,
}

/// A delta request subscribing `subscribe` to `type_url`.
pub fn delta_request(type_url: &str, subscribe: &[&str]) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: type_url.to_owned(),
        resource_names_subscribe: subscribe.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    }
}

impl Delta {
    /// Opens a stream; the first request is sent with `node`.
    pub async fn open(
        channel: Channel,
        token: Option<&str>,
        node: Node,
        first: DeltaDiscoveryRequest,
    ) -> Result<Delta, Status> {
        let (tx, rx) = mpsc::channel(64);
        tx.send(DeltaDiscoveryRequest {
            node: Some(node),
            ..first
        })
        .await
        .expect("queue first request");
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        let rx = client
            .delta_aggregated_resources(with_token(ReceiverStream::new(rx), token))
            .await?
            .into_inner();
        Ok(Delta { tx, rx })
    }

    /// Sends a request.
    pub async fn send(&self, req: DeltaDiscoveryRequest) {
        self.tx.send(req).await.expect("stream open");
    }

    /// The next response, or the status the stream ended with.
    pub async fn next(&mut self) -> Result<DeltaDiscoveryResponse, Status> {
        match tokio::time::timeout(RESPONSE_DEADLINE, self.rx.message()).await {
            Ok(Ok(Some(r))) => Ok(r),
            Ok(Ok(None)) => Err(Status::cancelled("stream ended without a status")),
            Ok(Err(s)) => Err(s),
            Err(_) => panic!("no response within {RESPONSE_DEADLINE:?}"),
        }
    }

    /// The next response, which must be of `type_url`.
    pub async fn expect(&mut self, type_url: &str) -> DeltaDiscoveryResponse {
        let r = self.next().await.expect("a response");
        assert_eq!(r.type_url, type_url, "unexpected response {r:?}");
        r
    }

    /// ACKs `resp`.
    pub async fn ack(&self, resp: &DeltaDiscoveryResponse) {
        self.send(DeltaDiscoveryRequest {
            type_url: resp.type_url.clone(),
            response_nonce: resp.nonce.clone(),
            ..Default::default()
        })
        .await;
    }
}

/// Names of the resources in a delta response.
pub fn delta_names(r: &DeltaDiscoveryResponse) -> Vec<String> {
    r.resources.iter().map(|r| r.name.clone()).collect()
}

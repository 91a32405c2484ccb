//! A stand-in control plane for the proxy's in-process tests: a real
//! tonic server with TLS (a test CA and a certificate for `localhost`
//! only, no IP address), serving delta ADS. Each stream gets one empty
//! response per subscribed type, which is enough for the proxy to hold a
//! configuration. `drain` ends every stream, open or new, with the status
//! the real control plane sends on SIGTERM.
//!
//! meshlink-cp is not used here: the proxy's tests stay independent of
//! the control plane's build, and this one can be told to drain on cue.
//! Every wait polls with a deadline; nothing sleeps to let things settle.

#![allow(dead_code, unreachable_pub)] // each test file uses a part of it

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::{Stream, StreamExt as _};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

/// How long a test waits for a condition before it fails (a failure
/// timeout, not a performance bound).
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A test CA and the PEM of a server certificate (and key) it signed for
/// `localhost`.
pub struct TestPki {
    /// The CA certificate (what `--cp-ca` names).
    pub ca_pem: String,
    /// The server certificate.
    pub cert_pem: String,
    /// Its key.
    pub key_pem: String,
}

impl TestPki {
    /// A fresh CA and a `localhost` server certificate.
    pub fn new() -> TestPki {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        let key = KeyPair::generate().expect("server key");
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .expect("server params")
            .signed_by(&key, &ca)
            .expect("server certificate");
        TestPki {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// The proxy's files: the CA that verifies the control plane and a
/// dataplane token (its claims are read, never verified, by the proxy).
pub struct ProxyFiles {
    /// `--cp-ca`.
    pub ca_file: PathBuf,
    /// `--token-file`.
    pub token_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl ProxyFiles {
    /// Writes both files for `pki`.
    pub fn new(pki: &TestPki) -> ProxyFiles {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, &pki.ca_pem).expect("write CA");
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let claims = r#"{"kind":"dataplane","mesh":"default","name":"web-1","services":["web"],"iat":0,"exp":4102444800,"jti":"test"}"#;
        let token = format!(
            "{}.{}.{}",
            b64(r#"{"alg":"EdDSA"}"#),
            b64(claims),
            b64("sig")
        );
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, token).expect("write token");
        ProxyFiles {
            ca_file,
            token_file,
            _dir: dir,
        }
    }
}

/// A delta ADS server on `127.0.0.1:0`; stops when dropped.
pub struct FakeCp {
    /// The bound address.
    pub addr: SocketAddr,
    opened: watch::Receiver<usize>,
    drain: CancellationToken,
    stop: CancellationToken,
}

impl FakeCp {
    /// Starts serving with `pki`'s server certificate.
    pub async fn start(pki: &TestPki) -> FakeCp {
        FakeCp::serve(pki, None).await
    }

    /// Starts a control plane that ends its first stream while the proxy
    /// still has ACKs to send: it answers with `responses` responses
    /// without reading a request, and grants the proxy a 1 KiB send window
    /// per stream, so the proxy's ACKs back up behind flow control; then
    /// it drains (every stream, that one and new ones, ends with the
    /// status [`FakeCp::drain`] sends). The proxy finds its request side
    /// closed before it reads why the stream ended.
    pub async fn start_draining_under_acks(pki: &TestPki, responses: usize) -> FakeCp {
        FakeCp::serve(pki, Some(responses)).await
    }

    async fn serve(pki: &TestPki, flood: Option<usize>) -> FakeCp {
        let incoming = TcpIncoming::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let addr = incoming.local_addr().expect("bound address");
        let (opened_tx, opened) = watch::channel(0);
        let drain = CancellationToken::new();
        let stop = CancellationToken::new();
        let ads = Ads {
            opened: Arc::new(opened_tx),
            drain: drain.clone(),
            flood,
        };
        let tls = ServerTlsConfig::new().identity(Identity::from_pem(&pki.cert_pem, &pki.key_pem));
        let window = flood.map(|_| FLOOD_WINDOW);
        let server = Server::builder()
            .initial_stream_window_size(window)
            .tls_config(tls)
            .expect("server TLS")
            .add_service(AggregatedDiscoveryServiceServer::new(ads))
            .serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned());
        tokio::spawn(async move {
            server.await.expect("the fake control plane serves");
        });
        FakeCp {
            addr,
            opened,
            drain,
            stop,
        }
    }

    /// Its URL with the name its certificate carries.
    pub fn url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }

    /// How many delta ADS streams it has accepted.
    pub fn streams(&self) -> usize {
        *self.opened.borrow()
    }

    /// Ends every stream, open or new, with `UNAVAILABLE` "control plane
    /// shutting down; reconnect", as the real control plane does on SIGTERM.
    pub fn drain(&self) {
        self.drain.cancel();
    }
}

impl Drop for FakeCp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Prints the proxy's own log lines (debug and up) into the test's
/// captured output, so a failing run shows what the client saw and did.
/// Safe to call from every test; only the first call installs it.
pub fn show_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("meshlink_proxy=debug"))
        .with_test_writer()
        .try_init();
}

/// A port nothing listens on (bound, then released).
pub fn dead_port() -> u16 {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    socket.local_addr().expect("address").port()
}

/// Polls `f` until it returns `Some`, failing after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

type Responses<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The per-stream send window a [`FakeCp::start_draining_under_acks`]
/// grants: room for about a dozen ACKs.
const FLOOD_WINDOW: u32 = 1024;

/// The words the real control plane ends its streams with when it drains.
const SHUTTING_DOWN: &str = "control plane shutting down; reconnect";

struct Ads {
    opened: Arc<watch::Sender<usize>>,
    drain: CancellationToken,
    /// Responses the first stream sends, unread requests and all, before
    /// the control plane drains.
    flood: Option<usize>,
}

impl Ads {
    /// `n` Listener responses, then the drain status; the requests are
    /// held unread until then, so their flow-control window is never
    /// given back.
    fn flood_then_drain(
        &self,
        n: usize,
        requests: Streaming<DeltaDiscoveryRequest>,
    ) -> Responses<DeltaDiscoveryResponse> {
        let responses = (0..n).map(|i| {
            Ok(DeltaDiscoveryResponse {
                nonce: format!("flood-{i}"),
                system_version_info: i.to_string(),
                type_url: meshlink_proxy::xds::apply::LISTENER.to_owned(),
                ..Default::default()
            })
        });
        let drain = self.drain.clone();
        let end = futures::stream::once(async move {
            let _unread = requests;
            drain.cancel();
            Err(Status::unavailable(SHUTTING_DOWN))
        });
        Box::pin(futures::stream::iter(responses).chain(end))
    }
}

#[tonic::codegen::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Responses<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Responses<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        _: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("the proxy speaks delta xDS"))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        self.opened.send_modify(|n| *n += 1);
        if let Some(n) = self.flood
            && !self.drain.is_cancelled()
        {
            return Ok(Response::new(
                self.flood_then_drain(n, request.into_inner()),
            ));
        }
        let state = Some((request.into_inner(), self.drain.clone()));
        let responses = futures::stream::unfold(state, |state| async move {
            let (mut requests, drain) = state?;
            loop {
                let request = tokio::select! {
                    biased;
                    () = drain.cancelled() => {
                        let end = Status::unavailable(SHUTTING_DOWN);
                        return Some((Err(end), None));
                    }
                    r = requests.message() => r,
                };
                match request {
                    // A subscription (not an ACK): one empty response.
                    Ok(Some(r)) if r.response_nonce.is_empty() => {
                        let response = DeltaDiscoveryResponse {
                            nonce: format!("{}-1", r.type_url),
                            system_version_info: "1".into(),
                            type_url: r.type_url,
                            ..Default::default()
                        };
                        return Some((Ok(response), Some((requests, drain))));
                    }
                    Ok(Some(_ack)) => continue,
                    Ok(None) | Err(_) => return None,
                }
            }
        });
        Ok(Response::new(Box::pin(responses)))
    }
}

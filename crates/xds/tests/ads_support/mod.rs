//! An in-process ADS setup for ownership tests: the real hub, owner
//! registry and ADS server, fed by an in-memory mesh whose CA is a real
//! builtin [`MeshCa`] that the test can rotate. Streams are driven through
//! channels, so a test controls exactly when each request, close and
//! cleanup happens.

#![allow(dead_code, unreachable_pub, unused_imports)]

#[path = "../translate_fixtures/mod.rs"]
mod translate_fixtures;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, secret};
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use futures::StreamExt;
use meshlink_identity::{MeshCa, SpiffeId, WallClock};
use meshlink_xds::ads::{AdsMetrics, AdsParts, AdsServer, Authenticate, Inspector, ResponseStream};
use meshlink_xds::hub::{Hub, IdentityInfo, IssuedIdentity, MeshSource, MeshTrust, SourceError};
use meshlink_xds::owner::{OwnerRegistry, ProxyKey};
use meshlink_xds::translate::{MeshView, SECRET_TYPE};
use prost::Message;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::Status;

pub use translate_fixtures::{MESH, dataplane, mesh, permission};

/// The identity secret of the `web` service.
pub const IDENTITY: &str = "identity_cert:web";

/// An in-memory mesh: `web-<i>` dataplanes, a rotatable CA, and a record
/// of every certificate issued (chain PEM → notAfter).
pub struct MemorySource {
    view: Mutex<MeshView>,
    ca: Mutex<Arc<MeshCa>>,
    lifetime: Duration,
    pub issued: Mutex<HashMap<String, (SystemTime, String)>>,
}

impl MemorySource {
    /// A mesh with `proxies` dataplanes `web-0..`, certificates valid for
    /// `lifetime`.
    pub fn new(proxies: usize, lifetime: Duration) -> Self {
        let dataplanes = (0..proxies)
            .map(|i| dataplane(&format!("web-{i}"), "10.0.0.1", "web", 8080, &[]))
            .collect();
        Self::with_view(MeshView::new(mesh(true), dataplanes, Vec::new()), lifetime)
    }

    /// A source holding `view` (mesh [`MESH`]).
    pub fn with_view(view: MeshView, lifetime: Duration) -> Self {
        Self {
            view: Mutex::new(view),
            ca: Mutex::new(Arc::new(new_ca())),
            lifetime,
            issued: Mutex::new(HashMap::new()),
        }
    }

    /// Writes a Mesh, Dataplane, MeshService or MeshTrafficPermission into the source;
    /// the caller tells the hub.
    pub fn put(&self, r: meshlink_api::Resource) {
        let mut view = self.view.lock().unwrap();
        if r.spec.as_mesh().is_some() {
            view.set_mesh(r);
        } else if r.spec.as_dataplane().is_some() {
            view.upsert_dataplane(r);
        } else if r.spec.as_mesh_service().is_some() {
            view.upsert_mesh_service(r);
        } else if r.spec.as_mesh_traffic_permission().is_some() {
            view.upsert_permission(r);
        } else {
            view.upsert_policy(r);
        }
    }

    /// Deletes Dataplane `name` from the source; returns it.
    pub fn delete_dataplane(&self, name: &str) -> Option<meshlink_api::Resource> {
        self.view.lock().unwrap().remove_dataplane(name)
    }

    /// The source's current view.
    pub fn view(&self) -> MeshView {
        self.view.lock().unwrap().clone()
    }

    /// Replaces the CA (a CA change); the caller tells the hub.
    pub fn rotate(&self) -> String {
        let ca = Arc::new(new_ca());
        let fp = ca.fingerprint();
        *self.ca.lock().unwrap() = ca;
        fp
    }

    /// Fingerprint of the CA issuing now.
    pub fn ca_fingerprint(&self) -> String {
        self.ca.lock().unwrap().fingerprint()
    }

    /// (notAfter, CA fingerprint) of an issued chain.
    pub fn lookup(&self, chain_pem: &str) -> Option<(SystemTime, String)> {
        self.issued.lock().unwrap().get(chain_pem).cloned()
    }
}

fn new_ca() -> MeshCa {
    let material = MeshCa::generate_builtin(
        MESH,
        "ca-1",
        "example.org",
        Duration::from_secs(10 * 365 * 86400),
    )
    .expect("builtin CA");
    MeshCa::load(&material).expect("load CA")
}

#[tonic::async_trait]
impl MeshSource for MemorySource {
    async fn view(&self, mesh: &str) -> Result<Option<MeshView>, SourceError> {
        Ok((mesh == MESH).then(|| self.view.lock().unwrap().clone()))
    }

    async fn trust(&self, _mesh: &str) -> Result<Option<MeshTrust>, SourceError> {
        let ca = self.ca.lock().unwrap().clone();
        Ok(Some(MeshTrust {
            bundle_pem: ca.root_pem().to_owned(),
            ca_fingerprint: ca.fingerprint(),
        }))
    }

    async fn issue(
        &self,
        _key: &ProxyKey,
        service: &str,
        now: SystemTime,
    ) -> Result<IssuedIdentity, SourceError> {
        let ca = self.ca.lock().unwrap().clone();
        let id = SpiffeId::new("example.org", service).map_err(|e| SourceError(e.to_string()))?;
        let (cert, key_pem) = ca
            .issue_with_key(&id, self.lifetime, now)
            .map_err(|e| SourceError(e.to_string()))?;
        self.issued
            .lock()
            .unwrap()
            .insert(cert.cert_pem.clone(), (cert.not_after, ca.fingerprint()));
        Ok(IssuedIdentity {
            chain_pem: cert.cert_pem,
            key_pem,
            info: IdentityInfo {
                serial: cert.serial_hex,
                spiffe_id: cert.spiffe_id,
                ca_fingerprint: cert.ca_fingerprint,
                not_before: cert.not_before,
                not_after: cert.not_after,
            },
        })
    }
}

pub struct NoAuth;

#[tonic::async_trait]
impl Authenticate for NoAuth {
    async fn authenticate(
        &self,
        _metadata: &tonic::metadata::MetadataMap,
        _peer_certs: Option<&[tonic::transport::CertificateDer<'static>]>,
    ) -> Result<ProxyKey, Status> {
        Err(Status::unauthenticated("streams are opened in-process"))
    }
}

/// The real hub, registry and ADS server over a [`MemorySource`].
pub struct Harness {
    pub source: Arc<MemorySource>,
    pub registry: OwnerRegistry<meshlink_xds::ads::ProxyState>,
    pub hub: Hub,
    pub server: AdsServer,
    pub inspector: Inspector,
    pub clock: WallClock,
    cancel: CancellationToken,
}

impl Harness {
    /// Asserts that what the hub published to each of `names` (Envoy
    /// proxies in [`MESH`]) has the versions a full translation of the
    /// current view gives: incremental updates missed nothing.
    pub fn assert_current(&self, names: &[&str]) {
        use meshlink_xds::translate::{
            CLUSTER_TYPE, ClientKind, ENDPOINT_TYPE, LISTENER_TYPE, ProxyContext, ROUTE_TYPE,
            SecretsInput, translate,
        };
        let view = self.source.view();
        for &name in names {
            let published = self
                .registry
                .state(&ProxyKey::new(MESH, name))
                .unwrap_or_else(|| panic!("{name}: nothing published"));
            let proxy = ProxyContext {
                mesh: MESH.into(),
                name: name.into(),
                client: ClientKind::Envoy,
                secrets: SecretsInput::default(),
            };
            let full = translate(&proxy, &view);
            for t in [LISTENER_TYPE, ROUTE_TYPE, CLUSTER_TYPE, ENDPOINT_TYPE] {
                assert_eq!(
                    published.snapshot.versions(t),
                    full.versions(t),
                    "{name}: {t} differs from a full translation"
                );
            }
        }
    }

    pub fn new(source: MemorySource) -> Self {
        let source = Arc::new(source);
        let registry = OwnerRegistry::new();
        let clock = WallClock::start();
        let cancel = CancellationToken::new();
        let hub = Hub::spawn(source.clone(), registry.clone(), clock, cancel.clone());
        let inspector = Inspector::default();
        let server = AdsServer::new(AdsParts {
            registry: registry.clone(),
            hub: hub.clone(),
            auth: Arc::new(NoAuth),
            inspector: inspector.clone(),
            metrics: AdsMetrics::default(),
            clock,
            instance: "test".into(),
        });
        Self {
            source,
            registry,
            hub,
            server,
            inspector,
            clock,
            cancel,
        }
    }

    /// Opens a SotW stream for `web-<i>` (it registers as the owner at its
    /// first request).
    pub fn open(&self, name: &str) -> Stream {
        self.open_with(name, None)
    }

    /// Opens a stream for each of `names`, reads each one's first
    /// response and ACKs it.
    pub async fn open_acked(&self, names: &[&str]) -> Vec<Stream> {
        let mut streams = Vec::new();
        for name in names {
            let mut s = self.open(name);
            s.request(None).await;
            let first = s.next_untimed().await.expect("served").expect("no error");
            s.request(Some(&first)).await;
            streams.push(s);
        }
        streams
    }

    /// Opens a SotW stream for `name` authenticated by proxy token
    /// `token_id` (revoking it ends the stream).
    pub fn open_with(&self, name: &str, token_id: Option<&str>) -> Stream {
        let (tx, rx) = mpsc::channel(16);
        let credential = meshlink_xds::ads::Credential {
            key: ProxyKey::new(MESH, name),
            token_id: token_id.map(str::to_owned),
            peer: None,
        };
        let (responses, task) = self
            .server
            .serve_sotw_as(credential, ReceiverStream::new(rx));
        Stream {
            name: name.to_owned(),
            tx: Some(tx),
            responses,
            task: Some(task),
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// One in-process stream.
pub struct Stream {
    pub name: String,
    tx: Option<mpsc::Sender<Result<DiscoveryRequest, Status>>>,
    pub responses: ResponseStream<DiscoveryResponse>,
    task: Option<JoinHandle<()>>,
}

/// The SDS request an Envoy sidecar for `web` sends.
pub fn sds_request(name: &str, nonce: &str, version: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        node: Some(envoy_types::pb::envoy::config::core::v3::Node {
            id: format!("{MESH}.{name}"),
            ..Default::default()
        }),
        type_url: SECRET_TYPE.to_owned(),
        resource_names: vec![IDENTITY.to_owned(), format!("mesh_ca:{MESH}")],
        response_nonce: nonce.to_owned(),
        version_info: version.to_owned(),
        ..Default::default()
    }
}

impl Stream {
    /// Sends the SDS request (or an ACK when `ack` is a response).
    pub async fn request(&mut self, ack: Option<&DiscoveryResponse>) {
        let req = match ack {
            Some(r) => sds_request(&self.name, &r.nonce, &r.version_info),
            None => sds_request(&self.name, "", ""),
        };
        if let Some(tx) = &self.tx {
            let _ = tx.send(Ok(req)).await;
        }
    }

    /// The next item: a response, the end status, or `None` at a clean end.
    pub async fn next(&mut self) -> Option<Result<DiscoveryResponse, Status>> {
        tokio::time::timeout(Duration::from_secs(30), self.responses.next())
            .await
            .expect("a response or the end of the stream within 30 s")
    }

    /// The next item without a deadline (for paused-time tests, where a
    /// wait that can never finish is caught by the runtime instead).
    pub async fn next_untimed(&mut self) -> Option<Result<DiscoveryResponse, Status>> {
        self.responses.next().await
    }

    /// Closes the client side and waits until the server ran the stream's
    /// cleanup.
    pub async fn close_and_cleanup(&mut self) {
        self.tx = None;
        if let Some(task) = self.task.take() {
            task.await.expect("stream task");
        }
    }
}

/// The identity certificate PEM in a Secret response, if it has one.
pub fn identity_pem(resp: &DiscoveryResponse) -> Option<String> {
    resp.resources.iter().find_map(|any| {
        let s = Secret::decode(any.value.as_slice()).ok()?;
        if s.name != IDENTITY {
            return None;
        }
        match s.r#type? {
            secret::Type::TlsCertificate(c) => match c.certificate_chain?.specifier? {
                envoy_types::pb::envoy::config::core::v3::data_source::Specifier::InlineString(
                    p,
                ) => Some(p),
                _ => None,
            },
            _ => None,
        }
    })
}

//! The ADS server: Envoy v3 aggregated discovery, state-of-the-world and
//! delta, over tonic.
//!
//! # What it owns
//!
//! Per stream: authentication (through [`Authenticate`]), the owner lease
//! (invariant I1, see [`crate::owner`]), the protocol engine (SotW or
//! delta: what was sent, ACKed, NACKed, subscribed), and the per-proxy
//! renewal timer. The translated state comes from the [`Hub`] through the
//! owner's watch channel; a stream never computes configuration itself.
//!
//! # Lifecycle of a stream
//!
//! 0. Admission: a token bucket ([`Admission`]) refuses streams beyond what
//!    this instance can take now with `RESOURCE_EXHAUSTED` and a
//!    `retry-after-ms` hint, before any credential is checked.
//! 1. The credential (token or client certificate) names a proxy key. A
//!    token-authenticated stream is bound to its token id, so revoking the
//!    token ([`AdsServer::revoke_token`]) ends it with `PERMISSION_DENIED`.
//! 2. The first request must carry `node.id == "<mesh>.<name>"` of that key.
//!    Only then does the stream register as the key's owner, taking over
//!    from any older stream (which ends with `ABORTED`), and the hub is told
//!    the proxy connected. A stream with a wrong node.id never disturbs the
//!    current owner.
//! 3. Requests (subscriptions, ACKs, NACKs) and new states are handled in
//!    one loop; responses follow make-before-break order.
//! 4. When the stream ends, its lease is released (compare-and-delete) and
//!    the hub is told, naming the owner id so a newer stream is untouched.
//! 5. [`AdsServer::drain`] ends every stream with `UNAVAILABLE` ("control
//!    plane shutting down; reconnect"); every stream task is tracked, so
//!    [`AdsServer::wait_streams`] returns once all of them ran their cleanup.

mod admission;
mod delta;
mod gate;
mod grpc;
mod inline_body;
mod inspect;
mod metrics;
mod request_stream;
mod response_body;
mod revocation;
mod sotw;
mod stream;
mod subscription;
#[cfg(test)]
mod test_state;
mod types;

use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryService;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::Stream;
use meshlink_identity::WallClock;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::metadata::MetadataMap;
use tonic::transport::CertificateDer;
use tonic::{Request, Response, Status, Streaming};

pub use admission::{Admission, AdmissionConfig, RETRY_AFTER_MS, RetryAfter};
pub use grpc::AdsService;
pub use inspect::{Holder, Inspector, StreamObserver, StreamReport, StreamView};
pub use metrics::{AdsMetrics, REJECT_REASONS};
pub use stream::SHUTTING_DOWN_MESSAGE;
pub use types::{NackReport, TypeReport, short_type};

use crate::hub::{Hub, IdentityInfo};
use crate::owner::{OwnerRegistry, ProxyKey};
use crate::translate::Snapshot;

/// What the hub publishes to a proxy's stream owner.
#[derive(Debug)]
pub struct ProxyState {
    /// Every resource of the proxy.
    pub snapshot: Snapshot,
    /// The identity certificate in the snapshot's identity secret, if any;
    /// shared by every state published with the same certificate.
    pub identity: Option<Arc<IdentityInfo>>,
    /// When the owner's timer should ask for a new identity.
    pub renew_at: Option<SystemTime>,
    /// When the change that led to this state reached the control plane
    /// (for the change-to-ACK latency).
    pub changed_at: Instant,
}

/// Who is on a stream: the proxy key its credential names, and the token id
/// (`jti`) when the credential is a proxy token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The proxy the credential is for.
    pub key: ProxyKey,
    /// The proxy token's id; `None` for a client certificate (such streams
    /// are not bound to a token and end only when the certificate's
    /// dataplane is taken over or the instance drains).
    pub token_id: Option<String>,
    /// The address the stream came from (the server fills it in from the
    /// connection; `None` for in-process streams). It names the stream's
    /// holder in the Dataplane's `DuplicateHolder` condition, nothing more.
    pub peer: Option<std::net::SocketAddr>,
}

impl Credential {
    /// A credential without a token (in-process tests, client certificates).
    pub fn untokened(key: ProxyKey) -> Self {
        Self {
            key,
            token_id: None,
            peer: None,
        }
    }

    /// What the credential is, for error messages ("the token's" / "the
    /// client certificate's").
    pub(crate) fn noun(&self) -> &'static str {
        if self.token_id.is_some() {
            "the token's"
        } else {
            "the credential's"
        }
    }
}

/// Checks a stream's credential and says which proxy it belongs to.
#[tonic::async_trait]
pub trait Authenticate: Send + Sync + 'static {
    /// The proxy key the caller's credential names: from `authorization:
    /// Bearer <token>` in `metadata`, or from the verified client
    /// certificate chain `peer_certs`. Errors are returned to the client
    /// as-is, so they must say what to fix.
    async fn authenticate(
        &self,
        metadata: &MetadataMap,
        peer_certs: Option<&[CertificateDer<'static>]>,
    ) -> Result<ProxyKey, Status>;

    /// Like [`Authenticate::authenticate`], and also names the token id so
    /// that revoking it ends the stream. The default binds no token.
    async fn credential(
        &self,
        metadata: &MetadataMap,
        peer_certs: Option<&[CertificateDer<'static>]>,
    ) -> Result<Credential, Status> {
        self.authenticate(metadata, peer_certs)
            .await
            .map(Credential::untokened)
    }
}

/// A boxed response stream.
pub type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// Everything streams share.
pub(crate) struct Shared {
    pub(crate) registry: OwnerRegistry<ProxyState>,
    pub(crate) hub: Hub,
    pub(crate) auth: Arc<dyn Authenticate>,
    pub(crate) inspector: Inspector,
    pub(crate) metrics: AdsMetrics,
    pub(crate) clock: WallClock,
    pub(crate) instance: String,
    /// Stream admission; `None` admits every stream.
    pub(crate) admission: Option<Admission>,
    /// The router reconciler; `None`: router streams get no configuration.
    pub(crate) routers: Option<crate::router::RouterHub>,
    /// Token id → open streams.
    pub(crate) revocations: revocation::Revocations,
    /// Cancelled by [`AdsServer::drain`].
    pub(crate) draining: CancellationToken,
    /// Every stream: stream tasks, and a token per stream run by its
    /// response body.
    pub(crate) streams: TaskTracker,
    /// The stalled-stream watchers of the streams run by their bodies.
    pub(crate) watchers: TaskTracker,
    /// Stream ids for token bindings (owner ids come later, at registration).
    pub(crate) next_stream: std::sync::atomic::AtomicU64,
}

// === impl Shared ===

impl Shared {
    /// Tells the reconciler of `key` (the router hub for a router, the hub
    /// otherwise) that its owner's stream is serving.
    pub(crate) fn connected(
        &self,
        key: ProxyKey,
        owner: crate::owner::OwnerId,
        client: crate::translate::ClientKind,
        identity_policy: bool,
    ) {
        if key.is_router() {
            if let Some(routers) = &self.routers {
                routers.connected(key, owner);
            }
        } else {
            self.hub.connected(key, owner, client, identity_policy);
        }
    }

    /// Tells the reconciler of `key` that its owner's stream ended.
    pub(crate) fn disconnected(&self, key: ProxyKey, owner: crate::owner::OwnerId) {
        if key.is_router() {
            if let Some(routers) = &self.routers {
                routers.disconnected(key, owner);
            }
        } else {
            self.hub.disconnected(key, owner);
        }
    }
}

/// The ADS service. Cheap to clone.
#[derive(Clone)]
pub struct AdsServer {
    shared: Arc<Shared>,
}

/// The parts an [`AdsServer`] is built from.
pub struct AdsParts {
    /// Owner records (shared with the hub).
    pub registry: OwnerRegistry<ProxyState>,
    /// The reconciler.
    pub hub: Hub,
    /// Credential checks.
    pub auth: Arc<dyn Authenticate>,
    /// Stream reports.
    pub inspector: Inspector,
    /// Metrics.
    pub metrics: AdsMetrics,
    /// The clock renewal timers use.
    pub clock: WallClock,
    /// This control-plane instance's name, sent in every response.
    pub instance: String,
}

/// Optional behaviour of an [`AdsServer`].
#[derive(Debug, Clone, Default)]
pub struct AdsOptions {
    /// Admit new streams through this token bucket; `None` admits all.
    pub admission: Option<AdmissionConfig>,
    /// Serve site routers (router-token streams) from this reconciler.
    pub routers: Option<crate::router::RouterHub>,
}

// === impl AdsServer ===

impl AdsServer {
    /// Builds the service (every stream admitted).
    pub fn new(parts: AdsParts) -> Self {
        Self::with_options(parts, AdsOptions::default())
    }

    /// Builds the service with `options`.
    pub fn with_options(parts: AdsParts, options: AdsOptions) -> Self {
        let AdsParts {
            registry,
            hub,
            auth,
            inspector,
            metrics,
            clock,
            instance,
        } = parts;
        Self {
            shared: Arc::new(Shared {
                registry,
                hub,
                auth,
                inspector,
                metrics,
                clock,
                instance,
                admission: options.admission.map(Admission::new),
                routers: options.routers,
                revocations: revocation::Revocations::default(),
                draining: CancellationToken::new(),
                streams: TaskTracker::new(),
                watchers: TaskTracker::new(),
                next_stream: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// Ends every open stream with `UNAVAILABLE` ("control plane shutting
    /// down; reconnect") and refuses new ones the same way. Idempotent.
    pub fn drain(&self) {
        self.shared.draining.cancel();
        self.shared.streams.close();
        self.shared.watchers.close();
    }

    /// Resolves once [`AdsServer::drain`] was called and every stream has
    /// run its cleanup.
    pub async fn wait_streams(&self) {
        self.shared.draining.cancelled().await;
        self.shared.streams.wait().await;
        self.shared.watchers.wait().await;
    }

    /// Number of streams still open.
    pub fn live_streams(&self) -> usize {
        self.shared.streams.len()
    }

    /// Revokes proxy token `jti` on this instance: its open streams end
    /// with `PERMISSION_DENIED` naming the revocation, and a stream whose
    /// credential check raced the revocation is ended when it registers.
    /// Returns how many open streams were ended.
    pub fn revoke_token(&self, jti: &str) -> usize {
        let ended = self.shared.revocations.revoke(jti);
        if ended > 0 {
            tracing::info!(
                token = jti,
                streams = ended,
                "token revoked; ending its ADS streams"
            );
        }
        ended
    }

    /// Number of token ids that have open streams (for leak checks).
    pub fn bound_tokens(&self) -> usize {
        self.shared.revocations.bound_tokens()
    }

    /// Serves one already-authenticated SotW stream for `key`. Returns the
    /// responses and the stream task, which ends after the stream's cleanup
    /// ran. (tonic uses this too; tests call it to control interleavings.)
    pub fn serve_sotw<I>(
        &self,
        key: ProxyKey,
        requests: I,
    ) -> (ResponseStream<DiscoveryResponse>, JoinHandle<()>)
    where
        I: Stream<Item = Result<DiscoveryRequest, Status>> + Send + Unpin + 'static,
    {
        self.serve_sotw_as(Credential::untokened(key), requests)
    }

    /// Serves one SotW stream for `credential` (see [`AdsServer::serve_sotw`]).
    pub fn serve_sotw_as<I>(
        &self,
        credential: Credential,
        requests: I,
    ) -> (ResponseStream<DiscoveryResponse>, JoinHandle<()>)
    where
        I: Stream<Item = Result<DiscoveryRequest, Status>> + Send + Unpin + 'static,
    {
        let engine = sotw::SotwEngine::new(self.shared.instance.clone());
        stream::open(self.shared.clone(), credential, engine, requests)
    }

    /// Serves one already-authenticated delta stream for `key` (see
    /// [`AdsServer::serve_sotw`]).
    pub fn serve_delta<I>(
        &self,
        key: ProxyKey,
        requests: I,
    ) -> (ResponseStream<DeltaDiscoveryResponse>, JoinHandle<()>)
    where
        I: Stream<Item = Result<DeltaDiscoveryRequest, Status>> + Send + Unpin + 'static,
    {
        self.serve_delta_as(Credential::untokened(key), requests)
    }

    /// Serves one delta stream for `credential` (see [`AdsServer::serve_sotw`]).
    pub fn serve_delta_as<I>(
        &self,
        credential: Credential,
        requests: I,
    ) -> (ResponseStream<DeltaDiscoveryResponse>, JoinHandle<()>)
    where
        I: Stream<Item = Result<DeltaDiscoveryRequest, Status>> + Send + Unpin + 'static,
    {
        let engine = delta::DeltaEngine::new(self.shared.instance.clone());
        stream::open(self.shared.clone(), credential, engine, requests)
    }

    /// Admits and serves a state-of-the-world stream whose requests come
    /// from `request`'s body (decoded by tonic or by the xDS port's own
    /// [`AdsService`]).
    pub(crate) async fn sotw_request<I>(
        &self,
        request: Request<I>,
    ) -> Result<Response<ResponseStream<DiscoveryResponse>>, Status>
    where
        I: Stream<Item = Result<DiscoveryRequest, Status>> + Send + Unpin + 'static,
    {
        self.admit_and_serve(request, Self::serve_sotw_as).await
    }

    /// [`AdsServer::sotw_request`] for a delta stream.
    pub(crate) async fn delta_request<I>(
        &self,
        request: Request<I>,
    ) -> Result<Response<ResponseStream<DeltaDiscoveryResponse>>, Status>
    where
        I: Stream<Item = Result<DeltaDiscoveryRequest, Status>> + Send + Unpin + 'static,
    {
        self.admit_and_serve(request, Self::serve_delta_as).await
    }

    /// Admits a state-of-the-world stream and returns the response body
    /// that runs it (the xDS port's [`AdsService`]).
    pub(crate) async fn sotw_body<I>(
        &self,
        request: Request<I>,
    ) -> Result<inline_body::InlineBody<DiscoveryResponse>, Status>
    where
        I: Stream<Item = Result<DiscoveryRequest, Status>> + Send + Unpin + 'static,
    {
        let engine = sotw::SotwEngine::new(self.shared.instance.clone());
        self.admit_body(request, engine).await
    }

    /// [`AdsServer::sotw_body`] for a delta stream.
    pub(crate) async fn delta_body<I>(
        &self,
        request: Request<I>,
    ) -> Result<inline_body::InlineBody<DeltaDiscoveryResponse>, Status>
    where
        I: Stream<Item = Result<DeltaDiscoveryRequest, Status>> + Send + Unpin + 'static,
    {
        let engine = delta::DeltaEngine::new(self.shared.instance.clone());
        self.admit_body(request, engine).await
    }

    /// Admission and the credential check, then the body that runs the
    /// stream with `engine`.
    async fn admit_body<E, I>(
        &self,
        request: Request<I>,
        engine: E,
    ) -> Result<inline_body::InlineBody<E::Resp>, Status>
    where
        E: stream::Engine,
        E::Resp: prost::Message,
        I: Stream<Item = Result<E::Req, Status>> + Send + Unpin + 'static,
    {
        let (credential, requests) = self.admit_request(request).await?;
        Ok(stream::open_inline(
            self.shared.clone(),
            credential,
            engine,
            requests,
        ))
    }

    /// Admission and the credential check of `request`; returns the
    /// credential and the request body. Admission reads only the metadata
    /// and the peer certificates; the body (which need not be `Sync`) is
    /// not held across that await.
    async fn admit_request<I>(&self, request: Request<I>) -> Result<(Credential, I), Status> {
        let peer = request.remote_addr();
        let (metadata, extensions, requests) = request.into_parts();
        let mut credential = self
            .admit(&Request::from_parts(metadata, extensions, ()))
            .await?;
        credential.peer = peer;
        Ok((credential, requests))
    }

    /// Admission and the credential check, then `serve` with the body's
    /// requests (see [`AdsServer::admit_request`]).
    async fn admit_and_serve<I, R>(
        &self,
        request: Request<I>,
        serve: impl FnOnce(&Self, Credential, I) -> (ResponseStream<R>, JoinHandle<()>),
    ) -> Result<Response<ResponseStream<R>>, Status> {
        let (credential, requests) = self.admit_request(request).await?;
        // The task is owned by the server's tracker (drain waits for it).
        let (responses, _tracked) = serve(self, credential, requests);
        Ok(Response::new(responses))
    }

    /// Admission, then the credential check.
    async fn admit<T>(&self, request: &Request<T>) -> Result<Credential, Status> {
        let refused = |reason: &'static str, status: Status| {
            self.shared.metrics.rejected(reason);
            tracing::info!(reason, code = ?status.code(), message = status.message(), "ADS stream refused");
            status
        };
        if self.shared.draining.is_cancelled() {
            return Err(refused("shutdown", stream::shutting_down()));
        }
        if let Some(admission) = &self.shared.admission
            && let Err(RetryAfter(after)) = admission.try_admit()
        {
            let ms = after.as_millis().max(1);
            let mut status = Status::resource_exhausted(format!(
                "this control plane is admitting {} new streams per second and is at its limit; \
                 retry in {ms} ms",
                admission.config().per_second
            ));
            if let Ok(v) = ms.to_string().parse() {
                status.metadata_mut().insert(RETRY_AFTER_MS, v);
            }
            return Err(refused("admission", status));
        }
        let certs = request.peer_certs();
        self.shared
            .auth
            .credential(request.metadata(), certs.as_deref().map(Vec::as_slice))
            .await
            .map_err(|status| refused("unauthenticated", status))
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for AdsServer {
    type StreamAggregatedResourcesStream = ResponseStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = ResponseStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        self.sotw_request(request).await
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        self.delta_request(request).await
    }
}

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
//! 1. The credential (token or client certificate) names a proxy key; the
//!    stream registers as its owner at once, taking over from any older
//!    stream, which ends with `ABORTED`.
//! 2. The first request must carry `node.id == "<mesh>.<name>"` of that key;
//!    then the hub is told the proxy connected, and it publishes state.
//! 3. Requests (subscriptions, ACKs, NACKs) and new states are handled in
//!    one loop; responses follow make-before-break order.
//! 4. When the stream ends, its lease is released (compare-and-delete) and
//!    the hub is told, naming the owner id so a newer stream is untouched.

mod delta;
mod dump;
mod inspect;
mod metrics;
mod sotw;
mod stream;
mod subscription;
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
use tonic::metadata::MetadataMap;
use tonic::transport::CertificateDer;
use tonic::{Request, Response, Status, Streaming};

pub use dump::config_dump;
pub use inspect::{Inspector, StreamObserver, StreamReport, StreamView};
pub use metrics::AdsMetrics;
pub use types::{NackReport, TypeReport, short_type};

use crate::hub::{Hub, IdentityInfo};
use crate::owner::{OwnerRegistry, ProxyKey};
use crate::translate::Snapshot;

/// What the hub publishes to a proxy's stream owner.
#[derive(Debug)]
pub struct ProxyState {
    /// Every resource of the proxy.
    pub snapshot: Snapshot,
    /// The identity certificate in the snapshot's identity secret, if any.
    pub identity: Option<IdentityInfo>,
    /// When the owner's timer should ask for a new identity.
    pub renew_at: Option<SystemTime>,
    /// When the change that led to this state reached the control plane
    /// (for the change-to-ACK latency).
    pub changed_at: Instant,
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

// === impl AdsServer ===

impl AdsServer {
    /// Builds the service.
    pub fn new(parts: AdsParts) -> Self {
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
            }),
        }
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
        let engine = sotw::SotwEngine::new(self.shared.instance.clone());
        stream::open(self.shared.clone(), key, engine, requests)
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
        let engine = delta::DeltaEngine::new(self.shared.instance.clone());
        stream::open(self.shared.clone(), key, engine, requests)
    }

    async fn authenticate<T>(&self, request: &Request<T>) -> Result<ProxyKey, Status> {
        let certs = request.peer_certs();
        let r = self
            .shared
            .auth
            .authenticate(request.metadata(), certs.as_deref().map(Vec::as_slice))
            .await;
        if let Err(status) = &r {
            self.shared.metrics.rejected();
            tracing::info!(code = ?status.code(), message = status.message(), "ADS stream refused");
        }
        r
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
        let key = self.authenticate(&request).await?;
        let (responses, _task) = self.serve_sotw(key, request.into_inner());
        Ok(Response::new(responses))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let key = self.authenticate(&request).await?;
        let (responses, _task) = self.serve_delta(key, request.into_inner());
        Ok(Response::new(responses))
    }
}

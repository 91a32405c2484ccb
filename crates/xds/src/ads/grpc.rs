//! The ADS gRPC service as the xDS port serves it: the two methods of
//! Envoy's `AggregatedDiscoveryService`, routed to [`AdsServer`] like the
//! generated `AggregatedDiscoveryServiceServer` does, but with per-stream
//! codec buffers sized for xDS traffic.
//!
//! The generated server uses tonic's default codec buffers, 8 KiB for
//! encoding and 8 KiB for decoding, allocated when a stream opens and kept
//! for its life. An ADS stream is long-lived and mostly idle, and its
//! messages are small (an ACK is a few hundred bytes), so those two
//! buffers were 16 KiB of every connected proxy's ~50 KiB in the control
//! plane (heap profile of 2,000 connected proxies). Here they start at
//! [`STREAM_BUFFER`] and grow only for a stream whose messages need it
//! (Envoy's first request, with its node metadata, is the usual one).

use std::convert::Infallible;
use std::marker::PhantomData;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryService;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use tonic::codec::{BufferSettings, Codec};
use tonic::codegen::{Body, BoxFuture, Context, Poll, Service, StdError, http};
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::{Status, Streaming};
use tonic_prost::ProstCodec;

use super::{AdsServer, ResponseStream};

/// Initial size of a stream's encode and decode buffers (tonic's default
/// is 8 KiB each).
pub const STREAM_BUFFER: usize = 1024;

/// Encoded bytes after which a response stream yields (tonic's default).
const YIELD_THRESHOLD: usize = 32 * 1024;

const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// The ADS service for a tonic server (`Server::builder().add_service`).
#[derive(Clone)]
pub struct AdsService {
    ads: AdsServer,
}

impl AdsService {
    /// Serves `ads` on both ADS methods.
    pub fn new(ads: AdsServer) -> Self {
        Self { ads }
    }
}

impl NamedService for AdsService {
    const NAME: &'static str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
}

impl<B> Service<http::Request<B>> for AdsService
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let ads = self.ads.clone();
        match req.uri().path() {
            SOTW_PATH => Box::pin(async move {
                Ok(Grpc::new(SmallBuffers::default())
                    .streaming(Sotw(ads), req)
                    .await)
            }),
            DELTA_PATH => Box::pin(async move {
                Ok(Grpc::new(SmallBuffers::default())
                    .streaming(Delta(ads), req)
                    .await)
            }),
            _ => Box::pin(async move { Ok(Status::unimplemented("").into_http()) }),
        }
    }
}

/// tonic's prost codec with [`STREAM_BUFFER`]-sized buffers.
struct SmallBuffers<T, U>(PhantomData<fn() -> (T, U)>);

impl<T, U> Default for SmallBuffers<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for SmallBuffers<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = <ProstCodec<T, U> as Codec>::Decoder;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::new(STREAM_BUFFER, YIELD_THRESHOLD))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(BufferSettings::new(STREAM_BUFFER, YIELD_THRESHOLD))
    }
}

/// `StreamAggregatedResources` (state of the world).
struct Sotw(AdsServer);

impl StreamingService<DiscoveryRequest> for Sotw {
    type Response = DiscoveryResponse;
    type ResponseStream = ResponseStream<DiscoveryResponse>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: tonic::Request<Streaming<DiscoveryRequest>>) -> Self::Future {
        let ads = self.0.clone();
        Box::pin(async move { ads.stream_aggregated_resources(request).await })
    }
}

/// `DeltaAggregatedResources` (incremental).
struct Delta(AdsServer);

impl StreamingService<DeltaDiscoveryRequest> for Delta {
    type Response = DeltaDiscoveryResponse;
    type ResponseStream = ResponseStream<DeltaDiscoveryResponse>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: tonic::Request<Streaming<DeltaDiscoveryRequest>>) -> Self::Future {
        let ads = self.0.clone();
        Box::pin(async move { ads.delta_aggregated_resources(request).await })
    }
}

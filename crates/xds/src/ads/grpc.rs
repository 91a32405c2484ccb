//! The ADS gRPC service as the xDS port serves it: the two methods of
//! Envoy's `AggregatedDiscoveryService`, routed to [`AdsServer`] like the
//! generated `AggregatedDiscoveryServiceServer` does, but with stream
//! buffers sized for xDS traffic.
//!
//! The generated server uses tonic's default codec buffers, 8 KiB for
//! encoding and 8 KiB for decoding, allocated when a stream opens and kept
//! for its life; the encode buffer then stays at the size of the largest
//! response the stream sent, the decode buffer at the largest request's
//! (an Envoy's first request, with its node and extension list, is several
//! KiB). An ADS stream is long-lived and mostly idle. Here requests are
//! decoded into a buffer that exists only while a message is arriving
//! ([`super::request_stream`]), and responses are encoded one buffer per
//! message ([`super::response_body`]), so an idle stream holds neither.

use std::convert::Infallible;

use tonic::Status;
use tonic::codegen::{Body, BoxFuture, Context, Poll, Service, StdError, http};
use tonic::server::NamedService;

use super::AdsServer;
use super::request_stream::Requests;
use super::response_body::inline_response;

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
    B: Body + Send + Unpin + 'static,
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
                Ok(match requests(req) {
                    Ok(req) => inline_response(ads.sotw_body(req).await),
                    Err(status) => status.into_http(),
                })
            }),
            DELTA_PATH => Box::pin(async move {
                Ok(match requests(req) {
                    Ok(req) => inline_response(ads.delta_body(req).await),
                    Err(status) => status.into_http(),
                })
            }),
            _ => Box::pin(async move { Ok(Status::unimplemented("").into_http()) }),
        }
    }
}

/// The request body as a stream of decoded messages. Compressed requests
/// are refused: this server offers no `grpc-accept-encoding`, so a client
/// that compresses anyway gets a clear `UNIMPLEMENTED`.
fn requests<B, T>(req: http::Request<B>) -> Result<tonic::Request<Requests<B, T>>, Status>
where
    B: Body + Send + Unpin + 'static,
    B::Error: Into<StdError> + Send + 'static,
    T: prost::Message + Default + Send + 'static,
{
    if let Some(encoding) = req.headers().get("grpc-encoding")
        && encoding.as_bytes() != b"identity"
    {
        return Err(Status::unimplemented(format!(
            "request compressed with {:?}; this control plane accepts uncompressed requests only",
            String::from_utf8_lossy(encoding.as_bytes())
        )));
    }
    Ok(tonic::Request::from_http(req.map(Requests::new)))
}

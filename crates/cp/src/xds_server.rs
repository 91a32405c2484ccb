//! The gRPC server on `--xds-addr`: TLS with the cp-tls serving certificate,
//! an optional client certificate (for clients that cannot send a token),
//! the ADS service (SotW and delta), the Certify service, the routers'
//! RouterStatus service and the sidecars' DataplaneHealth service.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use meshlink_identity::KeyedRateLimiter;
use meshlink_runtime::Shutdown;
use meshlink_xds::ads::{AdsServer, AdsService};
use meshlink_xds::certify::certify_server::CertifyServer;
use meshlink_xds::certify::dataplane_health_server::DataplaneHealthServer;
use meshlink_xds::certify::router_status_server::RouterStatusServer;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

use crate::coalesced_writes::CoalescedWrites;
use crate::identity::certify::CertifyService;
use crate::identity::issuance::IssuanceHooks;
use crate::identity::tokens::TokenService;
use crate::resources::ResourceService;
use crate::{CpError, cp_tls::CpTls};

/// Accept backlog of the xDS listener: a reconnect storm of thousands of
/// proxies must queue in the kernel, not be dropped (tokio's default is
/// 1,024, which the storm benchmark saw overflow).
pub(crate) const XDS_BACKLOG: u32 = 4096;

/// Certify requests allowed per token in a burst, and refilled per second.
const CERTIFY_BURST: u32 = 10;
const CERTIFY_PER_SECOND: f64 = 1.0;

/// Serves xDS on the bound port; returns its address and the server future.
/// `ca` serves Certify the mesh CAs; `issuance` is told about every
/// certificate Certify issues.
#[allow(clippy::too_many_arguments)] // each part is distinct; a struct would only rename them
pub(crate) async fn start(
    bound: (tokio::net::TcpListener, std::net::SocketAddr),
    tls: &CpTls,
    resources: ResourceService,
    tokens: Arc<TokenService>,
    ads: AdsServer,
    issuance: IssuanceHooks,
    registry: &meshlink_runtime::MetricsRegistry,
    shutdown: Shutdown,
    ca: crate::identity::CaHandle,
    router_status: crate::router::rpc::RouterStatusService,
    dataplane_health: crate::ads::DataplaneHealthService,
) -> Result<
    (
        std::net::SocketAddr,
        impl std::future::Future<Output = Result<(), CpError>> + Send + 'static,
    ),
    CpError,
> {
    let (listener, addr) = bound;
    let tls_config = ServerTlsConfig::new()
        .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem))
        .client_ca_root(Certificate::from_pem(&tls.ca_pem))
        .client_auth_optional(true);
    let limiter = KeyedRateLimiter::new(CERTIFY_BURST, CERTIFY_PER_SECOND)
        .expect("static rate-limit settings are valid");
    let certify =
        CertifyService::new(resources, tokens, limiter, registry, ca).with_hooks(issuance);
    let router = Server::builder()
        .tls_config(tls_config)
        .map_err(|e| CpError::Serve(format!("xDS TLS configuration: {e}")))?
        // Dead peers are noticed within ~40 s even if TCP stays silent.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .add_service(CertifyServer::new(certify))
        .add_service(RouterStatusServer::new(router_status))
        .add_service(DataplaneHealthServer::new(dataplane_health))
        .add_service(AdsService::new(ads.clone()));
    // Each connection's writes are batched per scheduler pass (see
    // coalesced_writes.rs): one write for many streams' responses.
    let incoming = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .map(|accepted| accepted.map(CoalescedWrites::new));
    let fut = async move {
        router
            .serve_with_incoming_shutdown(incoming, async move {
                shutdown.wait().await;
                // Stop accepting (tonic) and end every open stream with
                // UNAVAILABLE, so the graceful shutdown has nothing to wait
                // for but in-flight Certify calls.
                ads.drain();
            })
            .await
            .map_err(|e| CpError::Serve(format!("xDS server failed: {e}")))
    };
    Ok((addr, fut))
}

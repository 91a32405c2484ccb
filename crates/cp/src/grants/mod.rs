//! Multi-site access grants (DESIGN.md §9): the grant server that redeems
//! AccessGrants for other sites, and the client that redeems this site's
//! AccessTokens.
//!
//! - [`server`]: HTTPS on `--grant-addr`, TLS 1.3, the failure table;
//! - [`redeem`]: the checks and the counting compare-and-swap;
//! - [`response`]: the Secret + Links YAML stream (also `link generate`);
//! - [`renew`]: `POST /renew`, renewing a link client certificate;
//! - [`client`]: POSTing a token's code (TLS 1.3, only the token's CA).

pub mod client;
pub mod redeem;
pub mod renew;
pub mod response;
pub mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use meshlink_runtime::Shutdown;

use crate::CpError;
use crate::resources::ResourceService;
use crate::site::{SiteContext, SiteController, ca_store};

/// How long the grant server's own serving certificate is valid; a new one
/// is issued at every start.
const SERVING_CERT_LIFETIME: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

/// The bound grant server and the site controller, ready to spawn.
pub struct GrantParts {
    /// The bound grant server address.
    pub addr: SocketAddr,
    /// The server task.
    pub server: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    /// The site controller.
    pub controller: SiteController,
    /// Where the link credentials this site issues are renewed.
    pub renew_at: response::RenewAt,
}

/// Binds `--grant-addr`, prepares the grant server's TLS (its CA from the
/// store, created once; a serving certificate for the advertised host,
/// `localhost`, `127.0.0.1`, `::1` and the hostname) and builds the site
/// controller. `port` carries the limits against slow clients.
pub(crate) async fn start(
    grant_addr: SocketAddr,
    resources: &ResourceService,
    advertised_host: &str,
    port: crate::guarded_http::Port,
    shutdown: Shutdown,
) -> Result<GrantParts, CpError> {
    let (listener, addr) = crate::bind(grant_addr, "grant server", "--grant-addr").await?;
    let ca = ca_store::grant_server_ca(resources.store().as_ref())
        .await
        .map_err(|e| CpError::Serve(format!("grant server CA: {e}")))?;
    let mut hosts = vec![advertised_host.to_owned()];
    for h in ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .map(str::to_owned)
        .chain(crate::cp_tls::hostname())
    {
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    let (cert, key) = ca
        .issue_server_cert(&hosts, SERVING_CERT_LIFETIME, SystemTime::now())
        .map_err(|e| CpError::Serve(format!("grant server certificate for {hosts:?}: {e}")))?;
    let mut chain = cert.cert_pem.clone();
    chain.extend(cert.chain_pem.iter().map(String::as_str));
    let tls = server::tls13_server_config(&chain, &key).map_err(CpError::Serve)?;
    let grant_base_url = crate::site::grant_status::grant_base_url(advertised_host, addr.port());
    let renew_at = response::RenewAt {
        url: format!("{grant_base_url}/{}", renew::RENEW_PATH),
        ca_pem: ca.cert_pem().to_owned(),
    };
    let redeemer = Arc::new(redeem::Redeemer::new(
        resources.clone(),
        advertised_host.to_owned(),
        renew_at.clone(),
    ));
    let controller = SiteController::new(SiteContext {
        resources: resources.clone(),
        advertised_host: advertised_host.to_owned(),
        grant_base_url,
        grant_ca_pem: ca.cert_pem().to_owned(),
    });
    tracing::info!(%addr, "grant server listening (HTTPS, TLS 1.3)");
    Ok(GrantParts {
        addr,
        server: Box::pin(server::serve(listener, tls, redeemer, port, shutdown)),
        controller,
        renew_at,
    })
}

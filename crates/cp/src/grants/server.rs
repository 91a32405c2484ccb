//! The grant server: HTTPS on `--grant-addr`, TLS 1.3 only, serving
//! Skupper's redemption protocol (DESIGN.md §9) so a Skupper-style
//! redeemer, or curl, works unchanged.
//!
//! Owns the listener, the TLS handshake (its own serving certificate from
//! the grant server CA, whose PEM is every grant's `ca`), the HTTP framing
//! and the failure table's exact statuses and plain-text bodies. What a
//! redemption does is [`super::redeem`]'s. A connection that fails the
//! handshake or sends garbage is dropped and logged at debug: it never
//! affects the listener or other connections. The connections, their
//! limits against slow clients and the shutdown are [`crate::guarded_http`]'s.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;

use crate::guarded_http::TimedBody;
use hyper::{Method, Request, Response, StatusCode};
use meshlink_runtime::Shutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::guarded_http;

use super::redeem::{RedeemError, Redeemer};

/// Largest request body the grant server reads (a code is a few bytes).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Most bytes of a refused body read (and discarded) before answering.
const MAX_DRAIN_BYTES: usize = 16 * 1024 * 1024;
/// Longest time spent discarding a refused body.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Exact plain-text bodies of the failure table (Skupper's wording).
pub mod bodies {
    /// 405.
    pub const ONLY_POST: &str = "Only POST is supported";
    /// 400.
    pub const BODY_NOT_VALID: &str = "Request body not valid";
    /// 404: unknown or expired grant.
    pub const NO_SUCH_CLAIM: &str = "No such claim";
    /// 404: redemptions used up.
    pub const NO_SUCH_ACCESS: &str = "No such access granted";
    /// 403: wrong code.
    pub const REFUSED: &str = "Redemption of access token refused";
}

/// A TLS 1.3-only server configuration for `cert_pem` (with its chain)
/// and `key_pem`.
pub fn tls13_server_config(
    cert_chain_pem: &str,
    key_pem: &str,
) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(cert_chain_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("grant server certificate: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| format!("grant server key: {e}"))?;
    let config =
        rustls::ServerConfig::builder_with_provider(meshlink_identity::tls::crypto_provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("grant server certificate and key: {e}"))?;
    Ok(Arc::new(config))
}

/// Serves redemptions on `listener` until `shutdown`, with `port`'s limits
/// against slow clients (the header-read timeout covers the handshake).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    redeemer: Arc<Redeemer>,
    port: guarded_http::Port,
    shutdown: Shutdown,
) {
    let acceptor = TlsAcceptor::from(tls);
    let handshake = move |tcp: TcpStream, peer: SocketAddr| {
        let acceptor = acceptor.clone();
        async move {
            acceptor
                .accept(tcp)
                .await
                .inspect_err(
                    |e| tracing::debug!(%peer, error = %e, "grant server: TLS handshake failed"),
                )
                .ok()
        }
    };
    let service = hyper::service::service_fn(move |req| {
        let redeemer = redeemer.clone();
        async move { Ok::<_, Infallible>(handle(req, &redeemer).await) }
    });
    guarded_http::serve(listener, port, shutdown, handshake, service).await;
}

/// Reads and discards what is left of a refused body (at most
/// [`MAX_DRAIN_BYTES`], for at most [`DRAIN_TIMEOUT`]), so a client still
/// sending it reads the 400 instead of a reset connection.
async fn drain(body: &mut TimedBody) {
    let read = async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len());
            if seen > MAX_DRAIN_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, read).await;
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn header(req: &Request<TimedBody>, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// One request: the failure table, then the redemption.
async fn handle(req: Request<TimedBody>, redeemer: &Redeemer) -> Response<Full<Bytes>> {
    if req.method() != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, bodies::ONLY_POST);
    }
    let too_long = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES as u64);
    let uid = req.uri().path().trim_start_matches('/').to_owned();
    let name = header(&req, "name");
    let subject = header(&req, "subject");
    let router_id = header(&req, super::client::ROUTER_ID_HEADER);
    let mut body = req.into_body();
    if too_long {
        drain(&mut body).await;
        return text(StatusCode::BAD_REQUEST, bodies::BODY_NOT_VALID);
    }
    let mut code = Vec::new();
    loop {
        match body.frame().await {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    code.extend_from_slice(&data);
                }
                if code.len() > MAX_BODY_BYTES {
                    drain(&mut body).await;
                    return text(StatusCode::BAD_REQUEST, bodies::BODY_NOT_VALID);
                }
            }
            Some(Err(_)) => return text(StatusCode::BAD_REQUEST, bodies::BODY_NOT_VALID),
        }
    }
    if uid == super::renew::RENEW_PATH {
        return renew_response(redeemer, &code).await;
    }
    match redeemer
        .redeem(
            &uid,
            &code,
            name.as_deref(),
            subject.as_deref(),
            router_id.as_deref(),
        )
        .await
    {
        Ok(yaml) => {
            let mut r = Response::new(Full::new(Bytes::from(yaml)));
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/yaml"),
            );
            r
        }
        Err(RedeemError::NoSuchClaim) => text(StatusCode::NOT_FOUND, bodies::NO_SUCH_CLAIM),
        Err(RedeemError::UsedUp) => text(StatusCode::NOT_FOUND, bodies::NO_SUCH_ACCESS),
        Err(RedeemError::WrongCode) => text(StatusCode::FORBIDDEN, bodies::REFUSED),
        Err(RedeemError::Internal(e)) => {
            tracing::warn!(error = %e, "grant server: redemption failed");
            let mut r = Response::new(Full::new(Bytes::from(format!("Redemption failed: {e}"))));
            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            r
        }
    }
}

/// `POST /renew`: plain-text answers (see [`super::renew`]).
async fn renew_response(redeemer: &Redeemer, body: &[u8]) -> Response<Full<Bytes>> {
    use super::renew::{RenewRefused, renew};
    let (status, text) = match renew(redeemer.resources(), body).await {
        Ok(pem) => (StatusCode::OK, pem),
        Err(e @ RenewRefused::NoSite) => (StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ RenewRefused::Forbidden(_)) => (StatusCode::FORBIDDEN, e.to_string()),
        Err(e @ RenewRefused::BadRequest(_)) => (StatusCode::BAD_REQUEST, e.to_string()),
        Err(e @ RenewRefused::Internal(_)) => {
            tracing::warn!(error = %e, "grant server: renewal failed");
            (StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    };
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

//! The redeeming side's HTTP client: one POST of an AccessToken's code to
//! its grant URL, over hyper's HTTP/1 client on a tokio-rustls stream (not
//! reqwest: its rustls feature would unify into every other reqwest user in
//! the workspace and require a process-wide crypto provider there).
//!
//! Owns the client's rules (DESIGN.md §9): https only, TLS 1.3 only,
//! trusting only the token's `ca` (no system roots), a 10 s timeout and no
//! redirects. It returns the server's status and body as they are; it never
//! logs the code.

use std::sync::Arc;
use std::time::Duration;

/// The meshlink extension header naming the redeeming site's router id.
pub const ROUTER_ID_HEADER: &str = "meshlink-router-id";

/// The whole exchange may take this long.
pub const REDEEM_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a redemption request did not get an answer, or got a refusal.
#[derive(Debug, thiserror::Error)]
pub enum RedeemRequestError {
    /// The token is unusable as given (not https, bad CA PEM).
    #[error("{0}")]
    BadToken(String),
    /// No HTTP answer (connection, TLS or timeout); worth retrying.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The grant URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The grant server refused, with its status and plain-text body.
    #[error("the grant server answered {status}: {body}")]
    Refused {
        /// HTTP status code.
        status: u16,
        /// The body, trimmed.
        body: String,
    },
}

/// POSTs `code` to `url`, trusting only `ca_pem`. Headers `name` and
/// `subject` tell the grant server what to call the credentials; the
/// meshlink extension header `meshlink-router-id` (when given) asks it to
/// name this site's router in the client certificate.
pub async fn post_redemption(
    url: &str,
    ca_pem: &str,
    code: &str,
    name: &str,
    subject: &str,
    router_id: Option<&str>,
) -> Result<String, RedeemRequestError> {
    let tls = tls13_client(url, ca_pem)?;
    let mut headers = vec![("name", name), ("subject", subject)];
    headers.extend(router_id.map(|id| (ROUTER_ID_HEADER, id)));
    let (status, body) = exchange(
        tls,
        hyper::Method::POST,
        url,
        &headers,
        code.as_bytes().to_vec(),
    )
    .await?;
    if status == 200 {
        Ok(body)
    } else {
        Err(RedeemRequestError::Refused {
            status,
            body: body.trim().to_owned(),
        })
    }
}

/// A TLS 1.3 client for https `url` trusting only `ca_pem`.
fn tls13_client(url: &str, ca_pem: &str) -> Result<Arc<rustls::ClientConfig>, RedeemRequestError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    if !url.starts_with("https://") {
        return Err(RedeemRequestError::BadToken(format!(
            "url {url:?} is not https://; only https grant URLs are redeemed"
        )));
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| RedeemRequestError::BadToken(format!("ca: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| RedeemRequestError::BadToken(format!("ca: {e}")))?;
    }
    if roots.is_empty() {
        return Err(RedeemRequestError::BadToken(
            "ca holds no PEM certificate; copy ca from the AccessGrant's status".into(),
        ));
    }
    let tls =
        rustls::ClientConfig::builder_with_provider(meshlink_identity::tls::crypto_provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| RedeemRequestError::BadToken(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
    Ok(Arc::new(tls))
}

/// POSTs a link credential renewal (`body`: the current `tls.crt`, then a
/// CSR signed with its key) to the grant server's `url` (`/renew`),
/// trusting only `ca_pem`; returns the new `tls.crt` PEM.
pub async fn post_renewal(
    url: &str,
    ca_pem: &str,
    body: Vec<u8>,
) -> Result<String, RedeemRequestError> {
    let tls = tls13_client(url, ca_pem)?;
    let (status, body) = exchange(tls, hyper::Method::POST, url, &[], body).await?;
    if status == 200 {
        Ok(body)
    } else {
        Err(RedeemRequestError::Refused {
            status,
            body: body.trim().to_owned(),
        })
    }
}

/// One HTTPS request with `tls` (no redirects followed, [`REDEEM_TIMEOUT`]
/// for the whole exchange); returns the status and body.
pub async fn exchange(
    tls: Arc<rustls::ClientConfig>,
    method: hyper::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Result<(u16, String), RedeemRequestError> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| RedeemRequestError::BadToken(format!("url {url:?}: {e}")))?;
    let host = uri
        .host()
        .ok_or_else(|| RedeemRequestError::BadToken(format!("url {url:?} has no host")))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let unreachable = |reason: String| RedeemRequestError::Unreachable {
        url: url.to_owned(),
        reason,
    };
    let run = async {
        let server_name = rustls_pki_types::ServerName::try_from(host.clone())
            .map_err(|e| RedeemRequestError::BadToken(format!("url host {host:?}: {e}")))?;
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(server_name, tcp)
            .await
            .map_err(|e| unreachable(format!("TLS: {e}")))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| unreachable(error_chain(&e)))?;
        let driver = tokio::spawn(conn);
        let authority = uri.authority().map(|a| a.to_string()).unwrap_or_default();
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(uri.path())
            .header(hyper::header::HOST, authority);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(http_body_util::Full::new(hyper::body::Bytes::from(body)))
            .map_err(|e| RedeemRequestError::BadToken(e.to_string()))?;
        let result = async {
            let resp = sender
                .send_request(req)
                .await
                .map_err(|e| unreachable(error_chain(&e)))?;
            let status = resp.status().as_u16();
            let body = http_body_util::BodyExt::collect(resp.into_body())
                .await
                .map_err(|e| unreachable(error_chain(&e)))?
                .to_bytes();
            Ok((status, String::from_utf8_lossy(&body).into_owned()))
        }
        .await;
        driver.abort();
        result
    };
    tokio::time::timeout(REDEEM_TIMEOUT, run)
        .await
        .map_err(|_| unreachable(format!("no answer within {REDEEM_TIMEOUT:?}")))?
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

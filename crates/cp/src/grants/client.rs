//! The redeeming side's HTTP client: one POST of an AccessToken's code to
//! its grant URL.
//!
//! Owns the client's rules (DESIGN.md §9): https only, TLS 1.3 only,
//! trusting only the token's `ca` (no system roots), a 10 s timeout and no
//! redirects. It returns the server's status and body as they are; it never
//! logs the code.

use std::time::Duration;

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
/// `subject` tell the grant server what to call the credentials.
pub async fn post_redemption(
    url: &str,
    ca_pem: &str,
    code: &str,
    name: &str,
    subject: &str,
) -> Result<String, RedeemRequestError> {
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
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .https_only(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REDEEM_TIMEOUT)
        .build()
        .map_err(|e| RedeemRequestError::BadToken(e.to_string()))?;
    let unreachable = |e: reqwest::Error| RedeemRequestError::Unreachable {
        url: url.to_owned(),
        reason: error_chain(&e),
    };
    let resp = client
        .post(url)
        .header("name", name)
        .header("subject", subject)
        .body(code.to_owned())
        .send()
        .await
        .map_err(unreachable)?;
    let status = resp.status().as_u16();
    let body = resp.text().await.map_err(unreachable)?;
    if status == 200 {
        Ok(body)
    } else {
        Err(RedeemRequestError::Refused {
            status,
            body: body.trim().to_owned(),
        })
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

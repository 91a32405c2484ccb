//! rustls configuration builders for workload mTLS: TLS 1.3 only, the ring
//! crypto provider, trust from a `TrustBundle`, and peers identified by
//! their SPIFFE ID rather than a hostname (see `svid_verify`).
//!
//! Owns turning issued material into `Arc<ServerConfig>`/`Arc<ClientConfig>`.
//! It never reads files or watches for rotation (callers rebuild a config
//! and swap the `Arc` when a certificate or the bundle changes), and never
//! enables TLS 1.2 for workload traffic.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::bundle::TrustBundle;
use crate::issue::IssuedCert;
use crate::spiffe::SpiffeId;
use crate::svid_verify::{SpiffeClientVerifier, SpiffeServerVerifier, svid_id};
use crate::x509::{self, PemError};

/// Whether a server asks clients for a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// Clients must present a valid SPIFFE certificate (mTLS).
    Required,
    /// Clients may present one; if they do, it must be valid.
    Optional,
    /// Clients are not asked for a certificate.
    None,
}

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The leaf certificate or its chain does not decode.
    #[error("workload certificate cannot be read ({0}); reissue it")]
    Certificate(PemError),
    /// The private key does not decode.
    #[error("workload private key cannot be read ({0}); give a PEM `PRIVATE KEY` block")]
    Key(String),
    /// The trust bundle has no roots.
    #[error("trust bundle is empty; the mesh CA root must be distributed before TLS can be used")]
    EmptyBundle,
    /// A bundle root does not decode or is not a usable trust anchor.
    #[error("trust bundle root #{index} is unusable ({reason}); fix the bundle")]
    BadRoot {
        /// Position in the bundle, from 0.
        index: usize,
        /// Why it was rejected.
        reason: String,
    },
    /// rustls rejected the configuration (e.g. the key does not match).
    #[error("TLS configuration rejected: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client verifier could not be built.
    #[error("client certificate verifier rejected: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// The crypto provider for the whole tree: ring.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS 1.3 server config presenting `leaf` (with its chain) and, unless
/// `client_auth` is `None`, verifying client certificates against `bundle`
/// (chain, clientAuth EKU and one SPIFFE URI SAN; no names).
pub fn server_config(
    leaf: &IssuedCert,
    key_pem: &str,
    bundle: &TrustBundle,
    client_auth: ClientAuth,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = crypto_provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let builder = match client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Required | ClientAuth::Optional => {
            let roots = Arc::new(root_store(bundle)?);
            let webpki = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let inner = if client_auth == ClientAuth::Optional {
                webpki.allow_unauthenticated().build()?
            } else {
                webpki.build()?
            };
            builder.with_client_cert_verifier(Arc::new(SpiffeClientVerifier { inner }))
        }
    };
    let config = builder.with_single_cert(cert_chain(leaf)?, private_key(key_pem)?)?;
    Ok(Arc::new(config))
}

/// A TLS 1.3 client config that verifies the server's chain against
/// `bundle` and requires a SPIFFE URI SAN, equal to `expected_server` when
/// given. The TLS server name passed at connect time is only sent as SNI;
/// it is never checked against the certificate. With `leaf`, the client
/// presents that certificate (mTLS).
pub fn client_config(
    leaf: Option<(&IssuedCert, &str)>,
    bundle: &TrustBundle,
    expected_server: Option<SpiffeId>,
) -> Result<Arc<ClientConfig>, TlsError> {
    client_config_any_of(leaf, bundle, expected_server.into_iter().collect())
}

/// [`client_config`] accepting a server whose SPIFFE ID is any of
/// `expected_servers` (any SPIFFE ID when empty), e.g. the identities of
/// a MeshService's backends.
pub fn client_config_any_of(
    leaf: Option<(&IssuedCert, &str)>,
    bundle: &TrustBundle,
    expected_servers: Vec<SpiffeId>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = crypto_provider();
    let verifier = SpiffeServerVerifier {
        roots: Arc::new(root_store(bundle)?),
        algs: provider.signature_verification_algorithms,
        expected: expected_servers,
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let config = match leaf {
        Some((cert, key_pem)) => {
            builder.with_client_auth_cert(cert_chain(cert)?, private_key(key_pem)?)?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The SPIFFE ID of a peer's certificate chain (leaf first), as rustls
/// reports it after the handshake (`peer_certificates()`). `None` when
/// there is no certificate or the leaf is not a valid X509-SVID.
pub fn peer_spiffe_id(certs: &[CertificateDer<'_>]) -> Option<SpiffeId> {
    certs.first().and_then(|leaf| svid_id(leaf).ok())
}

/// The bundle's roots as a rustls root store.
pub fn root_store(bundle: &TrustBundle) -> Result<RootCertStore, TlsError> {
    if bundle.is_empty() {
        return Err(TlsError::EmptyBundle);
    }
    let mut store = RootCertStore::empty();
    for (index, pem) in bundle.roots_pem.iter().enumerate() {
        let bad = |reason: String| TlsError::BadRoot { index, reason };
        let der = x509::pem_cert(pem).map_err(|e| bad(e.to_string()))?;
        store.add(der).map_err(|e| bad(e.to_string()))?;
    }
    Ok(store)
}

/// Leaf then intermediates, as DER.
fn cert_chain(leaf: &IssuedCert) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let mut chain = vec![x509::pem_cert(&leaf.cert_pem).map_err(TlsError::Certificate)?];
    for pem in &leaf.chain_pem {
        chain.extend(x509::pem_certs(pem).map_err(TlsError::Certificate)?);
    }
    Ok(chain)
}

fn private_key(key_pem: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| TlsError::Key(e.to_string()))
}

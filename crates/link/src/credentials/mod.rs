//! Link credentials: the PEM material of a `kubernetes.io/tls` Secret
//! (`tls.crt`, `tls.key`, `ca.crt`) checked and turned into rustls configs.
//!
//! Owns validation before use (I2): the chain parses, every certificate is
//! within its validity period, each one is signed by the next and the last
//! by a CA in `ca.crt`, and the key matches the leaf. It never reads files
//! and never keeps a credential that failed validation: the caller keeps
//! its last good one (I3).
//!
//! Both roles are TLS 1.3 only with the tree's one crypto provider (ring):
//! a RouterAccess server presents `tls.crt` and requires a client
//! certificate that chains to `ca.crt`; a Link client presents `tls.crt`
//! and verifies the server against `ca.crt` and the endpoint host (a DNS
//! name or an IP address, as the site CA puts both in server SANs).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::prelude::{FromDer as _, X509Certificate};

/// The PEM fields of a `kubernetes.io/tls` Secret.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CredentialPem {
    /// `tls.crt`: the leaf certificate, then any intermediates.
    pub tls_crt: String,
    /// `tls.key`: the leaf's private key (PKCS#8, SEC1 or PKCS#1 PEM).
    pub tls_key: String,
    /// `ca.crt`: the CA certificates that verify the peer.
    pub ca_crt: String,
}

impl std::fmt::Debug for CredentialPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialPem")
            .field("tls_crt_len", &self.tls_crt.len())
            .field("tls_key", &"<redacted>")
            .field("ca_crt_len", &self.ca_crt.len())
            .finish()
    }
}

/// Why a credential was refused; each names the Secret field and the fix.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// A PEM field has no certificate or does not decode.
    #[error("{field}: {reason}; give PEM `CERTIFICATE` blocks")]
    Certificate {
        /// `tls.crt` or `ca.crt`.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The private key does not decode.
    #[error("tls.key: {0}; give a PEM `PRIVATE KEY` block")]
    Key(String),
    /// The key is not the leaf certificate's key.
    #[error("tls.key does not match the certificate in tls.crt; reissue the Secret")]
    KeyMismatch,
    /// A certificate is outside its validity period.
    #[error("{field} certificate #{index} ({subject}) is {reason}; renew it")]
    Validity {
        /// `tls.crt` or `ca.crt`.
        field: &'static str,
        /// Position in the field, from 0.
        index: usize,
        /// The certificate's subject.
        subject: String,
        /// `expired` or `not yet valid`.
        reason: &'static str,
    },
    /// The chain in `tls.crt` does not lead to a CA in `ca.crt`.
    #[error(
        "tls.crt ({subject}) is not signed by any CA in ca.crt; use the ca.crt of the site CA that issued it"
    )]
    Untrusted {
        /// The subject of the certificate that no CA signed.
        subject: String,
    },
    /// rustls refused the material.
    #[error("TLS configuration rejected: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client-certificate verifier could not be built from `ca.crt`.
    #[error("ca.crt cannot verify clients: {0}")]
    Verifier(String),
}

/// A validated credential with its ready-built rustls configs. Cheap to
/// clone; swap the whole `Arc` to rotate.
pub struct LinkCredential {
    server: Arc<ServerConfig>,
    /// The same, refusing client certificates that name no router.
    server_strict: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    /// Serial number of the leaf certificate, lowercase hex.
    serial_hex: String,
    /// The leaf certificate's notBefore and notAfter, unix seconds.
    validity: (i64, i64),
}

impl std::fmt::Debug for LinkCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkCredential")
            .field("serial", &self.serial_hex)
            .finish_non_exhaustive()
    }
}

// === impl LinkCredential ===

impl LinkCredential {
    /// Validates `pem` and builds the TLS 1.3 server and client configs.
    pub fn from_pem(pem: &CredentialPem) -> Result<LinkCredential, CredentialError> {
        let chain = certs("tls.crt", &pem.tls_crt)?;
        let cas = certs("ca.crt", &pem.ca_crt)?;
        verify_chain(&chain, &cas)?;
        let key = PrivateKeyDer::from_pem_slice(pem.tls_key.as_bytes())
            .map_err(|e| CredentialError::Key(e.to_string()))?;
        let leaf = parse("tls.crt", 0, &chain[0])?;
        let serial_hex = leaf.raw_serial_as_string();
        let validity = (
            leaf.validity().not_before.timestamp(),
            leaf.validity().not_after.timestamp(),
        );

        let provider = crypto_provider();
        let mut roots = RootCertStore::empty();
        for (index, ca) in cas.iter().enumerate() {
            roots
                .add(ca.clone())
                .map_err(|e| CredentialError::Certificate {
                    field: "ca.crt",
                    reason: format!("certificate #{index} is not a usable trust anchor: {e}"),
                })?;
        }
        let roots = Arc::new(roots);

        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| CredentialError::Verifier(e.to_string()))?;
        let server_with = |verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>| {
            ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[&rustls::version::TLS13])?
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain.clone(), key.clone_key())
                .map_err(key_error)
        };
        let server = server_with(client_verifier.clone())?;
        let server_strict =
            server_with(Arc::new(crate::peer_policy::RequireRouter(client_verifier)))?;

        let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| CredentialError::Verifier(e.to_string()))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_webpki_verifier(server_verifier)
            .with_client_auth_cert(chain, key)
            .map_err(key_error)?;

        Ok(LinkCredential {
            server: Arc::new(server),
            server_strict: Arc::new(server_strict),
            client: Arc::new(client),
            serial_hex: serial_hex.replace(':', "").to_ascii_lowercase(),
            validity,
        })
    }

    /// The leaf certificate's notBefore, unix seconds.
    pub fn not_before_unix(&self) -> i64 {
        self.validity.0
    }

    /// The leaf certificate's notAfter, unix seconds.
    pub fn not_after_unix(&self) -> i64 {
        self.validity.1
    }

    /// The server config a RouterAccess role presents.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }

    /// The server config of a role that refuses client certificates naming
    /// no router ([`crate::peer_policy`]).
    pub fn server_config_strict(&self) -> Arc<ServerConfig> {
        self.server_strict.clone()
    }

    /// The client config a Link dials with.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.client.clone()
    }

    /// The leaf certificate's serial number, lowercase hex.
    pub fn serial_hex(&self) -> &str {
        &self.serial_hex
    }
}

/// The crypto provider for the whole tree: ring.
fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The serial number (lowercase hex) of a peer's leaf certificate.
pub(crate) fn leaf_serial(certs: &[CertificateDer<'_>]) -> Option<String> {
    let leaf = certs.first()?;
    let (_, cert) = X509Certificate::from_der(leaf).ok()?;
    Some(
        cert.raw_serial_as_string()
            .replace(':', "")
            .to_ascii_lowercase(),
    )
}

fn key_error(e: rustls::Error) -> CredentialError {
    match e {
        rustls::Error::InconsistentKeys(_) => CredentialError::KeyMismatch,
        other => CredentialError::Rustls(other),
    }
}

fn certs(field: &'static str, pem: &str) -> Result<Vec<CertificateDer<'static>>, CredentialError> {
    let bad = |reason: String| CredentialError::Certificate { field, reason };
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("does not decode ({e})")))?;
    if certs.is_empty() {
        return Err(bad("holds no certificate".into()));
    }
    for (index, der) in certs.iter().enumerate() {
        parse(field, index, der)?;
    }
    Ok(certs)
}

fn parse<'a>(
    field: &'static str,
    index: usize,
    der: &'a CertificateDer<'_>,
) -> Result<X509Certificate<'a>, CredentialError> {
    X509Certificate::from_der(der)
        .map(|(_, cert)| cert)
        .map_err(|e| CredentialError::Certificate {
            field,
            reason: format!("certificate #{index} does not parse ({e})"),
        })
}

/// Each certificate of `chain` is valid now and signed by the next one; the
/// last is signed by one of `cas`, which must be valid too.
fn verify_chain(
    chain: &[CertificateDer<'static>],
    cas: &[CertificateDer<'static>],
) -> Result<(), CredentialError> {
    let chain: Vec<_> = chain
        .iter()
        .enumerate()
        .map(|(i, der)| parse("tls.crt", i, der))
        .collect::<Result<_, _>>()?;
    let cas: Vec<_> = cas
        .iter()
        .enumerate()
        .map(|(i, der)| parse("ca.crt", i, der))
        .collect::<Result<_, _>>()?;
    for (field, certs) in [("tls.crt", &chain), ("ca.crt", &cas)] {
        for (index, cert) in certs.iter().enumerate() {
            let validity = cert.validity();
            let now = x509_parser::time::ASN1Time::now();
            let reason = if now < validity.not_before {
                Some("not yet valid")
            } else if now > validity.not_after {
                Some("expired")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(CredentialError::Validity {
                    field,
                    index,
                    subject: cert.subject().to_string(),
                    reason,
                });
            }
        }
    }
    for pair in chain.windows(2) {
        if pair[0]
            .verify_signature(Some(pair[1].public_key()))
            .is_err()
        {
            return Err(CredentialError::Untrusted {
                subject: pair[0].subject().to_string(),
            });
        }
    }
    let top = chain.last().expect("certs() returns at least one");
    let signed = cas
        .iter()
        .any(|ca| top.verify_signature(Some(ca.public_key())).is_ok());
    if !signed {
        return Err(CredentialError::Untrusted {
            subject: top.subject().to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;

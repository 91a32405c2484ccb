//! SPIFFE peer verification for rustls: X.509 path validation against the
//! trust bundle without any hostname check, followed by the X509-SVID leaf
//! rules (§5.2) and, when the caller expects one, an exact SPIFFE ID match.
//!
//! Approach: the chain is verified by rustls' own webpki path validation
//! (`verify_server_cert_signed_by_trust_anchor` for servers, the stock
//! `WebPkiClientVerifier` for clients), which checks signatures, validity,
//! basic constraints and the serverAuth/clientAuth EKU, but not names. Only
//! the DNS/IP name step of `WebPkiServerVerifier` is dropped; in its place
//! the peer is identified by its single SPIFFE URI SAN. This module never
//! accepts a certificate that did not chain to a bundle root.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::server::ParsedCertificate;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, OtherError};
use rustls::{RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::spiffe::SpiffeId;
use crate::x509;

/// Why a chain-valid peer certificate is not an acceptable X509-SVID.
///
/// `Debug` prints the same text as `Display`, because rustls shows custom
/// certificate errors with `{:?}` in handshake failures and logs.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum SvidError {
    /// The peer sent no certificate.
    #[error("peer sent no certificate")]
    NoCertificate,
    /// The leaf is not parseable X.509.
    #[error("peer certificate is not valid X.509: {0}")]
    Unparseable(String),
    /// The leaf has zero or several URI SANs.
    #[error("peer certificate has {0} URI SANs; an X509-SVID has exactly one (the SPIFFE ID)")]
    UriSanCount(usize),
    /// The URI SAN is not a valid SPIFFE ID.
    #[error("peer URI SAN {uri:?} is not a SPIFFE ID: {reason}")]
    NotSpiffe {
        /// The URI SAN.
        uri: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The leaf is a signing certificate (CA=true, keyCertSign or cRLSign).
    #[error(
        "peer certificate is a CA certificate; X509-SVID leaves must have CA=false and no keyCertSign/cRLSign"
    )]
    LeafIsCa,
    /// The peer's SPIFFE ID is not the one expected.
    #[error("peer is {found}, expected {expected}")]
    UnexpectedPeer {
        /// The SPIFFE ID the caller asked for.
        expected: String,
        /// The SPIFFE ID the peer presented.
        found: String,
    },
}

impl fmt::Debug for SvidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The SPIFFE ID of an X509-SVID leaf, checked per X509-SVID §5.2.
pub(crate) fn svid_id(leaf: &CertificateDer<'_>) -> Result<SpiffeId, SvidError> {
    let cert = x509::parse_cert(leaf).map_err(SvidError::Unparseable)?;
    let is_ca = matches!(cert.basic_constraints(), Ok(Some(bc)) if bc.value.ca);
    let signs =
        matches!(cert.key_usage(), Ok(Some(ku)) if ku.value.key_cert_sign() || ku.value.crl_sign());
    if is_ca || signs {
        return Err(SvidError::LeafIsCa);
    }
    let uris = x509::uri_sans(&cert);
    let [uri] = uris.as_slice() else {
        return Err(SvidError::UriSanCount(uris.len()));
    };
    SpiffeId::parse(uri).map_err(|e| SvidError::NotSpiffe {
        uri: uri.clone(),
        reason: e.to_string(),
    })
}

/// Checks the leaf's SPIFFE ID, and that it equals `expected` if given.
/// Checks the peer's SPIFFE ID is one of `expected` (any, when empty).
fn check_peer(leaf: &CertificateDer<'_>, expected: &[SpiffeId]) -> Result<(), rustls::Error> {
    let id = svid_id(leaf).map_err(rejected)?;
    if expected.is_empty() || expected.contains(&id) {
        return Ok(());
    }
    Err(rejected(SvidError::UnexpectedPeer {
        expected: expected
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" or "),
        found: id.to_string(),
    }))
}

fn rejected(e: SvidError) -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(e))))
}

/// Client side: verifies the server's chain against the bundle roots and
/// its SPIFFE ID; the TLS server name is ignored.
#[derive(Debug)]
pub(crate) struct SpiffeServerVerifier {
    pub(crate) roots: Arc<RootCertStore>,
    pub(crate) algs: WebPkiSupportedAlgorithms,
    /// The accepted server IDs; empty accepts any SPIFFE ID.
    pub(crate) expected: Vec<SpiffeId>,
}

// === impl SpiffeServerVerifier ===

impl ServerCertVerifier for SpiffeServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algs.all,
        )?;
        check_peer(end_entity, &self.expected)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// Server side: the stock webpki client verifier (chain + clientAuth EKU,
/// no names), followed by the X509-SVID leaf rules.
#[derive(Debug)]
pub(crate) struct SpiffeClientVerifier {
    pub(crate) inner: Arc<dyn ClientCertVerifier>,
}

// === impl SpiffeClientVerifier ===

impl ClientCertVerifier for SpiffeClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        check_peer(end_entity, &[])?;
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, IsCa, KeyPair, SanType};

    use super::*;

    fn cert(uris: &[&str], is_ca: IsCa) -> CertificateDer<'static> {
        let mut params = CertificateParams::default();
        params.subject_alt_names = uris
            .iter()
            .map(|u| SanType::URI((*u).try_into().unwrap()))
            .collect();
        params.is_ca = is_ca;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn a_leaf_has_exactly_one_spiffe_uri_san() {
        let ok = cert(&["spiffe://td/web"], IsCa::ExplicitNoCa);
        assert_eq!(svid_id(&ok).unwrap().to_string(), "spiffe://td/web");
        let two = cert(&["spiffe://td/web", "spiffe://td/api"], IsCa::ExplicitNoCa);
        assert_eq!(svid_id(&two), Err(SvidError::UriSanCount(2)));
        let none = cert(&[], IsCa::ExplicitNoCa);
        assert_eq!(svid_id(&none), Err(SvidError::UriSanCount(0)));
        let https = cert(&["https://td/web"], IsCa::ExplicitNoCa);
        assert!(matches!(svid_id(&https), Err(SvidError::NotSpiffe { .. })));
        let ca = cert(
            &["spiffe://td/web"],
            IsCa::Ca(rcgen::BasicConstraints::Unconstrained),
        );
        assert_eq!(svid_id(&ca), Err(SvidError::LeafIsCa));
        let garbage = CertificateDer::from(vec![1, 2, 3]);
        assert!(matches!(svid_id(&garbage), Err(SvidError::Unparseable(_))));
    }

    #[test]
    fn debug_reads_like_display_for_handshake_errors() {
        let e = SvidError::UnexpectedPeer {
            expected: "spiffe://td/a".into(),
            found: "spiffe://td/b".into(),
        };
        assert_eq!(
            format!("{e:?}"),
            "peer is spiffe://td/b, expected spiffe://td/a"
        );
    }
}

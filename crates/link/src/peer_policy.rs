//! Strict peer identity: a router configured with
//! [`RouterConfig::require_router_identity`](crate::RouterConfig) refuses,
//! in the TLS handshake, a client certificate that names no router
//! (`urn:meshlink:router:<id>`, see [`crate::identity`]). Without it such
//! a peer is accepted as `unbound`.
//!
//! Owns the client-certificate verifier that adds that rule to the site
//! CA's chain check, and how each side explains the refusal: the acceptor
//! counts it in `meshlink_link_peer_identity_total{result="refused"}` and
//! logs it; the dialer receives the TLS alert `access_denied` and its
//! Link's `lastError` says what it means and how to fix it.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::identity::router_ids;

/// What the acceptor logs and the dialer's Link shows (with the fix).
pub const UNBOUND_REFUSED: &str = "the other site requires link certificates that name a router \
     (urn:meshlink:router:<site id>; its Site has meshlink.dev/require-router-identity: \"true\") \
     and this Link's certificate names none; get a new credential from that site by redeeming \
     one of its tokens with meshlink (which sends this site's id), or remove the label there";

/// The site CA's client verifier plus "the leaf names a router".
#[derive(Debug)]
pub(crate) struct RequireRouter(pub(crate) Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for RequireRouter {
    fn offer_client_auth(&self) -> bool {
        self.0.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.0.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self.0.verify_client_cert(end_entity, intermediates, now)?;
        if router_ids(std::slice::from_ref(end_entity)).is_empty() {
            // Sent as the alert access_denied.
            return Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ));
        }
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Whether an accept-side handshake error is [`RequireRouter`]'s refusal.
pub(crate) fn is_unbound_refusal(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| {
            matches!(
                r,
                rustls::Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure)
            )
        })
}

//! Checking a TLS certificate and private key as a pair, as a `kubernetes.io/tls`
//! Secret holds them: the certificate parses, the key parses and can sign
//! with the crypto provider, and the key is the certificate's.
//!
//! Owns only that check (I2: "the key matches"). It never logs or formats
//! the key, and it does not verify the chain (a Secret may carry a
//! certificate another site's CA signed).

use std::time::SystemTime;

use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject as _;

use crate::x509;

/// What a checked pair tells the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPairInfo {
    /// The leaf certificate's notBefore.
    pub not_before: SystemTime,
    /// The leaf certificate's notAfter.
    pub not_after: SystemTime,
    /// The leaf certificate's subject, e.g. `CN=west`.
    pub subject: String,
}

/// Why a certificate and key do not form a usable pair. Each message names
/// the part (certificate or key) and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsPairError {
    /// The certificate PEM is unreadable.
    #[error("certificate cannot be read ({0}); give a PEM CERTIFICATE block")]
    Certificate(x509::PemError),
    /// The key PEM is unreadable.
    #[error(
        "private key cannot be read ({0}); give a PEM PRIVATE KEY (PKCS#8), EC PRIVATE KEY or RSA PRIVATE KEY block"
    )]
    KeyPem(String),
    /// The key type is not supported by the crypto provider.
    #[error("private key cannot be used ({0}); use an ECDSA P-256/P-384, Ed25519 or RSA key")]
    KeyUnsupported(String),
    /// The key is not the certificate's.
    #[error(
        "private key does not match the certificate {subject} (their public keys differ); put the key that was issued with this certificate"
    )]
    Mismatch {
        /// The certificate's subject.
        subject: String,
    },
}

/// Checks that `key_pem` is the private key of the first certificate in
/// `cert_pem`.
pub fn check_tls_pair(cert_pem: &str, key_pem: &str) -> Result<TlsPairInfo, TlsPairError> {
    let der = x509::pem_cert(cert_pem).map_err(TlsPairError::Certificate)?;
    let cert = x509::parse_cert(&der)
        .map_err(|reason| TlsPairError::Certificate(x509::PemError::Der { index: 0, reason }))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| TlsPairError::KeyPem(e.to_string()))?;
    let signing = crate::tls::crypto_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsPairError::KeyUnsupported(e.to_string()))?;
    let subject = x509::subject(&cert);
    let matches = signing
        .public_key()
        .is_some_and(|spki| spki.as_ref() == cert.public_key().raw);
    if !matches {
        return Err(TlsPairError::Mismatch { subject });
    }
    let validity = cert.validity();
    Ok(TlsPairInfo {
        not_before: x509::asn1_to_system(validity.not_before),
        not_after: x509::asn1_to_system(validity.not_after),
        subject,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SiteCa;
    use std::time::Duration;

    #[test]
    fn a_pair_matches_and_a_foreign_key_does_not() {
        let ca = SiteCa::load(&SiteCa::generate("west", "ca", Duration::from_secs(3600)).unwrap())
            .unwrap();
        let now = SystemTime::now();
        let (a, a_key) = ca
            .issue_client_cert("a", Duration::from_secs(600), now)
            .unwrap();
        let (_, b_key) = ca
            .issue_client_cert("b", Duration::from_secs(600), now)
            .unwrap();
        let info = check_tls_pair(&a.cert_pem, &a_key).unwrap();
        assert_eq!(info.subject, "CN=a");
        assert!(matches!(
            check_tls_pair(&a.cert_pem, &b_key),
            Err(TlsPairError::Mismatch { .. })
        ));
        assert!(matches!(
            check_tls_pair(&a.cert_pem, "nope"),
            Err(TlsPairError::KeyPem(_))
        ));
        assert!(matches!(
            check_tls_pair("nope", &a_key),
            Err(TlsPairError::Certificate(_))
        ));
    }
}

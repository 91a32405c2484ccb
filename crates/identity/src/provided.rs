//! Validation of user-provided CAs against the X509-SVID signing-certificate
//! profile, plus the key parsing and key/certificate matching shared with
//! loading stored CAs.
//!
//! Owns the checks only: each failure is its own `CaError` variant naming
//! the check and the fix. It never repairs input (no re-signing, no key
//! conversion beyond re-encoding PKCS#8) and never logs key material.
//!
//! The profile, from the SPIFFE X509-SVID specification
//! (<https://github.com/spiffe/spiffe/blob/main/standards/X509-SVID.md>):
//! - §4.1 Basic Constraints: "Signing certificates MUST set the `cA` field
//!   to `true`."
//! - §4.3 Key Usage: "The key usage extension MUST be set on all SVIDs, and
//!   MUST be marked critical. SVID signing certificates MUST set
//!   `keyCertSign`. They MAY set `cRLSign`."
//! - Appendix A: `keyAgreement` and `keyEncipherment` "may be set if and only
//!   if the SVID is a leaf certificate"; `digitalSignature` "must be set if
//!   and only if the SVID is a leaf certificate". So a signing CA that sets
//!   any of the three is rejected.

use std::time::SystemTime;

use rcgen::KeyPair;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::certificate::X509Certificate;

use crate::ca::{CaError, CaMaterial};
use crate::x509::{self, PemError};

/// Runs every check on a provided CA and returns normalized material.
pub(crate) fn validate(
    cert_pem: &str,
    key_pem: &str,
    chain_pem: Option<&str>,
    now: SystemTime,
) -> Result<CaMaterial, CaError> {
    let mut certs = x509::pem_certs(cert_pem).map_err(CaError::CertificatePem)?;
    if let Some(chain_pem) = chain_pem.filter(|c| !c.trim().is_empty()) {
        certs.extend(x509::pem_certs(chain_pem).map_err(CaError::ChainPem)?);
    }
    let key = parse_key(key_pem)?;
    let ca = parse(&certs[0]);
    check_signing_profile(&ca)?;
    check_key_matches(&ca, &key)?;
    check_validity(&ca, now)?;
    check_chain(&certs, now)?;
    Ok(CaMaterial {
        cert_pem: x509::der_to_pem("CERTIFICATE", &certs[0]),
        key_pem: key.serialize_pem(),
        chain_pem: certs[1..]
            .iter()
            .map(|c| x509::der_to_pem("CERTIFICATE", c))
            .collect(),
    })
}

/// Parses a PKCS#8 PEM private key that ring can sign with.
pub(crate) fn parse_key(key_pem: &str) -> Result<KeyPair, CaError> {
    let der = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| CaError::KeyPem(e.to_string()))?;
    let pkcs8 = match der {
        PrivateKeyDer::Pkcs8(k) => k,
        PrivateKeyDer::Sec1(_) => {
            return Err(CaError::KeyNotPkcs8 {
                found: "EC PRIVATE KEY",
            });
        }
        PrivateKeyDer::Pkcs1(_) => {
            return Err(CaError::KeyNotPkcs8 {
                found: "RSA PRIVATE KEY",
            });
        }
        _ => return Err(CaError::KeyPem("unknown private key format".into())),
    };
    KeyPair::try_from(&pkcs8).map_err(|e| CaError::UnsupportedKey(e.to_string()))
}

/// Parses a certificate already checked by `x509::pem_certs`.
pub(crate) fn parse<'a>(der: &'a CertificateDer<'_>) -> X509Certificate<'a> {
    match x509::parse_cert(der) {
        Ok(c) => c,
        // pem_certs parsed every certificate before handing it out.
        Err(e) => unreachable!("certificate was checked by pem_certs: {e}"),
    }
}

/// basicConstraints CA=true (X509-SVID §4.1).
pub(crate) fn check_is_ca(cert: &X509Certificate<'_>) -> Result<(), CaError> {
    match cert.basic_constraints() {
        Ok(Some(bc)) if bc.value.ca => Ok(()),
        _ => Err(CaError::NotACa {
            subject: x509::subject(cert),
        }),
    }
}

/// X509-SVID §4.1, §4.3 and Appendix A for a signing certificate.
fn check_signing_profile(cert: &X509Certificate<'_>) -> Result<(), CaError> {
    check_is_ca(cert)?;
    let subject = x509::subject(cert);
    let ku = match cert.key_usage() {
        Ok(Some(ku)) => ku,
        _ => return Err(CaError::MissingKeyUsage { subject }),
    };
    if !ku.value.key_cert_sign() {
        return Err(CaError::MissingKeyCertSign { subject });
    }
    let forbidden = [
        (ku.value.key_agreement(), "keyAgreement"),
        (ku.value.key_encipherment(), "keyEncipherment"),
        (ku.value.digital_signature(), "digitalSignature"),
    ];
    if let Some((_, usage)) = forbidden.iter().find(|(set, _)| *set) {
        return Err(CaError::ForbiddenKeyUsage { subject, usage });
    }
    if !ku.critical {
        return Err(CaError::KeyUsageNotCritical { subject });
    }
    Ok(())
}

/// The key's public half is the certificate's subject public key.
pub(crate) fn check_key_matches(cert: &X509Certificate<'_>, key: &KeyPair) -> Result<(), CaError> {
    use rcgen::PublicKeyData as _;
    if cert.public_key().subject_public_key.data.as_ref() == key.der_bytes() {
        Ok(())
    } else {
        Err(CaError::KeyMismatch {
            subject: x509::subject(cert),
        })
    }
}

/// notBefore <= now <= notAfter.
pub(crate) fn check_validity(cert: &X509Certificate<'_>, now: SystemTime) -> Result<(), CaError> {
    let validity = cert.validity();
    let at = x509::system_to_asn1(now);
    if at < validity.not_before {
        return Err(CaError::NotYetValid {
            subject: x509::subject(cert),
            not_before: x509::rfc3339(x509::asn1_to_system(validity.not_before)),
        });
    }
    if at > validity.not_after {
        return Err(CaError::Expired {
            subject: x509::subject(cert),
            not_after: x509::rfc3339(x509::asn1_to_system(validity.not_after)),
        });
    }
    Ok(())
}

/// Every certificate is signed by the next; chain certificates are valid
/// CAs; a self-signed top verifies its own signature.
fn check_chain(certs: &[CertificateDer<'_>], now: SystemTime) -> Result<(), CaError> {
    let parsed: Vec<X509Certificate<'_>> = certs.iter().map(parse).collect();
    for (index, cert) in parsed.iter().enumerate().skip(1) {
        match cert.basic_constraints() {
            Ok(Some(bc)) if bc.value.ca => {}
            _ => {
                return Err(CaError::ChainNotCa {
                    index: index - 1,
                    subject: x509::subject(cert),
                });
            }
        }
        check_validity(cert, now)?;
    }
    for pair in parsed.windows(2) {
        verify_signed_by(&pair[0], &pair[1])?;
    }
    let top = &parsed[parsed.len() - 1];
    if top.subject() == top.issuer() && parsed.len() > 1 {
        verify_signed_by(top, top)?;
    }
    Ok(())
}

/// `child`'s issuer is `parent`'s subject and `parent`'s key signed `child`.
fn verify_signed_by(
    child: &X509Certificate<'_>,
    parent: &X509Certificate<'_>,
) -> Result<(), CaError> {
    let broken = |reason: String| CaError::ChainBroken {
        child: x509::subject(child),
        parent: x509::subject(parent),
        reason,
    };
    if child.issuer() != parent.subject() {
        return Err(broken(format!("its issuer is {}", child.issuer())));
    }
    child
        .verify_signature(Some(parent.public_key()))
        .map_err(|e| broken(format!("signature does not verify: {e}")))
}

/// Loads a stored certificate chain, for `CaSigner::load`.
pub(crate) fn load_certs(material: &CaMaterial) -> Result<Vec<CertificateDer<'static>>, CaError> {
    let mut certs = x509::pem_certs(&material.cert_pem).map_err(CaError::CertificatePem)?;
    certs.truncate(1);
    for pem in &material.chain_pem {
        let chain: Result<_, PemError> = x509::pem_certs(pem);
        certs.extend(chain.map_err(CaError::ChainPem)?);
    }
    Ok(certs)
}

//! Certificate signing requests from proxies: parsing, key-type policy and
//! self-signature verification.
//!
//! Owns the three distinct CSR rejections the Certify RPC maps to gRPC
//! statuses (`Malformed`, `WrongKeyType`, `BadSignature`) and reports the
//! CSR's URI SANs so the caller can compare them with the identity its token
//! allows. It never decides that identity: SANs are reported, not trusted.

use rustls_pki_types::CertificateSigningRequestDer;
use rustls_pki_types::pem::PemObject as _;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
    OID_SIG_ED25519,
};
use x509_parser::prelude::FromDer as _;
use x509_parser::x509::SubjectPublicKeyInfo;

/// The only key type workload CSRs may use.
pub const REQUIRED_KEY_ALGORITHM: &str = "ECDSA P-256";

/// What a CSR asks for, once it has passed all checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsrInfo {
    /// The URI SANs the CSR requests, in order (normally one SPIFFE ID).
    pub uri_sans: Vec<String>,
    /// The key algorithm, e.g. `ECDSA P-256`.
    pub key_algorithm: String,
}

/// Why a CSR was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsrError {
    /// The bytes are not a PKCS#10 certificate signing request.
    #[error("CSR is malformed ({0}); send a DER or PEM PKCS#10 certificate signing request")]
    Malformed(String),
    /// The CSR's key is not ECDSA P-256.
    #[error("CSR key is {found}, but {required} is required; generate an ECDSA P-256 key", required = REQUIRED_KEY_ALGORITHM)]
    WrongKeyType {
        /// The key algorithm found, e.g. `RSA-2048`.
        found: String,
    },
    /// The CSR's self-signature does not verify with its own key.
    #[error("CSR signature does not verify ({0}); the CSR was altered or signed with another key")]
    BadSignature(String),
}

/// Parses a CSR (DER or PEM), requires an ECDSA P-256 key and a valid
/// self-signature, and reports its URI SANs and key algorithm.
pub fn inspect_csr(csr: &[u8]) -> Result<CsrInfo, CsrError> {
    let der = to_der(csr)?;
    let req = parse(&der)?;
    let info = &req.certification_request_info;
    let key_algorithm = key_algorithm(&info.subject_pki);
    check(&req, &key_algorithm)?;
    let mut uri_sans = Vec::new();
    for ext in req.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            for name in &san.general_names {
                if let GeneralName::URI(uri) = name {
                    uri_sans.push((*uri).to_owned());
                }
            }
        }
    }
    Ok(CsrInfo {
        uri_sans,
        key_algorithm,
    })
}

/// Runs the `inspect_csr` checks and returns the public key to certify.
pub(crate) fn checked_public_key(csr: &[u8]) -> Result<rcgen::SubjectPublicKeyInfo, CsrError> {
    let der = to_der(csr)?;
    let req = parse(&der)?;
    let spki = &req.certification_request_info.subject_pki;
    check(&req, &key_algorithm(spki))?;
    rcgen::SubjectPublicKeyInfo::from_der(spki.raw)
        .map_err(|e| CsrError::Malformed(format!("public key: {e}")))
}

/// PEM (`CERTIFICATE REQUEST`) or raw DER to DER.
fn to_der(csr: &[u8]) -> Result<Vec<u8>, CsrError> {
    if csr.trim_ascii_start().starts_with(b"-----BEGIN") {
        CertificateSigningRequestDer::from_pem_slice(csr)
            .map(|d| d.as_ref().to_vec())
            .map_err(|e| CsrError::Malformed(format!("PEM: {e}")))
    } else {
        Ok(csr.to_vec())
    }
}

fn parse(der: &[u8]) -> Result<X509CertificationRequest<'_>, CsrError> {
    match X509CertificationRequest::from_der(der) {
        Ok((rest, _)) if !rest.is_empty() => {
            Err(CsrError::Malformed("trailing bytes after the CSR".into()))
        }
        Ok((_, req)) => Ok(req),
        Err(e) => Err(CsrError::Malformed(e.to_string())),
    }
}

/// Key type first (a cheap, precise answer), then the signature.
fn check(req: &X509CertificationRequest<'_>, key_algorithm: &str) -> Result<(), CsrError> {
    if key_algorithm != REQUIRED_KEY_ALGORITHM {
        return Err(CsrError::WrongKeyType {
            found: key_algorithm.to_owned(),
        });
    }
    req.verify_signature()
        .map_err(|e| CsrError::BadSignature(e.to_string()))
}

/// A readable name for the key algorithm of `spki`.
fn key_algorithm(spki: &SubjectPublicKeyInfo<'_>) -> String {
    let alg = &spki.algorithm.algorithm;
    if *alg == OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok());
        match curve {
            Some(c) if c == OID_EC_P256 => REQUIRED_KEY_ALGORITHM.to_owned(),
            Some(c) if c == OID_NIST_EC_P384 => "ECDSA P-384".to_owned(),
            Some(c) => format!("ECDSA on curve {c}"),
            None => "ECDSA with unnamed curve parameters".to_owned(),
        }
    } else if *alg == OID_PKCS1_RSAENCRYPTION {
        match spki.parsed() {
            Ok(pk) => format!("RSA-{}", pk.key_size()),
            Err(_) => "RSA".to_owned(),
        }
    } else if *alg == OID_SIG_ED25519 {
        "Ed25519".to_owned()
    } else {
        format!("unknown key algorithm {alg}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr_for(alg: &'static rcgen::SignatureAlgorithm, uri: &str) -> Vec<u8> {
        let key = rcgen::KeyPair::generate_for(alg).unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = vec![rcgen::SanType::URI(uri.try_into().unwrap())];
        params.serialize_request(&key).unwrap().der().to_vec()
    }

    #[test]
    fn p256_csr_reports_its_uri_sans_in_der_and_pem() {
        let der = csr_for(&rcgen::PKCS_ECDSA_P256_SHA256, "spiffe://td/web");
        let info = inspect_csr(&der).unwrap();
        assert_eq!(info.uri_sans, vec!["spiffe://td/web".to_owned()]);
        assert_eq!(info.key_algorithm, "ECDSA P-256");
        let pem = crate::x509::der_to_pem("CERTIFICATE REQUEST", &der);
        assert_eq!(inspect_csr(pem.as_bytes()).unwrap(), info);
    }

    #[test]
    fn other_keys_are_named_in_the_error() {
        let p384 = csr_for(&rcgen::PKCS_ECDSA_P384_SHA384, "spiffe://td/web");
        let err = inspect_csr(&p384).unwrap_err();
        assert_eq!(
            err,
            CsrError::WrongKeyType {
                found: "ECDSA P-384".into()
            }
        );
        assert!(err.to_string().contains("ECDSA P-256 is required"), "{err}");
        let ed = csr_for(&rcgen::PKCS_ED25519, "spiffe://td/web");
        assert_eq!(
            inspect_csr(&ed).unwrap_err(),
            CsrError::WrongKeyType {
                found: "Ed25519".into()
            }
        );
    }
}

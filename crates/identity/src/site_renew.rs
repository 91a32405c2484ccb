//! Renewing a link client certificate at the site CA that issued it.
//!
//! The holder of a link client certificate (the other site, after a grant
//! redemption) proves it holds the certificate's key by sending a CSR for
//! the same key, signed with it, together with the current certificate.
//! The site CA checks that the certificate is its own, still valid and a
//! clientAuth leaf, and that the CSR is for the same key; it then issues a
//! new certificate for that key with the same subject, the same router URI
//! SANs and the same lifetime. Owns those checks; the HTTP endpoint and
//! the stored Secret are the control plane's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{DistinguishedName, DnType, ExtendedKeyUsagePurpose, SanType};
use rustls_pki_types::CertificateSigningRequestDer;
use rustls_pki_types::pem::PemObject as _;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{ASN1Time, FromDer as _};

use crate::issue::{IssueError, IssuedCert, LeafSpec};
use crate::site_ca::{ROUTER_URI_PREFIX, SiteCa};
use crate::{csr, x509};

/// The backdating of notBefore at issuance (see `CaSigner::issue`).
const BACKDATE: Duration = Duration::from_secs(60);

/// Why a renewal was refused; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RenewError {
    /// The current certificate is missing or does not parse.
    #[error("the current certificate {0}; send the Secret's tls.crt followed by a CSR")]
    BadCertificate(String),
    /// The CSR is missing or does not parse.
    #[error("the CSR {0}; send a PEM `CERTIFICATE REQUEST` signed with the key in tls.key")]
    BadCsr(String),
    /// The certificate is not from this site CA.
    #[error(
        "the current certificate was not issued by this site's CA ({ca}); redeem a new token from this site"
    )]
    NotIssuedHere {
        /// This CA's subject.
        ca: String,
    },
    /// The certificate is expired or not yet valid.
    #[error("the current certificate is {0}; redeem a new token from this site")]
    NotValid(&'static str),
    /// The certificate is not a link client certificate.
    #[error("the current certificate is not a link client certificate (no clientAuth usage)")]
    NotClient,
    /// The CSR is for another key than the certificate's.
    #[error("the CSR is not for the current certificate's key; sign it with the key in tls.key")]
    OtherKey,
    /// Issuance failed.
    #[error(transparent)]
    Issue(#[from] IssueError),
}

impl SiteCa {
    /// Renews the link client certificate `current_pem` (its leaf first)
    /// for the key of `csr_pem`, which must be the same key: same subject,
    /// same router URI SANs, same lifetime, from `now`.
    pub fn renew_client_cert(
        &self,
        current_pem: &str,
        csr_pem: &[u8],
        now: SystemTime,
    ) -> Result<IssuedCert, RenewError> {
        let bad = |e: String| RenewError::BadCertificate(e);
        let leaf_der = x509::pem_certs(current_pem)
            .map_err(|e| bad(format!("does not decode ({e})")))?
            .into_iter()
            .next()
            .ok_or_else(|| bad("is missing".into()))?;
        let leaf = x509::parse_cert(&leaf_der).map_err(|e| bad(format!("does not parse ({e})")))?;
        let ca_der = x509::pem_cert(self.cert_pem())
            .map_err(|e| bad(format!("CA does not decode ({e})")))?;
        let ca = x509::parse_cert(&ca_der).map_err(|e| bad(format!("CA does not parse ({e})")))?;
        if leaf.verify_signature(Some(ca.public_key())).is_err() {
            return Err(RenewError::NotIssuedHere {
                ca: ca.subject().to_string(),
            });
        }
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
        let at = ASN1Time::from_timestamp(secs).map_err(|e| bad(e.to_string()))?;
        let validity = leaf.validity();
        if at < validity.not_before {
            return Err(RenewError::NotValid("not yet valid"));
        }
        if at > validity.not_after {
            return Err(RenewError::NotValid("expired"));
        }
        let client = matches!(leaf.extended_key_usage(), Ok(Some(eku)) if eku.value.client_auth);
        if !client {
            return Err(RenewError::NotClient);
        }

        let csr_der = CertificateSigningRequestDer::from_pem_slice(csr_pem)
            .map_err(|e| RenewError::BadCsr(format!("does not decode ({e})")))?;
        let (_, req) = X509CertificationRequest::from_der(csr_der.as_ref())
            .map_err(|e| RenewError::BadCsr(format!("does not parse ({e})")))?;
        if req.certification_request_info.subject_pki.raw != leaf.public_key().raw {
            return Err(RenewError::OtherKey);
        }
        let public_key = csr::checked_public_key(csr_der.as_ref()).map_err(IssueError::from)?;

        let mut subject = DistinguishedName::new();
        if let Some(cn) = leaf.subject().iter_common_name().next()
            && let Ok(cn) = cn.as_str()
        {
            subject.push(DnType::CommonName, cn);
        }
        let mut sans = Vec::new();
        if let Ok(Some(san)) = leaf.subject_alternative_name() {
            for name in &san.value.general_names {
                if let GeneralName::URI(uri) = name
                    && uri.starts_with(ROUTER_URI_PREFIX)
                {
                    sans.push(SanType::URI((*uri).try_into().map_err(IssueError::from)?));
                }
            }
        }
        let span = x509::asn1_to_system(validity.not_after)
            .duration_since(x509::asn1_to_system(validity.not_before))
            .unwrap_or_default();
        let lifetime = span.saturating_sub(BACKDATE).max(Duration::from_secs(1));
        let spec = LeafSpec {
            subject,
            sans,
            ekus: vec![ExtendedKeyUsagePurpose::ClientAuth],
            spiffe_id: String::new(),
        };
        Ok(self.signer().issue(spec, &public_key, lifetime, now)?)
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, KeyPair};

    use super::*;

    fn ca(name: &str) -> SiteCa {
        SiteCa::load(&SiteCa::generate(name, "ca", Duration::from_secs(86_400)).unwrap()).unwrap()
    }

    fn csr_for(key_pem: &str) -> String {
        let key = KeyPair::from_pem(key_pem).unwrap();
        CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .serialize_request(&key)
            .unwrap()
            .pem()
            .unwrap()
    }

    #[test]
    fn a_valid_certificate_is_renewed_for_the_same_key_subject_router_and_lifetime() {
        let ca = ca("a");
        let now = SystemTime::now();
        let life = Duration::from_secs(120);
        let (cert, key) = ca
            .issue_router_client_cert("site-b", Some("router-b"), life, now)
            .unwrap();
        let later = now + Duration::from_secs(70);
        let renewed = ca
            .renew_client_cert(&cert.cert_pem, csr_for(&key).as_bytes(), later)
            .unwrap();
        assert_ne!(renewed.serial_hex, cert.serial_hex);
        assert!(renewed.not_after > cert.not_after);
        assert_eq!(
            renewed
                .not_after
                .duration_since(renewed.not_before)
                .unwrap(),
            cert.not_after.duration_since(cert.not_before).unwrap(),
            "same lifetime"
        );
        let der = x509::pem_cert(&renewed.cert_pem).unwrap();
        let parsed = x509::parse_cert(&der).unwrap();
        assert_eq!(parsed.subject().to_string(), "CN=site-b");
        // The renewed certificate pairs with the old key.
        crate::check_tls_pair(&renewed.cert_pem, &key).unwrap();
        let uris: Vec<String> = parsed
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::URI(u) => Some((*u).to_owned()),
                _ => None,
            })
            .collect();
        assert_eq!(uris, ["urn:meshlink:router:router-b"]);
    }

    #[test]
    fn renewal_is_refused_for_another_key_another_ca_a_server_or_an_expired_certificate() {
        let ca_a = ca("a");
        let now = SystemTime::now();
        let life = Duration::from_secs(120);
        let (cert, key) = ca_a.issue_client_cert("b", life, now).unwrap();
        let (_, other_key) = ca_a.issue_client_cert("c", life, now).unwrap();
        let csr = csr_for(&key);
        assert!(matches!(
            ca_a.renew_client_cert(&cert.cert_pem, csr_for(&other_key).as_bytes(), now),
            Err(RenewError::OtherKey)
        ));
        assert!(matches!(
            ca("x").renew_client_cert(&cert.cert_pem, csr.as_bytes(), now),
            Err(RenewError::NotIssuedHere { .. })
        ));
        assert!(matches!(
            ca_a.renew_client_cert(&cert.cert_pem, csr.as_bytes(), now + life * 2),
            Err(RenewError::NotValid("expired"))
        ));
        let (server, server_key) = ca_a
            .issue_server_cert(&["10.0.0.1".into()], life, now)
            .unwrap();
        assert!(matches!(
            ca_a.renew_client_cert(&server.cert_pem, csr_for(&server_key).as_bytes(), now),
            Err(RenewError::NotClient)
        ));
        assert!(matches!(
            ca_a.renew_client_cert("", csr.as_bytes(), now),
            Err(RenewError::BadCertificate(_))
        ));
        assert!(matches!(
            ca_a.renew_client_cert(&cert.cert_pem, b"junk", now),
            Err(RenewError::BadCsr(_))
        ));
    }
}

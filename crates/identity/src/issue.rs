//! Issuing leaf certificates: SPIFFE workload certificates from a mesh CA
//! (from a CSR, or with a control-plane-generated key for Envoy/gRPC), and
//! the signing core shared with site CAs.
//!
//! Owns the leaf profile (X509-SVID §4: CA=false, keyUsage digitalSignature,
//! EKU serverAuth+clientAuth, exactly one URI SAN) and the validity window
//! (now − 60 s .. now + lifetime, capped at the CA's notAfter). It never
//! takes the identity from the CSR: the caller passes the `SpiffeId` that the
//! proxy token allows (I4), and the CSR contributes only its public key.

use std::time::{Duration, SystemTime};

use rcgen::{
    DistinguishedName, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256, PublicKeyData, SanType,
};
use serde::{Deserialize, Serialize};

use crate::ca::{BACKDATE, CaError, CaMaterial, MeshCa};
use crate::csr::{self, CsrError};
use crate::provided;
use crate::spiffe::SpiffeId;
use crate::x509;

/// A freshly issued leaf certificate and what the caller needs to serve it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedCert {
    /// The leaf certificate (PEM).
    pub cert_pem: String,
    /// Certificates between the leaf and the root, nearest first (the
    /// issuing CA when it is not itself the root). Empty for a root CA.
    pub chain_pem: Vec<String>,
    /// The serial number, lowercase hex.
    pub serial_hex: String,
    /// The SPIFFE ID in the URI SAN; empty for site (link) certificates.
    pub spiffe_id: String,
    /// notBefore (now − 60 s, whole seconds).
    pub not_before: SystemTime,
    /// notAfter (now + lifetime, capped at the CA's notAfter).
    pub not_after: SystemTime,
    /// SHA-256 fingerprint of the issuing CA certificate.
    pub ca_fingerprint: String,
}

/// Why a leaf certificate was not issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The CSR was rejected (malformed, wrong key type, bad signature).
    #[error(transparent)]
    Csr(#[from] CsrError),
    /// The issuing CA has expired.
    #[error("the issuing CA expired at {not_after}; rotate the mesh or site CA")]
    CaExpired {
        /// The CA's notAfter, RFC 3339.
        not_after: String,
    },
    /// The issuing CA is not valid yet.
    #[error("the issuing CA is not valid before {not_before}; check the control plane clock")]
    CaNotYetValid {
        /// The CA's notBefore, RFC 3339.
        not_before: String,
    },
    /// The requested lifetime is zero.
    #[error("certificate lifetime must be greater than zero")]
    ZeroLifetime,
    /// A server certificate was requested for no hosts.
    #[error("a server certificate needs at least one DNS name or IP address")]
    NoHosts,
    /// A host or subject is not encodable in a certificate.
    #[error("{what} {value:?} cannot be put in a certificate: {reason}")]
    BadName {
        /// `host` or `subject`.
        what: &'static str,
        /// The rejected value.
        value: String,
        /// What the encoder reported.
        reason: String,
    },
    /// Key generation or signing failed (a crypto provider error).
    #[error("signing failed: {0}")]
    Sign(#[from] rcgen::Error),
}

/// What differs between leaf kinds: subject, SANs and extended key usages.
pub(crate) struct LeafSpec {
    pub(crate) subject: DistinguishedName,
    pub(crate) sans: Vec<SanType>,
    pub(crate) ekus: Vec<ExtendedKeyUsagePurpose>,
    pub(crate) spiffe_id: String,
}

/// A loaded CA key and certificate chain that signs leaves.
pub(crate) struct CaSigner {
    issuer: Issuer<'static, KeyPair>,
    pub(crate) cert_pem: String,
    pub(crate) fingerprint: String,
    pub(crate) root_pem: String,
    pub(crate) root_fingerprint: String,
    leaf_chain_pem: Vec<String>,
    not_before: SystemTime,
    pub(crate) not_after: SystemTime,
}

// === impl MeshCa (issuing) ===

impl MeshCa {
    /// Issues a workload certificate for `id` with the public key of the
    /// CSR (DER or PEM). The CSR must be ECDSA P-256 and self-signed
    /// correctly; its subject and SANs are ignored.
    pub fn issue_from_csr(
        &self,
        csr_der: &[u8],
        id: &SpiffeId,
        lifetime: Duration,
        now: SystemTime,
    ) -> Result<IssuedCert, IssueError> {
        let public_key = csr::checked_public_key(csr_der)?;
        self.signer
            .issue(spiffe_leaf(id)?, &public_key, lifetime, now)
    }

    /// Envoy/gRPC compatibility: generates an ECDSA P-256 key in the
    /// control plane and issues for it. Returns the key as PKCS#8 PEM.
    pub fn issue_with_key(
        &self,
        id: &SpiffeId,
        lifetime: Duration,
        now: SystemTime,
    ) -> Result<(IssuedCert, String), IssueError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let cert = self.signer.issue(spiffe_leaf(id)?, &key, lifetime, now)?;
        Ok((cert, key.serialize_pem()))
    }
}

/// The X509-SVID leaf: empty subject (so the SAN is critical) and exactly
/// one URI SAN, the SPIFFE ID; EKU serverAuth + clientAuth (§4.4).
fn spiffe_leaf(id: &SpiffeId) -> Result<LeafSpec, IssueError> {
    let uri = id.to_string();
    let ia5 = uri
        .clone()
        .try_into()
        .map_err(|e: rcgen::Error| IssueError::BadName {
            what: "SPIFFE ID",
            value: uri.clone(),
            reason: e.to_string(),
        })?;
    Ok(LeafSpec {
        subject: DistinguishedName::new(),
        sans: vec![SanType::URI(ia5)],
        ekus: vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        spiffe_id: uri,
    })
}

// === impl CaSigner ===

impl CaSigner {
    /// Loads material: certificate and chain parse, the certificate is a CA
    /// and the key matches it.
    pub(crate) fn load(material: &CaMaterial) -> Result<CaSigner, CaError> {
        let certs = provided::load_certs(material)?;
        let key = provided::parse_key(&material.key_pem)?;
        let ca = provided::parse(&certs[0]);
        provided::check_is_ca(&ca)?;
        provided::check_key_matches(&ca, &key)?;
        let not_before = x509::asn1_to_system(ca.validity().not_before);
        let not_after = x509::asn1_to_system(ca.validity().not_after);
        let issuer =
            Issuer::from_ca_cert_der(&certs[0], key).map_err(|e| CaError::UnusableSubject {
                subject: x509::subject(&ca),
                reason: e.to_string(),
            })?;
        let pems: Vec<String> = certs
            .iter()
            .map(|c| x509::der_to_pem("CERTIFICATE", c))
            .collect();
        let root = &certs[certs.len() - 1];
        Ok(CaSigner {
            issuer,
            cert_pem: pems[0].clone(),
            fingerprint: x509::fingerprint(&certs[0]),
            root_pem: pems[pems.len() - 1].clone(),
            root_fingerprint: x509::fingerprint(root),
            leaf_chain_pem: pems[..pems.len() - 1].to_vec(),
            not_before,
            not_after,
        })
    }

    /// Signs a leaf for `public_key`: CA=false, keyUsage digitalSignature,
    /// random serial, notBefore now − 60 s, notAfter now + lifetime (capped
    /// at the CA's notAfter).
    pub(crate) fn issue(
        &self,
        spec: LeafSpec,
        public_key: &impl PublicKeyData,
        lifetime: Duration,
        now: SystemTime,
    ) -> Result<IssuedCert, IssueError> {
        if lifetime.is_zero() {
            return Err(IssueError::ZeroLifetime);
        }
        let now = x509::truncate_to_secs(now);
        if now > self.not_after {
            return Err(IssueError::CaExpired {
                not_after: x509::rfc3339(self.not_after),
            });
        }
        if now < self.not_before {
            return Err(IssueError::CaNotYetValid {
                not_before: x509::rfc3339(self.not_before),
            });
        }
        let not_before = now - BACKDATE;
        let not_after = (now + lifetime).min(self.not_after);
        let (serial, serial_hex) = x509::random_serial();

        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = spec.subject;
        params.subject_alt_names = spec.sans;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = spec.ekus;
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(serial);
        params.not_before = x509::to_offset(not_before);
        params.not_after = x509::to_offset(not_after);
        let cert = params.signed_by(public_key, &self.issuer)?;

        Ok(IssuedCert {
            cert_pem: cert.pem(),
            chain_pem: self.leaf_chain_pem.clone(),
            serial_hex,
            spiffe_id: spec.spiffe_id,
            not_before,
            not_after: x509::truncate_to_secs(not_after),
            ca_fingerprint: self.fingerprint.clone(),
        })
    }

    /// Checks that leaves signed by this CA name it exactly as its own
    /// subject is encoded (rcgen re-encodes the issuer name; an unusual
    /// provided subject could otherwise break chain building at handshake
    /// time instead of failing here).
    pub(crate) fn check_issuer_name_round_trips(&self) -> Result<(), CaError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let spec = LeafSpec {
            subject: DistinguishedName::new(),
            sans: vec![SanType::URI("spiffe://probe/probe".try_into()?)],
            ekus: Vec::new(),
            spiffe_id: String::new(),
        };
        let now = self.not_before.max(SystemTime::now()).min(self.not_after);
        let ca_der = x509::pem_cert(&self.cert_pem).map_err(CaError::CertificatePem)?;
        let ca = provided::parse(&ca_der);
        let unusable = |reason: String| CaError::UnusableSubject {
            subject: x509::subject(&ca),
            reason,
        };
        let leaf = self
            .issue(spec, &key, Duration::from_secs(1), now)
            .map_err(|e| unusable(e.to_string()))?;
        let leaf_der = x509::pem_cert(&leaf.cert_pem).map_err(CaError::CertificatePem)?;
        if provided::parse(&leaf_der).issuer().as_raw() == ca.subject().as_raw() {
            Ok(())
        } else {
            Err(unusable(
                "re-encoding the subject changes it, e.g. repeated attributes or multi-valued RDNs"
                    .into(),
            ))
        }
    }
}

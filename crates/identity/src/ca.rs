//! Mesh certificate authorities: the builtin ECDSA P-256 root, provided CAs
//! and the loaded, ready-to-sign `MeshCa`.
//!
//! Owns CA creation and loading. It never stores anything (the control plane
//! persists the returned `CaMaterial` and must never regenerate a CA that
//! exists, I5) and never lets the CA key leave `CaMaterial`: `Debug` redacts
//! it and nothing here logs it (I4). Issuing leaves lives in `issue`, the
//! X509-SVID signing-CA checks in `provided`.

use std::fmt;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256, SanType,
};
use serde::{Deserialize, Serialize};

use crate::issue::CaSigner;
use crate::spiffe::{SpiffeId, SpiffeIdError};
use crate::x509::{self, PemError};

/// Clock-skew allowance: certificates start this long before "now".
pub(crate) const BACKDATE: Duration = Duration::from_secs(60);

/// The stored form of a CA: PEM certificate, PKCS#8 PEM key and the chain
/// above the certificate. The control plane keeps it as JSON in its store.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaMaterial {
    /// The signing CA certificate (PEM).
    pub cert_pem: String,
    /// The CA private key, PKCS#8 PEM. Never returned by API reads.
    pub key_pem: String,
    /// Certificates above `cert_pem`, nearest first, ending with the root
    /// when known. Empty for a self-signed root.
    #[serde(default)]
    pub chain_pem: Vec<String>,
}

/// Why a CA could not be generated, validated or loaded. Every message names
/// the check that failed and how to fix the input.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The CA certificate PEM is unreadable.
    #[error("provided CA certificate cannot be read ({0}); give a PEM `CERTIFICATE` block")]
    CertificatePem(PemError),
    /// The chain PEM is unreadable.
    #[error("provided CA chain cannot be read ({0}); give PEM `CERTIFICATE` blocks, nearest first")]
    ChainPem(PemError),
    /// The key PEM is unreadable.
    #[error("provided CA key cannot be read ({0}); give a PEM `PRIVATE KEY` block")]
    KeyPem(String),
    /// The key is SEC1 or PKCS#1 rather than PKCS#8.
    #[error(
        "provided CA key is a `{found}` block, but PKCS#8 is required; convert it with `openssl pkcs8 -topk8 -nocrypt -in key.pem`"
    )]
    KeyNotPkcs8 {
        /// The PEM label found, e.g. `EC PRIVATE KEY`.
        found: &'static str,
    },
    /// The key type cannot sign with the crypto provider (ring).
    #[error(
        "provided CA key cannot be used for signing ({0}); use an ECDSA P-256/P-384, Ed25519 or RSA key"
    )]
    UnsupportedKey(String),
    /// basicConstraints is missing or CA=false.
    #[error(
        "provided CA certificate {subject} is not a CA (basicConstraints CA=false or missing); use a CA certificate, not a leaf"
    )]
    NotACa {
        /// Subject of the offending certificate.
        subject: String,
    },
    /// The keyUsage extension is absent.
    #[error(
        "provided CA certificate {subject} has no keyUsage extension; X509-SVID signing certificates need `keyUsage=critical,keyCertSign,cRLSign`"
    )]
    MissingKeyUsage {
        /// Subject of the offending certificate.
        subject: String,
    },
    /// keyUsage is present but not marked critical.
    #[error(
        "provided CA certificate {subject} has a non-critical keyUsage; X509-SVID requires it critical: `keyUsage=critical,keyCertSign,cRLSign`"
    )]
    KeyUsageNotCritical {
        /// Subject of the offending certificate.
        subject: String,
    },
    /// keyUsage lacks keyCertSign.
    #[error(
        "provided CA certificate {subject} cannot sign certificates (keyUsage lacks keyCertSign); reissue it with `keyUsage=critical,keyCertSign,cRLSign`"
    )]
    MissingKeyCertSign {
        /// Subject of the offending certificate.
        subject: String,
    },
    /// keyUsage sets a bit the X509-SVID spec reserves for leaves.
    #[error(
        "provided CA certificate {subject} sets keyUsage {usage}, which X509-SVID allows only on leaf certificates; reissue it with `keyUsage=critical,keyCertSign,cRLSign` only"
    )]
    ForbiddenKeyUsage {
        /// Subject of the offending certificate.
        subject: String,
        /// The forbidden usage, e.g. `keyAgreement`.
        usage: &'static str,
    },
    /// The private key does not belong to the certificate.
    #[error(
        "provided CA key does not match the CA certificate {subject} (different public key); give the key the certificate was issued for"
    )]
    KeyMismatch {
        /// Subject of the certificate.
        subject: String,
    },
    /// A certificate's notAfter is in the past.
    #[error("CA certificate {subject} expired at {not_after}; renew it or provide a valid CA")]
    Expired {
        /// Subject of the expired certificate.
        subject: String,
        /// Its notAfter, RFC 3339.
        not_after: String,
    },
    /// A certificate's notBefore is in the future.
    #[error(
        "CA certificate {subject} is not valid before {not_before}; check the system clock or wait until then"
    )]
    NotYetValid {
        /// Subject of the certificate.
        subject: String,
        /// Its notBefore, RFC 3339.
        not_before: String,
    },
    /// A chain certificate is not a CA.
    #[error(
        "CA chain certificate #{index} ({subject}) is not a CA (basicConstraints CA=false or missing); the chain must hold only intermediate and root CAs"
    )]
    ChainNotCa {
        /// Position in the chain, from 0.
        index: usize,
        /// Its subject.
        subject: String,
    },
    /// A certificate is not signed by the next one up.
    #[error(
        "CA chain is broken: {child} is not signed by {parent} ({reason}); order the chain nearest-first, ending at the root"
    )]
    ChainBroken {
        /// Subject of the lower certificate.
        child: String,
        /// Subject of the certificate expected to have signed it.
        parent: String,
        /// Why verification failed.
        reason: String,
    },
    /// The CA certificate's subject cannot be reproduced as the issuer
    /// name of leaves (rcgen re-encodes it), so leaves would not chain.
    #[error(
        "CA certificate {subject} cannot be used as an issuer ({reason}); use a CA whose subject has single-valued, non-repeated attributes such as `CN=...,O=...`"
    )]
    UnusableSubject {
        /// Subject of the CA certificate.
        subject: String,
        /// What went wrong.
        reason: String,
    },
    /// The trust domain is not a valid SPIFFE trust domain.
    #[error("invalid trust domain for the CA: {0}")]
    TrustDomain(#[from] SpiffeIdError),
    /// The requested lifetime is zero.
    #[error("CA lifetime must be greater than zero")]
    ZeroLifetime,
    /// Key or certificate generation failed (a crypto provider error).
    #[error("CA generation failed: {0}")]
    Generate(#[from] rcgen::Error),
}

/// A loaded mesh CA, ready to issue workload certificates.
pub struct MeshCa {
    pub(crate) signer: CaSigner,
}

// === impl CaMaterial ===

impl CaMaterial {
    /// A copy without the private key, for API reads (I4).
    pub fn redacted(&self) -> CaMaterial {
        CaMaterial {
            key_pem: String::new(),
            ..self.clone()
        }
    }
}

impl fmt::Debug for CaMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaMaterial")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"[redacted]")
            .field("chain_pem", &self.chain_pem)
            .finish()
    }
}

// === impl MeshCa ===

impl MeshCa {
    /// Generates the builtin CA: a self-signed ECDSA P-256 root (CA=true,
    /// keyCertSign+cRLSign) named after `mesh`/`backend`, with the trust
    /// domain as its URI SAN (`spiffe://<td>`) and a random 128-bit serial.
    /// notBefore is backdated 60 s; the caller passes the lifetime
    /// (10 years by default).
    pub fn generate_builtin(
        mesh: &str,
        backend: &str,
        trust_domain: &str,
        lifetime: Duration,
    ) -> Result<CaMaterial, CaError> {
        let td_uri = SpiffeId::trust_domain_uri(trust_domain)?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "meshlink");
        dn.push(DnType::OrganizationalUnitName, format!("mesh {mesh}"));
        dn.push(DnType::CommonName, format!("{mesh}/{backend}"));
        let san = SanType::URI(td_uri.try_into()?);
        self_signed_ca(dn, vec![san], lifetime, SystemTime::now())
    }

    /// Validates a user-provided CA as an X509-SVID signing CA (see
    /// `provided` for the exact checks) and returns normalized material:
    /// PKCS#8 key, certificates re-encoded, extra blocks after the first
    /// certificate in `cert_pem` moved to the front of the chain.
    pub fn validate_provided(
        cert_pem: &str,
        key_pem: &str,
        chain_pem: Option<&str>,
        now: SystemTime,
    ) -> Result<CaMaterial, CaError> {
        let material = crate::provided::validate(cert_pem, key_pem, chain_pem, now)?;
        CaSigner::load(&material)?.check_issuer_name_round_trips()?;
        Ok(material)
    }

    /// Loads stored material: the certificate parses and is a CA, the key
    /// parses and matches. Expiry is checked when issuing, so an expired CA
    /// still loads (and its bundle can still be served during rotation).
    pub fn load(material: &CaMaterial) -> Result<MeshCa, CaError> {
        Ok(MeshCa {
            signer: CaSigner::load(material)?,
        })
    }

    /// SHA-256 of the CA certificate DER, lowercase hex.
    pub fn fingerprint(&self) -> String {
        self.signer.fingerprint.clone()
    }

    /// The CA certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.signer.cert_pem
    }

    /// The top of the chain (the CA itself when it is a root): what goes in
    /// trust bundles.
    pub fn root_pem(&self) -> &str {
        &self.signer.root_pem
    }

    /// SHA-256 of the root certificate DER, lowercase hex.
    pub fn root_fingerprint(&self) -> String {
        self.signer.root_fingerprint.clone()
    }

    /// The CA certificate's notAfter.
    pub fn not_after(&self) -> SystemTime {
        self.signer.not_after
    }
}

impl fmt::Debug for MeshCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshCa")
            .field("fingerprint", &self.signer.fingerprint)
            .field("not_after", &x509::rfc3339(self.signer.not_after))
            .finish_non_exhaustive()
    }
}

/// Generates a self-signed ECDSA P-256 CA (shared by mesh and site CAs).
pub(crate) fn self_signed_ca(
    dn: DistinguishedName,
    sans: Vec<SanType>,
    lifetime: Duration,
    now: SystemTime,
) -> Result<CaMaterial, CaError> {
    if lifetime.is_zero() {
        return Err(CaError::ZeroLifetime);
    }
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = dn;
    params.subject_alt_names = sans;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.serial_number = Some(x509::random_serial().0);
    params.not_before = x509::to_offset(now - BACKDATE);
    params.not_after = x509::to_offset(now + lifetime);
    let cert = params.self_signed(&key)?;
    Ok(CaMaterial {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        chain_pem: Vec::new(),
    })
}

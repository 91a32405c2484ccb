//! Site CAs for multi-site links: each Site has its own CA that issues
//! RouterAccess server certificates and link client certificates, as
//! Skupper's `skupper-site-ca` does.
//!
//! Owns the site CA's creation and its two leaf profiles (serverAuth with
//! DNS/IP SANs; clientAuth with a CN subject). It never issues SPIFFE
//! workload identities (that is `MeshCa`'s job) and never stores the key.

use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use rcgen::{
    DistinguishedName, DnType, ExtendedKeyUsagePurpose, KeyPair, PKCS_ECDSA_P256_SHA256, SanType,
};

use crate::ca::{self, CaError, CaMaterial};
use crate::issue::{CaSigner, IssueError, IssuedCert, LeafSpec};
use crate::x509;

/// Longest CommonName X.509 allows (RFC 5280 `ub-common-name`).
const MAX_CN_LEN: usize = 64;

/// A loaded site CA, ready to issue link certificates.
pub struct SiteCa {
    signer: CaSigner,
}

// === impl SiteCa ===

impl SiteCa {
    /// The default site CA name, as Skupper names it.
    pub const DEFAULT_NAME: &'static str = "skupper-site-ca";

    /// Generates a self-signed ECDSA P-256 site CA with subject
    /// `CN=<name>, OU=site <site>, O=meshlink`.
    pub fn generate(site: &str, name: &str, lifetime: Duration) -> Result<CaMaterial, CaError> {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "meshlink");
        dn.push(DnType::OrganizationalUnitName, format!("site {site}"));
        dn.push(DnType::CommonName, name);
        ca::self_signed_ca(dn, Vec::new(), lifetime, SystemTime::now())
    }

    /// Loads stored material (the certificate is a CA, the key matches).
    pub fn load(material: &CaMaterial) -> Result<SiteCa, CaError> {
        Ok(SiteCa {
            signer: CaSigner::load(material)?,
        })
    }

    /// Issues a RouterAccess server certificate (EKU serverAuth) for
    /// `hosts`, each a DNS name or an IP address; the first host is also
    /// the CommonName. Returns the certificate and its new PKCS#8 PEM key.
    pub fn issue_server_cert(
        &self,
        hosts: &[String],
        lifetime: Duration,
        now: SystemTime,
    ) -> Result<(IssuedCert, String), IssueError> {
        let first = hosts.first().ok_or(IssueError::NoHosts)?;
        let sans = hosts
            .iter()
            .map(|h| host_san(h))
            .collect::<Result<_, _>>()?;
        let spec = LeafSpec {
            subject: common_name(first)?,
            sans,
            ekus: vec![ExtendedKeyUsagePurpose::ServerAuth],
            spiffe_id: String::new(),
        };
        self.issue(spec, lifetime, now)
    }

    /// Issues a link client certificate (EKU clientAuth) with subject
    /// `CN=<subject>`. Returns the certificate and its new PKCS#8 PEM key.
    pub fn issue_client_cert(
        &self,
        subject: &str,
        lifetime: Duration,
        now: SystemTime,
    ) -> Result<(IssuedCert, String), IssueError> {
        let spec = LeafSpec {
            subject: common_name(subject)?,
            sans: Vec::new(),
            ekus: vec![ExtendedKeyUsagePurpose::ClientAuth],
            spiffe_id: String::new(),
        };
        self.issue(spec, lifetime, now)
    }

    /// SHA-256 of the site CA certificate DER, lowercase hex.
    pub fn fingerprint(&self) -> String {
        self.signer.fingerprint.clone()
    }

    /// The site CA certificate (PEM): what link peers trust.
    pub fn cert_pem(&self) -> &str {
        &self.signer.cert_pem
    }

    /// The top of the chain (the site CA itself when self-signed).
    pub fn root_pem(&self) -> &str {
        &self.signer.root_pem
    }

    /// The site CA certificate's notAfter.
    pub fn not_after(&self) -> SystemTime {
        self.signer.not_after
    }

    fn issue(
        &self,
        spec: LeafSpec,
        lifetime: Duration,
        now: SystemTime,
    ) -> Result<(IssuedCert, String), IssueError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let cert = self.signer.issue(spec, &key, lifetime, now)?;
        Ok((cert, key.serialize_pem()))
    }
}

impl fmt::Debug for SiteCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SiteCa")
            .field("fingerprint", &self.signer.fingerprint)
            .field("not_after", &x509::rfc3339(self.signer.not_after))
            .finish_non_exhaustive()
    }
}

/// A DNS or IP SAN for `host`.
fn host_san(host: &str) -> Result<SanType, IssueError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    let bad = |reason: String| IssueError::BadName {
        what: "host",
        value: host.to_owned(),
        reason,
    };
    let valid = !host.is_empty()
        && host.len() <= 253
        && host.split('.').enumerate().all(|(i, label)| {
            (i == 0 && label == "*")
                || (!label.is_empty()
                    && label.len() <= 63
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        });
    if !valid {
        return Err(bad(
            "not a DNS name or IP address; use e.g. `router.example.com` or `10.0.0.1`".into(),
        ));
    }
    Ok(SanType::DnsName(
        host.try_into()
            .map_err(|e: rcgen::Error| bad(e.to_string()))?,
    ))
}

/// `CN=<name>`, checked against the X.509 length limit.
fn common_name(name: &str) -> Result<DistinguishedName, IssueError> {
    if name.is_empty() || name.chars().count() > MAX_CN_LEN {
        return Err(IssueError::BadName {
            what: "subject",
            value: name.to_owned(),
            reason: format!("a CommonName must be 1 to {MAX_CN_LEN} characters"),
        });
    }
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    Ok(dn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_validated() {
        assert!(matches!(host_san("10.0.0.1"), Ok(SanType::IpAddress(_))));
        assert!(matches!(host_san("::1"), Ok(SanType::IpAddress(_))));
        assert!(matches!(
            host_san("router.example.com"),
            Ok(SanType::DnsName(_))
        ));
        assert!(matches!(host_san("*.example.com"), Ok(SanType::DnsName(_))));
        for bad in ["", "a..b", "exa mple.com", "a.*.com", "héllo.com"] {
            assert!(
                matches!(host_san(bad), Err(IssueError::BadName { what: "host", .. })),
                "{bad:?} should be rejected"
            );
        }
        assert!(common_name(&"x".repeat(65)).is_err());
        assert!(common_name("link-1").is_ok());
    }
}

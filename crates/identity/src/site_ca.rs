//! Site CAs for multi-site links: each Site has its own CA that issues
//! RouterAccess server certificates and link client certificates, as
//! Skupper's `skupper-site-ca` does.
//!
//! Owns the site CA's creation and its two leaf profiles (serverAuth with
//! DNS/IP SANs; clientAuth with a CN subject). Either may also name the
//! router (site id) it belongs to as a URI SAN `urn:meshlink:router:<id>`,
//! which the link crate binds to the router id the peer claims in its
//! hello. It never issues SPIFFE workload identities (that is `MeshCa`'s
//! job) and never stores the key.

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
/// Longest router id a certificate names.
const MAX_ROUTER_ID_LEN: usize = 128;

/// Prefix of the URI SAN that names the router a link certificate belongs
/// to: `urn:meshlink:router:<router id>`.
pub const ROUTER_URI_PREFIX: &str = "urn:meshlink:router:";

/// The URI SAN naming router `id`.
pub fn router_uri(id: &str) -> String {
    format!("{ROUTER_URI_PREFIX}{id}")
}

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
        self.issue_router_server_cert(hosts, None, lifetime, now)
    }

    /// As [`SiteCa::issue_server_cert`], and when `router_id` is given the
    /// certificate also names that router (`urn:meshlink:router:<id>`).
    pub fn issue_router_server_cert(
        &self,
        hosts: &[String],
        router_id: Option<&str>,
        lifetime: Duration,
        now: SystemTime,
    ) -> Result<(IssuedCert, String), IssueError> {
        let first = hosts.first().ok_or(IssueError::NoHosts)?;
        let mut sans: Vec<SanType> = hosts
            .iter()
            .map(|h| host_san(h))
            .collect::<Result<_, _>>()?;
        sans.extend(router_id.map(router_san).transpose()?);
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
        self.issue_router_client_cert(subject, None, lifetime, now)
    }

    /// As [`SiteCa::issue_client_cert`], and when `router_id` is given the
    /// certificate also names that router (`urn:meshlink:router:<id>`):
    /// the peer then accepts only that router id in the link's hello.
    pub fn issue_router_client_cert(
        &self,
        subject: &str,
        router_id: Option<&str>,
        lifetime: Duration,
        now: SystemTime,
    ) -> Result<(IssuedCert, String), IssueError> {
        let spec = LeafSpec {
            subject: common_name(subject)?,
            sans: router_id.map(router_san).transpose()?.into_iter().collect(),
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

    /// The signer, for renewals (`site_renew`).
    pub(crate) fn signer(&self) -> &CaSigner {
        &self.signer
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

/// The URI SAN naming router `id`: 1 to 128 ASCII letters, digits, `-`,
/// `_` or `.` (a site id is a UUID).
fn router_san(id: &str) -> Result<SanType, IssueError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ROUTER_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let bad = |reason: String| IssueError::BadName {
        what: "router id",
        value: id.to_owned(),
        reason,
    };
    if !ok {
        return Err(bad(format!(
            "a router id must be 1 to {MAX_ROUTER_ID_LEN} ASCII letters, digits, '-', '_' or '.' (the Site's status.siteId)"
        )));
    }
    Ok(SanType::URI(
        router_uri(id)
            .try_into()
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
        assert!(matches!(
            router_san("5f0c6a2e-1b7d-4c1e-9f00-0a1b2c3d4e5f"),
            Ok(SanType::URI(_))
        ));
        for bad in ["", "a b", "a/b", "é", &"x".repeat(129)] {
            assert!(
                matches!(
                    router_san(bad),
                    Err(IssueError::BadName {
                        what: "router id",
                        ..
                    })
                ),
                "{bad:?} should be rejected"
            );
        }
    }
}

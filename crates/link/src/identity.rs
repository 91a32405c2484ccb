//! Binding a peer router's claimed id to its verified certificate.
//!
//! The site CA names the router a link certificate belongs to with a URI
//! SAN `urn:meshlink:router:<router id>` (RouterAccess server certificates
//! and the client certificates of meshlink's grant redemptions). When the
//! peer's verified leaf certificate names routers, the router id in the
//! peer's hello must be one of them, or the link is refused. A certificate
//! that names no router (one issued by a Skupper-style redeemer, `curl`,
//! `meshlink link generate`, or before this rule) is accepted and counted
//! as `unbound`, so existing credentials keep working.
//!
//! Owns that rule and the parsing of the SAN; the session applies it to the
//! first hello and counts the outcome in `meshlink_link_peer_identity_total`.

use rustls_pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer as _, X509Certificate};

/// Prefix of the URI SAN naming a router (the identity crate's
/// `site_ca::ROUTER_URI_PREFIX`; kept equal by a test).
pub const ROUTER_URI_PREFIX: &str = "urn:meshlink:router:";

/// A refused identity claim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The hello's router id is not one the certificate names.
    #[error(
        "the peer claims router id {claimed:?} but its certificate is issued for router {certified:?}; \
         a link credential belongs to one router: issue the peer its own credential (redeem a token on that site)"
    )]
    Mismatch {
        /// The router id in the hello.
        claimed: String,
        /// The router ids the certificate names.
        certified: Vec<String>,
    },
}

/// How a peer's claim was bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// The certificate names the claimed router id.
    Bound,
    /// The certificate names no router; the claim is taken as is.
    Unbound,
}

// === impl Binding ===

impl Binding {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Binding::Bound => "bound",
            Binding::Unbound => "unbound",
        }
    }
}

/// The router ids the peer's leaf certificate names (URI SANs with
/// [`ROUTER_URI_PREFIX`]); empty when it names none or does not parse.
pub fn router_ids(certs: &[CertificateDer<'_>]) -> Vec<String> {
    let Some(leaf) = certs.first() else {
        return Vec::new();
    };
    let Ok((_, cert)) = X509Certificate::from_der(leaf) else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::URI(u) => u.strip_prefix(ROUTER_URI_PREFIX).map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// Checks `claimed` (the hello's router id) against the certificate's
/// router ids.
pub fn check(certified: &[String], claimed: &str) -> Result<Binding, IdentityError> {
    if certified.is_empty() {
        return Ok(Binding::Unbound);
    }
    if certified.iter().any(|c| c == claimed) {
        return Ok(Binding::Bound);
    }
    Err(IdentityError::Mismatch {
        claimed: claimed.to_owned(),
        certified: certified.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use meshlink_identity::SiteCa;
    use rustls_pki_types::pem::PemObject as _;

    use super::*;

    fn leaf(router: Option<&str>) -> Vec<CertificateDer<'static>> {
        let ca = SiteCa::load(
            &SiteCa::generate("a", SiteCa::DEFAULT_NAME, Duration::from_secs(3600)).unwrap(),
        )
        .unwrap();
        let (cert, _) = ca
            .issue_router_client_cert("a", router, Duration::from_secs(600), SystemTime::now())
            .unwrap();
        vec![CertificateDer::from_pem_slice(cert.cert_pem.as_bytes()).unwrap()]
    }

    #[test]
    fn the_prefix_is_the_site_cas() {
        assert_eq!(
            ROUTER_URI_PREFIX,
            meshlink_identity::site_ca::ROUTER_URI_PREFIX
        );
    }

    #[test]
    fn a_claim_must_match_the_certified_router() {
        let ids = router_ids(&leaf(Some("router-a")));
        assert_eq!(ids, ["router-a"]);
        assert_eq!(check(&ids, "router-a"), Ok(Binding::Bound));
        let err = check(&ids, "router-b").unwrap_err();
        assert!(err.to_string().contains("\"router-b\""), "{err}");
        assert!(err.to_string().contains("router-a"), "{err}");
    }

    #[test]
    fn a_certificate_naming_no_router_is_unbound() {
        let ids = router_ids(&leaf(None));
        assert!(ids.is_empty());
        assert_eq!(check(&ids, "anything"), Ok(Binding::Unbound));
    }
}

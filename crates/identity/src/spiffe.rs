//! SPIFFE IDs: `spiffe://<trust-domain>/<service>`.
//!
//! Owns parsing and validation of workload identities as the SPIFFE ID
//! specification defines them (scheme, trust domain and path rules). It must
//! never decide *who* may hold an identity: that comes from the proxy token
//! (I4), and certificates are only issued for an already-validated `SpiffeId`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The URI scheme of every SPIFFE ID.
const SCHEME: &str = "spiffe://";

/// Maximum length of a trust domain name (SPIFFE ID spec §2.1).
const MAX_TRUST_DOMAIN_LEN: usize = 255;

/// Maximum length of a whole SPIFFE ID URI (SPIFFE ID spec §2.3).
const MAX_URI_LEN: usize = 2048;

/// Why a trust domain, service name or SPIFFE ID URI was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpiffeIdError {
    /// The URI does not start with `spiffe://`.
    #[error("SPIFFE ID {0:?} must start with `spiffe://`; use `spiffe://<trust-domain>/<service>`")]
    WrongScheme(String),
    /// The trust domain is empty.
    #[error("trust domain is empty; set the Mesh trust domain (defaults to the mesh name)")]
    EmptyTrustDomain,
    /// The trust domain contains a character the SPIFFE spec does not allow.
    #[error(
        "trust domain {domain:?} contains {ch:?}; only lowercase letters, digits, `.`, `-` and `_` are allowed"
    )]
    BadTrustDomainChar {
        /// The rejected trust domain.
        domain: String,
        /// The first offending character.
        ch: char,
    },
    /// The trust domain is longer than 255 bytes.
    #[error("trust domain {0:?} is longer than 255 characters; use a shorter trust domain")]
    TrustDomainTooLong(String),
    /// The service (path) is empty.
    #[error(
        "service name is empty; a workload SPIFFE ID needs a service, `spiffe://<td>/<service>`"
    )]
    EmptyService,
    /// A path segment is empty, `.` or `..`.
    #[error("service {service:?} has an empty, `.` or `..` path segment; remove it")]
    BadServiceSegment {
        /// The rejected service.
        service: String,
    },
    /// The service contains a character the SPIFFE spec does not allow.
    #[error(
        "service {service:?} contains {ch:?}; only letters, digits, `.`, `-`, `_` and `/` between segments are allowed"
    )]
    BadServiceChar {
        /// The rejected service.
        service: String,
        /// The first offending character.
        ch: char,
    },
    /// The URI is longer than 2048 bytes.
    #[error("SPIFFE ID is longer than 2048 characters; use a shorter service name")]
    TooLong,
}

/// A validated workload identity, `spiffe://<trust-domain>/<service>`.
///
/// The service is the SPIFFE ID path without its leading `/`; it may have
/// several segments (`ns/web`). Serialized as the URI string.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SpiffeId {
    trust_domain: String,
    service: String,
}

// === impl SpiffeId ===

impl SpiffeId {
    /// Builds a SPIFFE ID from a trust domain and a service, validating both.
    pub fn new(
        trust_domain: impl Into<String>,
        service: impl Into<String>,
    ) -> Result<SpiffeId, SpiffeIdError> {
        let trust_domain = trust_domain.into();
        let service = service.into();
        validate_trust_domain(&trust_domain)?;
        validate_service(&service)?;
        if SCHEME.len() + trust_domain.len() + 1 + service.len() > MAX_URI_LEN {
            return Err(SpiffeIdError::TooLong);
        }
        Ok(SpiffeId {
            trust_domain,
            service,
        })
    }

    /// Parses `spiffe://<trust-domain>/<service>`.
    ///
    /// Query strings, fragments, ports and user info are rejected by the
    /// character rules, as the SPIFFE ID spec requires.
    pub fn parse(uri: &str) -> Result<SpiffeId, SpiffeIdError> {
        let rest = uri
            .strip_prefix(SCHEME)
            .ok_or_else(|| SpiffeIdError::WrongScheme(uri.to_owned()))?;
        let (trust_domain, service) = match rest.split_once('/') {
            Some((td, path)) => (td, path),
            None => (rest, ""),
        };
        SpiffeId::new(trust_domain, service)
    }

    /// The trust domain, e.g. `default`.
    pub fn trust_domain(&self) -> &str {
        &self.trust_domain
    }

    /// The service (the path without its leading `/`), e.g. `web`.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The URI of the trust domain itself, `spiffe://<trust-domain>`, as
    /// carried by signing (CA) certificates.
    pub fn trust_domain_uri(trust_domain: &str) -> Result<String, SpiffeIdError> {
        validate_trust_domain(trust_domain)?;
        Ok(format!("{SCHEME}{trust_domain}"))
    }
}

impl fmt::Display for SpiffeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.trust_domain, self.service)
    }
}

impl fmt::Debug for SpiffeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpiffeId({self})")
    }
}

impl FromStr for SpiffeId {
    type Err = SpiffeIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SpiffeId::parse(s)
    }
}

impl TryFrom<String> for SpiffeId {
    type Error = SpiffeIdError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        SpiffeId::parse(&s)
    }
}

impl From<SpiffeId> for String {
    fn from(id: SpiffeId) -> String {
        id.to_string()
    }
}

/// SPIFFE ID spec §2.1: lowercase letters, digits, dots, dashes, underscores.
fn validate_trust_domain(td: &str) -> Result<(), SpiffeIdError> {
    if td.is_empty() {
        return Err(SpiffeIdError::EmptyTrustDomain);
    }
    if td.len() > MAX_TRUST_DOMAIN_LEN {
        return Err(SpiffeIdError::TrustDomainTooLong(td.to_owned()));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || ".-_".contains(c);
    if let Some(ch) = td.chars().find(|c| !allowed(*c)) {
        return Err(SpiffeIdError::BadTrustDomainChar {
            domain: td.to_owned(),
            ch,
        });
    }
    Ok(())
}

/// SPIFFE ID spec §2.2: segments of letters, digits, dots, dashes and
/// underscores; no empty, `.` or `..` segments; no trailing `/`.
fn validate_service(service: &str) -> Result<(), SpiffeIdError> {
    if service.is_empty() {
        return Err(SpiffeIdError::EmptyService);
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || ".-_".contains(c);
    for segment in service.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(SpiffeIdError::BadServiceSegment {
                service: service.to_owned(),
            });
        }
        if let Some(ch) = segment.chars().find(|c| !allowed(*c)) {
            return Err(SpiffeIdError::BadServiceChar {
                service: service.to_owned(),
                ch,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_display_and_parse() {
        let id = SpiffeId::new("default", "web").unwrap();
        assert_eq!(id.to_string(), "spiffe://default/web");
        assert_eq!(SpiffeId::parse("spiffe://default/web").unwrap(), id);
        assert_eq!(id.trust_domain(), "default");
        assert_eq!(id.service(), "web");
        let nested = SpiffeId::parse("spiffe://prod.example/ns/web-1").unwrap();
        assert_eq!(nested.service(), "ns/web-1");
    }

    #[test]
    fn serde_uses_the_uri_string() {
        let id = SpiffeId::new("td", "svc").unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"spiffe://td/svc\"");
        assert_eq!(serde_json::from_str::<SpiffeId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<SpiffeId>("\"http://td/svc\"").is_err());
    }

    #[test]
    fn rejects_invalid_ids_with_the_reason() {
        type Check = fn(&SpiffeIdError) -> bool;
        let cases: &[(&str, Check)] = &[
            ("https://td/svc", |e| {
                matches!(e, SpiffeIdError::WrongScheme(_))
            }),
            ("spiffe:///svc", |e| {
                matches!(e, SpiffeIdError::EmptyTrustDomain)
            }),
            ("spiffe://TD/svc", |e| {
                matches!(e, SpiffeIdError::BadTrustDomainChar { ch: 'T', .. })
            }),
            ("spiffe://td:8080/svc", |e| {
                matches!(e, SpiffeIdError::BadTrustDomainChar { ch: ':', .. })
            }),
            ("spiffe://td", |e| matches!(e, SpiffeIdError::EmptyService)),
            ("spiffe://td/", |e| matches!(e, SpiffeIdError::EmptyService)),
            ("spiffe://td/a//b", |e| {
                matches!(e, SpiffeIdError::BadServiceSegment { .. })
            }),
            ("spiffe://td/a/../b", |e| {
                matches!(e, SpiffeIdError::BadServiceSegment { .. })
            }),
            ("spiffe://td/svc/", |e| {
                matches!(e, SpiffeIdError::BadServiceSegment { .. })
            }),
            ("spiffe://td/svc?x=1", |e| {
                matches!(e, SpiffeIdError::BadServiceChar { ch: '?', .. })
            }),
        ];
        for (uri, check) in cases {
            let err = SpiffeId::parse(uri).unwrap_err();
            assert!(check(&err), "{uri}: unexpected error {err:?}");
        }
        let long = "a".repeat(256);
        assert!(matches!(
            SpiffeId::new(long, "svc"),
            Err(SpiffeIdError::TrustDomainTooLong(_))
        ));
        assert!(matches!(
            SpiffeId::new("td", "s".repeat(2100)),
            Err(SpiffeIdError::TooLong)
        ));
    }
}

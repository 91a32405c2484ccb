//! The sidecar's mesh DNS as validated from the `meshlink:dns` Listener
//! (`meshlink_proto::dns_listener`): where it listens, the name → address
//! table, the suffixes it answers for alone, and how it forwards the rest.
//!
//! Plain data with the one lookup rule ([`DnsSpec::lookup`]); the server
//! (`crate::dns`) does the I/O. Names are kept lowercase without a
//! trailing dot, so a lookup is one hash probe.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Serialize;

/// One name of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DnsRecord {
    /// Its addresses: A answers take the IPv4 ones, AAAA the IPv6 ones.
    pub addresses: Vec<IpAddr>,
    /// The TTL of its answers, in seconds.
    pub ttl: u32,
}

/// The mesh DNS server's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DnsSpec {
    /// Where the server listens, UDP and TCP.
    pub bind: SocketAddr,
    /// Names (lowercase, no trailing dot) and their records.
    pub table: HashMap<String, DnsRecord>,
    /// Suffixes (lowercase, no leading or trailing dot) under which a name
    /// missing from the table is NXDOMAIN, never forwarded.
    pub known_suffixes: Vec<String>,
    /// How long one upstream resolver may take before the next is tried.
    #[serde(with = "humantime_serde_secs")]
    pub resolver_timeout: Duration,
    /// Forwarded queries in flight at most; more are dropped.
    pub max_pending: usize,
}

/// What the table says about a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// The name is in the table.
    Found(&'a DnsRecord),
    /// The name is under a known suffix but not in the table: NXDOMAIN.
    NotFound,
    /// Not a mesh name: forward it.
    Elsewhere,
}

impl DnsSpec {
    /// What the table says about `name` (any case, trailing dot or not).
    pub fn lookup(&self, name: &str) -> Lookup<'_> {
        let name = normalize(name);
        if let Some(record) = self.table.get(name.as_str()) {
            return Lookup::Found(record);
        }
        let known = self.known_suffixes.iter().any(|s| {
            name == *s
                || name
                    .strip_suffix(s.as_str())
                    .is_some_and(|n| n.ends_with('.'))
        });
        if known {
            Lookup::NotFound
        } else {
            Lookup::Elsewhere
        }
    }
}

/// `name` lowercase (ASCII) without its trailing dot.
pub fn normalize(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// `Duration` as `"5s"` in `/config_dump`.
mod humantime_serde_secs {
    use std::time::Duration;

    pub(super) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> DnsSpec {
        DnsSpec {
            bind: "127.0.0.1:15053".parse().unwrap(),
            table: [(
                "backend.mesh".to_owned(),
                DnsRecord {
                    addresses: vec!["240.0.0.1".parse().unwrap()],
                    ttl: 1,
                },
            )]
            .into(),
            known_suffixes: vec!["mesh".into()],
            resolver_timeout: Duration::from_secs(5),
            max_pending: 1024,
        }
    }

    #[test]
    fn names_match_in_any_case_with_or_without_the_trailing_dot() {
        let s = spec();
        for name in ["backend.mesh", "BACKEND.Mesh.", "backend.mesh."] {
            assert!(matches!(s.lookup(name), Lookup::Found(_)), "{name}");
        }
    }

    #[test]
    fn known_suffixes_match_whole_labels_only() {
        let s = spec();
        assert_eq!(s.lookup("web.mesh."), Lookup::NotFound);
        assert_eq!(s.lookup("a.b.MESH"), Lookup::NotFound);
        assert_eq!(s.lookup("mesh."), Lookup::NotFound);
        assert_eq!(s.lookup("enmesh."), Lookup::Elsewhere);
        assert_eq!(s.lookup("example.com."), Lookup::Elsewhere);
        assert_eq!(s.lookup("."), Lookup::Elsewhere);
    }
}

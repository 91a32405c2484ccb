//! A route's `hash_policy` (Envoy's, what Kuma's MeshLoadBalancingStrategy
//! `hashPolicies` become): what a request's hash for a `RING_HASH` or
//! `MAGLEV` cluster is made of. Policies are tried in order; each that
//! finds its property folds it into the hash (Envoy's
//! `hash = (hash << 1 | hash >> 63) ^ new`), and a `terminal` one that
//! produced a hash ends the list. No hash at all: the balancer picks as
//! if there were no ring (a random point).

use std::net::SocketAddr;

use http::HeaderMap;
use serde::Serialize;

use crate::hash_ring::hash_of;

/// What one policy hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HashOn {
    /// A request header's value (all values, in order, joined).
    Header(String),
    /// A cookie's value (meshlink-proxy does not make a missing cookie).
    Cookie(String),
    /// The downstream connection's source IP address.
    SourceIp,
    /// A URL query parameter's (first) value.
    QueryParameter(String),
    /// Envoy filter state: meshlink-proxy has none, so it never hashes.
    FilterState(String),
}

/// One hash policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HashPolicy {
    /// The property.
    pub on: HashOn,
    /// Stop here when a hash exists.
    pub terminal: bool,
}

/// The hash of a request under `policies`; `None` when none applied.
pub fn request_hash(
    policies: &[HashPolicy],
    headers: &HeaderMap,
    query: Option<&str>,
    peer: SocketAddr,
) -> Option<u64> {
    let mut hash: Option<u64> = None;
    for p in policies {
        let value = match &p.on {
            HashOn::Header(name) => {
                let values: Vec<&[u8]> =
                    headers.get_all(name).iter().map(|v| v.as_bytes()).collect();
                (!values.is_empty()).then(|| hash_of(&values.concat()))
            }
            HashOn::Cookie(name) => cookie(headers, name).map(|v| hash_of(v.as_bytes())),
            HashOn::SourceIp => Some(hash_of(peer.ip().to_string().as_bytes())),
            HashOn::QueryParameter(name) => query
                .and_then(|q| {
                    q.split('&')
                        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
                        .find(|(k, _)| k == name)
                })
                .map(|(_, v)| hash_of(v.as_bytes())),
            HashOn::FilterState(_) => None,
        };
        if let Some(v) = value {
            hash = Some(hash.map_or(v, |h| h.rotate_left(1) ^ v));
        }
        if p.terminal && hash.is_some() {
            break;
        }
    }
    hash
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(on: HashOn, terminal: bool) -> HashPolicy {
        HashPolicy { on, terminal }
    }

    #[test]
    fn properties_hash_and_terminal_stops() {
        let peer: SocketAddr = "10.0.0.7:5555".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-session-id", "abc".parse().unwrap());
        h.insert(http::header::COOKIE, "a=1; user=ann".parse().unwrap());
        let header = policy(HashOn::Header("x-session-id".into()), true);
        let user = policy(HashOn::Cookie("user".into()), false);
        assert_eq!(
            request_hash(std::slice::from_ref(&header), &h, None, peer),
            Some(hash_of(b"abc"))
        );
        assert_eq!(
            request_hash(std::slice::from_ref(&user), &h, None, peer),
            Some(hash_of(b"ann"))
        );
        // Terminal: the cookie is not folded in once the header hashed.
        assert_eq!(
            request_hash(&[header, user.clone()], &h, None, peer),
            Some(hash_of(b"abc"))
        );
        let missing = policy(HashOn::Header("x-none".into()), true);
        assert_eq!(
            request_hash(&[missing, user], &h, None, peer),
            Some(hash_of(b"ann")),
            "a terminal policy without a value falls through"
        );
        let q = policy(HashOn::QueryParameter("id".into()), false);
        assert_eq!(
            request_hash(std::slice::from_ref(&q), &h, Some("x=1&id=42"), peer),
            Some(hash_of(b"42"))
        );
        assert_eq!(request_hash(&[q], &h, None, peer), None);
        let ip = policy(HashOn::SourceIp, false);
        assert_eq!(
            request_hash(&[ip], &h, None, peer),
            Some(hash_of(b"10.0.0.7"))
        );
        let fs = policy(HashOn::FilterState("k".into()), false);
        assert_eq!(request_hash(&[fs], &h, None, peer), None);
    }
}

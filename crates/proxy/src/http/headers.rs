//! Header handling on the way through: hop-by-hop headers removed
//! (RFC 9110 §7.6.1; HTTP/2 forbids them outright, RFC 9113 §8.2.2),
//! `x-forwarded-for` and `x-request-id`, and a route's header changes.
//!
//! Pure functions over a `HeaderMap`; no I/O.

use std::net::IpAddr;

use http::HeaderMap;
use http::header::{CONNECTION, HeaderName, HeaderValue, TE, TRANSFER_ENCODING, UPGRADE};

use crate::model::route::HeaderMutation;

/// `x-forwarded-for`.
pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
/// `x-request-id`.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Removes the hop-by-hop headers: `connection` and every header it
/// names, `keep-alive`, `proxy-connection`, `transfer-encoding` and
/// `upgrade`; `te` unless it is exactly `trailers` (which gRPC needs).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none: one pass over the names, no removals.
    let hop_by_hop = |n: &HeaderName| {
        n == CONNECTION
            || n == TRANSFER_ENCODING
            || n == UPGRADE
            || n == TE
            || n.as_str() == "keep-alive"
            || n.as_str() == "proxy-connection"
    };
    if !headers.keys().any(hop_by_hop) {
        return;
    }
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [CONNECTION, TRANSFER_ENCODING, UPGRADE] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
    let te_trailers = headers
        .get_all(TE)
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(b"trailers"));
    headers.remove(TE);
    if te_trailers {
        headers.insert(TE, HeaderValue::from_static("trailers"));
    }
}

/// The request's authority: the URI's (HTTP/2 `:authority`, or an
/// absolute-form HTTP/1.1 target), else the `Host` header.
pub fn authority(parts: &http::request::Parts) -> Option<&str> {
    parts
        .uri
        .authority()
        .map(|a| a.as_str())
        .or_else(|| parts.headers.get(http::header::HOST)?.to_str().ok())
}

/// An authority's host and port (`None` when it names no port).
pub fn split_port(authority: &str) -> (&str, Option<&str>) {
    match authority.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => (h, Some(p)),
        _ => (authority, None),
    }
}

/// Appends `peer` to `x-forwarded-for`.
pub fn append_forwarded_for(headers: &mut HeaderMap, peer: &HeaderValue) {
    let value = match headers.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
        Some(existing) if !existing.trim().is_empty() => {
            let joined = format!("{existing}, {}", peer.to_str().unwrap_or_default());
            match HeaderValue::from_str(&joined) {
                Ok(v) => v,
                Err(_) => return,
            }
        }
        _ => peer.clone(),
    };
    headers.insert(X_FORWARDED_FOR, value);
}

/// `peer` as an `x-forwarded-for` entry (made once per connection).
pub fn forwarded_for_entry(peer: IpAddr) -> HeaderValue {
    HeaderValue::from_str(&peer.to_string()).expect("an IP address is a header value")
}

/// Sets `x-request-id` to a new random UUID when the request has none.
pub fn ensure_request_id(headers: &mut HeaderMap) {
    if !headers.contains_key(&X_REQUEST_ID) {
        // A v4 UUID from the thread's RNG (uuid's own new_v4 asks the
        // kernel for entropy on every call: a syscall per request).
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        let id = uuid::Builder::from_random_bytes(rand::random())
            .into_uuid()
            .hyphenated()
            .encode_lower(&mut text)
            .as_bytes();
        headers.insert(
            X_REQUEST_ID,
            HeaderValue::from_bytes(id).expect("a UUID is a header value"),
        );
    }
}

/// Applies a route's header changes: removals, then sets (replacing),
/// then additions. A name or value that is not a valid header was refused
/// at validation, so one here is skipped.
pub fn apply(headers: &mut HeaderMap, mutation: &HeaderMutation) {
    if mutation.is_empty() {
        return;
    }
    for name in &mutation.remove {
        headers.remove(name.as_str());
    }
    for (name, value) in &mutation.set {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.insert(n, v);
        }
    }
    for (name, value) in &mutation.add {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(n, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn hop_by_hop_headers_and_the_ones_connection_names_are_removed() {
        let mut h = map(&[
            ("connection", "keep-alive, x-private"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("x-private", "1"),
            ("te", "gzip"),
            ("x-kept", "yes"),
        ]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h, map(&[("x-kept", "yes")]));
    }

    #[test]
    fn an_authority_splits_into_host_and_port() {
        assert_eq!(split_port("backend:8080"), ("backend", Some("8080")));
        assert_eq!(split_port("backend"), ("backend", None));
        assert_eq!(split_port("[::1]:80"), ("[::1]", Some("80")));
        assert_eq!(split_port("[::1]"), ("[::1]", None));
    }

    #[test]
    fn te_trailers_survives_for_grpc() {
        let mut h = map(&[("te", "trailers"), ("content-type", "application/grpc")]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h.get(TE).unwrap(), "trailers");
    }

    #[test]
    fn forwarded_for_appends_and_request_id_is_kept_or_made() {
        let mut h = map(&[("x-forwarded-for", "10.0.0.1"), ("x-request-id", "abc")]);
        append_forwarded_for(&mut h, &forwarded_for_entry("127.0.0.9".parse().unwrap()));
        ensure_request_id(&mut h);
        assert_eq!(h.get(&X_FORWARDED_FOR).unwrap(), "10.0.0.1, 127.0.0.9");
        assert_eq!(h.get(&X_REQUEST_ID).unwrap(), "abc");
        let mut fresh = HeaderMap::new();
        append_forwarded_for(&mut fresh, &forwarded_for_entry("::1".parse().unwrap()));
        ensure_request_id(&mut fresh);
        assert_eq!(fresh.get(&X_FORWARDED_FOR).unwrap(), "::1");
        assert_eq!(fresh.get(&X_REQUEST_ID).unwrap().len(), 36);
    }

    #[test]
    fn mutations_remove_then_set_then_add() {
        let mut h = map(&[("x-a", "old"), ("x-gone", "1")]);
        apply(
            &mut h,
            &HeaderMutation {
                set: vec![("x-a".into(), "new".into())],
                add: vec![("x-a".into(), "more".into()), ("x-b".into(), "b".into())],
                remove: vec!["x-gone".into()],
            },
        );
        let a: Vec<_> = h.get_all("x-a").iter().collect();
        assert_eq!(a, ["new", "more"]);
        assert_eq!(h.get("x-b").unwrap(), "b");
        assert!(!h.contains_key("x-gone"));
    }
}

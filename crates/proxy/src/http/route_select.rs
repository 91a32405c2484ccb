//! Picking the route of one request from a RouteConfiguration, with
//! Envoy's semantics: the virtual host by domain (exact, then the longest
//! suffix wildcard, then the longest prefix wildcard, then `*`), the first
//! route whose path, header and query conditions all hold, and a backend by
//! weight.
//!
//! Pure: no I/O, no clock, no randomness of its own (the caller passes the
//! random number), so every rule is unit-tested. It never allocates per
//! request except to lower-case a path for a case-insensitive route.

use http::HeaderMap;
use http::request::Parts;

use crate::model::route::{
    HeaderMatch, PathMatch, QueryMatch, RouteConfigSpec, RouteMatch, RouteSpec, ValueMatch,
    VirtualHostSpec, WeightedBackend,
};

/// The route for `request`, if any matches.
pub fn select<'a>(config: &'a RouteConfigSpec, request: &Parts) -> Option<&'a RouteSpec> {
    let authority = super::headers::authority(request).unwrap_or_default();
    let host = virtual_host(config, authority)?;
    let path = request.uri.path();
    let query = request.uri.query().unwrap_or_default();
    host.routes.iter().find(|r| {
        matches(
            &r.matcher,
            path,
            query,
            request.method.as_str(),
            &request.headers,
        )
    })
}

/// The virtual host serving `authority` (`host` or `host:port`), matched
/// as Envoy does by default: case-insensitively and with the port as
/// written (a domain `backend:8080` matches only that authority).
pub fn virtual_host<'a>(
    config: &'a RouteConfigSpec,
    authority: &str,
) -> Option<&'a VirtualHostSpec> {
    best_host(config, authority)
}

/// Envoy's domain order: exact, longest `*.suffix`, longest `prefix.*`,
/// then `*`.
fn best_host<'a>(config: &'a RouteConfigSpec, host: &str) -> Option<&'a VirtualHostSpec> {
    let mut best: Option<(u8, usize, &VirtualHostSpec)> = None;
    for vh in &config.virtual_hosts {
        for domain in &vh.domains {
            let domain = domain.as_str();
            let rank = if domain.eq_ignore_ascii_case(host) {
                Some((0, domain.len()))
            } else if domain == "*" {
                Some((3, 0))
            } else if let Some(suffix) = domain.strip_prefix('*') {
                (host.len() > suffix.len() && ends_with_ignore_case(host, suffix))
                    .then_some((1, suffix.len()))
            } else if let Some(prefix) = domain.strip_suffix('*') {
                (host.len() > prefix.len() && starts_with_ignore_case(host, prefix))
                    .then_some((2, prefix.len()))
            } else {
                None
            };
            if let Some((class, len)) = rank {
                let better = best.is_none_or(|(c, l, _)| class < c || (class == c && len > l));
                if better {
                    best = Some((class, len, vh));
                }
            }
        }
    }
    best.map(|(_, _, vh)| vh)
}

fn ends_with_ignore_case(s: &str, suffix: &str) -> bool {
    s.len() >= suffix.len()
        && s.as_bytes()[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Whether a request with `path` (no query), `query`, `method` and
/// `headers` satisfies every condition of `m`.
pub fn matches(m: &RouteMatch, path: &str, query: &str, method: &str, headers: &HeaderMap) -> bool {
    path_matches(&m.path, m.case_sensitive, path)
        && m.headers.iter().all(|h| header_matches(h, method, headers))
        && m.query.iter().all(|q| query_matches(q, query))
}

fn path_matches(p: &PathMatch, case_sensitive: bool, path: &str) -> bool {
    match p {
        PathMatch::Prefix(prefix) if case_sensitive => path.starts_with(prefix.as_str()),
        PathMatch::Prefix(prefix) => starts_with_ignore_case(path, prefix),
        PathMatch::Exact(exact) if case_sensitive => path == exact,
        PathMatch::Exact(exact) => path.eq_ignore_ascii_case(exact),
        PathMatch::Segments(prefix) => {
            let starts = if case_sensitive {
                path.starts_with(prefix.as_str())
            } else {
                starts_with_ignore_case(path, prefix)
            };
            starts
                && (path.len() == prefix.len()
                    || prefix.ends_with('/')
                    || path.as_bytes()[prefix.len()] == b'/')
        }
        PathMatch::Regex(re) => re.is_match(path),
    }
}

pub(crate) fn header_matches(h: &HeaderMatch, method: &str, headers: &HeaderMap) -> bool {
    let matched = match h.name.as_str() {
        ":method" => value_matches(&h.kind, Some(method)),
        name => {
            let mut values = headers.get_all(name).iter().filter_map(|v| v.to_str().ok());
            match (values.next(), values.next()) {
                (None, _) => value_matches(&h.kind, None),
                (Some(one), None) => value_matches(&h.kind, Some(one)),
                // Envoy compares a repeated header as its values joined
                // with commas.
                (Some(first), Some(second)) => {
                    let mut joined = format!("{first},{second}");
                    for v in values {
                        joined.push(',');
                        joined.push_str(v);
                    }
                    value_matches(&h.kind, Some(&joined))
                }
            }
        }
    };
    matched != h.invert
}

fn query_matches(q: &QueryMatch, query: &str) -> bool {
    let value = query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == q.name).then_some(v)
    });
    value_matches(&q.kind, value)
}

/// Whether `value` (absent: `None`) satisfies `kind`.
fn value_matches(kind: &ValueMatch, value: Option<&str>) -> bool {
    let Some(v) = value else {
        return false;
    };
    match kind {
        ValueMatch::Present => true,
        ValueMatch::Exact(e) => v == e,
        ValueMatch::Prefix(p) => v.starts_with(p.as_str()),
        ValueMatch::Suffix(s) => v.ends_with(s.as_str()),
        ValueMatch::Contains(c) => v.contains(c.as_str()),
        ValueMatch::Regex(re) => re.is_match(v),
    }
}

/// The backend `random` (any `u32`, uniformly drawn) picks among
/// `backends` by weight; `None` when every weight is 0.
pub fn pick_backend(backends: &[WeightedBackend], random: u32) -> Option<&WeightedBackend> {
    let total: u64 = backends.iter().map(|b| u64::from(b.weight)).sum();
    if total == 0 {
        return None;
    }
    let mut point = u64::from(random) % total;
    backends.iter().find(|b| {
        let w = u64::from(b.weight);
        if point < w {
            true
        } else {
            point -= w;
            false
        }
    })
}

#[cfg(test)]
mod tests;

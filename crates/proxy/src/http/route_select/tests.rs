//! Unit tests of route selection: Envoy's virtual-host order, first-match
//! routes with path, header (`:method` included) and query conditions, and
//! weighted backends.

use http::Request;

use super::*;
use crate::model::route::{
    ForwardAction, HeaderMutation, Pattern, Rewrite, RouteAction, VirtualHostSpec,
};

fn forward(cluster: &str) -> RouteAction {
    RouteAction::Forward(Box::new(ForwardAction {
        backends: vec![backend(cluster, 1)],
        timeout: None,
        idle_timeout: None,
        max_stream_duration: None,
        retry: None,
        rewrite: Rewrite::default(),
        mirrors: Vec::new(),
        hash_policies: Vec::new(),
    }))
}

fn backend(cluster: &str, weight: u32) -> WeightedBackend {
    WeightedBackend {
        cluster: cluster.into(),
        weight,
        request_headers: HeaderMutation::default(),
    }
}

fn route(
    name: &str,
    path: PathMatch,
    headers: Vec<HeaderMatch>,
    query: Vec<QueryMatch>,
) -> RouteSpec {
    RouteSpec {
        name: name.into(),
        matcher: RouteMatch {
            path,
            case_sensitive: true,
            headers,
            query,
        },
        action: forward(name),
        request_headers: HeaderMutation::default(),
        response_headers: HeaderMutation::default(),
    }
}

fn header(name: &str, kind: ValueMatch, invert: bool) -> HeaderMatch {
    HeaderMatch {
        name: name.into(),
        kind,
        invert,
    }
}

fn host(name: &str, domains: &[&str], routes: Vec<RouteSpec>) -> VirtualHostSpec {
    VirtualHostSpec {
        name: name.into(),
        domains: domains.iter().map(|d| d.to_string()).collect(),
        routes,
    }
}

fn catch_all(name: &str) -> RouteSpec {
    route(name, PathMatch::Prefix(String::new()), vec![], vec![])
}

fn parts(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
    let mut b = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

fn picked(config: &RouteConfigSpec, request: Parts) -> Option<&str> {
    select(config, &request).map(|r| r.name.as_str())
}

#[test]
fn virtual_hosts_are_chosen_in_envoys_order() {
    let config = RouteConfigSpec {
        name: "r".into(),
        virtual_hosts: vec![
            host("any", &["*"], vec![catch_all("any")]),
            host("prefix", &["api.*"], vec![catch_all("prefix")]),
            host("short-suffix", &["*.com"], vec![catch_all("short-suffix")]),
            host("suffix", &["*.example.com"], vec![catch_all("suffix")]),
            host(
                "exact",
                &["www.example.com", "backend:8080"],
                vec![catch_all("exact")],
            ),
        ],
    };
    let at = |authority: &str| virtual_host(&config, authority).map(|h| h.name.as_str());
    assert_eq!(at("www.example.com"), Some("exact"));
    assert_eq!(at("WWW.Example.com"), Some("exact"), "case-insensitive");
    assert_eq!(at("backend:8080"), Some("exact"));
    assert_eq!(
        at("www.example.com:443"),
        Some("any"),
        "the port is part of the authority"
    );
    assert_eq!(
        at("a.example.com"),
        Some("suffix"),
        "the longest suffix wins"
    );
    assert_eq!(at("a.other.com"), Some("short-suffix"));
    assert_eq!(
        at("api.internal"),
        Some("prefix"),
        "a suffix beats a prefix, a prefix beats *"
    );
    assert_eq!(at("backend"), Some("any"));
    assert_eq!(at("[::1]:8080"), Some("any"));
    // The authority of an absolute URI, else the Host header.
    assert_eq!(
        picked(&config, parts("GET", "http://www.example.com/x", &[])),
        Some("exact")
    );
    assert_eq!(
        picked(&config, parts("GET", "/x", &[("host", "a.example.com")])),
        Some("suffix")
    );
}

#[test]
fn the_first_route_whose_conditions_all_hold_wins() {
    let config = RouteConfigSpec {
        name: "r".into(),
        virtual_hosts: vec![host(
            "h",
            &["*"],
            vec![
                route("exact", PathMatch::Exact("/login".into()), vec![], vec![]),
                route(
                    "v2-header",
                    PathMatch::Prefix("/".into()),
                    vec![header("x-version", ValueMatch::Exact("v2".into()), false)],
                    vec![],
                ),
                route(
                    "post-only",
                    PathMatch::Prefix("/api".into()),
                    vec![header(":method", ValueMatch::Exact("POST".into()), false)],
                    vec![],
                ),
                route(
                    "no-debug",
                    PathMatch::Segments("/api".into()),
                    vec![header("x-debug", ValueMatch::Present, true)],
                    vec![],
                ),
                route(
                    "numeric-id",
                    PathMatch::Regex(Pattern::new("/items/[0-9]+").unwrap()),
                    vec![],
                    vec![QueryMatch {
                        name: "page".into(),
                        kind: ValueMatch::Regex(Pattern::new("[0-9]+").unwrap()),
                    }],
                ),
                catch_all("default"),
            ],
        )],
    };
    let pick = |method: &str, uri: &str, headers: &[(&str, &str)]| {
        picked(&config, parts(method, uri, headers)).unwrap()
    };
    assert_eq!(pick("GET", "/login", &[]), "exact");
    assert_eq!(
        pick("GET", "/login/again", &[]),
        "default",
        "Exact is the whole path"
    );
    assert_eq!(
        pick("GET", "/login", &[("x-version", "v2")]),
        "exact",
        "order decides"
    );
    assert_eq!(pick("GET", "/x", &[("x-version", "v2")]), "v2-header");
    assert_eq!(pick("GET", "/x", &[("x-version", "v22")]), "default");
    assert_eq!(pick("POST", "/api/items", &[]), "post-only");
    assert_eq!(pick("GET", "/api/items", &[]), "no-debug");
    assert_eq!(
        pick("GET", "/api/items", &[("x-debug", "1")]),
        "default",
        "Absent"
    );
    assert_eq!(
        pick("GET", "/apiary", &[]),
        "default",
        "a segment prefix ends at /"
    );
    assert_eq!(pick("GET", "/api", &[]), "no-debug");
    assert_eq!(pick("GET", "/items/42?page=3", &[]), "numeric-id");
    assert_eq!(pick("GET", "/items/42?page=x", &[]), "default");
    assert_eq!(
        pick("GET", "/items/42", &[]),
        "default",
        "a missing parameter fails"
    );
    assert_eq!(
        pick("GET", "/items/42x?page=3", &[]),
        "default",
        "regexes are anchored"
    );
}

#[test]
fn a_repeated_header_is_matched_as_its_joined_values() {
    let h = header("x-tag", ValueMatch::Exact("a,b".into()), false);
    let mut headers = HeaderMap::new();
    headers.append("x-tag", "a".parse().unwrap());
    headers.append("x-tag", "b".parse().unwrap());
    assert!(header_matches(&h, "GET", &headers));
}

#[test]
fn case_insensitive_paths() {
    let m = RouteMatch {
        path: PathMatch::Prefix("/API".into()),
        case_sensitive: false,
        headers: vec![],
        query: vec![],
    };
    assert!(matches(&m, "/api/x", "", "GET", &HeaderMap::new()));
}

#[test]
fn backends_are_picked_by_weight() {
    let backends = [backend("v1", 90), backend("v2", 10), backend("never", 0)];
    let mut counts = std::collections::HashMap::new();
    for random in 0..1000u32 {
        *counts
            .entry(pick_backend(&backends, random).unwrap().cluster.clone())
            .or_insert(0) += 1;
    }
    assert_eq!(counts["v1"], 900);
    assert_eq!(counts["v2"], 100);
    assert!(!counts.contains_key("never"));
    assert!(pick_backend(&[backend("zero", 0)], 5).is_none());
}

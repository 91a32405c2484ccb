//! Unit tests of RDS validation: what a MeshHTTPRoute's translation needs
//! is read into the route model, anything else is refused with its field
//! path, and regular expressions are compiled once with a size limit.

use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption};
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RedirectAction, RetryPolicy, Route, RouteAction,
    RouteConfiguration, RouteMatch, VirtualHost, WeightedCluster,
    header_matcher::HeaderMatchSpecifier, query_parameter_matcher::QueryParameterMatchSpecifier,
    redirect_action, retry_policy::RetryBackOff, route::Action, route_action,
    route_match::PathSpecifier, weighted_cluster::ClusterWeight,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration, UInt32Value};
use prost::{Message, Name};

use super::*;

fn any(rc: &RouteConfiguration) -> Any {
    Any {
        type_url: RouteConfiguration::type_url(),
        value: rc.encode_to_vec(),
    }
}

fn secs(s: i64) -> PbDuration {
    PbDuration {
        seconds: s,
        nanos: 0,
    }
}

fn config(routes: Vec<Route>) -> RouteConfiguration {
    RouteConfiguration {
        name: "outbound:backend".into(),
        virtual_hosts: vec![VirtualHost {
            name: "backend".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn prefix(p: &str) -> Option<RouteMatch> {
    Some(RouteMatch {
        path_specifier: Some(PathSpecifier::Prefix(p.into())),
        ..Default::default()
    })
}

fn to_cluster(c: &str) -> Option<Action> {
    Some(Action::Route(RouteAction {
        cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(c.into())),
        ..Default::default()
    }))
}

fn regex(r: &str) -> RegexMatcher {
    RegexMatcher {
        regex: r.into(),
        ..Default::default()
    }
}

/// What Kuma's MeshHTTPRoute + MeshRetry + MeshTimeout translate to:
/// a header match, a weighted split, a retry and a timeout.
fn kuma_like() -> RouteConfiguration {
    config(vec![
        Route {
            name: "header-v2".into(),
            r#match: Some(RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix("/".into())),
                headers: vec![
                    HeaderMatcher {
                        name: "X-Version".into(),
                        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(
                            StringMatcher {
                                match_pattern: Some(MatchPattern::Exact("v2".into())),
                                ignore_case: false,
                            },
                        )),
                        ..Default::default()
                    },
                    HeaderMatcher {
                        name: "x-debug".into(),
                        header_match_specifier: Some(HeaderMatchSpecifier::PresentMatch(false)),
                        ..Default::default()
                    },
                ],
                query_parameters: vec![QueryParameterMatcher {
                    name: "id".into(),
                    query_parameter_match_specifier: Some(
                        QueryParameterMatchSpecifier::StringMatch(StringMatcher {
                            match_pattern: Some(MatchPattern::SafeRegex(regex("[0-9]+"))),
                            ignore_case: false,
                        }),
                    ),
                }],
                ..Default::default()
            }),
            action: to_cluster("backend-v2"),
            request_headers_to_add: vec![HeaderValueOption {
                header: Some(HeaderValue {
                    key: "X-Routed".into(),
                    value: "v2".into(),
                    ..Default::default()
                }),
                append_action: 2, // OVERWRITE_IF_EXISTS_OR_ADD
                ..Default::default()
            }],
            ..Default::default()
        },
        Route {
            name: "split".into(),
            r#match: prefix("/api"),
            action: Some(Action::Route(RouteAction {
                cluster_specifier: Some(route_action::ClusterSpecifier::WeightedClusters(
                    WeightedCluster {
                        clusters: vec![
                            ClusterWeight {
                                name: "backend-v1".into(),
                                weight: Some(UInt32Value { value: 90 }),
                                ..Default::default()
                            },
                            ClusterWeight {
                                name: "backend-v2".into(),
                                weight: Some(UInt32Value { value: 10 }),
                                ..Default::default()
                            },
                        ],
                        ..Default::default()
                    },
                )),
                timeout: Some(secs(1)),
                retry_policy: Some(RetryPolicy {
                    retry_on: "5xx,reset,retriable-status-codes".into(),
                    num_retries: Some(UInt32Value { value: 5 }),
                    per_try_timeout: Some(secs(0)),
                    retriable_status_codes: vec![409],
                    retry_back_off: Some(RetryBackOff {
                        base_interval: Some(PbDuration {
                            seconds: 0,
                            nanos: 25_000_000,
                        }),
                        max_interval: Some(secs(1)),
                    }),
                    host_selection_retry_max_attempts: 3,
                    ..Default::default()
                }),
                ..Default::default()
            })),
            ..Default::default()
        },
    ])
}

#[test]
fn a_kuma_translation_is_read_whole() {
    let spec = route_configuration(&any(&kuma_like())).expect("valid");
    assert_eq!(spec.name, "outbound:backend");
    let [vh] = spec.virtual_hosts.as_slice() else {
        panic!("one virtual host")
    };
    let [header, split] = vh.routes.as_slice() else {
        panic!("two routes")
    };
    assert_eq!(header.matcher.headers.len(), 2);
    assert_eq!(header.matcher.headers[0].name, "x-version");
    assert_eq!(
        header.matcher.headers[0].kind,
        ValueMatch::Exact("v2".into())
    );
    // present_match: false is Kuma's `Absent`: an inverted Present.
    assert_eq!(header.matcher.headers[1].kind, ValueMatch::Present);
    assert!(header.matcher.headers[1].invert);
    let ValueMatch::Regex(id) = &header.matcher.query[0].kind else {
        panic!("regex query match")
    };
    assert!(
        id.is_match("42") && !id.is_match("42a"),
        "anchored at both ends"
    );
    assert_eq!(
        header.request_headers.set,
        [("x-routed".into(), "v2".into())]
    );
    let Act::Forward(f) = &header.action else {
        panic!("forward")
    };
    assert_eq!(f.timeout, Some(Duration::from_secs(15)), "Envoy's default");

    let Act::Forward(f) = &split.action else {
        panic!("forward")
    };
    let weights: Vec<_> = f
        .backends
        .iter()
        .map(|b| (b.cluster.as_str(), b.weight))
        .collect();
    assert_eq!(weights, [("backend-v1", 90), ("backend-v2", 10)]);
    assert_eq!(f.timeout, Some(Duration::from_secs(1)));
    let retry = f.retry.as_ref().expect("retry policy");
    assert_eq!(
        retry.retry_on,
        [
            RetryOn::FiveXx,
            RetryOn::Reset,
            RetryOn::RetriableStatusCodes
        ]
    );
    assert_eq!(retry.num_retries, 5);
    assert_eq!(retry.per_try_timeout, None, "0s disables");
    assert_eq!(retry.retriable_status_codes, [409]);
    assert_eq!(retry.backoff_base, Some(Duration::from_millis(25)));
}

#[test]
fn an_unimplemented_field_is_refused_with_its_path() {
    let mut rc = kuma_like();
    rc.virtual_hosts[0].require_tls = 1;
    let e = route_configuration(&any(&rc)).unwrap_err();
    assert_eq!(e.field, "virtual_hosts[0]");
    assert!(
        e.reason.contains("supported here: name, domains, routes"),
        "{e}"
    );

    let mut rc = kuma_like();
    let Some(Action::Route(a)) = &mut rc.virtual_hosts[0].routes[1].action else {
        unreachable!()
    };
    a.priority = 1;
    let e = route_configuration(&any(&rc)).unwrap_err();
    assert_eq!(e.field, "virtual_hosts[0].routes[1].route");
    assert!(e.reason.contains("weighted_clusters, timeout"), "{e}");
}

#[test]
fn a_regex_bomb_is_refused_at_validation() {
    let rc = config(vec![Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::SafeRegex(regex("(a{1000}){1000}"))),
            ..Default::default()
        }),
        action: to_cluster("c"),
        ..Default::default()
    }]);
    let e = route_configuration(&any(&rc)).unwrap_err();
    assert_eq!(e.field, "virtual_hosts[0].routes[0].match.safe_regex.regex");
    assert!(e.reason.contains("size limit"), "{e}");
}

#[test]
fn bad_values_name_the_field_and_the_fix() {
    let mut rc = kuma_like();
    let Some(Action::Route(a)) = &mut rc.virtual_hosts[0].routes[1].action else {
        unreachable!()
    };
    a.retry_policy.as_mut().unwrap().retry_on = "5xx,sometimes".into();
    let e = route_configuration(&any(&rc)).unwrap_err();
    assert_eq!(
        e.field,
        "virtual_hosts[0].routes[1].route.retry_policy.retry_on"
    );
    assert!(
        e.reason.contains("\"sometimes\"") && e.reason.contains("gateway-error"),
        "{e}"
    );

    let rc = config(vec![Route {
        r#match: prefix("/"),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::WeightedClusters(
                WeightedCluster {
                    clusters: vec![ClusterWeight {
                        name: "a".into(),
                        weight: Some(UInt32Value { value: 0 }),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            )),
            ..Default::default()
        })),
        ..Default::default()
    }]);
    let e = route_configuration(&any(&rc)).unwrap_err();
    assert!(e.reason.contains("every weight is 0"), "{e}");

    let rc = config(vec![Route {
        r#match: prefix("/"),
        ..Default::default()
    }]);
    let e = route_configuration(&any(&rc)).unwrap_err();
    assert!(e.reason.contains("no action"), "{e}");
}

#[test]
fn a_redirect_is_read_with_its_status() {
    let rc = config(vec![Route {
        r#match: prefix("/old"),
        action: Some(Action::Redirect(RedirectAction {
            scheme_rewrite_specifier: Some(redirect_action::SchemeRewriteSpecifier::HttpsRedirect(
                true,
            )),
            host_redirect: "example.com".into(),
            port_redirect: 8443,
            path_rewrite_specifier: Some(redirect_action::PathRewriteSpecifier::PrefixRewrite(
                "/new".into(),
            )),
            response_code: redirect_action::RedirectResponseCode::PermanentRedirect as i32,
            ..Default::default()
        })),
        ..Default::default()
    }]);
    let spec = route_configuration(&any(&rc)).unwrap();
    let Act::Redirect(r) = &spec.virtual_hosts[0].routes[0].action else {
        panic!("redirect")
    };
    assert_eq!(r.scheme.as_deref(), Some("https"));
    assert_eq!(
        (r.host.as_deref(), r.port),
        (Some("example.com"), Some(8443))
    );
    assert_eq!((r.prefix.as_deref(), r.status), (Some("/new"), 308));
}

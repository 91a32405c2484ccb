//! MeshHTTPRoute `matches` and `filters` as Envoy route fields.
//!
//! Owns the one-to-one mapping of each Kuma (Gateway API) match and
//! filter to its Envoy form, and the Gateway API precedence of matches.
//! It never decides which rules apply to a destination (`policies`) nor
//! where requests go (`routes`).

use std::cmp::Reverse;

use envoy_types::pb::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, RuntimeFractionalPercent,
    header_value_option::HeaderAppendAction,
};
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RedirectAction, Route, RouteAction, RouteMatch,
    header_matcher::HeaderMatchSpecifier, query_parameter_matcher::QueryParameterMatchSpecifier,
    redirect_action, route_action, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatchAndSubstitute, RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent::DenominatorType};
use meshlink_api::spec::{
    HeaderMatch, HeaderMatchType, HeaderModifier, HttpRouteMatch, PathMatchType, PathRewrite,
    PathRewriteType, QueryParamMatchType, RequestMirror, RequestRedirect, UrlRewrite,
};
use serde_json::Value;

/// The Envoy match of one MeshHTTPRoute match.
pub(super) fn route_match(m: &HttpRouteMatch) -> RouteMatch {
    let path = m.path.as_ref().map(|p| match p.type_ {
        PathMatchType::Exact => PathSpecifier::Path(p.value.clone()),
        PathMatchType::PathPrefix if p.value == "/" => PathSpecifier::Prefix("/".to_owned()),
        PathMatchType::PathPrefix => PathSpecifier::PathSeparatedPrefix(p.value.clone()),
        _ => PathSpecifier::SafeRegex(regex(&p.value)),
    });
    let mut headers: Vec<HeaderMatcher> = m
        .method
        .iter()
        .map(|method| HeaderMatcher {
            name: ":method".to_owned(),
            header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(string(
                MatchPattern::Exact(method.to_string()),
            ))),
            ..Default::default()
        })
        .collect();
    headers.extend(m.headers.iter().map(header));
    let query_parameters = m
        .query_params
        .iter()
        .map(|q| {
            let pattern = match q.type_ {
                QueryParamMatchType::Exact => MatchPattern::Exact(q.value.clone()),
                _ => MatchPattern::SafeRegex(regex(&q.value)),
            };
            QueryParameterMatcher {
                name: q.name.clone(),
                query_parameter_match_specifier: Some(QueryParameterMatchSpecifier::StringMatch(
                    string(pattern),
                )),
            }
        })
        .collect();
    RouteMatch {
        path_specifier: Some(path.unwrap_or_else(|| PathSpecifier::Prefix("/".to_owned()))),
        headers,
        query_parameters,
        ..Default::default()
    }
}

/// Gateway API precedence of a match (smaller first): an exact path, then
/// the longest prefix, then a regex; then a method, then more headers,
/// then more query parameters. Equal keys keep the engine's order.
pub(super) fn precedence(m: &HttpRouteMatch) -> impl Ord + use<> {
    let (rank, len) = match &m.path {
        Some(p) if p.type_ == PathMatchType::Exact => (0, p.value.len()),
        Some(p) if p.type_ == PathMatchType::PathPrefix => (1, p.value.len()),
        Some(_) => (2, 0),
        None => (1, 1),
    };
    (
        rank,
        Reverse(len),
        m.method.is_none(),
        Reverse(m.headers.len()),
        Reverse(m.query_params.len()),
    )
}

fn string(pattern: MatchPattern) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(pattern),
        ignore_case: false,
    }
}

fn regex(re: &str) -> RegexMatcher {
    RegexMatcher {
        regex: re.to_owned(),
        ..Default::default()
    }
}

fn header(h: &HeaderMatch) -> HeaderMatcher {
    let value = h.value.clone().unwrap_or_default();
    let (spec, invert) = match h.effective_type() {
        HeaderMatchType::Present => (HeaderMatchSpecifier::PresentMatch(true), false),
        HeaderMatchType::Absent => (HeaderMatchSpecifier::PresentMatch(true), true),
        HeaderMatchType::Prefix => (
            HeaderMatchSpecifier::StringMatch(string(MatchPattern::Prefix(value))),
            false,
        ),
        HeaderMatchType::RegularExpression => (
            HeaderMatchSpecifier::StringMatch(string(MatchPattern::SafeRegex(regex(&value)))),
            false,
        ),
        _ => (
            HeaderMatchSpecifier::StringMatch(string(MatchPattern::Exact(value))),
            false,
        ),
    };
    HeaderMatcher {
        name: h.name.clone(),
        header_match_specifier: Some(spec),
        invert_match: invert,
        ..Default::default()
    }
}

/// Applies a header modifier to `to_add` and `to_remove` (`set`
/// overwrites, `add` appends).
pub(super) fn modify_headers(
    m: &HeaderModifier,
    to_add: &mut Vec<HeaderValueOption>,
    to_remove: &mut Vec<String>,
) {
    let option = |name: &str, value: &str, action: HeaderAppendAction| HeaderValueOption {
        header: Some(HeaderValue {
            key: name.to_owned(),
            value: value.to_owned(),
            ..Default::default()
        }),
        append_action: action as i32,
        ..Default::default()
    };
    for h in m.set.iter().flatten() {
        to_add.push(option(
            &h.name,
            &h.value,
            HeaderAppendAction::OverwriteIfExistsOrAdd,
        ));
    }
    for h in m.add.iter().flatten() {
        to_add.push(option(
            &h.name,
            &h.value,
            HeaderAppendAction::AppendIfExistsOrAdd,
        ));
    }
    to_remove.extend(m.remove.iter().flatten().cloned());
}

/// The Envoy redirect of a `RequestRedirect` filter (302 by default).
pub(super) fn redirect(r: &RequestRedirect) -> RedirectAction {
    use redirect_action::{PathRewriteSpecifier, RedirectResponseCode, SchemeRewriteSpecifier};
    let code = match r.status_code {
        Some(301) => RedirectResponseCode::MovedPermanently,
        Some(303) => RedirectResponseCode::SeeOther,
        Some(307) => RedirectResponseCode::TemporaryRedirect,
        Some(308) => RedirectResponseCode::PermanentRedirect,
        _ => RedirectResponseCode::Found,
    };
    let path = r.path.as_ref().and_then(|p| match path_rewrite(p)? {
        PathChange::Full(full) => Some(PathRewriteSpecifier::PathRedirect(full)),
        PathChange::Prefix(prefix) => Some(PathRewriteSpecifier::PrefixRewrite(prefix)),
    });
    RedirectAction {
        host_redirect: r.hostname.clone().unwrap_or_default(),
        port_redirect: r.port.map_or(0, |p| u32::from(p.get())),
        response_code: code as i32,
        scheme_rewrite_specifier: r.scheme.clone().map(SchemeRewriteSpecifier::SchemeRedirect),
        path_rewrite_specifier: path,
        ..Default::default()
    }
}

enum PathChange {
    Full(String),
    Prefix(String),
}

fn path_rewrite(p: &PathRewrite) -> Option<PathChange> {
    match p.type_ {
        PathRewriteType::ReplaceFullPath => p.replace_full_path.clone().map(PathChange::Full),
        PathRewriteType::ReplacePrefixMatch => {
            p.replace_prefix_match.clone().map(PathChange::Prefix)
        }
        _ => None,
    }
}

/// Applies a `URLRewrite` filter to `action`.
pub(super) fn rewrite(u: &UrlRewrite, action: &mut RouteAction) {
    if let Some(host) = &u.hostname {
        action.host_rewrite_specifier = Some(
            route_action::HostRewriteSpecifier::HostRewriteLiteral(host.clone()),
        );
    }
    match u.path.as_ref().and_then(path_rewrite) {
        Some(PathChange::Full(full)) => {
            action.regex_rewrite = Some(RegexMatchAndSubstitute {
                pattern: Some(regex("^/.*$")),
                substitution: full,
            });
        }
        Some(PathChange::Prefix(prefix)) => action.prefix_rewrite = prefix,
        None => {}
    }
}

/// The Envoy mirror of a `RequestMirror` filter to `cluster`: all
/// requests, or `percentage` of them (in millionths).
pub(super) fn mirror(m: &RequestMirror, cluster: String) -> route_action::RequestMirrorPolicy {
    let percent = m.percentage.as_ref().and_then(|p| match p {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    });
    route_action::RequestMirrorPolicy {
        cluster,
        runtime_fraction: percent.map(|p| RuntimeFractionalPercent {
            default_value: Some(FractionalPercent {
                numerator: (p.clamp(0.0, 100.0) * 10_000.0).round() as u32,
                denominator: DenominatorType::Million as i32,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Adds header modifications of a rule's filters to `route`.
pub(super) fn apply_header_filters(filters: &[meshlink_api::spec::Filter], route: &mut Route) {
    for f in filters {
        if let Some(m) = &f.request_header_modifier {
            modify_headers(
                m,
                &mut route.request_headers_to_add,
                &mut route.request_headers_to_remove,
            );
        }
        if let Some(m) = &f.response_header_modifier {
            modify_headers(
                m,
                &mut route.response_headers_to_add,
                &mut route.response_headers_to_remove,
            );
        }
    }
}

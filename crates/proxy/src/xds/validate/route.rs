//! Validation of RouteConfigurations (RDS) into the proxy's route model.
//!
//! Owns "can meshlink-proxy route by this?". Every message is checked
//! field by field: a field the proxy implements is converted, and any other
//! field that is set is refused with its path and the list of what is
//! supported (a field ignored silently would change behaviour). Regular
//! expressions are compiled here, once, with a size limit. It never panics
//! on any input.

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{HeaderValueOption, header_value_option};
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RedirectAction, RetryPolicy, Route, RouteAction,
    RouteConfiguration, VirtualHost, header_matcher::HeaderMatchSpecifier,
    query_parameter_matcher::QueryParameterMatchSpecifier, redirect_action, retry_policy,
    route::Action, route_action, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::envoy::r#type::v3::fractional_percent::DenominatorType;
use envoy_types::pb::google::protobuf::Any;

use super::{Invalid, decode, duration, invalid};
use crate::model::route::{
    ForwardAction, HeaderMatch, HeaderMutation, Mirror, PathMatch, Pattern, QueryMatch, Redirect,
    ResetFormat, RetryOn, RetrySpec, Rewrite, RouteAction as Act, RouteConfigSpec, RouteMatch,
    RouteSpec, ValueMatch, VirtualHostSpec, WeightedBackend,
};

/// Validates a RouteConfiguration.
pub fn route_configuration(any: &Any) -> Result<RouteConfigSpec, Invalid> {
    let mut rc: RouteConfiguration = decode(any, "resource")?;
    let name = std::mem::take(&mut rc.name);
    let hosts = std::mem::take(&mut rc.virtual_hosts);
    // Envoy's default for validate_clusters is "true for static routes";
    // the proxy resolves clusters per request either way.
    rc.validate_clusters = None;
    only_supported(&rc, "", "name, virtual_hosts")?;
    let virtual_hosts = hosts
        .into_iter()
        .enumerate()
        .map(|(i, vh)| virtual_host(vh, &format!("virtual_hosts[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(RouteConfigSpec {
        name,
        virtual_hosts,
    })
}

/// Refuses `rest` (a message whose supported fields were taken out) unless
/// every other field is unset.
pub(super) fn only_supported<M: PartialEq + Default>(
    rest: &M,
    field: &str,
    supported: &str,
) -> Result<(), Invalid> {
    if *rest == M::default() {
        return Ok(());
    }
    let at = if field.is_empty() { "resource" } else { field };
    Err(invalid(
        at,
        format!("sets a field meshlink-proxy does not implement; supported here: {supported}"),
    ))
}

fn virtual_host(mut vh: VirtualHost, field: &str) -> Result<VirtualHostSpec, Invalid> {
    let name = std::mem::take(&mut vh.name);
    let domains = std::mem::take(&mut vh.domains);
    let routes = std::mem::take(&mut vh.routes);
    only_supported(&vh, field, "name, domains, routes")?;
    if domains.is_empty() {
        return Err(invalid(
            format!("{field}.domains"),
            "at least one domain is required (\"*\" matches every host)",
        ));
    }
    let routes = routes
        .into_iter()
        .enumerate()
        .map(|(i, r)| route(r, &format!("{field}.routes[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(VirtualHostSpec {
        name,
        domains,
        routes,
    })
}

fn route(mut r: Route, field: &str) -> Result<RouteSpec, Invalid> {
    let name = std::mem::take(&mut r.name);
    let matcher = r.r#match.take();
    let action = r.action.take();
    let request_headers = mutation(
        std::mem::take(&mut r.request_headers_to_add),
        std::mem::take(&mut r.request_headers_to_remove),
        &format!("{field}.request_headers_to_add"),
    )?;
    let response_headers = mutation(
        std::mem::take(&mut r.response_headers_to_add),
        std::mem::take(&mut r.response_headers_to_remove),
        &format!("{field}.response_headers_to_add"),
    )?;
    // Metadata and a decorator only label the route.
    r.metadata = None;
    r.decorator = None;
    only_supported(
        &r,
        field,
        "name, match, route, redirect, request/response_headers_to_add/remove, metadata, decorator",
    )?;
    let matcher = route_match(matcher, &format!("{field}.match"))?;
    let action = match action {
        Some(Action::Route(a)) => Act::Forward(Box::new(forward(a, &format!("{field}.route"))?)),
        Some(Action::Redirect(a)) => Act::Redirect(redirect(a, &format!("{field}.redirect"))?),
        Some(_) => {
            return Err(invalid(
                field,
                "only route and redirect actions are supported (no direct_response, filter_action or non_forwarding_action)",
            ));
        }
        None => {
            return Err(invalid(
                field,
                "the route has no action; set route or redirect",
            ));
        }
    };
    Ok(RouteSpec {
        name,
        matcher,
        action,
        request_headers,
        response_headers,
    })
}

fn route_match(
    m: Option<envoy_types::pb::envoy::config::route::v3::RouteMatch>,
    field: &str,
) -> Result<RouteMatch, Invalid> {
    let Some(mut m) = m else {
        return Err(invalid(
            field,
            "required; use prefix \"/\" to match every request",
        ));
    };
    let path = match m.path_specifier.take() {
        Some(PathSpecifier::Prefix(p)) => PathMatch::Prefix(p),
        Some(PathSpecifier::Path(p)) => PathMatch::Exact(p),
        Some(PathSpecifier::PathSeparatedPrefix(p)) => PathMatch::Segments(p),
        Some(PathSpecifier::SafeRegex(r)) => {
            PathMatch::Regex(pattern(&r.regex, &format!("{field}.safe_regex.regex"))?)
        }
        Some(_) => {
            return Err(invalid(
                field,
                "supported path matches: prefix, path, path_separated_prefix, safe_regex",
            ));
        }
        None => {
            return Err(invalid(
                field,
                "no path match; use prefix \"/\" to match every path",
            ));
        }
    };
    let case_sensitive = m.case_sensitive.take().is_none_or(|b| b.value);
    let headers = std::mem::take(&mut m.headers)
        .into_iter()
        .enumerate()
        .map(|(i, h)| header_match(h, &format!("{field}.headers[{i}]")))
        .collect::<Result<_, _>>()?;
    let query = std::mem::take(&mut m.query_parameters)
        .into_iter()
        .enumerate()
        .map(|(i, q)| query_match(q, &format!("{field}.query_parameters[{i}]")))
        .collect::<Result<_, _>>()?;
    // `grpc: {}` only requires a gRPC content type; the router checks it
    // as a header match would.
    m.grpc = None;
    only_supported(
        &m,
        field,
        "prefix, path, path_separated_prefix, safe_regex, case_sensitive, headers, query_parameters, grpc",
    )?;
    Ok(RouteMatch {
        path,
        case_sensitive,
        headers,
        query,
    })
}

/// Compiles `source` with the size limit, naming `field` on failure.
fn pattern(source: &str, field: &str) -> Result<Pattern, Invalid> {
    Pattern::new(source).map_err(|e| {
        invalid(
            field,
            format!("cannot use regular expression {source:?}: {e}"),
        )
    })
}

// Envoy deprecated the direct matchers for `string_match`, but control
// planes still send them; both are read.
#[allow(deprecated)]
fn header_match(mut h: HeaderMatcher, field: &str) -> Result<HeaderMatch, Invalid> {
    let name = std::mem::take(&mut h.name).to_ascii_lowercase();
    if name.is_empty() {
        return Err(invalid(
            format!("{field}.name"),
            "a header name is required",
        ));
    }
    let mut invert = std::mem::take(&mut h.invert_match);
    let kind = match h.header_match_specifier.take() {
        Some(HeaderMatchSpecifier::ExactMatch(v)) => ValueMatch::Exact(v),
        Some(HeaderMatchSpecifier::PrefixMatch(v)) => ValueMatch::Prefix(v),
        Some(HeaderMatchSpecifier::SuffixMatch(v)) => ValueMatch::Suffix(v),
        Some(HeaderMatchSpecifier::ContainsMatch(v)) => ValueMatch::Contains(v),
        Some(HeaderMatchSpecifier::SafeRegexMatch(r)) => ValueMatch::Regex(pattern(
            &r.regex,
            &format!("{field}.safe_regex_match.regex"),
        )?),
        Some(HeaderMatchSpecifier::PresentMatch(present)) => {
            invert ^= !present;
            ValueMatch::Present
        }
        Some(HeaderMatchSpecifier::StringMatch(s)) => {
            string_match(s, &format!("{field}.string_match"))?
        }
        Some(HeaderMatchSpecifier::RangeMatch(_)) => {
            return Err(invalid(
                field,
                "range_match is not supported; use exact, prefix, suffix, contains, safe_regex or present",
            ));
        }
        None => ValueMatch::Present,
    };
    only_supported(
        &h,
        field,
        "name, exact/prefix/suffix/contains/safe_regex/present/string_match, invert_match",
    )?;
    Ok(HeaderMatch { name, kind, invert })
}

fn query_match(mut q: QueryParameterMatcher, field: &str) -> Result<QueryMatch, Invalid> {
    let name = std::mem::take(&mut q.name);
    let kind = match q.query_parameter_match_specifier.take() {
        Some(QueryParameterMatchSpecifier::StringMatch(s)) => {
            string_match(s, &format!("{field}.string_match"))?
        }
        Some(QueryParameterMatchSpecifier::PresentMatch(true)) | None => ValueMatch::Present,
        Some(QueryParameterMatchSpecifier::PresentMatch(false)) => {
            return Err(invalid(
                format!("{field}.present_match"),
                "false is not supported; omit the matcher",
            ));
        }
    };
    only_supported(&q, field, "name, string_match, present_match")?;
    Ok(QueryMatch { name, kind })
}

fn string_match(s: StringMatcher, field: &str) -> Result<ValueMatch, Invalid> {
    if s.ignore_case {
        return Err(invalid(
            format!("{field}.ignore_case"),
            "not supported; use a safe_regex with (?i)",
        ));
    }
    Ok(match s.match_pattern {
        Some(MatchPattern::Exact(v)) => ValueMatch::Exact(v),
        Some(MatchPattern::Prefix(v)) => ValueMatch::Prefix(v),
        Some(MatchPattern::Suffix(v)) => ValueMatch::Suffix(v),
        Some(MatchPattern::Contains(v)) => ValueMatch::Contains(v),
        Some(MatchPattern::SafeRegex(r)) => {
            ValueMatch::Regex(pattern(&r.regex, &format!("{field}.safe_regex.regex"))?)
        }
        Some(MatchPattern::Custom(_)) | None => {
            return Err(invalid(
                field,
                "use exact, prefix, suffix, contains or safe_regex",
            ));
        }
    })
}

fn forward(mut a: RouteAction, field: &str) -> Result<ForwardAction, Invalid> {
    let backends = match a.cluster_specifier.take() {
        Some(route_action::ClusterSpecifier::Cluster(c)) if !c.is_empty() => {
            vec![WeightedBackend {
                cluster: c,
                weight: 1,
                request_headers: HeaderMutation::default(),
            }]
        }
        Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
            let wfield = format!("{field}.weighted_clusters");
            if w.clusters.is_empty() {
                return Err(invalid(
                    format!("{wfield}.clusters"),
                    "at least one cluster is required",
                ));
            }
            let mut out = Vec::with_capacity(w.clusters.len());
            for (i, mut c) in w.clusters.into_iter().enumerate() {
                let cfield = format!("{wfield}.clusters[{i}]");
                let cluster = std::mem::take(&mut c.name);
                if cluster.is_empty() {
                    return Err(invalid(
                        format!("{cfield}.name"),
                        "a cluster name is required",
                    ));
                }
                let weight = c.weight.take().map_or(0, |w| w.value);
                let request_headers = mutation(
                    std::mem::take(&mut c.request_headers_to_add),
                    std::mem::take(&mut c.request_headers_to_remove),
                    &format!("{cfield}.request_headers_to_add"),
                )?;
                only_supported(&c, &cfield, "name, weight, request_headers_to_add/remove")?;
                out.push(WeightedBackend {
                    cluster,
                    weight,
                    request_headers,
                });
            }
            if out.iter().all(|b| b.weight == 0) {
                return Err(invalid(
                    format!("{wfield}.clusters"),
                    "every weight is 0; at least one backend needs a weight",
                ));
            }
            out
        }
        _ => {
            return Err(invalid(
                field,
                "a cluster name or weighted_clusters is required (cluster_header and cluster specifier plugins are not supported)",
            ));
        }
    };
    let timeout = match a.timeout.take() {
        None => Some(Duration::from_secs(15)),
        Some(d) => nonzero(duration(&d, format!("{field}.timeout"))?),
    };
    let idle_timeout = a
        .idle_timeout
        .take()
        .map(|d| duration(&d, format!("{field}.idle_timeout")))
        .transpose()?
        .and_then(nonzero);
    let max_stream_duration = match a.max_stream_duration.take() {
        Some(mut m) => {
            let d = m
                .max_stream_duration
                .take()
                .map(|d| {
                    duration(
                        &d,
                        format!("{field}.max_stream_duration.max_stream_duration"),
                    )
                })
                .transpose()?;
            only_supported(
                &m,
                &format!("{field}.max_stream_duration"),
                "max_stream_duration",
            )?;
            d.and_then(nonzero)
        }
        None => None,
    };
    let retry = a
        .retry_policy
        .take()
        .map(|r| retry(r, &format!("{field}.retry_policy")))
        .transpose()?;
    let mut rewrite = Rewrite {
        prefix: Some(std::mem::take(&mut a.prefix_rewrite)).filter(|p| !p.is_empty()),
        ..Rewrite::default()
    };
    if let Some(r) = a.regex_rewrite.take() {
        let pattern = r.pattern.map(|p| p.regex).unwrap_or_default();
        if pattern != "^.*$" && pattern != ".*" {
            return Err(invalid(
                format!("{field}.regex_rewrite.pattern"),
                "only a full-path rewrite (pattern \"^.*$\") is supported",
            ));
        }
        rewrite.full_path = Some(r.substitution);
    }
    match a.host_rewrite_specifier.take() {
        Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(h)) => rewrite.host = Some(h),
        Some(_) => {
            return Err(invalid(
                field,
                "only host_rewrite_literal is supported among host rewrites",
            ));
        }
        None => {}
    }
    let hash_policies = std::mem::take(&mut a.hash_policy)
        .into_iter()
        .enumerate()
        .map(|(i, h)| super::hash_policy::hash_policy(h, &format!("{field}.hash_policy[{i}]")))
        .collect::<Result<_, _>>()?;
    let mirrors = std::mem::take(&mut a.request_mirror_policies)
        .into_iter()
        .enumerate()
        .map(|(i, m)| mirror(m, &format!("{field}.request_mirror_policies[{i}]")))
        .collect::<Result<_, _>>()?;
    only_supported(
        &a,
        field,
        "cluster, weighted_clusters, timeout, idle_timeout, max_stream_duration, retry_policy, \
         prefix_rewrite, regex_rewrite (full path), host_rewrite_literal, request_mirror_policies, \
         hash_policy",
    )?;
    Ok(ForwardAction {
        backends,
        timeout,
        idle_timeout,
        max_stream_duration,
        retry,
        rewrite,
        mirrors,
        hash_policies,
    })
}

fn mirror(
    mut m: envoy_types::pb::envoy::config::route::v3::route_action::RequestMirrorPolicy,
    field: &str,
) -> Result<Mirror, Invalid> {
    let cluster = std::mem::take(&mut m.cluster);
    if cluster.is_empty() {
        return Err(invalid(
            format!("{field}.cluster"),
            "a cluster name is required",
        ));
    }
    let per_million = match m.runtime_fraction.take().and_then(|f| f.default_value) {
        None => 1_000_000,
        Some(f) => {
            let scale = match DenominatorType::try_from(f.denominator) {
                Ok(DenominatorType::Hundred) => 10_000,
                Ok(DenominatorType::TenThousand) => 100,
                Ok(DenominatorType::Million) => 1,
                Err(_) => {
                    return Err(invalid(
                        format!("{field}.runtime_fraction.default_value.denominator"),
                        "unknown denominator",
                    ));
                }
            };
            f.numerator.saturating_mul(scale).min(1_000_000)
        }
    };
    only_supported(&m, field, "cluster, runtime_fraction")?;
    Ok(Mirror {
        cluster,
        per_million,
    })
}

fn retry(mut r: RetryPolicy, field: &str) -> Result<RetrySpec, Invalid> {
    let mut retry_on = Vec::new();
    for token in r
        .retry_on
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        let Some(on) = RetryOn::from_token(token) else {
            let known: Vec<&str> = RetryOn::ALL.iter().map(|(t, _)| *t).collect();
            return Err(invalid(
                format!("{field}.retry_on"),
                format!("unknown condition {token:?}; known: {}", known.join(", ")),
            ));
        };
        if !retry_on.contains(&on) {
            retry_on.push(on);
        }
    }
    r.retry_on.clear();
    let num_retries = r.num_retries.take().map_or(1, |n| n.value);
    let per_try_timeout = r
        .per_try_timeout
        .take()
        .map(|d| duration(&d, format!("{field}.per_try_timeout")))
        .transpose()?
        .and_then(nonzero);
    let retriable_status_codes = std::mem::take(&mut r.retriable_status_codes)
        .into_iter()
        .map(|c| {
            u16::try_from(c)
                .ok()
                .filter(|c| (100..=599).contains(c))
                .ok_or_else(|| {
                    invalid(
                        format!("{field}.retriable_status_codes"),
                        format!("{c} is not an HTTP status (100-599)"),
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    let (mut backoff_base, mut backoff_max) = (None, None);
    if let Some(b) = r.retry_back_off.take() {
        backoff_base = b
            .base_interval
            .map(|d| duration(&d, format!("{field}.retry_back_off.base_interval")))
            .transpose()?
            .and_then(nonzero);
        backoff_max = b
            .max_interval
            .map(|d| duration(&d, format!("{field}.retry_back_off.max_interval")))
            .transpose()?
            .and_then(nonzero);
        if backoff_base.is_none() {
            return Err(invalid(
                format!("{field}.retry_back_off.base_interval"),
                "required, and more than 0",
            ));
        }
        if let (Some(b), Some(m)) = (backoff_base, backoff_max)
            && m < b
        {
            return Err(invalid(
                format!("{field}.retry_back_off.max_interval"),
                "must be at least base_interval",
            ));
        }
    }
    let (mut rate_limited_reset_headers, mut rate_limited_max) = (Vec::new(), None);
    if let Some(b) = r.rate_limited_retry_back_off.take() {
        for (i, h) in b.reset_headers.into_iter().enumerate() {
            let format = match retry_policy::ResetHeaderFormat::try_from(h.format) {
                Ok(retry_policy::ResetHeaderFormat::Seconds) => ResetFormat::Seconds,
                Ok(retry_policy::ResetHeaderFormat::UnixTimestamp) => ResetFormat::UnixTimestamp,
                Err(_) => {
                    return Err(invalid(
                        format!("{field}.rate_limited_retry_back_off.reset_headers[{i}].format"),
                        "use SECONDS or UNIX_TIMESTAMP",
                    ));
                }
            };
            rate_limited_reset_headers.push((h.name.to_ascii_lowercase(), format));
        }
        rate_limited_max = b
            .max_interval
            .map(|d| {
                duration(
                    &d,
                    format!("{field}.rate_limited_retry_back_off.max_interval"),
                )
            })
            .transpose()?
            .and_then(nonzero);
    }
    let retriable_request_headers = std::mem::take(&mut r.retriable_request_headers)
        .into_iter()
        .enumerate()
        .map(|(i, h)| header_match(h, &format!("{field}.retriable_request_headers[{i}]")))
        .collect::<Result<_, _>>()?;
    let retriable_response_headers = std::mem::take(&mut r.retriable_headers)
        .into_iter()
        .enumerate()
        .map(|(i, h)| header_match(h, &format!("{field}.retriable_headers[{i}]")))
        .collect::<Result<_, _>>()?;
    // Kuma sets these host-selection knobs on every retry policy; the
    // proxy's balancer already avoids the endpoint that just failed.
    r.retry_host_predicate.clear();
    r.host_selection_retry_max_attempts = 0;
    only_supported(
        &r,
        field,
        "retry_on, num_retries, per_try_timeout, retriable_status_codes, retry_back_off, \
         rate_limited_retry_back_off, retriable_headers, retriable_request_headers, retry_host_predicate",
    )?;
    Ok(RetrySpec {
        retry_on,
        retriable_status_codes,
        num_retries,
        per_try_timeout,
        backoff_base,
        backoff_max,
        rate_limited_reset_headers,
        rate_limited_max,
        retriable_request_headers,
        retriable_response_headers,
    })
}

fn redirect(mut a: RedirectAction, field: &str) -> Result<Redirect, Invalid> {
    let scheme = match a.scheme_rewrite_specifier.take() {
        Some(redirect_action::SchemeRewriteSpecifier::HttpsRedirect(true)) => {
            Some("https".to_owned())
        }
        Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(s)) => Some(s),
        _ => None,
    };
    let host = Some(std::mem::take(&mut a.host_redirect)).filter(|h| !h.is_empty());
    let port = match std::mem::take(&mut a.port_redirect) {
        0 => None,
        p => Some(u16::try_from(p).map_err(|_| {
            invalid(
                format!("{field}.port_redirect"),
                format!("{p} is not a port"),
            )
        })?),
    };
    let (mut path, mut prefix) = (None, None);
    match a.path_rewrite_specifier.take() {
        Some(redirect_action::PathRewriteSpecifier::PathRedirect(p)) => path = Some(p),
        Some(redirect_action::PathRewriteSpecifier::PrefixRewrite(p)) => prefix = Some(p),
        Some(_) => {
            return Err(invalid(
                field,
                "only path_redirect and prefix_rewrite are supported among path rewrites",
            ));
        }
        None => {}
    }
    use redirect_action::RedirectResponseCode as Code;
    let status = match Code::try_from(std::mem::take(&mut a.response_code)) {
        Ok(Code::MovedPermanently) => 301,
        Ok(Code::Found) => 302,
        Ok(Code::SeeOther) => 303,
        Ok(Code::TemporaryRedirect) => 307,
        Ok(Code::PermanentRedirect) => 308,
        Err(_) => {
            return Err(invalid(
                format!("{field}.response_code"),
                "use 301, 302, 303, 307 or 308",
            ));
        }
    };
    only_supported(
        &a,
        field,
        "https_redirect, scheme_redirect, host_redirect, port_redirect, path_redirect, prefix_rewrite, response_code",
    )?;
    Ok(Redirect {
        scheme,
        host,
        port,
        path,
        prefix,
        status,
    })
}

/// Header changes from Envoy's `*_headers_to_add` and `*_to_remove`.
pub(super) fn mutation(
    add: Vec<HeaderValueOption>,
    remove: Vec<String>,
    field: &str,
) -> Result<HeaderMutation, Invalid> {
    let mut out = HeaderMutation {
        remove: remove.into_iter().map(|h| h.to_ascii_lowercase()).collect(),
        ..HeaderMutation::default()
    };
    for (i, o) in add.into_iter().enumerate() {
        let Some(h) = o.header else {
            return Err(invalid(format!("{field}[{i}].header"), "required"));
        };
        let name = h.key.to_ascii_lowercase();
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(invalid(
                format!("{field}[{i}].header.key"),
                format!("{:?} is not a valid header name", h.key),
            ));
        }
        if http::HeaderValue::from_str(&h.value).is_err() {
            return Err(invalid(
                format!("{field}[{i}].header.value"),
                "not a valid header value (control characters?)",
            ));
        }
        #[allow(deprecated)]
        let append = match (
            o.append.map(|b| b.value),
            header_value_option::HeaderAppendAction::try_from(o.append_action),
        ) {
            (Some(a), _) => a,
            (None, Ok(header_value_option::HeaderAppendAction::AppendIfExistsOrAdd)) => true,
            (None, Ok(header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd)) => false,
            (None, _) => {
                return Err(invalid(
                    format!("{field}[{i}].append_action"),
                    "use APPEND_IF_EXISTS_OR_ADD or OVERWRITE_IF_EXISTS_OR_ADD",
                ));
            }
        };
        let pair = (name, h.value);
        if append {
            out.add.push(pair)
        } else {
            out.set.push(pair)
        }
    }
    Ok(out)
}

/// Envoy's "0 disables".
fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

#[cfg(test)]
mod tests;

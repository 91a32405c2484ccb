//! Validation of `envoy.filters.http.fault` (what Kuma's MeshFaultInjection
//! becomes): a fixed abort status, a fixed delay and a fixed response
//! bandwidth limit, each for a fraction of requests; bare, or wrapped in
//! an `ExtensionWithMatcher` whose one rule skips it (`SkipFilter`) for
//! callers whose URI SAN is (or is not) in a list.
//!
//! Refused, naming the field, rather than silently ignored: faults chosen
//! by request headers, restrictions by header, upstream cluster or
//! downstream node, a cap on active faults, runtime overrides, gRPC
//! aborts, and any other matcher shape.

use envoy_types::pb::envoy::extensions::common::matching::v3::ExtensionWithMatcher;
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{
    fault_delay::FaultDelaySecifier, fault_rate_limit::LimitType,
};
use envoy_types::pb::envoy::extensions::filters::common::matcher::action::v3::SkipFilter;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{
    HttpFault, fault_abort::ErrorType,
};
use envoy_types::pb::envoy::extensions::matching::common_inputs::ssl::v3::UriSanInput;
use envoy_types::pb::envoy::r#type::v3::FractionalPercent;
use envoy_types::pb::envoy::r#type::v3::fractional_percent::DenominatorType;
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::xds::r#type::matcher::v3::Matcher;
use envoy_types::pb::xds::r#type::matcher::v3::matcher::matcher_list::{Predicate, predicate};
use envoy_types::pb::xds::r#type::matcher::v3::matcher::{MatcherType, on_match};
use envoy_types::pb::xds::r#type::matcher::v3::string_matcher::MatchPattern;
use prost::Name;

use super::{Invalid, decode, invalid};
use crate::model::fault::{Callers, Fault, Fraction};

/// Whether `any` is a fault filter's config (bare or wrapped).
pub(super) fn is_fault(any: &Any) -> bool {
    any.type_url == HttpFault::type_url() || any.type_url == ExtensionWithMatcher::type_url()
}

/// Reads the filter's `typed_config` at `field`.
pub(super) fn fault(any: &Any, field: &str) -> Result<Fault, Invalid> {
    if any.type_url == HttpFault::type_url() {
        return settings(decode(any, field)?, field, Callers::All);
    }
    let w: ExtensionWithMatcher = decode(any, field)?;
    if has_deprecated_matcher(&w) {
        return Err(invalid(
            format!("{field}.matcher"),
            "the deprecated matcher is not supported; use xds_matcher",
        ));
    }
    let inner_field = format!("{field}.extension_config.typed_config");
    let Some(inner) = w.extension_config.and_then(|c| c.typed_config) else {
        return Err(invalid(inner_field, "required: the fault filter's config"));
    };
    if inner.type_url != HttpFault::type_url() {
        return Err(invalid(
            inner_field,
            "meshlink-proxy wraps only envoy.filters.http.fault in a matcher",
        ));
    }
    let callers = callers(w.xds_matcher, &format!("{field}.xds_matcher"))?;
    settings(decode(&inner, &inner_field)?, &inner_field, callers)
}

#[allow(deprecated)]
fn has_deprecated_matcher(w: &ExtensionWithMatcher) -> bool {
    w.matcher.is_some()
}

fn settings(f: HttpFault, field: &str, callers: Callers) -> Result<Fault, Invalid> {
    let unsupported = [
        (!f.headers.is_empty(), "headers"),
        (!f.upstream_cluster.is_empty(), "upstream_cluster"),
        (!f.downstream_nodes.is_empty(), "downstream_nodes"),
        (f.max_active_faults.is_some(), "max_active_faults"),
        (!f.delay_percent_runtime.is_empty(), "delay_percent_runtime"),
        (!f.abort_percent_runtime.is_empty(), "abort_percent_runtime"),
        (
            !f.delay_duration_runtime.is_empty(),
            "delay_duration_runtime",
        ),
        (
            !f.abort_http_status_runtime.is_empty(),
            "abort_http_status_runtime",
        ),
        (
            !f.max_active_faults_runtime.is_empty(),
            "max_active_faults_runtime",
        ),
        (
            !f.response_rate_limit_percent_runtime.is_empty(),
            "response_rate_limit_percent_runtime",
        ),
        (
            !f.abort_grpc_status_runtime.is_empty(),
            "abort_grpc_status_runtime",
        ),
    ];
    if let Some((_, name)) = unsupported.iter().find(|(set, _)| *set) {
        return Err(invalid(
            format!("{field}.{name}"),
            "not supported by meshlink-proxy: it injects a fixed abort, delay and response \
             bandwidth limit for every request of the callers the filter applies to",
        ));
    }
    let abort = match f.abort {
        None => None,
        Some(a) => {
            let at = format!("{field}.abort");
            let status = match a.error_type {
                Some(ErrorType::HttpStatus(s)) if (200..600).contains(&s) => s as u16,
                Some(ErrorType::HttpStatus(s)) => {
                    return Err(invalid(
                        format!("{at}.http_status"),
                        format!("{s} is outside 200-599, as Envoy requires"),
                    ));
                }
                _ => {
                    return Err(invalid(
                        at,
                        "only http_status is supported (no grpc_status or header_abort)",
                    ));
                }
            };
            Some((status, fraction(a.percentage, &format!("{at}.percentage"))?))
        }
    };
    let delay = match f.delay {
        None => None,
        Some(d) => {
            let at = format!("{field}.delay");
            let Some(FaultDelaySecifier::FixedDelay(fixed)) = d.fault_delay_secifier else {
                return Err(invalid(
                    at,
                    "only fixed_delay is supported (no header_delay)",
                ));
            };
            let value = super::duration(&fixed, format!("{at}.fixed_delay"))?;
            if value.is_zero() {
                return Err(invalid(
                    format!("{at}.fixed_delay"),
                    "must be greater than zero, as Envoy requires",
                ));
            }
            Some((value, fraction(d.percentage, &format!("{at}.percentage"))?))
        }
    };
    let response_bytes_per_second = match f.response_rate_limit {
        None => None,
        Some(r) => {
            let at = format!("{field}.response_rate_limit");
            let Some(LimitType::FixedLimit(fixed)) = r.limit_type else {
                return Err(invalid(
                    at,
                    "only fixed_limit is supported (no header_limit)",
                ));
            };
            if fixed.limit_kbps == 0 {
                return Err(invalid(
                    format!("{at}.fixed_limit.limit_kbps"),
                    "must be at least 1 (KiB per second)",
                ));
            }
            Some((
                fixed.limit_kbps.saturating_mul(1024),
                fraction(r.percentage, &format!("{at}.percentage"))?,
            ))
        }
    };
    Ok(Fault {
        callers,
        abort,
        delay,
        response_bytes_per_second,
    })
}

/// Envoy's fraction; unset is 0 %, as in Envoy.
fn fraction(p: Option<FractionalPercent>, field: &str) -> Result<Fraction, Invalid> {
    let p = p.unwrap_or_default();
    let denominator = match DenominatorType::try_from(p.denominator) {
        Ok(DenominatorType::Hundred) => 100,
        Ok(DenominatorType::TenThousand) => 10_000,
        Ok(DenominatorType::Million) => 1_000_000,
        Err(_) => return Err(invalid(format!("{field}.denominator"), "unknown")),
    };
    Ok(Fraction {
        numerator: p.numerator,
        denominator,
    })
}

/// The callers of a matcher with one rule: "skip when the URI SAN is one
/// of these" (every caller but them), or "skip when it is not"
/// (only them).
fn callers(m: Option<Matcher>, field: &str) -> Result<Callers, Invalid> {
    let shape = || {
        invalid(
            field,
            "meshlink-proxy supports one matcher_list rule whose predicate is the peer's URI SAN \
             (envoy.matching.inputs.uri_san) equal to one of a list, or its negation, with the \
             SkipFilter action and no on_no_match",
        )
    };
    let Some(m) = m else {
        return Err(invalid(field, "required"));
    };
    if m.on_no_match.is_some() {
        return Err(shape());
    }
    let Some(MatcherType::MatcherList(list)) = m.matcher_type else {
        return Err(shape());
    };
    let [rule] = list.matchers.as_slice() else {
        return Err(shape());
    };
    let skip = rule.on_match.as_ref().is_some_and(|o| {
        !o.keep_matching
            && matches!(&o.on_match, Some(on_match::OnMatch::Action(a))
                if a.typed_config.as_ref().is_some_and(|t| t.type_url == SkipFilter::type_url()))
    });
    if !skip {
        return Err(shape());
    }
    let Some(p) = &rule.predicate else {
        return Err(shape());
    };
    match &p.match_type {
        Some(predicate::MatchType::NotMatcher(inner)) => {
            Ok(Callers::Only(sans(inner).ok_or_else(shape)?))
        }
        _ => Ok(Callers::Except(sans(p).ok_or_else(shape)?)),
    }
}

/// The SPIFFE IDs of "URI SAN equals one of these" (one predicate, or an
/// OR of them).
fn sans(p: &Predicate) -> Option<Vec<String>> {
    match p.match_type.as_ref()? {
        predicate::MatchType::SinglePredicate(s) => {
            let input = s.input.as_ref()?.typed_config.as_ref()?;
            if input.type_url != UriSanInput::type_url() {
                return None;
            }
            match s.matcher.as_ref()? {
                predicate::single_predicate::Matcher::ValueMatch(m) if !m.ignore_case => {
                    match m.match_pattern.as_ref()? {
                        MatchPattern::Exact(id) => Some(vec![id.clone()]),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        predicate::MatchType::OrMatcher(list) => {
            let mut out = Vec::new();
            for p in &list.predicate {
                out.extend(sans(p)?);
            }
            (!out.is_empty()).then_some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;

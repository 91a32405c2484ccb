//! MeshFaultInjection as Envoy's fault filters (`envoy.filters.http.fault`):
//! `to[]` on a proxyless gRPC client's channels ([`client_filters`]), and
//! `from[]` on an inbound's connection manager, after
//! RBAC and the local rate limit: one filter per `http[]` entry, in order,
//! so each entry's percentages apply to what the entries before it let
//! through (Kuma's chaining).
//!
//! Callers are told apart by their SPIFFE ID, the peer certificate's URI
//! SAN. Kuma's fold gives each caller the `http` list of the
//! highest-priority `from[]` entry that matches it (lists are replaced, not
//! merged); the callers named by some entry (`MeshService`, a
//! `MeshServiceSubset`'s service, a `MeshSubset`'s `kuma.io/service`) are
//! grouped by the list they get, and each group's filters are wrapped in
//! an `ExtensionWithMatcher` that skips them (`SkipFilter`) for any other
//! caller. The list every other caller gets (the `Mesh` entries) is
//! wrapped to skip the named callers. So a request meets exactly one
//! caller's chain. Identities are per service: subset tags other than
//! `kuma.io/service` cannot narrow a caller further, and a `MeshSubset`
//! without that tag names nobody.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::extensions::common::matching::v3::ExtensionWithMatcher;
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{
    FaultDelay, FaultRateLimit, fault_delay, fault_rate_limit,
};
use envoy_types::pb::envoy::extensions::filters::common::matcher::action::v3::SkipFilter;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{
    FaultAbort, HttpFault as PbHttpFault, fault_abort,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::matching::common_inputs::ssl::v3::UriSanInput;
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent::DenominatorType};
use envoy_types::pb::xds::core::v3::TypedExtensionConfig as XdsExtension;
use envoy_types::pb::xds::r#type::matcher::v3::matcher::matcher_list::{
    FieldMatcher, Predicate, predicate,
};
use envoy_types::pb::xds::r#type::matcher::v3::matcher::{
    MatcherList, MatcherType, OnMatch, on_match,
};
use envoy_types::pb::xds::r#type::matcher::v3::{Matcher, StringMatcher, string_matcher};
use envoy_types::util::pack_any;
use meshlink_api::Kind;
use meshlink_api::policy::{self, Entry, PolicyInput, Section};
use meshlink_api::spec::{
    Bandwidth, FaultConf, HttpFault, InboundTarget, Percentage, SERVICE_TAG, TargetRefKind,
};

use super::MeshView;
use super::names;
use super::policies::ViewPolicy;

/// The filter's name.
pub(super) const FAULT_FILTER: &str = "envoy.filters.http.fault";

/// The matcher input naming the peer certificate's URI SAN.
const URI_SAN_INPUT: &str = "envoy.matching.inputs.uri_san";

/// Which callers a chain of filters is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Callers {
    /// Every caller.
    All,
    /// Only these SPIFFE IDs.
    Only(BTreeSet<String>),
    /// Every caller but these SPIFFE IDs.
    Except(BTreeSet<String>),
}

/// The fault filters of `inbound`, in the order they apply (empty when no
/// MeshFaultInjection selects it).
pub(super) fn inbound_filters(view: &MeshView, inbound: &InboundTarget<'_>) -> Vec<HttpFilter> {
    let inputs = view.policies().iter().map(|p: &ViewPolicy| &p.input);
    chains(inputs, view.trust_domain(), inbound)
        .into_iter()
        .flat_map(|(callers, faults)| {
            faults
                .into_iter()
                .map(move |f| filter(&f, &callers))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Each caller group and the fault list it gets, the named groups first.
fn chains<'a>(
    policies: impl Iterator<Item = &'a PolicyInput>,
    trust_domain: &str,
    inbound: &InboundTarget<'_>,
) -> Vec<(Callers, Vec<HttpFault>)> {
    let selected: Vec<PolicyInput> = policies
        .filter(|p| p.kind == Kind::MeshFaultInjection && p.target_ref.selects(inbound))
        .cloned()
        .collect();
    if selected.is_empty() {
        return Vec::new();
    }
    let rules = policy::merge(Kind::MeshFaultInjection, &selected, Section::From).applied;
    let named: BTreeSet<String> = rules
        .entries
        .iter()
        .filter_map(|e| callers_of(e, trust_domain))
        .flatten()
        .collect();
    let list_for = |applies: &dyn Fn(&Entry) -> bool| -> Vec<HttpFault> {
        rules
            .merged_where(applies)
            .and_then(|m| m.typed::<FaultConf>().ok())
            .and_then(|c| c.http)
            .unwrap_or_default()
    };
    let mut groups: Vec<(Callers, Vec<HttpFault>)> = Vec::new();
    for id in &named {
        let list = list_for(&|e| callers_of(e, trust_domain).is_none_or(|ids| ids.contains(id)));
        match groups.iter_mut().find(|g| g.1 == list) {
            Some((Callers::Only(ids), _)) => {
                ids.insert(id.clone());
            }
            _ => groups.push((Callers::Only(BTreeSet::from([id.clone()])), list)),
        }
    }
    let rest = list_for(&|e| callers_of(e, trust_domain).is_none());
    groups.push((
        if named.is_empty() {
            Callers::All
        } else {
            Callers::Except(named)
        },
        rest,
    ));
    groups.retain(|(_, list)| !list.is_empty());
    groups
}

/// The SPIFFE IDs a `from[]` entry names; `None` for every caller (`Mesh`).
fn callers_of(e: &Entry, trust_domain: &str) -> Option<BTreeSet<String>> {
    let t = e.target_ref.as_ref()?;
    let service = match t.kind {
        TargetRefKind::Mesh => return None,
        TargetRefKind::MeshService | TargetRefKind::MeshServiceSubset => t.name.clone(),
        TargetRefKind::MeshSubset => t.tags.get(SERVICE_TAG).cloned(),
        _ => None,
    };
    Some(
        service
            .map(|s| names::spiffe_id(trust_domain, &s))
            .into_iter()
            .collect(),
    )
}

/// One `http[]` entry as a fault filter for `callers`.
fn filter(fault: &HttpFault, callers: &Callers) -> HttpFilter {
    let config = config(fault);
    let typed = match callers {
        Callers::All => pack_any(config),
        Callers::Only(ids) => with_matcher(config, skip_when(not(san_in(ids)))),
        Callers::Except(ids) => with_matcher(config, skip_when(san_in(ids))),
    };
    HttpFilter {
        name: FAULT_FILTER.to_owned(),
        config_type: Some(http_filter::ConfigType::TypedConfig(typed)),
        ..Default::default()
    }
}

/// MeshFaultInjection `to[]` faults as a proxyless gRPC client's own fault
/// filters (gRFC A33), for its channels' connection managers before the
/// router: one per `http[]` entry, in order (each entry's percentages
/// apply to the calls the entries before it let through). gRPC refuses
/// two filters of one name, so each is named `envoy.filters.http.fault.<i>`.
/// gRPC has no response rate limit: `responseBandwidth` is left out, and
/// an entry with nothing else is skipped.
pub(super) fn client_filters(faults: &[HttpFault]) -> Vec<HttpFilter> {
    faults
        .iter()
        .filter(|f| f.abort.is_some() || f.delay.is_some())
        .enumerate()
        .map(|(i, f)| {
            let mut config = config(f);
            config.response_rate_limit = None;
            HttpFilter {
                name: format!("{FAULT_FILTER}.{i}"),
                config_type: Some(http_filter::ConfigType::TypedConfig(pack_any(config))),
                ..Default::default()
            }
        })
        .collect()
}

/// One `http[]` entry as Envoy's fault filter config.
fn config(fault: &HttpFault) -> PbHttpFault {
    PbHttpFault {
        abort: fault.abort.as_ref().map(|a| FaultAbort {
            error_type: Some(fault_abort::ErrorType::HttpStatus(
                u32::try_from(a.http_status).unwrap_or(500),
            )),
            percentage: Some(fraction(&a.percentage)),
            ..Default::default()
        }),
        delay: fault.delay.as_ref().map(|d| FaultDelay {
            fault_delay_secifier: super::http::kuma_duration(Some(&d.value))
                .map(fault_delay::FaultDelaySecifier::FixedDelay),
            percentage: Some(fraction(&d.percentage)),
        }),
        response_rate_limit: fault.response_bandwidth.as_ref().map(|b| FaultRateLimit {
            limit_type: Bandwidth::parse(&b.limit).map(|bw| {
                fault_rate_limit::LimitType::FixedLimit(fault_rate_limit::FixedLimit {
                    limit_kbps: bw.kib_per_second(),
                })
            }),
            percentage: Some(fraction(&b.percentage)),
        }),
        ..Default::default()
    }
}

/// A percentage as Envoy's fraction, with the smallest denominator that
/// holds it exactly (`50` is 50/100, `"2.5"` 250/10000).
pub(super) fn fraction(p: &Percentage) -> FractionalPercent {
    let ppm = p.per_million().unwrap_or(0);
    let (numerator, denominator) = if ppm.is_multiple_of(10_000) {
        (ppm / 10_000, DenominatorType::Hundred)
    } else if ppm.is_multiple_of(100) {
        (ppm / 100, DenominatorType::TenThousand)
    } else {
        (ppm, DenominatorType::Million)
    };
    FractionalPercent {
        numerator,
        denominator: denominator as i32,
    }
}

fn with_matcher(config: PbHttpFault, matcher: Matcher) -> envoy_types::pb::google::protobuf::Any {
    pack_any(ExtensionWithMatcher {
        xds_matcher: Some(matcher),
        extension_config: Some(TypedExtensionConfig {
            name: FAULT_FILTER.to_owned(),
            typed_config: Some(pack_any(config)),
        }),
        ..Default::default()
    })
}

/// A matcher whose only rule skips the filter when `p` holds.
fn skip_when(p: Predicate) -> Matcher {
    Matcher {
        matcher_type: Some(MatcherType::MatcherList(MatcherList {
            matchers: vec![FieldMatcher {
                predicate: Some(p),
                on_match: Some(OnMatch {
                    keep_matching: false,
                    on_match: Some(on_match::OnMatch::Action(XdsExtension {
                        name: "skip".to_owned(),
                        typed_config: Some(pack_any(SkipFilter {})),
                    })),
                }),
            }],
        })),
        on_no_match: None,
    }
}

/// "The peer's URI SAN is one of `ids`" (an OR needs two or more).
fn san_in(ids: &BTreeSet<String>) -> Predicate {
    let mut single: Vec<Predicate> = ids
        .iter()
        .map(|id| Predicate {
            match_type: Some(predicate::MatchType::SinglePredicate(
                predicate::SinglePredicate {
                    input: Some(XdsExtension {
                        name: URI_SAN_INPUT.to_owned(),
                        typed_config: Some(pack_any(UriSanInput {})),
                    }),
                    matcher: Some(predicate::single_predicate::Matcher::ValueMatch(
                        StringMatcher {
                            match_pattern: Some(string_matcher::MatchPattern::Exact(id.clone())),
                            ignore_case: false,
                        },
                    )),
                },
            )),
        })
        .collect();
    if single.len() == 1 {
        return single.remove(0);
    }
    Predicate {
        match_type: Some(predicate::MatchType::OrMatcher(predicate::PredicateList {
            predicate: single,
        })),
    }
}

fn not(p: Predicate) -> Predicate {
    Predicate {
        match_type: Some(predicate::MatchType::NotMatcher(Box::new(p))),
    }
}

#[cfg(test)]
mod tests;

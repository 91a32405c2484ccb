//! MeshTrafficPermission → RBAC filters on sidecar inbounds (network
//! filters on a TCP inbound, the same rules as HTTP filters on an HTTP one).
//!
//! Owns who may connect to an inbound: sources are SPIFFE IDs matched on
//! the peer certificate's URI SAN. With mTLS on, the default is deny: an
//! inbound no Allow rule selects gets an ALLOW filter with no policies.
//! Several permissions combine in Kuma's merge order ([`inbound_sources`]):
//! for each client the highest-priority matching rule decides, and the
//! result is a DENY filter (the exceptions to a mesh-wide Allow) before an
//! ALLOW filter. It must never be used with mTLS off: without certificates
//! there is no identity.
//!
//! A permission may instead give Kuma's `rules` (SPIFFE ID matches, exact
//! or prefix): when any permission selecting an inbound has `rules`, the
//! rules of all of them decide it (DENY matches first, then ALLOW) and
//! `from[]` permissions are ignored there, as in Kuma.
//!
//! Each filter carries at most one policy, because RBAC policies are a
//! protobuf map whose encoding order is not stable; one entry keeps the
//! output byte-identical.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use envoy_types::pb::envoy::config::listener::v3::{Filter, filter::ConfigType};
use envoy_types::pb::envoy::config::rbac::v3::{
    Permission, Policy, Principal, Rbac as RbacRules, permission, principal,
    rbac::Action as RbacAction,
};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac;
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::util::pack_any;
use meshlink_api::spec::{
    Action, DataplaneSpec, FromRule, InboundTarget, MeshTrafficPermissionSpec, PermissionRule,
    SpiffeIdMatch, SpiffeIdMatchType, Tags, TargetRef, TargetRefKind, service_from_tags,
};

use super::{MeshView, names};

/// Envoy's name of the network RBAC filter.
const RBAC_FILTER: &str = "envoy.filters.network.rbac";

/// Envoy's name of the HTTP RBAC filter.
const HTTP_RBAC_FILTER: &str = "envoy.filters.http.rbac";

/// A source identity, ordered for determinism.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    /// SPIFFE IDs starting with this (a `Mesh` source's trust domain, or
    /// a `rules` `Prefix` match).
    Prefix(String),
    /// One SPIFFE ID (a service's, or a `rules` `Exact` match).
    Exact(String),
}

/// Who an inbound's rules allow and deny (before filters are built).
#[derive(Debug, Default)]
pub(crate) struct RbacSources {
    allow: BTreeSet<Source>,
    deny: BTreeSet<Source>,
}

/// What an inbound's RBAC depends on: its tags always; the Dataplane's
/// name, labels and the inbound's port and name only while some permission of the
/// view selects by them (so proxies of one service still share the entry).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RbacKey {
    tags: Tags,
    dataplane: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    port: Option<(u16, Option<String>)>,
}

/// The memo key of `inbound` in `view` (see [`RbacKey`]).
pub(super) fn rbac_key(view: &MeshView, inbound: &InboundTarget<'_>) -> RbacKey {
    let (mut names, mut labels, mut ports) = (false, false, false);
    for t in top_level_targets(view) {
        names |= t.name.is_some();
        labels |= t.labels.is_some() || t.namespace.is_some();
        ports |= t.section_name.is_some();
    }
    RbacKey {
        tags: inbound.tags.clone(),
        dataplane: names.then(|| inbound.dataplane.to_owned()),
        labels: labels.then(|| inbound.labels.clone()),
        port: ports.then(|| (inbound.port, inbound.name.map(str::to_owned))),
    }
}

fn top_level_targets(view: &MeshView) -> impl Iterator<Item = TargetRef> + '_ {
    view.permissions()
        .iter()
        .filter_map(|r| r.spec.as_mesh_traffic_permission())
        .map(MeshTrafficPermissionSpec::effective_target_ref)
        .filter(|t| t.kind == TargetRefKind::Dataplane)
}

/// The allow and deny sources for `inbound`, as Kuma merges policies:
/// the permissions whose top-level `targetRef` selects the inbound are
/// ordered by [`TargetRef::rank`] (most general first), then by name in
/// inverted lexicographic order (so of two equal targets the name that
/// sorts first has the higher priority); their `from[]` lists are
/// concatenated in that order, and for each client the last entry that
/// matches it decides.
pub(super) fn inbound_sources(view: &MeshView, inbound: &InboundTarget<'_>) -> RbacSources {
    let mut mtps: Vec<_> = view
        .permissions()
        .iter()
        .filter_map(|r| Some((r.name(), r.spec.as_mesh_traffic_permission()?)))
        .map(|(name, mtp)| (name, mtp, mtp.effective_target_ref()))
        .filter(|(_, _, target)| target.selects(inbound))
        .collect();
    mtps.sort_by(|a, b| a.2.rank().cmp(&b.2.rank()).then_with(|| b.0.cmp(a.0)));
    // Kuma: once a policy with `rules` selects the inbound, the rules of
    // every such policy decide it and `from[]` policies are ignored.
    if mtps.iter().any(|(_, mtp, _)| !mtp.rules.is_empty()) {
        return rule_sources(mtps.iter().flat_map(|(_, mtp, _)| &mtp.rules));
    }
    let rules: Vec<&FromRule> = mtps.iter().flat_map(|(_, mtp, _)| &mtp.from).collect();
    // Walk from the highest priority down: the first verdict a client
    // gets is its last matching entry's. A `Mesh` entry decides every
    // client not decided yet, so nothing below it matters.
    let mut decided: BTreeMap<Source, bool> = BTreeMap::new();
    let mut rest = None;
    for rule in rules.iter().rev() {
        let allow = match rule.default_.action {
            Action::Allow | Action::AllowWithShadowDeny => true,
            Action::Deny => false,
            Action::Unknown(_) => continue,
        };
        if rule.target_ref.kind == TargetRefKind::Mesh {
            rest = Some(allow);
            break;
        }
        for source in sources(view, &rule.target_ref) {
            decided.entry(source).or_insert(allow);
        }
    }
    let mut out = RbacSources::default();
    if rest == Some(true) {
        // Everyone in the trust domain but the clients decided Deny.
        out.allow
            .insert(Source::Prefix(names::spiffe_prefix(view.trust_domain())));
        out.deny
            .extend(decided.into_iter().filter(|(_, a)| !a).map(|(s, _)| s));
    } else {
        // Default deny: only the clients decided Allow.
        out.allow
            .extend(decided.into_iter().filter(|(_, a)| *a).map(|(s, _)| s));
    }
    out
}

/// The sources of Kuma's `rules` (all of them together, in any order):
/// a client any `deny` match selects is refused, else one any `allow` or
/// `allowWithShadowDeny` match selects is let in, else it is refused.
fn rule_sources<'a>(rules: impl Iterator<Item = &'a PermissionRule>) -> RbacSources {
    let source = |m: &SpiffeIdMatch| match m.type_ {
        SpiffeIdMatchType::Prefix => Some(Source::Prefix(m.value.clone())),
        SpiffeIdMatchType::Exact => Some(Source::Exact(m.value.clone())),
        SpiffeIdMatchType::Unknown(_) => None,
    };
    let mut out = RbacSources::default();
    for rule in rules {
        out.deny.extend(rule.default_.denying().filter_map(source));
        out.allow
            .extend(rule.default_.allowing().filter_map(source));
    }
    out
}

/// The RBAC filters for an inbound from its `sources`: an optional DENY
/// filter, then the ALLOW filter (empty = deny all).
pub(super) fn inbound_filters(sources: &RbacSources, stat_prefix: &str) -> Vec<Filter> {
    rule_sets(sources)
        .into_iter()
        .map(|(policy_name, rules)| {
            let rbac = Rbac {
                rules: Some(rules),
                stat_prefix: format!("{stat_prefix}.{policy_name}"),
                ..Default::default()
            };
            Filter {
                name: RBAC_FILTER.to_owned(),
                config_type: Some(ConfigType::TypedConfig(pack_any(rbac))),
            }
        })
        .collect()
}

/// [`inbound_filters`] as HTTP filters (the same rules, in the same
/// order), for an inbound whose listener routes HTTP requests.
pub(super) fn inbound_http_filters(sources: &RbacSources) -> Vec<HttpFilter> {
    rule_sets(sources)
        .into_iter()
        .map(|(_, rules)| HttpFilter {
            name: HTTP_RBAC_FILTER.to_owned(),
            config_type: Some(http_filter::ConfigType::TypedConfig(pack_any(HttpRbac {
                rules: Some(rules),
                ..Default::default()
            }))),
            ..Default::default()
        })
        .collect()
}

/// The rule sets of an inbound, by policy name: an optional DENY set,
/// then the ALLOW set (empty = deny all).
fn rule_sets(sources: &RbacSources) -> Vec<(&'static str, RbacRules)> {
    let mut sets = Vec::new();
    if !sources.deny.is_empty() {
        sets.push(("deny", rules(RbacAction::Deny, "deny", &sources.deny)));
    }
    sets.push(("allow", rules(RbacAction::Allow, "allow", &sources.allow)));
    sets
}

/// Whether any MeshTrafficPermission of `view` selects sources by
/// `MeshSubset` (then the inbounds of every Dataplane are an input of RBAC).
pub fn uses_subset_sources(view: &MeshView) -> bool {
    view.permissions()
        .iter()
        .filter_map(|r| r.spec.as_mesh_traffic_permission())
        .flat_map(|mtp| &mtp.from)
        .any(|rule| rule.target_ref.kind == TargetRefKind::MeshSubset)
}

/// The identities a `from[].targetRef` selects.
fn sources(view: &MeshView, target: &TargetRef) -> Vec<Source> {
    let td = view.trust_domain();
    match &target.kind {
        TargetRefKind::Mesh => vec![Source::Prefix(names::spiffe_prefix(td))],
        TargetRefKind::MeshService => target
            .name
            .iter()
            .map(|s| Source::Exact(names::spiffe_id(td, s)))
            .collect(),
        // Identities are per service: a subset allows every service that
        // has an inbound (or is a gateway) with those tags.
        TargetRefKind::MeshSubset => view
            .dataplane_specs()
            .flat_map(|(_, dp)| client_tags(dp))
            .filter(|tags| target.matches(tags))
            .filter_map(service_from_tags)
            .map(|s| Source::Exact(names::spiffe_id(td, s)))
            .collect(),
        // Not a client selector (validation refuses it in from[]).
        TargetRefKind::Dataplane
        | TargetRefKind::MeshServiceSubset
        | TargetRefKind::MeshHTTPRoute
        | TargetRefKind::MeshExternalService
        | TargetRefKind::MeshMultiZoneService
        | TargetRefKind::Unknown(_) => Vec::new(),
    }
}

/// The tags a Dataplane's proxy calls others with: its inbounds', or its
/// gateway's.
fn client_tags(dp: &DataplaneSpec) -> impl Iterator<Item = &Tags> {
    dp.networking
        .inbound
        .iter()
        .map(|i| &i.tags)
        .chain(dp.gateway().map(|g| &g.tags))
}

fn principal(source: &Source) -> Principal {
    let pattern = match source {
        Source::Prefix(prefix) => MatchPattern::Prefix(prefix.clone()),
        Source::Exact(id) => MatchPattern::Exact(id.clone()),
    };
    Principal {
        identifier: Some(principal::Identifier::Authenticated(
            principal::Authenticated {
                principal_name: Some(StringMatcher {
                    match_pattern: Some(pattern),
                    ignore_case: false,
                }),
            },
        )),
    }
}

fn rules(action: RbacAction, policy_name: &str, sources: &BTreeSet<Source>) -> RbacRules {
    let mut policies = HashMap::new();
    if !sources.is_empty() {
        policies.insert(
            policy_name.to_owned(),
            Policy {
                permissions: vec![Permission {
                    rule: Some(permission::Rule::Any(true)),
                }],
                principals: sources.iter().map(principal).collect(),
                ..Default::default()
            },
        );
    }
    RbacRules {
        action: action as i32,
        policies,
        ..Default::default()
    }
}

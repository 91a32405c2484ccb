//! MeshTrafficPermission → network RBAC filters on sidecar inbounds.
//!
//! Owns who may connect to an inbound: sources are SPIFFE IDs matched on
//! the peer certificate's URI SAN. With mTLS on, the default is deny: an
//! inbound no Allow rule selects gets an ALLOW filter with no policies.
//! Deny rules win over Allow rules (a DENY filter runs first). It must
//! never be used with mTLS off: without certificates there is no identity.
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
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac;
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::util::pack_any;
use meshlink_api::spec::{Action, TargetRef, TargetRefKind};

use super::{MeshView, names};

/// Envoy's name of the network RBAC filter.
const RBAC_FILTER: &str = "envoy.filters.network.rbac";

/// A source identity, ordered for determinism.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    /// Any identity of the trust domain (a `Mesh` source).
    TrustDomain(String),
    /// One service's SPIFFE ID.
    Service(String),
}

/// Who an inbound's rules allow and deny (before filters are built).
#[derive(Debug, Default)]
pub(crate) struct RbacSources {
    allow: BTreeSet<Source>,
    deny: BTreeSet<Source>,
}

/// The allow and deny sources for an inbound with `tags`.
pub(super) fn inbound_sources(view: &MeshView, tags: &BTreeMap<String, String>) -> RbacSources {
    let mut out = RbacSources::default();
    let mut mtps: Vec<_> = view
        .permissions()
        .iter()
        .filter_map(|r| Some((r.name(), r.spec.as_mesh_traffic_permission()?)))
        .filter(|(_, mtp)| mtp.effective_target_ref().matches(tags))
        .collect();
    mtps.sort_by_key(|(name, _)| *name);
    for (_, mtp) in mtps {
        for rule in &mtp.from {
            let into = match rule.default_.action {
                Action::Allow | Action::AllowWithShadowDeny => &mut out.allow,
                Action::Deny => &mut out.deny,
                Action::Unknown(_) => continue,
            };
            into.extend(sources(view, &rule.target_ref));
        }
    }
    out
}

/// The RBAC filters for an inbound from its `sources`: an optional DENY
/// filter, then the ALLOW filter (empty = deny all).
pub(super) fn inbound_filters(sources: &RbacSources, stat_prefix: &str) -> Vec<Filter> {
    let mut filters = Vec::new();
    if !sources.deny.is_empty() {
        filters.push(filter(RbacAction::Deny, "deny", &sources.deny, stat_prefix));
    }
    filters.push(filter(
        RbacAction::Allow,
        "allow",
        &sources.allow,
        stat_prefix,
    ));
    filters
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
        TargetRefKind::Mesh => vec![Source::TrustDomain(names::spiffe_prefix(td))],
        TargetRefKind::MeshService => target
            .name
            .iter()
            .map(|s| Source::Service(names::spiffe_id(td, s)))
            .collect(),
        // Identities are per service: a subset allows every service that
        // has an inbound with those tags.
        TargetRefKind::MeshSubset => view
            .dataplane_specs()
            .flat_map(|(_, dp)| dp.networking.inbound.iter())
            .filter(|i| target.matches(&i.tags))
            .filter_map(|i| i.service())
            .map(|s| Source::Service(names::spiffe_id(td, s)))
            .collect(),
        TargetRefKind::Unknown(_) => Vec::new(),
    }
}

fn principal(source: &Source) -> Principal {
    let pattern = match source {
        Source::TrustDomain(prefix) => MatchPattern::Prefix(prefix.clone()),
        Source::Service(id) => MatchPattern::Exact(id.clone()),
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

fn filter(
    action: RbacAction,
    policy_name: &str,
    sources: &BTreeSet<Source>,
    stat_prefix: &str,
) -> Filter {
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
    let rbac = Rbac {
        rules: Some(RbacRules {
            action: action as i32,
            policies,
            ..Default::default()
        }),
        stat_prefix: format!("{stat_prefix}.{policy_name}"),
        ..Default::default()
    };
    Filter {
        name: RBAC_FILTER.to_owned(),
        config_type: Some(ConfigType::TypedConfig(pack_any(rbac))),
    }
}

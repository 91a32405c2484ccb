//! MeshTrafficPermission semantics on a sidecar's inbound: who may connect.

mod translate_fixtures;

use envoy_types::pb::envoy::config::rbac::v3::rbac::Action;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use meshlink_api::Resource;
use meshlink_xds::translate::{ClientKind, MeshView, translate};
use serde_json::json;
use translate_fixtures::{MESH, permission, proxy, rbac_of_listener, standard_view};

/// The RBAC filters of web-1's inbound: (action, principal patterns).
fn inbound_rbac(view: &MeshView) -> Vec<(Action, Vec<MatchPattern>)> {
    rbac_of_listener(
        &translate(&proxy("web-1", ClientKind::Envoy), view),
        "inbound:10.0.0.1:8080",
    )
}

fn exact(id: &str) -> MatchPattern {
    MatchPattern::Exact(id.to_owned())
}

#[test]
fn allow_rule_admits_only_the_named_source() {
    let rbac = inbound_rbac(&standard_view(true, true));
    assert_eq!(
        rbac,
        vec![(Action::Allow, vec![exact("spiffe://example.org/backend")])]
    );
}

#[test]
fn no_permission_means_an_allow_filter_with_no_principals() {
    assert_eq!(
        inbound_rbac(&standard_view(true, false)),
        vec![(Action::Allow, vec![])]
    );
}

#[test]
fn deny_runs_before_allow_and_mesh_sources_match_the_trust_domain() {
    let view = standard_view(true, false);
    let mesh_wide = Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshTrafficPermission",
        "metadata": {"name": "everyone", "mesh": MESH},
        "spec": {"from": [{"targetRef": {"kind": "Mesh"}, "default": {"action": "Allow"}}]},
    }))
    .unwrap();
    let view = view.with_permissions(vec![
        mesh_wide,
        permission("no-backend", "web", "backend", "Deny"),
    ]);
    assert_eq!(
        inbound_rbac(&view),
        vec![
            (Action::Deny, vec![exact("spiffe://example.org/backend")]),
            (
                Action::Allow,
                vec![MatchPattern::Prefix("spiffe://example.org/".into())]
            ),
        ]
    );
}

#[test]
fn permission_for_another_service_does_not_apply() {
    let view = standard_view(true, false).with_permissions(vec![permission(
        "to-backend",
        "backend",
        "web",
        "Allow",
    )]);
    assert_eq!(inbound_rbac(&view), vec![(Action::Allow, vec![])]);
}

#[test]
fn mtls_off_has_no_rbac() {
    assert_eq!(inbound_rbac(&standard_view(false, true)), vec![]);
}

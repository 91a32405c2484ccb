//! MeshTrafficPermission semantics on a sidecar's inbound: who may connect.

mod translate_fixtures;

use envoy_types::pb::envoy::config::listener::v3::{Listener, filter::ConfigType};
use envoy_types::pb::envoy::config::rbac::v3::{principal::Identifier, rbac::Action};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use meshlink_api::Resource;
use meshlink_xds::translate::{ClientKind, LISTENER_TYPE, MeshView, translate};
use prost::Message;
use serde_json::json;
use translate_fixtures::{MESH, permission, proxy, standard_view};

/// The RBAC filters of web-1's inbound: (action, principal patterns).
fn inbound_rbac(view: &MeshView) -> Vec<(Action, Vec<MatchPattern>)> {
    let snap = translate(&proxy("web-1", ClientKind::Envoy), view);
    let any = &snap
        .get(LISTENER_TYPE, "inbound:10.0.0.1:8080")
        .expect("web-1 has an inbound listener")
        .resource;
    let listener = Listener::decode(any.value.as_slice()).unwrap();
    listener.filter_chains[0]
        .filters
        .iter()
        .filter(|f| f.name == "envoy.filters.network.rbac")
        .map(|f| {
            let Some(ConfigType::TypedConfig(cfg)) = &f.config_type else {
                panic!("RBAC filter without typed config")
            };
            let rules = Rbac::decode(cfg.value.as_slice()).unwrap().rules.unwrap();
            let principals = rules
                .policies
                .values()
                .flat_map(|p| &p.principals)
                .map(|p| match &p.identifier {
                    Some(Identifier::Authenticated(a)) => a
                        .principal_name
                        .as_ref()
                        .and_then(|m| m.match_pattern.clone())
                        .unwrap(),
                    other => panic!("unexpected principal {other:?}"),
                })
                .collect();
            (rules.action(), principals)
        })
        .collect()
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

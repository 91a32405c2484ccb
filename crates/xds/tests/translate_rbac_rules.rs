//! MeshTrafficPermission `rules` (Kuma's experimental SPIFFE ID matches)
//! on a sidecar's inbound: `Exact` and `Prefix` matches become principals,
//! `deny` becomes a DENY filter before the ALLOW filter, the rules of every
//! permission selecting the inbound combine, `from[]` permissions are
//! ignored on an inbound that rules decide, and `proxyTypes: [Gateway]`
//! selects no sidecar inbound.

mod translate_fixtures;

use envoy_types::pb::envoy::config::rbac::v3::rbac::Action;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use meshlink_api::Resource;
use meshlink_xds::translate::{ClientKind, MeshView, translate};
use serde_json::{Value, json};
use translate_fixtures::{MESH, dataplane, mesh, permission, proxy, rbac_of_listener};

const WEB1: &str = "inbound:10.0.0.1:8080";
const BACKEND: &str = "spiffe://example.org/backend";
const TRUST_DOMAIN: &str = "spiffe://example.org";

fn resource(v: Value) -> Resource {
    Resource::from_json(v.clone()).unwrap_or_else(|e| panic!("{v}: {e:?}"))
}

/// A permission named `name` on `target` with one rule `default`.
fn rules(name: &str, target: Value, default: Value) -> Resource {
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshTrafficPermission",
        "metadata": {"name": name, "mesh": MESH},
        "spec": {"targetRef": target, "rules": [{"default": default}]},
    }))
}

fn exact(id: &str) -> Value {
    json!({"spiffeID": {"type": "Exact", "value": id}})
}

fn prefix(id: &str) -> Value {
    json!({"spiffeID": {"type": "Prefix", "value": id}})
}

/// web-1's inbound RBAC under `permissions`.
fn web1(permissions: Vec<Resource>) -> Vec<(Action, Vec<MatchPattern>)> {
    let view = MeshView::new(
        mesh(true),
        vec![
            dataplane("web-1", "10.0.0.1", "web", 8080, &[]),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        permissions,
    );
    rbac_of_listener(&translate(&proxy("web-1", ClientKind::Envoy), &view), WEB1)
}

fn mesh_target() -> Value {
    json!({"kind": "Mesh"})
}

#[test]
fn exact_and_prefix_matches_become_principals() {
    let rbac = web1(vec![rules(
        "r",
        mesh_target(),
        json!({"allow": [exact(BACKEND), prefix("spiffe://partner.org")]}),
    )]);
    assert_eq!(
        rbac,
        vec![(
            Action::Allow,
            vec![
                MatchPattern::Prefix("spiffe://partner.org".into()),
                MatchPattern::Exact(BACKEND.into()),
            ]
        )]
    );
}

#[test]
fn deny_comes_first_and_allow_with_shadow_deny_lets_in() {
    let rbac = web1(vec![rules(
        "r",
        mesh_target(),
        json!({
            "deny": [exact(BACKEND)],
            "allowWithShadowDeny": [prefix(TRUST_DOMAIN)],
        }),
    )]);
    assert_eq!(
        rbac,
        vec![
            (Action::Deny, vec![MatchPattern::Exact(BACKEND.into())]),
            (
                Action::Allow,
                vec![MatchPattern::Prefix(TRUST_DOMAIN.into())]
            ),
        ]
    );
}

#[test]
fn rules_of_every_selecting_permission_combine_and_from_policies_step_aside() {
    let rbac = web1(vec![
        // A from[] Allow for backend, as specific as it gets: ignored once
        // rules decide the inbound.
        permission("from-allow", "web", "backend", "Allow"),
        rules(
            "allow-partner",
            json!({"kind": "MeshService", "name": "web"}),
            json!({"allow": [prefix("spiffe://partner.org")]}),
        ),
        rules(
            "deny-partner-intern",
            mesh_target(),
            json!({"deny": [exact("spiffe://partner.org/intern")]}),
        ),
    ]);
    assert_eq!(
        rbac,
        vec![
            (
                Action::Deny,
                vec![MatchPattern::Exact("spiffe://partner.org/intern".into())]
            ),
            (
                Action::Allow,
                vec![MatchPattern::Prefix("spiffe://partner.org".into())]
            ),
        ],
        "backend is no longer allowed: from[] does not apply where rules decide"
    );
}

#[test]
fn rules_that_select_another_inbound_leave_from_policies_in_charge() {
    let rbac = web1(vec![
        permission("from-allow", "web", "backend", "Allow"),
        rules(
            "backend-only",
            json!({"kind": "MeshService", "name": "backend"}),
            json!({"allow": [prefix(TRUST_DOMAIN)]}),
        ),
    ]);
    assert_eq!(
        rbac,
        vec![(Action::Allow, vec![MatchPattern::Exact(BACKEND.into())])]
    );
}

#[test]
fn proxy_types_without_sidecar_select_no_inbound() {
    let allow_all = |types: Value| {
        let mut target = mesh_target();
        target["proxyTypes"] = types;
        rules("all", target, json!({"allow": [prefix(TRUST_DOMAIN)]}))
    };
    assert_eq!(
        web1(vec![allow_all(json!(["Gateway"]))]),
        vec![(Action::Allow, vec![])],
        "a gateway-only policy leaves web-1 on default deny"
    );
    assert_eq!(
        web1(vec![allow_all(json!(["Sidecar", "Gateway"]))]),
        vec![(
            Action::Allow,
            vec![MatchPattern::Prefix(TRUST_DOMAIN.into())]
        )]
    );
}

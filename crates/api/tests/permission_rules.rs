//! MeshTrafficPermission `rules` (Kuma's SPIFFE ID matches) and top-level
//! `targetRef.proxyTypes`: accepted in Kuma's shapes, each misuse refused
//! at its field path.

use meshlink_api::{FieldError, Resource};
use serde_json::{Value, json};

fn errors(spec: Value) -> Vec<String> {
    let doc = json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshTrafficPermission",
        "metadata": {"name": "p", "mesh": "default"},
        "spec": spec,
    });
    match Resource::from_json(doc) {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(FieldError::to_string).collect(),
    }
}

fn rule(default: Value) -> Value {
    json!({"targetRef": {"kind": "Mesh"}, "rules": [{"default": default}]})
}

fn id(type_: &str, value: &str) -> Value {
    json!({"spiffeID": {"type": type_, "value": value}})
}

const ALLOW_WEB: &str = "spiffe://default/web";

#[test]
fn rules_with_exact_and_prefix_matches_are_accepted() {
    assert!(
        errors(rule(json!({
            "allow": [id("Exact", ALLOW_WEB)],
            "allowWithShadowDeny": [id("Prefix", "spiffe://partner.org")],
            "deny": [id("Exact", "spiffe://default/intern")],
        })))
        .is_empty()
    );
    assert!(
        errors(json!({"rules": [{"default": {"deny": [id("Prefix", "spiffe://x")]}}]})).is_empty()
    );
}

#[test]
fn rules_and_from_together_or_neither_are_refused() {
    let mut both = rule(json!({"allow": [id("Exact", ALLOW_WEB)]}));
    both["from"] = json!([{"targetRef": {"kind": "Mesh"}, "default": {"action": "Allow"}}]);
    assert_eq!(
        errors(both),
        vec![
            "spec.from: from must be empty when rules is defined (as in Kuma): a policy \
             matches clients by from[].targetRef or by rules[] SPIFFE IDs; split it in two"
        ]
    );
    let neither = errors(json!({"targetRef": {"kind": "Mesh"}}));
    assert_eq!(neither.len(), 1, "{neither:?}");
    assert!(
        neither[0].starts_with("spec.from: at least one rule is required")
            && neither[0].contains("rules"),
        "{neither:?}"
    );
}

#[test]
fn each_rule_and_match_is_checked_at_its_path() {
    assert_eq!(
        errors(rule(json!({}))),
        vec![
            "spec.rules[0].default: at least one of allow, allowWithShadowDeny or deny is \
             required, e.g. allow: [{spiffeID: {type: Exact, value: spiffe://default/web}}]"
        ]
    );
    assert_eq!(
        errors(rule(json!({"allow": [id("Regex", ALLOW_WEB)]}))),
        vec![
            "spec.rules[0].default.allow[0].spiffeID.type: unknown spiffeID match type \
             \"Regex\"; expected Exact or Prefix"
        ]
    );
    let bad = errors(rule(json!({"deny": [id("Exact", "web")]})));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].starts_with(
            "spec.rules[0].default.deny[0].spiffeID.value: \"web\" must be a valid SPIFFE ID \
             (as in Kuma): it must start with spiffe://"
        ),
        "{bad:?}"
    );
    assert_eq!(
        errors(rule(json!({"allow": [{}]}))),
        vec![
            "spec.rules[0].default.allow[0].spiffeID: required: the client's SPIFFE ID to \
             match, e.g. {type: Exact, value: spiffe://default/web}"
        ]
    );
    assert_eq!(
        errors(rule(
            json!({"allowWithShadowDeny": [{"sni": {"type": "Exact", "value": "web.mesh"}}]})
        )),
        vec![
            "spec.rules[0].default.allowWithShadowDeny[0].sni: not supported: meshlink-proxy \
             authorizes a connection by the client's SPIFFE ID, not the TLS server name; match \
             with spiffeID instead"
        ]
    );
    let unknown = errors(rule(
        json!({"allow": [id("Exact", ALLOW_WEB)], "action": "Allow"}),
    ));
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(
        unknown[0].starts_with("spec.rules[0].default.action: unknown field `action`"),
        "{unknown:?}"
    );
}

#[test]
fn proxy_types_are_checked_as_kuma_does() {
    let with = |target: Value| {
        errors(
            json!({"targetRef": target, "from": [{"targetRef": {"kind": "Mesh"},
            "default": {"action": "Allow"}}]}),
        )
    };
    assert!(with(json!({"kind": "Mesh", "proxyTypes": ["Sidecar"]})).is_empty());
    assert!(
        with(
            json!({"kind": "MeshSubset", "tags": {"a": "b"}, "proxyTypes": ["Sidecar", "Gateway"]})
        )
        .is_empty()
    );
    assert_eq!(
        with(json!({"kind": "Mesh", "proxyTypes": []})),
        vec![
            "spec.targetRef.proxyTypes: must be left out or have at least one element (as in \
             Kuma): Sidecar or Gateway"
        ]
    );
    assert_eq!(
        with(json!({"kind": "Mesh", "proxyTypes": ["Ingress"]})),
        vec![
            "spec.targetRef.proxyTypes[0]: unknown proxy type \"Ingress\"; expected Sidecar or Gateway"
        ]
    );
    assert_eq!(
        with(json!({"kind": "MeshService", "name": "web", "proxyTypes": ["Sidecar"]})),
        vec![
            "spec.targetRef.proxyTypes: not allowed when kind is MeshService (as in Kuma); only \
             Mesh and MeshSubset"
        ]
    );
    assert_eq!(
        errors(
            json!({"from": [{"targetRef": {"kind": "Mesh", "proxyTypes": ["Sidecar"]},
            "default": {"action": "Allow"}}]})
        ),
        vec![
            "spec.from[0].targetRef.proxyTypes: not allowed in from[]: a client is matched by \
             its identity; proxyTypes selects the proxies a policy is installed on \
             (spec.targetRef)"
        ]
    );
}

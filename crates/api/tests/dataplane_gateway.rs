//! Kuma's Dataplane `networking.gateway` and inbound `address`: accepted
//! in Kuma's shapes, each misuse refused at its field path (as Kuma 2.14
//! refuses it, plus the gateway service tag meshlink needs for identity),
//! and a `BUILTIN` gateway stored with a warning naming what is not served.

use meshlink_api::{FieldError, Resource, parse_documents};
use serde_json::{Value, json};

fn errors_of(networking: Value) -> Vec<String> {
    let doc = json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "edge-1", "mesh": "default"},
        "spec": {"networking": networking},
    });
    match Resource::from_json(doc) {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(FieldError::to_string).collect(),
    }
}

/// A gateway Dataplane with `gateway` and `extra` networking fields.
fn gateway(gateway: Value, extra: Value) -> Vec<String> {
    let mut n = json!({"address": "10.0.0.9", "gateway": gateway});
    for (k, v) in extra.as_object().unwrap() {
        n[k] = v.clone();
    }
    errors_of(n)
}

/// A sidecar Dataplane whose only inbound is `inbound`.
fn inbound(inbound: Value) -> Vec<String> {
    errors_of(json!({"address": "10.0.0.1", "inbound": [inbound]}))
}

const EDGE: &str = "edge";

#[test]
fn gateways_of_either_type_are_accepted_and_stored_as_written() {
    let tags = json!({"kuma.io/service": EDGE, "kuma.io/protocol": "tcp"});
    let outbound = json!({"outbound": [{"port": 9001, "tags": {"kuma.io/service": "backend"}}]});
    assert!(gateway(json!({"tags": tags}), outbound.clone()).is_empty());
    assert!(gateway(json!({"type": "DELEGATED", "tags": tags}), outbound).is_empty());
    assert!(gateway(json!({"type": "BUILTIN", "tags": tags}), json!({})).is_empty());

    let doc = "type: Dataplane\nname: edge-1\nmesh: default\nnetworking:\n  address: 10.0.0.9\n  \
               gateway:\n    tags:\n      kuma.io/service: edge\n";
    let r = parse_documents(doc).remove(0).outcome.expect("accepted");
    let dp = r.spec.as_dataplane().unwrap();
    assert_eq!(
        dp.services(),
        vec![EDGE],
        "the gateway's service is its identity"
    );
    assert_eq!(
        dp.gateway().unwrap().type_,
        None,
        "type is stored as written"
    );
    assert!(!r.to_yaml().contains("type: DELEGATED"), "{}", r.to_yaml());
}

#[test]
fn a_gateway_with_inbounds_or_a_builtin_one_with_outbounds_is_refused_as_kuma_does() {
    let tags = json!({"kuma.io/service": EDGE});
    let inbounds = json!({"inbound": [{"port": 8080, "tags": {"kuma.io/service": EDGE}}]});
    assert_eq!(
        gateway(json!({"tags": tags}), inbounds.clone()),
        vec![
            "spec.networking.inbound: inbound cannot be defined for delegated gateways (as in \
             Kuma): a gateway receives traffic that is not proxied by the mesh; remove the \
             inbounds or the gateway"
        ]
    );
    let builtin = gateway(json!({"type": "BUILTIN", "tags": tags}), inbounds);
    assert_eq!(builtin.len(), 1, "{builtin:?}");
    assert!(
        builtin[0].starts_with("spec.networking.inbound: inbound cannot be defined for builtin"),
        "{builtin:?}"
    );
    assert_eq!(
        gateway(
            json!({"type": "BUILTIN", "tags": tags}),
            json!({"outbound": [{"port": 9001, "tags": {"kuma.io/service": "backend"}}]})
        ),
        vec![
            "spec.networking.outbound: outbound cannot be defined for builtin gateways (as in \
             Kuma): a builtin gateway's destinations come from its routes"
        ]
    );
}

#[test]
fn a_gateway_needs_its_service_tag_a_known_type_and_tcp() {
    assert_eq!(
        gateway(json!({"tags": {"team": "edge"}}), json!({})),
        vec![
            "spec.networking.gateway.tags: missing the service tag: add kuma.io/service: \
             <service name>"
        ]
    );
    assert_eq!(
        gateway(json!({}), json!({})),
        vec![
            "spec.networking.gateway.tags: missing the service tag: add kuma.io/service: \
             <service name>"
        ]
    );
    assert_eq!(
        gateway(
            json!({"type": "INGRESS", "tags": {"kuma.io/service": EDGE}}),
            json!({})
        ),
        vec![
            "spec.networking.gateway.type: unknown gateway type \"INGRESS\"; expected \
             DELEGATED or BUILTIN"
        ]
    );
    assert_eq!(
        gateway(
            json!({"tags": {"kuma.io/service": EDGE, "kuma.io/protocol": "http"}}),
            json!({})
        ),
        vec![
            "spec.networking.gateway.tags[\"kuma.io/protocol\"]: a gateway's protocol must be \
             tcp (as in Kuma), got \"http\"; remove the tag or set it to tcp"
        ]
    );
    let unknown = gateway(
        json!({"tags": {"kuma.io/service": EDGE}, "listeners": []}),
        json!({}),
    );
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(
        unknown[0].starts_with("spec.networking.gateway.listeners: unknown field `listeners`"),
        "{unknown:?}"
    );
}

#[test]
fn a_dataplane_without_inbounds_or_gateway_is_still_refused() {
    let errs = errors_of(json!({"address": "10.0.0.1"}));
    assert_eq!(
        errs,
        vec![
            "spec.networking.inbound: at least one inbound is required (or a \
             networking.gateway): a Dataplane's identity is the service of its inbounds, or \
             of its gateway's tags"
        ]
    );
}

#[test]
fn a_builtin_gateway_is_accepted_with_a_warning_naming_what_is_not_served() {
    for (doc, path) in [
        (
            "type: Dataplane\nname: edge-1\nmesh: default\nnetworking:\n  address: 10.0.0.9\n  \
             gateway:\n    type: BUILTIN\n    tags:\n      kuma.io/service: edge\n",
            "networking.gateway.type",
        ),
        (
            "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {name: edge-1, mesh: \
             default}\nspec:\n  networking:\n    address: 10.0.0.9\n    gateway: {type: \
             BUILTIN, tags: {kuma.io/service: edge}}\n",
            "spec.networking.gateway.type",
        ),
    ] {
        let d = parse_documents(doc).remove(0);
        assert!(d.outcome.is_ok(), "{:?}", d.outcome);
        assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
        let w = &d.warnings[0];
        assert!(
            w.starts_with(&format!("{path}: BUILTIN gateway accepted")),
            "{w}"
        );
        assert!(w.contains("MeshGateway"), "{w}");
    }
    let delegated = "type: Dataplane\nname: edge-1\nmesh: default\nnetworking:\n  address: \
                     10.0.0.9\n  gateway:\n    type: DELEGATED\n    tags:\n      \
                     kuma.io/service: edge\n";
    assert!(parse_documents(delegated).remove(0).warnings.is_empty());
}

#[test]
fn an_inbound_address_is_an_ip_that_can_be_dialled_and_not_the_app_itself() {
    let svc = json!({"kuma.io/service": "web"});
    assert!(inbound(json!({"port": 8080, "address": "10.0.1.7", "tags": svc})).is_empty());
    assert!(inbound(json!({"port": 8080, "address": "fd00::7", "tags": svc})).is_empty());
    assert!(
        inbound(json!({"port": 8080, "address": "127.0.0.5", "servicePort": 8081, "tags": svc}))
            .is_empty()
    );
    assert_eq!(
        inbound(json!({"port": 8080, "address": "web.local", "tags": svc})),
        vec![
            "spec.networking.inbound[0].address: \"web.local\" is not an IP address: the \
             inbound listens on it and other proxies dial it, so it must be an IP (e.g. \
             10.0.0.5), as in Kuma; a hostname is not resolved"
        ]
    );
    assert_eq!(
        inbound(json!({"port": 8080, "address": "0.0.0.0", "tags": svc})),
        vec![
            "spec.networking.inbound[0].address: 0.0.0.0 cannot be dialled: other proxies \
             reach this inbound at its address; give the workload's own IP (or remove address \
             to use networking.address)"
        ]
    );
    let looped = inbound(json!({"port": 8080, "address": "127.0.0.1", "tags": svc}));
    assert_eq!(looped.len(), 1, "{looped:?}");
    assert!(
        looped[0].starts_with(
            "spec.networking.inbound[0].serviceAddress: serviceAddress and servicePort have to \
             differ from address and port"
        ),
        "{looped:?}"
    );
}

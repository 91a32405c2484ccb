//! Kuma's Dataplane networking fields (inbound `name`, `serviceAddress`, `admin.port`) are accepted
//! in every importer form and each misuse is refused at its field path.

use meshlink_api::{FieldError, Resource};
use serde_json::{Value, json};

/// The errors of a canonical Dataplane whose only inbound is `inbound`.
fn errors(inbound: Value) -> Vec<String> {
    errors_of(json!([inbound]))
}

fn errors_of(inbounds: Value) -> Vec<String> {
    errors_of_networking(json!({"address": "10.0.0.1", "inbound": inbounds}))
}

/// The errors of a canonical Dataplane with `networking`.
fn errors_of_networking(networking: Value) -> Vec<String> {
    let doc = json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "web-1", "mesh": "default"},
        "spec": {"networking": networking},
    });
    match Resource::from_json(doc) {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(FieldError::to_string).collect(),
    }
}

fn inbound(port: u16, extra: Value) -> Value {
    let mut v = json!({"port": port, "tags": {"kuma.io/service": "web"}});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn inbound_name_is_a_dns_label_unique_in_the_dataplane() {
    assert!(errors(inbound(8080, json!({"name": "http"}))).is_empty());
    assert!(errors(inbound(8080, json!({"name": "main-http2"}))).is_empty());
    let dns = "a DNS label (lowercase letters, digits and '-', starting and ending with a \
               letter or digit, at most 63 characters)";
    assert_eq!(
        errors(inbound(8080, json!({"name": "Http_1"}))),
        vec![format!(
            "spec.networking.inbound[0].name: invalid inbound name \"Http_1\": {dns}"
        )]
    );
    assert_eq!(
        errors(inbound(8080, json!({"name": ""}))),
        vec![format!(
            "spec.networking.inbound[0].name: invalid inbound name \"\": {dns}"
        )]
    );
    assert_eq!(
        errors(inbound(8080, json!({"name": "8080"}))),
        vec![
            "spec.networking.inbound[0].name: invalid inbound name \"8080\": it must not be \
             all digits, which a targetRef sectionName reads as a port"
        ]
    );
    assert_eq!(
        errors_of(json!([
            inbound(8080, json!({"name": "http"})),
            inbound(9090, json!({"name": "http"})),
        ])),
        vec!["spec.networking.inbound[1].name: duplicate inbound name \"http\" (also inbound[0])"]
    );
}

#[test]
fn service_address_is_an_ip_address() {
    assert!(errors(inbound(8080, json!({"serviceAddress": "127.0.0.2"}))).is_empty());
    assert!(errors(inbound(8080, json!({"serviceAddress": "::1"}))).is_empty());
    assert_eq!(
        errors(inbound(8080, json!({"serviceAddress": "app.local"}))),
        vec![
            "spec.networking.inbound[0].serviceAddress: \"app.local\" is not an IP address: \
             the sidecar forwards to the application at serviceAddress:servicePort, which must \
             be an IP (e.g. 127.0.0.1), as in Kuma; a hostname is not resolved"
        ]
    );
}

#[test]
fn admin_port_is_a_port() {
    let with_admin = |admin: Value| {
        let doc = json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "Dataplane",
            "metadata": {"name": "web-1", "mesh": "default"},
            "spec": {"networking": {
                "address": "10.0.0.1",
                "admin": admin,
                "inbound": [inbound(8080, json!({}))],
            }},
        });
        match Resource::from_json(doc) {
            Ok(_) => Vec::new(),
            Err(errs) => errs.iter().map(FieldError::to_string).collect::<Vec<_>>(),
        }
    };
    assert!(with_admin(json!({"port": 9901})).is_empty());
    let errs = with_admin(json!({"port": 0}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("spec.networking.admin.port: "),
        "{errs:?}"
    );
    let errs = with_admin(json!({"port": 9901, "address": "0.0.0.0"}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("admin"), "{errs:?}");
}

/// The errors of a Dataplane with one inbound on 8080 and `tp` as its
/// `transparentProxying`.
fn tp_errors(tp: Value) -> Vec<String> {
    errors_of_networking(json!({
        "address": "10.0.0.1",
        "inbound": [inbound(8080, json!({}))],
        "transparentProxying": tp,
    }))
}

#[test]
fn transparent_proxying_takes_kumas_fields_and_refuses_clashing_ports() {
    assert!(tp_errors(json!({})).is_empty());
    assert!(
        tp_errors(json!({
            "redirectPortInbound": 15006, "redirectPortOutbound": 15001,
            "ipFamilyMode": "IPv4", "reachableServices": ["backend", "redis"],
        }))
        .is_empty()
    );
    assert_eq!(
        tp_errors(json!({"ipFamilyMode": "ipv6"})),
        vec![
            "spec.networking.transparentProxying.ipFamilyMode: unknown ipFamilyMode \"ipv6\"; \
             expected DualStack or IPv4"
        ]
    );
    assert_eq!(
        tp_errors(json!({"redirectPortInbound": 15001})),
        vec![
            "spec.networking.transparentProxying.redirectPortOutbound: the inbound and outbound \
             capture ports are both 15001: redirected connections could not be told apart; use \
             two ports (Kuma's defaults are 15006 inbound and 15001 outbound)"
        ]
    );
    // A capture port may equal an inbound's port (Kuma's own example
    // does): inbound listeners do not bind behind a transparent proxy.
    assert!(tp_errors(json!({"redirectPortOutbound": 8080})).is_empty());
    assert_eq!(
        tp_errors(json!({"reachableServices": [""]})),
        vec![
            "spec.networking.transparentProxying.reachableServices[0]: an empty service name; \
             name a kuma.io/service or a MeshService"
        ]
    );
    let unknown = tp_errors(json!({"redirectPortOutbond": 15001}));
    assert_eq!(unknown.len(), 1);
    assert!(
        unknown[0].contains("redirectPortOutbond"),
        "the unknown field is named: {unknown:?}"
    );
}

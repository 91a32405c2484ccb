//! Kuma's Dataplane networking fields (inbound `name`, `serviceAddress`, `admin.port`) are accepted
//! in every importer form and each misuse is refused at its field path.

use meshlink_api::{FieldError, Resource};
use serde_json::{Value, json};

/// The errors of a canonical Dataplane whose only inbound is `inbound`.
fn errors(inbound: Value) -> Vec<String> {
    errors_of(json!([inbound]))
}

fn errors_of(inbounds: Value) -> Vec<String> {
    let doc = json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "web-1", "mesh": "default"},
        "spec": {"networking": {"address": "10.0.0.1", "inbound": inbounds}},
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

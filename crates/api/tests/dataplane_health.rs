//! Kuma's inbound `health` (`{ready: bool}`) is taken as Kuma writes it, in
//! every form, kept on apply, and anything else under it is refused at its
//! path. `ready: false` (and only that) makes an inbound not ready.

use meshlink_api::{Resource, parse_documents};
use serde_json::json;

mod support;
use support::{errors, ok};

const UNIVERSAL: &str = r#"type: Dataplane
name: backend-1
mesh: default
networking:
  address: 127.0.0.1
  inbound:
    - port: 15000
      servicePort: 8080
      health:
        ready: false
      tags:
        kuma.io/service: backend
    - port: 15001
      health: {ready: true}
      tags:
        kuma.io/service: admin
"#;

#[test]
fn kuma_universal_health_is_kept_and_read() {
    let docs = parse_documents(UNIVERSAL);
    let doc = &docs[0];
    assert!(doc.warnings.is_empty(), "{:?}", doc.warnings);
    let json = ok(doc);
    assert_eq!(
        json["spec"]["networking"]["inbound"][0]["health"],
        json!({"ready": false})
    );
    let r = doc.outcome.as_ref().expect("valid");
    let spec = r.spec.as_dataplane().expect("a Dataplane");
    let ready: Vec<bool> = spec
        .networking
        .inbound
        .iter()
        .map(|i| i.is_ready())
        .collect();
    assert_eq!(ready, [false, true]);
}

#[test]
fn kuma_kubernetes_health_is_kept() {
    let docs = parse_documents(
        r#"apiVersion: kuma.io/v1alpha1
kind: Dataplane
metadata: {name: backend-1}
mesh: default
spec:
  networking:
    address: 10.0.0.1
    inbound:
      - port: 15000
        health: {ready: false}
        tags: {kuma.io/service: backend}
"#,
    );
    let json = ok(&docs[0]);
    assert_eq!(
        json["spec"]["networking"]["inbound"][0]["health"],
        json!({"ready": false}),
        "{json}"
    );
}

#[test]
fn unset_health_is_ready_and_stays_unset() {
    let r = Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "web-1", "mesh": "default"},
        "spec": {"networking": {"address": "10.0.0.1",
            "inbound": [{"port": 80, "tags": {"kuma.io/service": "web"}}]}},
    }))
    .expect("valid");
    let spec = r.spec.as_dataplane().expect("a Dataplane");
    assert!(spec.networking.inbound[0].is_ready());
    assert!(
        r.to_json()["spec"]["networking"]["inbound"][0]
            .get("health")
            .is_none()
    );
}

#[test]
fn unknown_fields_under_health_are_refused_at_their_path() {
    let errs = errors(
        r#"apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: web-1, mesh: default}
spec:
  networking:
    address: 10.0.0.1
    inbound:
      - port: 80
        health: {ready: false, live: true}
        tags: {kuma.io/service: web}
"#,
    );
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("spec.networking.inbound[0].health") && errs[0].contains("live"),
        "{errs:?}"
    );
}

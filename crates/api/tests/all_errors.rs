//! Out-of-range ports and unknown enum values are reported together with
//! every other error of their document, at the paths the user wrote, without
//! follow-up errors that only restate them.

use meshlink_api::spec::{Action, CaType, Port, Spec, TargetRefKind};
use meshlink_api::{Resource, parse_documents};
use serde_json::json;

mod support;
use support::errors;

/// Every error of every document in `text`, as the CLI prints them for `file`.
fn located(file: &str, text: &str) -> Vec<String> {
    parse_documents(text)
        .iter()
        .flat_map(|d| {
            let errs = d.outcome.as_ref().err().cloned().unwrap_or_default();
            errs.into_iter().map(move |e| e.located(file, d.index))
        })
        .collect()
}

#[test]
fn unknown_ca_type_does_not_hide_other_mesh_errors() {
    let text = r#"
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: default}
spec:
  mtls:
    enabledBackend: ca-1
    backends:
      - {name: ca-1, type: vault}
      - {name: ca-1, type: builtin, dpCert: {rotation: {expiration: soon}}}
"#;
    assert_eq!(
        errors(text),
        [
            r#"spec.mtls.backends[0].type: unknown CA type "vault"; expected builtin or provided"#,
            r#"spec.mtls.backends[1].name: duplicate backend name "ca-1" (also backends[0])"#,
            r#"spec.mtls.backends[1].dpCert.rotation.expiration: unparsable duration "soon" (e.g. 24h, 30m, 10s)"#,
        ]
    );
}

#[test]
fn unknown_ca_type_gets_no_conf_follow_up_errors() {
    // `cert` is not allowed for builtin and `key` is required for provided:
    // neither applies while the type itself is unknown.
    let text = r#"
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: m}
spec:
  mtls:
    backends:
      - {name: v, type: Provided, conf: {cert: {file: /ca.pem}, caCert: {expiration: 1y}}}
"#;
    assert_eq!(
        errors(text),
        [r#"spec.mtls.backends[0].type: unknown CA type "Provided"; expected builtin or provided"#]
    );
}

#[test]
fn out_of_range_port_does_not_hide_other_dataplane_errors() {
    let text = r#"
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: web-1, mesh: default}
spec:
  networking:
    address: 127.0.0.1
    inbound:
      - {port: 70000, servicePort: 0, tags: {version: v1}}
      - {port: 70000, tags: {kuma.io/service: web}}
    outbound:
      - {port: -1, tags: {kuma.io/service: db}}
"#;
    assert_eq!(
        errors(text),
        [
            "spec.networking.inbound[0].port: 70000 is out of range 1-65535",
            "spec.networking.inbound[0].servicePort: 0 is out of range 1-65535",
            "spec.networking.inbound[0].tags: missing the service tag: add kuma.io/service: <service name>",
            // Out of range, but not also reported as a duplicate of inbound[0].
            "spec.networking.inbound[1].port: 70000 is out of range 1-65535",
            "spec.networking.outbound[0].port: -1 is out of range 1-65535",
        ]
    );
}

#[test]
fn unknown_enums_in_a_traffic_permission_are_reported_with_other_errors() {
    let text = r#"
apiVersion: meshlink.dev/v1alpha1
kind: MeshTrafficPermission
metadata: {name: p, mesh: default}
spec:
  targetRef: {kind: MeshGateway, name: web, tags: {version: v1}}
  from:
    - targetRef: {kind: MeshService}
      default: {action: allow}
    - targetRef: {kind: Mesh}
      default: {action: Deny}
"#;
    assert_eq!(
        errors(text),
        [
            // No "name/tags not allowed" follow-ups for the unknown kind.
            r#"spec.targetRef.kind: unknown targetRef kind "MeshGateway"; expected Mesh, Dataplane, MeshSubset or MeshService"#,
            "spec.from[0].targetRef.name: required when kind is MeshService: the service name",
            r#"spec.from[0].default.action: unknown action "allow"; expected Allow, Deny or AllowWithShadowDeny"#,
        ]
    );
}

#[test]
fn multi_site_kinds_report_ports_and_enums_with_other_errors() {
    let text = r#"
apiVersion: meshlink.dev/v1alpha1
kind: RouterAccess
metadata: {name: ra}
spec:
  roles:
    - {name: interior, port: 0}
    - {name: interior, port: 0}
    - {name: edge, port: 45671}
    - {name: edge, port: 45671}
  bindHost: "not a host"
---
apiVersion: meshlink.dev/v1alpha1
kind: Connector
metadata: {name: c}
spec: {routingKey: "a b", host: h, port: 65536, type: udp}
---
apiVersion: meshlink.dev/v1alpha1
kind: Link
metadata: {name: l}
spec:
  endpoints: [{name: inter-router, host: h, port: 100000}]
  cost: 0
"#;
    let unknown_role = r#"unknown router role "interior"; expected inter-router or edge"#;
    assert_eq!(
        located("multi.yaml", text),
        [
            format!("multi.yaml[0] spec.roles[0].name: {unknown_role}"),
            "multi.yaml[0] spec.roles[0].port: 0 is out of range 1-65535".to_string(),
            format!("multi.yaml[0] spec.roles[1].name: {unknown_role}"),
            "multi.yaml[0] spec.roles[1].port: 0 is out of range 1-65535".to_string(),
            "multi.yaml[0] spec.roles[3].name: duplicate role edge (also roles[2])".to_string(),
            "multi.yaml[0] spec.roles[3].port: port 45671 is already used by roles[2]".to_string(),
            r#"multi.yaml[0] spec.bindHost: "not a host" is neither an IP address nor a valid hostname"#.to_string(),
            r#"multi.yaml[1] spec.routingKey: invalid routing key "a b": use up to 253 letters, digits, '-', '_', '.', ':' or '/'"#.to_string(),
            "multi.yaml[1] spec.port: 65536 is out of range 1-65535".to_string(),
            r#"multi.yaml[1] spec.type: unknown type "udp"; expected tcp"#.to_string(),
            "multi.yaml[2] spec.endpoints[0].port: 100000 is out of range 1-65535".to_string(),
            "multi.yaml[2] spec.cost: must be at least 1 (got 0)".to_string(),
        ]
    );
}

#[test]
fn the_e2e_invalid_fixture_reports_every_listed_error() {
    // The documents of tests/e2e/fixtures/invalid.yaml.
    let text = r#"
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata:
  name: default
spec:
  mtls:
    enabledBackend: ca-1
    backends:
      - name: ca-1
        type: vault
      - name: ca-1
        type: builtin
        dpCert:
          rotation:
            expiration: soon
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata:
  name: web-1
  mesh: default
spec:
  networking:
    address: 127.0.0.1
    inbound:
      - port: 70000
        tags:
          version: v1
---
apiVersion: meshlink.dev/v1alpha1
kind: AccessGrant
metadata:
  name: grant
spec:
  redemptionsAllowed: -1
  expirationWindow: 1h
"#;
    let paths: Vec<String> = located("invalid.yaml", text)
        .into_iter()
        .map(|e| e.split(": ").next().unwrap().to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "invalid.yaml[0] spec.mtls.backends[0].type",
            "invalid.yaml[0] spec.mtls.backends[1].name",
            "invalid.yaml[0] spec.mtls.backends[1].dpCert.rotation.expiration",
            "invalid.yaml[1] spec.networking.inbound[0].port",
            "invalid.yaml[1] spec.networking.inbound[0].tags",
            "invalid.yaml[2] spec.redemptionsAllowed",
        ]
    );
}

#[test]
fn imported_documents_report_every_error_at_the_users_paths() {
    let kuma_universal = r#"
type: Mesh
name: default
mtls:
  enabledBackend: ca-2
  backends:
    - {name: ca-1, type: vault}
    - {name: ca-1, type: builtin, dpCert: {rotation: {expiration: soon}}}
---
type: Dataplane
name: dp
mesh: default
networking:
  address: 1.2.3.4
  inbound: [{port: 70000, tags: {version: v1}}]
"#;
    assert_eq!(
        errors(kuma_universal),
        [
            r#"mtls.backends[0].type: unknown CA type "vault"; expected builtin or provided"#,
            r#"mtls.backends[1].name: duplicate backend name "ca-1" (also backends[0])"#,
            r#"mtls.backends[1].dpCert.rotation.expiration: unparsable duration "soon" (e.g. 24h, 30m, 10s)"#,
            r#"mtls.enabledBackend: "ca-2" names no backend in spec.mtls.backends; defined backends: ca-1"#,
            "networking.inbound[0].port: 70000 is out of range 1-65535",
            "networking.inbound[0].tags: missing the service tag: add kuma.io/service: <service name>",
        ]
    );
    let kuma_kubernetes = r#"
apiVersion: kuma.io/v1alpha1
kind: MeshTrafficPermission
mesh: default
metadata: {name: p}
spec:
  targetRef: {kind: Dataplane, tags: {app: web}}
  from: [{targetRef: {kind: MeshSubset}, default: {action: allow}}]
"#;
    assert_eq!(
        errors(kuma_kubernetes),
        [
            "spec.targetRef.tags: not allowed when kind is Dataplane; a Dataplane is selected by labels (use labels:)",
            "spec.from[0].targetRef.tags: required when kind is MeshSubset: the tags to match",
            r#"spec.from[0].default.action: unknown action "allow"; expected Allow, Deny or AllowWithShadowDeny"#,
        ]
    );
    let skupper = r#"
apiVersion: skupper.io/v2alpha1
kind: RouterAccess
metadata: {name: ra}
spec:
  roles: [{name: interior, port: "70000"}, {name: edge, port: "45671"}]
---
apiVersion: skupper.io/v1alpha1
kind: Listener
metadata: {name: l}
spec: {routingKey: k, host: "bad host", port: "0", type: http}
"#;
    assert_eq!(
        errors(skupper),
        [
            r#"spec.roles[0].name: unknown router role "interior"; expected inter-router or edge"#,
            "spec.roles[0].port: 70000 is out of range 1-65535",
            r#"spec.host: "bad host" is neither an IP address nor a valid hostname"#,
            "spec.port: 0 is out of range 1-65535",
            r#"spec.type: unknown type "http"; expected tcp"#,
        ]
    );
}

#[test]
fn non_integer_ports_and_non_string_enums_stay_structural() {
    let text = r#"
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: m}
spec: {mtls: {backends: [{name: a, type: 1}]}}
---
apiVersion: meshlink.dev/v1alpha1
kind: Listener
metadata: {name: l}
spec: {routingKey: k, host: h, port: 80.5}
"#;
    let errs = errors(text);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].starts_with(
            "spec.mtls.backends[0].type: invalid type: integer `1`, expected a string"
        ),
        "{errs:?}"
    );
    assert!(
        errs[1].starts_with("spec.port: invalid type: floating point `80.5`, expected i64"),
        "{errs:?}"
    );
}

#[test]
fn unvalidated_parse_keeps_values_exactly_as_written() {
    let doc = json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "dp", "mesh": "default"},
        "spec": {"networking": {"address": "1.2.3.4",
            "inbound": [{"port": 70000, "servicePort": 8080, "tags": {"kuma.io/service": "web"}}]}},
    });
    let r = Resource::from_json_unvalidated(doc.clone()).unwrap();
    assert_eq!(
        r.to_json(),
        doc,
        "round trip is exact, out-of-range port included"
    );
    let Spec::Dataplane(spec) = &r.spec else {
        panic!("not a Dataplane: {r:?}")
    };
    let inbound = &spec.networking.inbound[0];
    assert_eq!(inbound.port.raw(), 70000);
    assert_eq!(
        inbound.port.get(),
        u16::MAX,
        "get saturates before validation"
    );
    assert_eq!(inbound.effective_service_port(), 8080);
    assert!(Resource::from_json(doc).is_err());

    let mesh = json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Mesh",
        "metadata": {"name": "m"},
        "spec": {"mtls": {"backends": [{"name": "a", "type": "vault"}, {"name": "b", "type": "builtin"}]}},
    });
    let r = Resource::from_json_unvalidated(mesh.clone()).unwrap();
    assert_eq!(r.to_json(), mesh);
    let backends = &r.spec.as_mesh().unwrap().mtls.as_ref().unwrap().backends;
    assert_eq!(backends[0].type_, CaType::Unknown("vault".into()));
    assert_eq!(backends[1].type_, CaType::Builtin);
}

#[test]
fn known_values_and_valid_ports_read_as_before() {
    let text = r#"
apiVersion: meshlink.dev/v1alpha1
kind: MeshTrafficPermission
metadata: {name: p, mesh: default}
spec:
  targetRef: {kind: MeshService, name: web}
  from: [{targetRef: {kind: Mesh}, default: {action: AllowWithShadowDeny}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Listener
metadata: {name: l}
spec: {routingKey: k, host: 0.0.0.0, port: 65535}
"#;
    let docs = parse_documents(text);
    let mtp = docs[0].outcome.as_ref().unwrap();
    let spec = mtp.spec.as_mesh_traffic_permission().unwrap();
    assert_eq!(spec.effective_target_ref().kind, TargetRefKind::MeshService);
    assert_eq!(spec.from[0].default_.action, Action::AllowWithShadowDeny);
    let Spec::Listener(listener) = &docs[1].outcome.as_ref().unwrap().spec else {
        panic!("not a Listener")
    };
    assert_eq!(listener.port, Port::new(65535));
    assert_eq!(listener.port.get(), 65535);
}

//! Kuma documents (universal and kuma.io/v1alpha1) import to the expected
//! canonical resources, with a warning per ignored field.

use meshlink_api::{SourceFormat, parse_documents};
use serde_json::json;

mod support;
use support::{errors, ok};

#[test]
fn universal_fixture_imports() {
    let docs = parse_documents(include_str!("fixtures/kuma-universal.yaml"));
    assert_eq!(docs.len(), 4);
    assert!(
        docs.iter()
            .all(|d| d.format == Some(SourceFormat::KumaUniversal))
    );
    assert_eq!(
        ok(&docs[0]),
        json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "Mesh",
            "metadata": {"name": "default"},
            "spec": {"mtls": {
                "enabledBackend": "ca-1",
                "backends": [{
                    "name": "ca-1",
                    "type": "builtin",
                    "dpCert": {"rotation": {"expiration": "24h"}},
                    "conf": {"caCert": {"expiration": "10y"}},
                }],
            }},
        })
    );
    assert_eq!(
        docs[0].warnings,
        [
            "metrics: not implemented yet and ignored (meshlink accepts it for compatibility)",
            "mtls.backends[0].conf.caCert.RSAbits: not implemented yet and ignored (meshlink accepts it for compatibility)",
        ]
    );
    assert_eq!(
        ok(&docs[1]),
        json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "Dataplane",
            "metadata": {"name": "backend-1", "mesh": "default"},
            "spec": {"networking": {
                "address": "127.0.0.1",
                "inbound": [{"port": 15000, "servicePort": 8080,
                             "tags": {"kuma.io/service": "backend", "version": "v1"}}],
            }},
        })
    );
    assert!(docs[1].warnings.is_empty());
    // Legacy `service:` on an outbound becomes the service tag.
    assert_eq!(
        ok(&docs[2])["spec"]["networking"]["outbound"],
        json!([{"port": 10001, "tags": {"kuma.io/service": "backend"}}])
    );
    // Transparent proxying is honoured, as written.
    assert_eq!(
        ok(&docs[2])["spec"]["networking"]["transparentProxying"],
        json!({"redirectPortInbound": 15006, "redirectPortOutbound": 15001})
    );
    assert!(docs[2].warnings.is_empty(), "{:?}", docs[2].warnings);
    assert_eq!(
        ok(&docs[3]),
        json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "MeshTrafficPermission",
            "metadata": {"name": "allow-frontend", "mesh": "default"},
            "spec": {
                "targetRef": {"kind": "MeshService", "name": "backend"},
                "from": [{"targetRef": {"kind": "MeshSubset", "tags": {"kuma.io/service": "frontend"}},
                          "default": {"action": "Allow"}}],
            },
        })
    );
    let dp = docs[2].outcome.as_ref().unwrap();
    let spec = dp.spec.as_dataplane().unwrap();
    assert_eq!(spec.services(), ["frontend"]);
    assert_eq!(spec.networking.outbound[0].service(), Some("backend"));
    assert_eq!(spec.networking.inbound[0].effective_service_port(), 8081);
}

#[test]
fn kubernetes_fixture_imports() {
    let docs = parse_documents(include_str!("fixtures/kuma-kubernetes.yaml"));
    assert!(
        docs.iter()
            .all(|d| d.format == Some(SourceFormat::KumaKubernetes))
    );
    assert_eq!(
        ok(&docs[0])["spec"],
        json!({"mtls": {"enabledBackend": "ca-1", "backends": [{"name": "ca-1", "type": "builtin"}]}})
    );
    assert_eq!(docs[0].warnings.len(), 2, "{:?}", docs[0].warnings);
    assert!(docs[0].warnings[0].starts_with("metadata.annotations: not implemented yet"));
    assert!(docs[0].warnings[1].starts_with("spec.mtls.backends[0].mode: not implemented yet"));
    assert_eq!(
        ok(&docs[1])["metadata"],
        json!({"name": "ledger-1", "mesh": "payments"})
    );
    assert!(docs[1].warnings[0].starts_with("metadata.namespace: "));
    // The mesh label becomes metadata.mesh; other labels stay.
    assert_eq!(
        ok(&docs[2])["metadata"],
        json!({"name": "deny-all", "mesh": "payments", "labels": {"team": "payments"}})
    );
    assert_eq!(ok(&docs[2])["spec"]["from"][0]["default"]["action"], "Deny");
}

#[test]
fn kubernetes_without_mesh_uses_kumas_default_mesh() {
    let text = "apiVersion: kuma.io/v1alpha1\nkind: MeshTrafficPermission\nmetadata:\n  name: p\nspec:\n  from:\n    - targetRef: {kind: Mesh}\n      default: {action: Allow}\n";
    let docs = parse_documents(text);
    assert_eq!(ok(&docs[0])["metadata"]["mesh"], "default");
}

#[test]
fn errors_use_the_paths_the_user_wrote() {
    let text = "type: Mesh\nname: default\nmtls:\n  backends:\n    - name: ca\n      type: vault\n";
    assert_eq!(
        errors(text),
        [r#"mtls.backends[0].type: unknown CA type "vault"; expected builtin or provided"#]
    );
    let text = "type: Dataplane\nname: dp\nnetworking:\n  address: 1.2.3.4\n  inbound:\n    - port: 1\n      tags: {kuma.io/service: a}\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("mesh: required"), "{errs:?}");
    let text = "type: Dataplane\nname: dp\nmesh: m\nnetworking:\n  address: 1.2.3.4\n  inbound:\n    - port: 1\n      tags: {kuma.io/service: a}\n      bogus: 1\n";
    let errs = errors(text);
    assert!(
        errs[0].starts_with("networking.inbound[0].bogus: unknown field `bogus`"),
        "{errs:?}"
    );
    let text = "type: Mesh\nname: m\nfoo: 1\n";
    assert!(
        errors(text)[0].starts_with("foo: unknown field `foo`, expected"),
        "{:?}",
        errors(text)
    );
    let text = "apiVersion: kuma.io/v1alpha1\nkind: Dataplane\nmetadata:\n  name: dp\n  labels: {kuma.io/mesh: Bad.Mesh}\nspec:\n  networking: {address: 1.2.3.4, inbound: [{port: 1, tags: {kuma.io/service: a}}]}\n";
    let errs = errors(text);
    assert!(
        errs.iter()
            .all(|e| e.starts_with(r#"metadata.labels["kuma.io/mesh"]: "#)),
        "{errs:?}"
    );
}

#[test]
fn unknown_kuma_types_list_what_is_accepted() {
    assert_eq!(
        errors("type: TrafficRoute\nname: r\n"),
        [
            r#"type: unknown Kuma type "TrafficRoute"; meshlink accepts Mesh, Dataplane, MeshTrafficPermission, MeshService, MeshHTTPRoute, MeshTCPRoute, MeshTimeout, MeshRetry, MeshRateLimit, MeshAccessLog, MeshLoadBalancingStrategy, MeshHealthCheck, MeshMetric, MeshFaultInjection, MeshCircuitBreaker, MeshTrace, Secret or GlobalSecret"#
        ]
    );
    assert_eq!(
        errors("apiVersion: kuma.io/v1alpha1\nkind: MeshProxyPatch\nmetadata: {name: t}\n"),
        [
            r#"kind: unknown Kuma kind "MeshProxyPatch"; meshlink accepts Mesh, Dataplane, MeshTrafficPermission, MeshService, MeshHTTPRoute, MeshTCPRoute, MeshTimeout, MeshRetry, MeshRateLimit, MeshAccessLog, MeshLoadBalancingStrategy, MeshHealthCheck, MeshMetric, MeshFaultInjection, MeshCircuitBreaker or MeshTrace (Kuma Secrets are apiVersion: v1 Secrets of type system.kuma.io/secret)"#
        ]
    );
}

#[test]
fn legacy_service_conflicting_with_tag_is_an_error() {
    let text = "type: Dataplane\nname: dp\nmesh: m\nnetworking:\n  address: 1.2.3.4\n  inbound: [{port: 1, tags: {kuma.io/service: a}}]\n  outbound:\n    - port: 2\n      service: b\n      tags: {kuma.io/service: c}\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("networking.outbound[0].service: \"b\" differs"),
        "{errs:?}"
    );
}

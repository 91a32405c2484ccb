//! MeshTrafficPermission targetRefs in every form Kuma documents are
//! accepted, and each misuse is refused at its field path with the fix.

use meshlink_api::{FieldError, Resource};
use serde_json::{Value, json};

/// The errors of a canonical MeshTrafficPermission with `spec`, as the CLI
/// prints them (without the file prefix).
fn errors(kind: &str, spec: Value) -> Vec<String> {
    let doc = json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "mesh": "default"},
        "spec": spec,
    });
    match Resource::from_json(doc) {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(FieldError::to_string).collect(),
    }
}

fn one(kind: &str, spec: Value) -> String {
    let errs = errors(kind, spec);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:?}");
    errs.into_iter().next().unwrap()
}

#[test]
fn traffic_permission_target_ref_forms() {
    let top = |target: Value| json!({"targetRef": target, "from": [{"targetRef": {"kind": "Mesh"}, "default": {"action": "Allow"}}]});
    let mtp = "MeshTrafficPermission";
    for ok in [
        json!({"kind": "Mesh"}),
        json!({"kind": "Dataplane"}),
        json!({"kind": "Dataplane", "labels": {"app": "backend"}}),
        json!({"kind": "Dataplane", "labels": {"app": "backend"}, "sectionName": "8080"}),
        json!({"kind": "Dataplane", "name": "backend-1", "namespace": "shop"}),
        json!({"kind": "Dataplane", "name": "backend-1", "sectionName": "8080"}),
        json!({"kind": "MeshSubset", "tags": {"version": "v2"}}),
        json!({"kind": "MeshService", "name": "backend"}),
    ] {
        assert_eq!(errors(mtp, top(ok.clone())), Vec::<String>::new(), "{ok}");
    }
    assert_eq!(
        one(mtp, top(json!({"kind": "Mesh", "labels": {"app": "x"}}))),
        "spec.targetRef.labels: not allowed when kind is Mesh; use kind: Dataplane to select Dataplanes by labels"
    );
    assert_eq!(
        one(mtp, top(json!({"kind": "Dataplane", "labels": {}}))),
        "spec.targetRef.labels: must not be empty: list the labels a Dataplane must carry, or remove labels to select every Dataplane"
    );
    assert_eq!(
        one(mtp, top(json!({"kind": "Dataplane", "tags": {"app": "x"}}))),
        "spec.targetRef.tags: not allowed when kind is Dataplane; a Dataplane is selected by labels (use labels:)"
    );
    assert_eq!(
        one(
            mtp,
            top(json!({"kind": "Dataplane", "name": "a", "labels": {"app": "x"}}))
        ),
        "spec.targetRef.labels: not allowed together with name: select one Dataplane by name or several by labels"
    );
    assert_eq!(
        one(mtp, top(json!({"kind": "Dataplane", "namespace": "shop"}))),
        "spec.targetRef.namespace: only allowed together with name: namespace and name reference one Dataplane"
    );
    assert_eq!(
        one(
            mtp,
            top(json!({"kind": "Dataplane", "labels": {"bad key!": "x"}}))
        ),
        r#"spec.targetRef.labels["bad key!"]: invalid label key "bad key!": use an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit"#
    );
    assert_eq!(
        one(
            mtp,
            top(json!({"kind": "MeshService", "name": "b", "sectionName": "80"}))
        ),
        "spec.targetRef.sectionName: not allowed when kind is MeshService; use kind: Dataplane to select one inbound"
    );
    assert_eq!(
        one(
            mtp,
            top(json!({"kind": "MeshSubset", "tags": {"a": "b"}, "namespace": "x"}))
        ),
        "spec.targetRef.namespace: not allowed when kind is MeshSubset"
    );
    assert_eq!(
        one(
            mtp,
            top(json!({"kind": "MeshSubset", "tags": {"a": "b"}, "labels": {"a": "b"}}))
        ),
        "spec.targetRef.labels: not allowed when kind is MeshSubset; use kind: Dataplane to select Dataplanes by labels"
    );
    assert_eq!(
        one(
            mtp,
            top(json!({"kind": "Dataplane", "labels": {"a": "b"}, "sectionName": ""}))
        ),
        r#"spec.targetRef.sectionName: must not be empty: an inbound's name or port, e.g. sectionName: "8080""#
    );
    assert_eq!(
        one(mtp, top(json!({"kind": "Dataplane", "selector": {}}))),
        "spec.targetRef.selector: unknown field `selector`, expected one of `kind`, `name`, `namespace`, `labels`, `sectionName`, `tags`, `proxyTypes`"
    );
}

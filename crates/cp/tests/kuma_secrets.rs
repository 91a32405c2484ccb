//! Kuma Secrets through the REST API of an in-process control plane: the
//! value never comes back and re-applying what `get` returned is
//! `unchanged`; a Mesh naming a missing Secret is a 422 at the field and is
//! not stored; a dry run counts Secrets earlier in the same apply; a
//! Secret in use cannot be deleted; changing the Secret's value moves the
//! mesh to the new CA, as changing an inline CA does; a cascade deletes
//! the mesh's Secrets.

mod support;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use meshlink_identity::MeshCa;
use serde_json::{Value, json};
use support::{TestCp, eventually};

fn secret(mesh: Option<&str>, name: &str, value: &str) -> Value {
    let (type_, metadata) = match mesh {
        Some(m) => ("system.kuma.io/secret", json!({"name": name, "mesh": m})),
        None => ("system.kuma.io/global-secret", json!({"name": name})),
    };
    json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Secret", "metadata": metadata,
        "spec": {"type": type_, "data": {"value": STANDARD.encode(value)}},
    })
}

fn provided_mesh(name: &str, cert: &str, key: &str) -> Value {
    json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh", "metadata": {"name": name},
        "spec": {"mtls": {"enabledBackend": "corp", "backends": [{
            "name": "corp", "type": "provided",
            "conf": {"cert": {"secret": cert}, "key": {"secret": key}},
        }]}},
    })
}

/// A CA as PEM (certificate, key); any valid signing CA will do.
fn ca_pem() -> (String, String) {
    let m = MeshCa::generate_builtin("x", "x", "x", Duration::from_secs(3600)).expect("CA");
    (m.cert_pem, m.key_pem)
}

async fn apply_ca_secrets(cp: &TestCp, mesh: &str) -> (String, String) {
    let (cert, key) = ca_pem();
    cp.must_apply("secrets", &secret(Some(mesh), "ca-cert", &cert))
        .await;
    cp.must_apply("secrets", &secret(Some(mesh), "ca-key", &key))
        .await;
    (cert, key)
}

async fn dry(cp: &TestCp, items: Vec<Value>, pending: Value) -> Value {
    let body = json!({"items": items, "pendingSecrets": pending});
    cp.api("POST", "/api/v1/apply?dryRun=true", Some(&body))
        .await
        .1
}

async fn fingerprint(cp: &TestCp, mesh: &str) -> Value {
    let (status, body) = cp
        .api("GET", &format!("/api/v1/meshes/{mesh}/ca"), None)
        .await;
    if status == 200 {
        body["fingerprint"].clone()
    } else {
        Value::Null
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_value_is_redacted_and_reapplying_the_redacted_output_is_unchanged() {
    let cp = TestCp::start().await;
    let s = secret(Some("payments"), "db-password", "hunter2");
    let (status, body) = cp.apply("secrets", &s).await;
    assert_eq!(
        (status, body["result"].as_str()),
        (201, Some("created")),
        "{body}"
    );
    assert_eq!(
        body["resource"]["spec"]["data"]["value"], "<redacted>",
        "{body}"
    );
    cp.must_apply("secrets", &secret(None, "signing", "global value"))
        .await;

    let (status, got) = cp
        .api("GET", "/api/v1/secrets/db-password?mesh=payments", None)
        .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["spec"]["data"]["value"], "<redacted>", "{got}");
    let (_, all) = cp.api("GET", "/api/v1/secrets", None).await;
    let text = all.to_string();
    assert!(!text.contains(&STANDARD.encode("hunter2")), "{all}");
    assert!(!text.contains(&STANDARD.encode("global value")), "{all}");
    let names = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| {
                i["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(names(&all), ["signing", "db-password"], "{all}");
    let (_, in_mesh) = cp.api("GET", "/api/v1/secrets?mesh=payments", None).await;
    assert_eq!(names(&in_mesh), ["db-password"], "{in_mesh}");

    let mut again = got.clone();
    again["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let (status, body) = cp.apply("secrets", &again).await;
    assert_eq!(
        (status, body["result"].as_str()),
        (200, Some("unchanged")),
        "{body}"
    );

    // A redacted value for a Secret that does not exist has nothing to keep.
    let mut fresh = again.clone();
    fresh["metadata"]["name"] = json!("other");
    let (status, body) = cp.apply("secrets", &fresh).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"]["fields"][0]["path"], "spec.data.value",
        "{body}"
    );
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mesh_naming_a_missing_secret_is_refused_at_the_field_and_not_stored() {
    let cp = TestCp::start().await;
    // A GlobalSecret of that name does not count: only Secrets in the mesh do.
    cp.must_apply("secrets", &secret(None, "ca-key", "x")).await;
    let (cert, _) = ca_pem();
    cp.must_apply("secrets", &secret(Some("corp"), "ca-cert", &cert))
        .await;
    let (status, body) = cp
        .apply("meshes", &provided_mesh("corp", "ca-cert", "ca-key"))
        .await;
    assert_eq!(status, 422, "{body}");
    let fields = body["error"]["fields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(fields.len(), 1, "{body}");
    assert_eq!(fields[0]["path"], "spec.mtls.backends[0].conf.key.secret");
    assert!(
        fields[0]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("secret ca-key not found in mesh corp"),
        "{body}"
    );
    let (status, _) = cp.api("GET", "/api/v1/meshes/corp", None).await;
    assert_eq!(status, 404, "nothing was stored");

    // A dry run counts a Secret earlier in the same apply, and one named
    // in pendingSecrets (an earlier chunk); not one that comes later.
    let key = secret(Some("corp"), "ca-key", "k");
    let mesh = provided_mesh("corp", "ca-cert", "ca-key");
    let ok = dry(&cp, vec![key.clone(), mesh.clone()], json!([])).await;
    assert_eq!(ok["valid"], true, "{ok}");
    let pending = json!([{"mesh": "corp", "name": "ca-key"}]);
    let ok = dry(&cp, vec![mesh.clone()], pending).await;
    assert_eq!(ok["valid"], true, "{ok}");
    let bad = dry(&cp, vec![mesh.clone(), key.clone()], json!([])).await;
    assert_eq!(bad["valid"], false, "{bad}");
    assert!(bad["items"][0]["error"].is_object(), "{bad}");
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_use_is_kept_and_a_new_value_moves_the_mesh_to_the_new_ca() {
    let cp = TestCp::start().await;
    apply_ca_secrets(&cp, "corp").await;
    cp.must_apply("meshes", &provided_mesh("corp", "ca-cert", "ca-key"))
        .await;
    cp.wait_condition("/api/v1/meshes/corp", "Ready", "True")
        .await;
    let before = fingerprint(&cp, "corp").await;
    assert!(before.is_string(), "{before}");

    let (status, body) = cp
        .api("DELETE", "/api/v1/secrets/ca-key?mesh=corp", None)
        .await;
    assert_eq!(status, 409, "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with(
            "Secret \"ca-key\" in mesh \"corp\" is in use by Mesh/corp \
             (spec.mtls.backends[0].conf.key.secret)"
        ),
        "{body}"
    );

    // A new CA in the same two Secrets: the mesh moves to it.
    let (cert, key) = ca_pem();
    cp.must_apply("secrets", &secret(Some("corp"), "ca-cert", &cert))
        .await;
    cp.must_apply("secrets", &secret(Some("corp"), "ca-key", &key))
        .await;
    let expected = MeshCa::load(
        &MeshCa::validate_provided(&cert, &key, None, std::time::SystemTime::now()).unwrap(),
    )
    .unwrap()
    .fingerprint()
    .to_owned();
    eventually("the mesh CA moves to the new Secret value", || async {
        let fp = fingerprint(&cp, "corp").await;
        (fp == expected.as_str()).then_some(())
    })
    .await;
    assert_ne!(before, expected.as_str());

    // Deleting the Mesh is refused while Secrets live in it; a cascade
    // deletes them with it.
    let (status, body) = cp.api("DELETE", "/api/v1/meshes/corp", None).await;
    assert_eq!(status, 409, "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("Secret/ca-cert") && msg.contains("Secret/ca-key"),
        "{body}"
    );
    let (status, body) = cp
        .api("DELETE", "/api/v1/meshes/corp?cascade=true", None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, left) = cp.api("GET", "/api/v1/secrets?mesh=corp", None).await;
    assert_eq!(left["items"], json!([]), "{left}");
    cp.stop().await;
}

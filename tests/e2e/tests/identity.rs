//! Mesh CAs through the real control plane: created once, stable across
//! restarts, shared by control planes on one PostgreSQL, rotated without
//! dropping trust, and invalid CAs reported in Mesh status.

use meshlink_e2e::certify::{certify, csr};
use meshlink_e2e::{ControlPlane, StoreKind};
use serde_json::Value;

fn mesh_yaml(name: &str, enabled: &str) -> String {
    format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {{name: {name}}}\nspec:\n  mtls:\n    enabledBackend: {enabled}\n    backends:\n      - {{name: ca-1, type: builtin, dpCert: {{rotation: {{expiration: 1h}}}}}}\n      - {{name: ca-2, type: builtin, dpCert: {{rotation: {{expiration: 1h}}}}}}\n"
    )
}

fn dataplane_yaml(name: &str, service: &str, port: u16) -> String {
    format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {{name: {name}, mesh: default}}\nspec:\n  networking:\n    address: 127.0.0.1\n    inbound: [{{port: {port}, tags: {{kuma.io/service: {service}}}}}]\n"
    )
}

fn ca(cp: &ControlPlane, mesh: &str) -> Value {
    let (s, v) = cp.api("GET", &format!("/api/v1/meshes/{mesh}/ca"), None);
    assert_eq!(s, 200, "{v}");
    v
}

fn wait(cp: &ControlPlane, target: &str, cond: &str) {
    cp.cli(&["wait", target, "--for", cond, "--timeout", "30s"])
        .success();
}

#[test]
fn ca_is_created_once_and_survives_restarts() {
    let mut cp = ControlPlane::start(StoreKind::Sqlite);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&mesh_yaml("default", "ca-1")))
        .success();
    wait(&cp, "mesh/default", "condition=Ready");
    let before = ca(&cp, "default")["fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(before.len(), 64);

    cp.kill9();
    cp.restart();
    assert_eq!(
        ca(&cp, "default")["fingerprint"],
        before.as_str(),
        "same CA after kill -9"
    );
    assert_eq!(cp.terminate(), Some(0));
    cp.restart();
    assert_eq!(
        ca(&cp, "default")["fingerprint"],
        before.as_str(),
        "same CA after SIGTERM"
    );
    // Re-applying the Mesh does not regenerate it either.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&mesh_yaml("default", "ca-1")))
        .success();
    assert_eq!(ca(&cp, "default")["fingerprint"], before.as_str());
}

#[test]
fn control_planes_sharing_postgres_end_with_one_ca() {
    let StoreKind::Postgres(url) = StoreKind::fresh("postgres") else {
        unreachable!()
    };
    let a = ControlPlane::start(StoreKind::Postgres(url.clone()));
    let b = ControlPlane::start(StoreKind::Postgres(url));
    let yaml = mesh_yaml("shared", "ca-1");
    std::thread::scope(|s| {
        s.spawn(|| a.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success());
        s.spawn(|| b.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success());
    });
    let fa = ca(&a, "shared")["fingerprint"].clone();
    let fb = ca(&b, "shared")["fingerprint"].clone();
    assert_eq!(fa, fb, "both control planes serve the same CA");
    wait(&a, "mesh/shared", "condition=Ready");
    wait(&b, "mesh/shared", "condition=Ready");
}

#[test]
fn rotation_keeps_old_and_new_roots_until_every_proxy_moved() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let setup = [
        mesh_yaml("default", "ca-1"),
        dataplane_yaml("web-1", "web", 10001),
        dataplane_yaml("backend-1", "backend", 10002),
    ]
    .join("---\n");
    cp.cli_stdin(&["apply", "-f", "-"], Some(&setup)).success();
    let (web, _) = cp.dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    let (backend, _) = cp.dataplane_token(&["--mesh", "default", "--name", "backend-1"]);
    let key = rcgen::KeyPair::generate().unwrap();

    let first = certify(&cp, Some(&web), "default", "web-1", "", csr(&key, None)).unwrap();
    assert_eq!(first.trust_bundle_pem.len(), 1);
    let old_root = first.trust_bundle_pem[0].clone();

    // Switch the enabled backend: a rotation starts.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&mesh_yaml("default", "ca-2")))
        .success();
    let moved = certify(
        &cp,
        Some(&backend),
        "default",
        "backend-1",
        "",
        csr(&key, None),
    )
    .unwrap();
    assert_eq!(
        moved.trust_bundle_pem.len(),
        2,
        "old and new roots while web-1 is on ca-1"
    );
    assert!(moved.trust_bundle_pem.contains(&old_root));
    assert_ne!(
        moved.trust_bundle_pem[0], old_root,
        "the new root comes first"
    );
    wait(&cp, "mesh/default", "condition=CARotation");
    let rotation = &ca(&cp, "default")["rotation"];
    assert_eq!(rotation["phase"], "rotating", "{rotation}");
    assert_eq!(rotation["proxiesOnOld"], 1, "{rotation}");

    // Both leaves verify against the bundle the proxies now hold.
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle.pem");
    std::fs::write(&bundle, moved.trust_bundle_pem.concat()).unwrap();
    for (name, pem) in [
        ("old", &first.certificate_pem),
        ("new", &moved.certificate_pem),
    ] {
        let leaf = dir.path().join(format!("{name}.pem"));
        std::fs::write(&leaf, pem).unwrap();
        let out = std::process::Command::new("openssl")
            .args([
                "verify",
                "-CAfile",
                bundle.to_str().unwrap(),
                leaf.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // web-1 renews from the new CA: nobody is left on the old one, and the
    // controller ends the rotation (the bundle drops the old root).
    let renewed = certify(&cp, Some(&web), "default", "web-1", "", csr(&key, None)).unwrap();
    assert_eq!(renewed.trust_bundle_pem[0], moved.trust_bundle_pem[0]);
    wait(&cp, "mesh/default", "condition=CARotation=False");
    let after = ca(&cp, "default");
    assert_eq!(after["rotation"]["phase"], "stable");
    assert_eq!(
        after["trustBundle"],
        serde_json::json!([moved.trust_bundle_pem[0].clone()])
    );
}

#[test]
fn invalid_provided_ca_is_reported_in_mesh_status() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let yaml = "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {name: corp}\nspec:\n  mtls:\n    enabledBackend: corp-ca\n    backends:\n      - name: corp-ca\n        type: provided\n        conf:\n          cert: {file: /nonexistent/ca.pem}\n          key: {file: /nonexistent/ca.key}\n";
    cp.cli_stdin(&["apply", "-f", "-"], Some(yaml)).success();
    wait(&cp, "mesh/corp", "condition=Ready=False");
    let (_, mesh) = cp.api("GET", "/api/v1/meshes/corp", None);
    let ready = mesh["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready["reason"], "CAInvalid");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/ca.pem"),
        "{ready}"
    );
    // The control plane stays up and other meshes are unaffected.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&mesh_yaml("default", "ca-1")))
        .success();
    wait(&cp, "mesh/default", "condition=Ready");
}

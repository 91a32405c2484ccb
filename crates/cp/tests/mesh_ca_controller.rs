//! The mesh identity controller in an in-process control plane: a Mesh
//! with mTLS gets a CA and `Ready=True`; switching the enabled backend
//! while a dataplane holds a certificate from the old CA shows
//! `CARotation=True` with both roots in the bundle, until that dataplane
//! renews from the new CA; a Mesh without mTLS is ready with no CA.

mod support;

use meshlink_xds::certify::certify_client::CertifyClient;
use meshlink_xds::certify::{CertifyRequest, CertifyResponse};
use serde_json::{Value, json};
use support::{TestCp, dataplane, eventually, mesh, with_token};

async fn ca(cp: &TestCp) -> Value {
    let (status, body) = cp.api("GET", "/api/v1/meshes/default/ca", None).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Certify with a fresh key for `default/name`.
async fn certify(cp: &TestCp, token: &str, name: &str) -> CertifyResponse {
    let key = rcgen::KeyPair::generate().expect("key");
    let csr = rcgen::CertificateParams::new(Vec::<String>::new())
        .expect("params")
        .serialize_request(&key)
        .expect("CSR")
        .der()
        .to_vec();
    let req = CertifyRequest {
        mesh: "default".into(),
        dataplane: name.into(),
        service: String::new(),
        csr,
        ..Default::default()
    };
    CertifyClient::new(cp.xds_channel().await)
        .certify(with_token(req, token))
        .await
        .expect("certify")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mesh_with_mtls_becomes_ready_with_a_ca() {
    let cp = TestCp::start().await;
    cp.must_apply("meshes", &mesh("default", "ca-1")).await;

    let ready = cp
        .wait_condition("/api/v1/meshes/default", "Ready", "True")
        .await;
    assert_eq!(ready["reason"], "CAReady", "{ready}");
    assert!(
        ready["message"]
            .as_str()
            .unwrap_or_default()
            .contains("ca-1"),
        "{ready}"
    );
    let rotation = cp.condition("/api/v1/meshes/default", "CARotation").await;
    assert_eq!(
        (rotation["status"].as_str(), rotation["reason"].as_str()),
        (Some("False"), Some("Stable")),
        "{rotation}"
    );

    let info = ca(&cp).await;
    assert_eq!(info["backend"], "ca-1", "{info}");
    assert_eq!(
        info["fingerprint"].as_str().map(str::len),
        Some(64),
        "{info}"
    );
    assert_eq!(info["rotation"]["phase"], "stable", "{info}");
    let bundle = info["trustBundle"].to_string();
    assert!(bundle.contains("BEGIN CERTIFICATE"), "{info}");
    assert!(
        !info.to_string().contains("PRIVATE KEY"),
        "no key is served: {info}"
    );
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_backends_shows_carotation_until_the_dataplane_renews() {
    let cp = TestCp::start().await;
    cp.must_apply("meshes", &mesh("default", "ca-1")).await;
    cp.must_apply(
        "dataplanes",
        &dataplane("web-1", "127.0.0.1", "web", 10001, &[]),
    )
    .await;
    cp.wait_condition("/api/v1/meshes/default", "Ready", "True")
        .await;
    let token = cp.dataplane_token("default", "web-1").await;
    let first = certify(&cp, &token, "web-1").await;
    assert_eq!(
        first.trust_bundle_pem.len(),
        1,
        "one root before the switch"
    );
    let old = ca(&cp).await["fingerprint"].clone();

    cp.must_apply("meshes", &mesh("default", "ca-2")).await;
    let rotating = cp
        .wait_condition("/api/v1/meshes/default", "CARotation", "True")
        .await;
    assert_eq!(rotating["reason"], "Rotating", "{rotating}");
    assert!(
        rotating["message"]
            .as_str()
            .unwrap_or_default()
            .contains("1 dataplane(s)"),
        "{rotating}"
    );
    let info = ca(&cp).await;
    assert_eq!(info["backend"], "ca-2", "{info}");
    assert_ne!(info["fingerprint"], old, "a new CA for ca-2");
    assert_eq!(info["rotation"]["phase"], "rotating", "{info}");
    assert_eq!(
        info["trustBundle"].as_array().map(Vec::len),
        Some(2),
        "both roots: {info}"
    );

    // web-1 renews from ca-2: nobody is left on ca-1, the rotation ends.
    // That renewal's reply may still carry both roots (the bundle is the
    // stored CA state, which the controller rewrites once it has counted
    // the renewal); the next one carries the new root only.
    certify(&cp, &token, "web-1").await;
    let stable = cp
        .wait_condition("/api/v1/meshes/default", "CARotation", "False")
        .await;
    assert_eq!(stable["reason"], "Stable", "{stable}");
    let after = certify(&cp, &token, "web-1").await;
    assert_eq!(after.trust_bundle_pem.len(), 1, "the new root only");
    let info = eventually("the bundle to drop the old root", || async {
        let info = ca(&cp).await;
        (info["rotation"]["phase"] == "stable").then_some(info)
    })
    .await;
    assert_eq!(
        info["trustBundle"].as_array().map(Vec::len),
        Some(1),
        "{info}"
    );
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mesh_without_mtls_is_ready_and_says_traffic_is_not_encrypted() {
    let cp = TestCp::start().await;
    let plain = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
        "metadata": {"name": "default"}, "spec": {}});
    cp.must_apply("meshes", &plain).await;
    let ready = cp
        .wait_condition("/api/v1/meshes/default", "Ready", "True")
        .await;
    assert_eq!(ready["reason"], "MTLSDisabled", "{ready}");
    let (status, body) = cp.api("GET", "/api/v1/meshes/default/ca", None).await;
    assert_eq!(status, 409, "no CA for a mesh without mTLS: {body}");
    cp.stop().await;
}

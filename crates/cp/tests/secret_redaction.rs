//! Secrets through the REST API: `tls.key` never comes back, re-applying
//! what `get` returned keeps the stored key and is `unchanged`, and bad
//! credentials are a 422 naming the field.

mod support;

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use meshlink_identity::SiteCa;
use serde_json::{Value, json};
use support::TestCp;

fn issue(subject: &str) -> (String, String, String) {
    let ca =
        SiteCa::load(&SiteCa::generate("west", "ca", Duration::from_secs(3600)).unwrap()).unwrap();
    let (cert, key) = ca
        .issue_client_cert(subject, Duration::from_secs(600), SystemTime::now())
        .unwrap();
    (cert.cert_pem, key, ca.cert_pem().to_owned())
}

fn secret(name: &str, cert: &str, key: &str, ca: &str) -> Value {
    json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Secret",
        "metadata": {"name": name},
        "spec": {"type": "kubernetes.io/tls", "data": {
            "tls.crt": STANDARD.encode(cert),
            "tls.key": STANDARD.encode(key),
            "ca.crt": STANDARD.encode(ca),
        }},
    })
}

fn field_errors(body: &Value) -> Vec<(String, String)> {
    body["error"]["fields"]
        .as_array()
        .map(|fs| {
            fs.iter()
                .map(|f| {
                    (
                        f["path"].as_str().unwrap_or_default().to_owned(),
                        f["message"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_redacted_and_reapplying_the_redacted_output_is_unchanged() {
    let cp = TestCp::start().await;
    let (cert, key, ca) = issue("west");
    let s = secret("link-creds", &cert, &key, &ca);
    let (status, body) = cp.apply("secrets", &s).await;
    assert_eq!(
        (status, body["result"].as_str()),
        (201, Some("created")),
        "{body}"
    );
    assert_eq!(
        body["resource"]["spec"]["data"]["tls.key"], "<redacted>",
        "{body}"
    );
    assert!(!body.to_string().contains(&STANDARD.encode(&key)));

    let (status, got) = cp.api("GET", "/api/v1/secrets/link-creds", None).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["spec"]["data"]["tls.key"], "<redacted>", "{got}");
    assert_eq!(got["spec"]["data"]["tls.crt"], STANDARD.encode(&cert));
    let (_, list) = cp.api("GET", "/api/v1/secrets", None).await;
    assert!(!list.to_string().contains(&STANDARD.encode(&key)), "{list}");

    // What `get -o yaml` printed goes back unchanged, keeping the key.
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

    // A new certificate with the redacted key is refused: the stored key is
    // not this certificate's.
    let (cert2, _, _) = issue("west");
    let mut changed = again.clone();
    changed["spec"]["data"]["tls.crt"] = json!(STANDARD.encode(&cert2));
    let (status, body) = cp.apply("secrets", &changed).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(field_errors(&body)[0].0, "spec.data.tls.key", "{body}");
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_are_422_naming_the_field_and_the_server_stays_up() {
    let cp = TestCp::start().await;
    let (cert, key, ca) = issue("a");
    let (_, other_key, _) = issue("b");

    let mut bad_b64 = secret("s1", &cert, &key, &ca);
    bad_b64["spec"]["data"]["tls.crt"] = json!("%%% not base64");
    let mismatch = secret("s2", &cert, &other_key, &ca);
    let mut redacted_new = secret("s3", &cert, &key, &ca);
    redacted_new["spec"]["data"]["tls.key"] = json!("<redacted>");
    let mut not_a_cert = secret("s4", &cert, &key, &ca);
    not_a_cert["spec"]["data"]["ca.crt"] = json!(STANDARD.encode("hello"));
    let cases = [
        (bad_b64, "spec.data.tls.crt", "not valid base64"),
        (
            mismatch,
            "spec.data.tls.key",
            "does not match the certificate",
        ),
        (redacted_new, "spec.data.tls.key", "no stored key"),
        (not_a_cert, "spec.data.ca.crt", "does not decode to a PEM"),
    ];
    for (doc, path, msg) in cases {
        let (status, body) = cp.apply("secrets", &doc).await;
        assert_eq!(status, 422, "{body}");
        let errs = field_errors(&body);
        assert!(
            errs.iter().any(|(p, m)| p == path && m.contains(msg)),
            "expected {path}: {msg}, got {errs:?}"
        );
    }
    let (status, _) = cp.api("GET", "/api/v1/secrets", None).await;
    assert_eq!(status, 200, "the server is still up");
    cp.stop().await;
}

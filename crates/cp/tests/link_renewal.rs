//! Link client credentials from a redemption are renewed before they
//! expire: site B redeems a grant of site A whose certificates live 20 s
//! (the `meshlink.dev/link-cert-lifetime` label); B's control plane renews
//! the stored Secret at A's `POST /renew` around half of that lifetime,
//! for the same key, subject and router, before the first certificate
//! expires, and keeps doing so. The renewal endpoint refuses a
//! certificate it did not issue.

mod support;

use base64::Engine as _;
use rustls_pki_types::pem::PemObject as _;
use serde_json::{Value, json};
use support::{TestCp, eventually};
use x509_parser::prelude::{FromDer as _, X509Certificate};

fn doc(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec})
}

/// (serial, notBefore, notAfter, subject, URI SANs, public key DER) of the
/// Secret's tls.crt.
type CertFacts = (String, i64, i64, String, Vec<String>, Vec<u8>);

async fn secret_cert(cp: &TestCp, name: &str) -> Option<CertFacts> {
    let (code, s) = cp
        .api("GET", &format!("/api/v1/secrets/{name}"), None)
        .await;
    if code != 200 {
        return None;
    }
    let b64 = s["spec"]["data"]["tls.crt"]
        .as_str()
        .or_else(|| s["data"]["tls.crt"].as_str())?;
    let pem = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let der = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
        .next()?
        .ok()?;
    let (_, c) = X509Certificate::from_der(&der).ok()?;
    let uris = c
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::URI(u) => Some((*u).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some((
        c.raw_serial_as_string(),
        c.validity().not_before.timestamp(),
        c.validity().not_after.timestamp(),
        c.subject().to_string(),
        uris,
        c.public_key().raw.to_vec(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redeemed_link_credential_is_renewed_before_it_expires() {
    let a = TestCp::start().await;
    let b = TestCp::start().await;
    a.must_apply(
        "sites",
        &doc("Site", "dmz-a", json!({"linkAccess": "default"})),
    )
    .await;
    let mut grant = doc(
        "AccessGrant",
        "short",
        json!({"redemptionsAllowed": 1, "expirationWindow": "1h"}),
    );
    grant["metadata"]["labels"] = json!({"meshlink.dev/link-cert-lifetime": "20s"});
    a.must_apply("accessgrants", &grant).await;
    a.wait_condition("/api/v1/accessgrants/short", "Ready", "True")
        .await;
    let status = a.api("GET", "/api/v1/accessgrants/short", None).await.1["status"].clone();
    b.must_apply("sites", &doc("Site", "dmz-b", json!({"edge": false})))
        .await;
    b.must_apply(
        "accesstokens",
        &doc(
            "AccessToken",
            "to-a",
            json!({"url": status["url"], "code": status["code"], "ca": status["ca"]}),
        ),
    )
    .await;
    b.wait_condition("/api/v1/accesstokens/to-a", "Redeemed", "True")
        .await;
    let first = secret_cert(&b, "to-a").await.expect("the redeemed Secret");
    assert_eq!(
        first.2 - first.1,
        20 + 60,
        "20 s lifetime, notBefore backdated 60 s"
    );
    let site_b = b.api("GET", "/api/v1/sites/dmz-b", None).await.1;
    let b_id = site_b["status"]["siteId"]
        .as_str()
        .expect("siteId")
        .to_owned();
    assert_eq!(first.4, [format!("urn:meshlink:router:{b_id}")]);

    // Renewed (a new serial) before the first certificate expires.
    let second = eventually("the first renewal", || async {
        secret_cert(&b, "to-a").await.filter(|c| c.0 != first.0)
    })
    .await;
    let renewed_at = second.1 + 60;
    assert!(
        renewed_at < first.2,
        "renewed at {renewed_at}, before the first certificate's notAfter {}",
        first.2
    );
    assert_eq!(second.3, first.3, "same subject");
    assert_eq!(second.4, first.4, "same router");
    assert_eq!(second.5, first.5, "same key");
    assert_eq!(second.2 - second.1, first.2 - first.1, "same lifetime");
    // And again, from the renewed one.
    let third = eventually("the second renewal", || async {
        secret_cert(&b, "to-a").await.filter(|c| c.0 != second.0)
    })
    .await;
    assert!(third.1 + 60 < second.2, "renewed before the second expires");
    assert_eq!(third.5, first.5, "same key");

    // The endpoint refuses a certificate from another site.
    let (code, body) = renew_at(&status, &b).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("not issued by this site's CA"), "{body}");
    a.stop().await;
    b.stop().await;
}

/// POSTs a link credential from B's own CA (as `link generate` prints it)
/// to A's `/renew`.
async fn renew_at(grant_status: &Value, b: &TestCp) -> (u16, String) {
    b.must_apply(
        "sites",
        &doc("Site", "dmz-b", json!({"linkAccess": "default"})),
    )
    .await;
    let generated = eventually("B's link credential", || async {
        let (code, v) = b.api("POST", "/api/v1/link-generate", None).await;
        (code == 200).then_some(v)
    })
    .await;
    let yaml = generated["yaml"].as_str().unwrap().to_owned();
    let secret: Value = serde_yaml_ng::from_str(yaml.split("---").next().unwrap()).unwrap();
    let d = |k: &str| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(secret["data"][k].as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    let key = rcgen::KeyPair::from_pem(&d("tls.key")).unwrap();
    let csr = rcgen::CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .serialize_request(&key)
        .unwrap()
        .pem()
        .unwrap();
    let url = meshlink_cp::site::renewal::renew_url(grant_status["url"].as_str().unwrap());
    match meshlink_cp::grants::client::post_renewal(
        &url,
        grant_status["ca"].as_str().unwrap(),
        format!("{}{csr}", d("tls.crt")).into_bytes(),
    )
    .await
    {
        Ok(body) => (200, body),
        Err(meshlink_cp::grants::client::RedeemRequestError::Refused { status, body }) => {
            (status, body)
        }
        Err(e) => (0, e.to_string()),
    }
}

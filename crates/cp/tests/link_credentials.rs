//! The life of a Link's client credential, as `meshlink get links` shows
//! it:
//! - a credential redeemed by hand (`curl` against the grant server, then
//!   `meshlink apply -f -`) names the grant server that issued it, so the
//!   redeeming site's control plane renews it like a token's; its Link's
//!   `CredentialsValid` condition names the Secret and the expiry, and
//!   follows each renewal (no stale time);
//! - a credential nothing renews shows `NotRenewable`, then `Expiring`
//!   (first among the conditions, so the MESSAGE column shows it), then
//!   `Expired` with `Ready` False; a missing Secret shows `Missing`.

mod support;

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use meshlink_identity::SiteCa;
use serde_json::{Value, json};
use support::{TestCp, eventually};
use x509_parser::prelude::{FromDer as _, X509Certificate};

fn doc(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec})
}

/// (serial, notAfter as RFC 3339) of the Secret's tls.crt.
async fn secret_cert(cp: &TestCp, name: &str) -> Option<(String, String)> {
    let (code, s) = cp
        .api("GET", &format!("/api/v1/secrets/{name}"), None)
        .await;
    if code != 200 {
        return None;
    }
    let pem = STANDARD
        .decode(s["spec"]["data"]["tls.crt"].as_str()?)
        .ok()?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let (_, c) = X509Certificate::from_der(&pem.contents).ok()?;
    let not_after =
        SystemTime::UNIX_EPOCH + Duration::from_secs(c.validity().not_after.timestamp() as u64);
    Some((
        c.raw_serial_as_string(),
        humantime::format_rfc3339_seconds(not_after).to_string(),
    ))
}

/// The Link's conditions, in order.
async fn link_conditions(cp: &TestCp, name: &str) -> Vec<Value> {
    let (code, l) = cp.api("GET", &format!("/api/v1/links/{name}"), None).await;
    assert_eq!(code, 200, "{l}");
    l["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn find<'a>(conditions: &'a [Value], type_: &str) -> Option<&'a Value> {
    conditions.iter().find(|c| c["type"] == type_)
}

/// Polls until the Link's `CredentialsValid` has `reason` and its message
/// contains every one of `words`; returns all its conditions.
async fn wait_credentials(cp: &TestCp, link: &str, reason: &str, words: &[&str]) -> Vec<Value> {
    eventually(
        &format!("link {link}: CredentialsValid {reason} {words:?}"),
        || async {
            let cs = link_conditions(cp, link).await;
            let c = find(&cs, "CredentialsValid")?;
            let m = c["message"].as_str().unwrap_or_default();
            (c["reason"] == reason && words.iter().all(|w| m.contains(w))).then_some(cs)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_redeemed_by_hand_is_renewed_and_its_link_shows_the_expiry() {
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
    b.must_apply("sites", &doc("Site", "dmz-b", json!({})))
        .await;

    // What `curl --data CODE -H 'name: by-hand' URL | meshlink apply -f -`
    // does: no AccessToken on B.
    let yaml = meshlink_cp::grants::client::post_redemption(
        status["url"].as_str().unwrap(),
        status["ca"].as_str().unwrap(),
        status["code"].as_str().unwrap(),
        "by-hand",
        "dmz-b",
        None,
    )
    .await
    .expect("the grant server redeems the code");
    let mut kinds = Vec::new();
    for d in meshlink_api::parse_documents(&yaml) {
        let r = d.outcome.expect("the answer applies as it is");
        if let Some(s) = r.spec.as_secret() {
            let url = String::from_utf8(STANDARD.decode(&s.data["renew-url"]).unwrap()).unwrap();
            let base = status["url"].as_str().unwrap().rsplit_once('/').unwrap().0;
            assert_eq!(url, format!("{base}/renew"), "the Secret names A's /renew");
            let ca = String::from_utf8(STANDARD.decode(&s.data["renew-ca.crt"]).unwrap()).unwrap();
            assert_eq!(
                ca,
                status["ca"].as_str().unwrap(),
                "and A's grant server CA"
            );
        }
        kinds.push(r.kind());
        b.must_apply(r.kind().plural(), &r.to_json()).await;
    }
    assert_eq!(kinds.len(), 2, "a Secret and a Link: {kinds:?}");

    let first = secret_cert(&b, "by-hand")
        .await
        .expect("the applied Secret");
    let cs = wait_credentials(&b, "by-hand", "Valid", &["\"by-hand\"", &first.1]).await;
    assert_eq!(find(&cs, "CredentialsValid").unwrap()["status"], "True");

    // B's control plane renews it at A (new serial), and the Link follows.
    let second = eventually("the renewal of the hand-applied Secret", || async {
        secret_cert(&b, "by-hand").await.filter(|c| c.0 != first.0)
    })
    .await;
    assert_ne!(second.1, first.1, "a later notAfter");
    let cs = wait_credentials(&b, "by-hand", "Valid", &[&second.1]).await;
    assert_eq!(find(&cs, "CredentialsValid").unwrap()["status"], "True");
    // Renewed again from the renewed certificate: the renew data is kept.
    let third = eventually("the second renewal", || async {
        secret_cert(&b, "by-hand").await.filter(|c| c.0 != second.0)
    })
    .await;
    wait_credentials(&b, "by-hand", "Valid", &[&third.1]).await;
    a.stop().await;
    b.stop().await;
}

/// A Secret (meshlink form) with a client certificate from a CA of its
/// own, valid from `issued - 60 s` to `issued + lifetime`, and no renew
/// data.
fn unrenewable_secret(name: &str, issued: SystemTime, lifetime: Duration) -> (Value, String) {
    let ca = SiteCa::load(
        &SiteCa::generate("other", SiteCa::DEFAULT_NAME, Duration::from_secs(3600)).unwrap(),
    )
    .unwrap();
    let (cert, key) = ca
        .issue_router_client_cert(name, None, lifetime, issued)
        .unwrap();
    let not_after = issued + lifetime;
    let at = humantime::format_rfc3339_seconds(not_after).to_string();
    let secret = doc(
        "Secret",
        name,
        json!({"type": "kubernetes.io/tls", "data": {
            "tls.crt": STANDARD.encode(&cert.cert_pem),
            "tls.key": STANDARD.encode(&key),
            "ca.crt": STANDARD.encode(ca.cert_pem()),
        }}),
    );
    (secret, at)
}

fn link(name: &str, secret: &str) -> Value {
    doc(
        "Link",
        name,
        json!({"endpoints": [{"name": "inter-router", "host": "127.0.0.9", "port": 55671}],
               "tlsCredentials": secret}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrenewable_credential_shows_expiring_then_expired_on_its_link() {
    let b = TestCp::start().await;
    b.must_apply("sites", &doc("Site", "dmz-b", json!({})))
        .await;
    let now = SystemTime::now();
    // Valid for an hour, nothing renews it.
    let (long, long_at) = unrenewable_secret("long", now, Duration::from_secs(3600));
    b.must_apply("secrets", &long).await;
    b.must_apply("links", &link("to-long", "long")).await;
    // In the last third of its life: Expiring now, Expired in 8 s.
    let (short, short_at) = unrenewable_secret(
        "short",
        now - Duration::from_secs(20),
        Duration::from_secs(28),
    );
    b.must_apply("secrets", &short).await;
    b.must_apply("links", &link("to-short", "short")).await;
    b.must_apply("links", &link("to-nothing", "absent")).await;

    let cs = wait_credentials(&b, "to-long", "NotRenewable", &["\"long\"", &long_at]).await;
    assert_eq!(find(&cs, "CredentialsValid").unwrap()["status"], "True");

    let cs = wait_credentials(&b, "to-nothing", "Missing", &["\"absent\""]).await;
    assert_eq!(find(&cs, "CredentialsValid").unwrap()["status"], "False");

    let cs = wait_credentials(
        &b,
        "to-short",
        "Expiring",
        &["\"short\"", &short_at, "will not be renewed"],
    )
    .await;
    assert_eq!(
        cs[0]["type"], "CredentialsValid",
        "first, so the MESSAGE column shows it: {cs:?}"
    );
    assert_eq!(cs[0]["status"], "False");

    let cs = wait_credentials(&b, "to-short", "Expired", &["\"short\"", &short_at]).await;
    let ready = find(&cs, "Ready").expect("Ready");
    assert_eq!(ready["status"], "False", "{cs:?}");
    assert_eq!(ready["reason"], "CredentialsExpired", "{cs:?}");
    assert!(
        ready["message"].as_str().unwrap().contains("expired at"),
        "{ready}"
    );

    // Replacing the Secret turns the Link valid again.
    let (fresh, fresh_at) =
        unrenewable_secret("short", SystemTime::now(), Duration::from_secs(3600));
    b.must_apply("secrets", &fresh).await;
    let cs = wait_credentials(&b, "to-short", "NotRenewable", &[&fresh_at]).await;
    assert_ne!(
        find(&cs, "Ready").unwrap()["reason"],
        "CredentialsExpired",
        "{cs:?}"
    );
    b.stop().await;
}

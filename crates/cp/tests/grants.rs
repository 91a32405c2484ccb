//! Access grants end to end inside one process: the seed's Site,
//! RouterAccess and AccessGrant get their CA, credentials and status; the
//! grant server answers every row of the failure table with its exact
//! status and body, changing nothing but the count; concurrent redemptions
//! are counted exactly; TLS 1.2 is refused; and an AccessToken applied to a
//! second control plane is redeemed once, storing the Secret and Link.

mod support;

use std::sync::Arc;

use meshlink_cp::grants::client::exchange;
use serde_json::{Value, json};
use support::{TestCp, eventually};

fn doc(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec})
}

/// The issue's seed, in canonical form (the CLI translates the Skupper YAML
/// to exactly this).
async fn apply_seed(cp: &TestCp, site: &str, redemptions: i64) {
    cp.must_apply("sites", &doc("Site", site, json!({"edge": false})))
        .await;
    cp.must_apply(
        "routeraccesses",
        &doc(
            "RouterAccess",
            &format!("{site}-peer"),
            json!({"generateTlsCredentials": true, "issuer": "skupper-site-ca",
                   "roles": [{"name": "inter-router", "port": 55671}],
                   "tlsCredentials": "skupper-site-server"}),
        ),
    )
    .await;
    cp.must_apply(
        "accessgrants",
        &doc(
            "AccessGrant",
            &format!("{site}-grant"),
            json!({"redemptionsAllowed": redemptions, "expirationWindow": "1h"}),
        ),
    )
    .await;
}

/// Waits for the grant to be Ready; returns its status.
async fn ready_grant(cp: &TestCp, name: &str) -> Value {
    let path = format!("/api/v1/accessgrants/{name}");
    cp.wait_condition(&path, "Ready", "True").await;
    cp.api("GET", &path, None).await.1["status"].clone()
}

#[derive(Clone)]
struct Client(Arc<rustls::ClientConfig>);

fn client(ca: &str, versions: &[&'static rustls::SupportedProtocolVersion]) -> Client {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    Client(Arc::new(tls))
}

async fn request(
    c: &Client,
    method: &str,
    url: &str,
    body: Vec<u8>,
) -> Result<(u16, String), String> {
    exchange(c.0.clone(), method.parse().unwrap(), url, &[], body)
        .await
        .map_err(|e| e.to_string())
}

async fn post(c: &Client, url: &str, body: impl Into<Vec<u8>>) -> (u16, String) {
    request(c, "POST", url, body.into())
        .await
        .expect("grant server answers")
}

async fn redemptions(cp: &TestCp, name: &str) -> u64 {
    let (_, g) = cp
        .api("GET", &format!("/api/v1/accessgrants/{name}"), None)
        .await;
    g["status"]["redemptions"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_seed_gets_a_site_ca_credentials_and_a_redeemable_grant() {
    let cp = TestCp::start().await;
    apply_seed(&cp, "dmz-a", 10).await;
    let status = ready_grant(&cp, "dmz-a-grant").await;
    let url = status["url"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("https://127.0.0.1:{}/", cp.grant_addr.port())),
        "{url}"
    );
    assert_eq!(status["code"].as_str().unwrap().len(), 24, "{status}");
    assert!(status["ca"].as_str().unwrap().contains("BEGIN CERTIFICATE"));
    assert_eq!(status["redemptions"], 0);
    assert!(status["expirationTime"].is_string());

    // RouterAccess: endpoints with the advertised host; the Secret it names.
    let ra = eventually("RouterAccess endpoints", || async {
        let (_, ra) = cp
            .api("GET", "/api/v1/routeraccesses/dmz-a-peer", None)
            .await;
        ra["status"]["endpoints"].is_array().then_some(ra)
    })
    .await;
    assert_eq!(
        ra["status"]["endpoints"],
        json!([{"name": "inter-router", "host": "127.0.0.1", "port": "55671", "group": "dmz-a-peer"}])
    );
    let (code, secret) = cp
        .api("GET", "/api/v1/secrets/skupper-site-server", None)
        .await;
    assert_eq!(code, 200, "{secret}");
    assert_eq!(secret["spec"]["data"]["tls.key"], "<redacted>");
    let site = cp
        .wait_condition("/api/v1/sites/dmz-a", "Configured", "True")
        .await;
    assert_eq!(site["status"], "True");
    let (_, site) = cp.api("GET", "/api/v1/sites/dmz-a", None).await;
    assert!(site["status"]["siteId"].is_string(), "{site}");
    assert_eq!(site["status"]["endpoints"][0]["port"], "55671", "{site}");
    // No router: the Site is not Ready, and says it is the router.
    let ready = site["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["status"], "False", "{site}");
    assert_eq!(ready["reason"], "RouterNotConnected", "{site}");
    assert!(
        ready["message"].as_str().unwrap().contains("router"),
        "{site}"
    );

    // One redemption: a v1 Secret then one skupper.io/v2alpha1 Link.
    let c = client(status["ca"].as_str().unwrap(), &[&rustls::version::TLS13]);
    let (code, body) = post(&c, &url, status["code"].as_str().unwrap().to_owned()).await;
    assert_eq!(code, 200, "{body}");
    let docs = meshlink_api::parse_documents(&body);
    assert_eq!(docs.len(), 2, "{body}");
    assert_eq!(
        docs[0].format,
        Some(meshlink_api::SourceFormat::KubernetesV1)
    );
    assert_eq!(docs[1].format, Some(meshlink_api::SourceFormat::SkupperV2));
    let link = docs[1]
        .outcome
        .as_ref()
        .expect("the Link applies")
        .to_json();
    assert_eq!(link["spec"]["tlsCredentials"], "dmz-a-grant");
    assert_eq!(link["spec"]["endpoints"][0]["port"], 55671);
    assert!(docs[0].outcome.is_ok(), "the Secret applies: {body}");
    assert_eq!(redemptions(&cp, "dmz-a-grant").await, 1);
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_failure_has_its_status_and_body_and_changes_nothing_but_the_count() {
    let cp = TestCp::start().await;
    apply_seed(&cp, "west", 1).await;
    let status = ready_grant(&cp, "west-grant").await;
    let url = status["url"].as_str().unwrap().to_owned();
    let code = status["code"].as_str().unwrap().to_owned();
    let c = client(status["ca"].as_str().unwrap(), &[&rustls::version::TLS13]);
    let base = url.rsplit_once('/').unwrap().0.to_owned();
    let (_, before) = cp.api("GET", "/api/v1/accessgrants/west-grant", None).await;

    assert_eq!(
        request(&c, "GET", &url, Vec::new()).await.unwrap(),
        (405, "Only POST is supported".into())
    );
    let cases = [
        (
            post(&c, &format!("{base}/no-such-uid"), code.clone()).await,
            (404, "No such claim"),
        ),
        (
            post(&c, &url, "wrong-code").await,
            (403, "Redemption of access token refused"),
        ),
        (
            post(&c, &url, vec![b'x'; 10 * 1024 * 1024]).await,
            (400, "Request body not valid"),
        ),
        (
            post(&c, &url, vec![b'x'; 64 * 1024 + 1]).await,
            (400, "Request body not valid"),
        ),
    ];
    for ((status, body), (want_status, want_body)) in cases {
        assert_eq!((status, body.as_str()), (want_status, want_body));
    }
    let (_, after) = cp.api("GET", "/api/v1/accessgrants/west-grant", None).await;
    assert_eq!(after, before, "failures change nothing");

    // TLS 1.2 only is refused at the handshake.
    let old = client(status["ca"].as_str().unwrap(), &[&rustls::version::TLS12]);
    assert!(
        request(&old, "POST", &url, code.clone().into_bytes())
            .await
            .is_err()
    );
    // Garbage on the port does not hurt the server.
    let mut raw = tokio::net::TcpStream::connect(cp.grant_addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut raw, b"GET / HTTP/1.1\r\n\r\n\x00\xff garbage")
        .await
        .unwrap();
    drop(raw);

    assert_eq!(post(&c, &url, code.clone()).await.0, 200);
    assert_eq!(
        post(&c, &url, code.clone()).await,
        (404, "No such access granted".into())
    );
    assert_eq!(redemptions(&cp, "west-grant").await, 1);
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_redemptions_of_a_ten_use_grant_succeed_exactly_ten_times() {
    let cp = TestCp::start().await;
    apply_seed(&cp, "east", 10).await;
    let status = ready_grant(&cp, "east-grant").await;
    let url = status["url"].as_str().unwrap().to_owned();
    let code = status["code"].as_str().unwrap().to_owned();
    let c = client(status["ca"].as_str().unwrap(), &[&rustls::version::TLS13]);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (c, url, code) = (c.clone(), url.clone(), code.clone());
        set.spawn(async move { post(&c, &url, code).await });
    }
    let mut ok = 0;
    let mut used_up = 0;
    while let Some(r) = set.join_next().await {
        match r.unwrap() {
            (200, _) => ok += 1,
            (404, b) if b == "No such access granted" => used_up += 1,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!((ok, used_up), (10, 10));
    assert_eq!(redemptions(&cp, "east-grant").await, 10);
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_applied_to_another_site_is_redeemed_once_with_its_link_cost() {
    let a = TestCp::start().await;
    let b = TestCp::start().await;
    apply_seed(&a, "dmz-a", 10).await;
    b.must_apply("sites", &doc("Site", "dmz-b", json!({"edge": false})))
        .await;
    let status = ready_grant(&a, "dmz-a-grant").await;
    let token = doc(
        "AccessToken",
        "token-dmz-a",
        json!({"url": status["url"], "code": status["code"], "ca": status["ca"], "linkCost": 3}),
    );
    b.must_apply("accesstokens", &token).await;
    b.wait_condition("/api/v1/accesstokens/token-dmz-a", "Redeemed", "True")
        .await;
    let (_, t) = b.api("GET", "/api/v1/accesstokens/token-dmz-a", None).await;
    assert_eq!(t["status"]["redeemed"], true, "{t}");
    let (code, secret) = b.api("GET", "/api/v1/secrets/token-dmz-a", None).await;
    assert_eq!(code, 200, "{secret}");
    let (code, link) = b.api("GET", "/api/v1/links/token-dmz-a", None).await;
    assert_eq!(code, 200, "{link}");
    assert_eq!(link["spec"]["cost"], 3);
    assert_eq!(link["spec"]["endpoints"][0]["host"], "127.0.0.1");
    // Re-applying is unchanged and redeems nothing again.
    let (_, again) = b.apply("accesstokens", &token).await;
    assert_eq!(again["result"], "unchanged");
    assert_eq!(redemptions(&a, "dmz-a-grant").await, 1);

    // A refused token carries the server's status and body.
    let mut bad = token.clone();
    bad["metadata"]["name"] = json!("bad-token");
    bad["spec"]["code"] = json!("nope");
    b.must_apply("accesstokens", &bad).await;
    let c = b
        .wait_condition("/api/v1/accesstokens/bad-token", "Redeemed", "False")
        .await;
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("403: Redemption of access token refused"),
        "{c}"
    );
    assert_eq!(redemptions(&a, "dmz-a-grant").await, 1);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_site_refuses_to_issue_grants_and_says_why() {
    let cp = TestCp::start().await;
    cp.must_apply("sites", &doc("Site", "edge-1", json!({"edge": true})))
        .await;
    cp.must_apply("accessgrants", &doc("AccessGrant", "g", json!({})))
        .await;
    let c = cp
        .wait_condition("/api/v1/accessgrants/g", "Ready", "False")
        .await;
    assert!(c["message"].as_str().unwrap().contains("edge site"), "{c}");
    cp.stop().await;
}

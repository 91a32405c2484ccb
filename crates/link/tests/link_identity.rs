//! A peer router's claimed id is bound to its certificate: when the site
//! CA names the router in a link certificate (`urn:meshlink:router:<id>`),
//! the id in the peer's hello must be that one, on both sides of the link;
//! any other claim is refused and counted. A router that requires router
//! identity refuses a certificate naming no router in the handshake, and
//! the dialer's Link says why and how to fix it. Also: each credential's
//! notAfter is published as a metric.

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use meshlink_link::metrics::{CredentialLabels, IdentityLabels};
use meshlink_link::{CredentialPem, LinkCredential, LinkMetrics, LinkState, Router, RouterOptions};
use support::*;

const DAY: Duration = Duration::from_secs(86_400);

fn server_for(site: &Site, router: Option<&str>) -> CredentialPem {
    let (cert, key) = site
        .ca
        .issue_router_server_cert(&["127.0.0.1".into()], router, DAY, SystemTime::now())
        .unwrap();
    CredentialPem {
        tls_crt: cert.cert_pem + &cert.chain_pem.concat(),
        tls_key: key,
        ca_crt: site.ca.cert_pem().to_owned(),
    }
}

fn client_for(site: &Site, router: Option<&str>) -> CredentialPem {
    let (cert, key) = site
        .ca
        .issue_router_client_cert("site-a", router, DAY, SystemTime::now())
        .unwrap();
    CredentialPem {
        tls_crt: cert.cert_pem + &cert.chain_pem.concat(),
        tls_key: key,
        ca_crt: site.ca.cert_pem().to_owned(),
    }
}

fn router_with(id: &str) -> (Router, Arc<LinkMetrics>) {
    let metrics = Arc::new(LinkMetrics::default());
    let r = Router::start(
        RouterOptions {
            router_id: id.into(),
            site: format!("site-{id}"),
            edge: false,
        },
        metrics.clone(),
    )
    .unwrap();
    (r, metrics)
}

fn identity(m: &LinkMetrics, result: &'static str) -> u64 {
    m.peer_identity
        .get_or_create(&IdentityLabels { result })
        .get()
}

/// Polls `f` until it holds; panics after the support deadline.
async fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// B accepts on a role presenting `server` (whose `ca.crt` verifies
/// clients); A dials it with `client`.
async fn pair(server: CredentialPem, client: CredentialPem) -> [(Router, Arc<LinkMetrics>); 2] {
    let (b, bm) = router_with("b");
    let mut b_cfg = acceptor_config(&Site::new("unused"), 0);
    b_cfg
        .credentials
        .insert("skupper-site-server".into(), server);
    assert!(b.apply(&b_cfg).is_empty());
    let addr = role_addr(&b, "inter-router").await;
    let (a, am) = router_with("a");
    let mut a_cfg = meshlink_link::RouterConfig::default();
    add_link(&mut a_cfg, "to-b", addr, client);
    assert!(a.apply(&a_cfg).is_empty());
    [(a, am), (b, bm)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_naming_the_routers_that_claim_them_link_up() {
    let site = Site::new("b");
    let server = server_for(&site, Some("b"));
    let client = client_for(&site, Some("a"));
    let expiry = LinkCredential::from_pem(&client).unwrap().not_after_unix();
    let [(a, am), (b, bm)] = pair(server, client).await;
    wait_status(&a, "to-b up", |s| {
        s.links
            .get("to-b")
            .is_some_and(|l| l.state == LinkState::Up)
    })
    .await;
    wait_status(&b, "the accepted link up", |s| {
        s.links
            .values()
            .any(|l| l.state == LinkState::Up && l.peer.as_deref() == Some("a"))
    })
    .await;
    until("both sides count a bound peer", || {
        identity(&am, "bound") >= 1 && identity(&bm, "bound") >= 1
    })
    .await;
    assert_eq!(identity(&am, "refused") + identity(&bm, "refused"), 0);
    let published = am
        .credential_expiry
        .get_or_create(&CredentialLabels {
            credential: "to-b-secret".into(),
        })
        .get();
    assert_eq!(published, expiry, "the client credential's notAfter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_for_another_router_is_refused_by_the_acceptor() {
    let site = Site::new("b");
    // A (router id "a") dials with a certificate issued to router "x".
    let [(a, _am), (b, bm)] =
        pair(server_for(&site, Some("b")), client_for(&site, Some("x"))).await;
    until("the acceptor refuses the claim", || {
        identity(&bm, "refused") >= 1
    })
    .await;
    let s = b.status().borrow().clone();
    assert!(
        !s.links.values().any(|l| l.state == LinkState::Up),
        "no accepted link may be up: {s:#?}"
    );
    let a_link = a.status().borrow().links.get("to-b").cloned().unwrap();
    assert_ne!(a_link.state, LinkState::Up, "{a_link:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_for_another_router_is_refused_by_the_dialer() {
    let site = Site::new("b");
    // B (router id "b") presents a certificate issued to router "z".
    let [(a, am), _b] = pair(server_for(&site, Some("z")), client_for(&site, Some("a"))).await;
    let s = wait_status(&a, "to-b refused with the reason", |s| {
        s.links.get("to-b").is_some_and(|l| {
            l.last_error
                .as_deref()
                .is_some_and(|e| e.contains("claims router id \"b\"") && e.contains("\"z\""))
        })
    })
    .await;
    assert_ne!(s.links["to-b"].state, LinkState::Up);
    assert!(identity(&am, "refused") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_naming_no_router_still_link_and_count_as_unbound() {
    let site = Site::new("b");
    let [(a, am), _b] = pair(server_for(&site, None), client_for(&site, None)).await;
    wait_status(&a, "to-b up", |s| {
        s.links
            .get("to-b")
            .is_some_and(|l| l.state == LinkState::Up)
    })
    .await;
    until("an unbound peer counted", || identity(&am, "unbound") >= 1).await;
}

/// Like [`pair`], with the acceptor requiring router identity.
async fn strict_pair(
    server: CredentialPem,
    client: CredentialPem,
) -> ([(Router, Arc<LinkMetrics>); 2], meshlink_link::RouterConfig) {
    let (b, bm) = router_with("b");
    let mut b_cfg = acceptor_config(&Site::new("unused"), 0);
    b_cfg
        .credentials
        .insert("skupper-site-server".into(), server);
    b_cfg.require_router_identity = true;
    assert!(b.apply(&b_cfg).is_empty());
    let addr = role_addr(&b, "inter-router").await;
    let (a, am) = router_with("a");
    let mut a_cfg = meshlink_link::RouterConfig::default();
    add_link(&mut a_cfg, "to-b", addr, client);
    assert!(a.apply(&a_cfg).is_empty());
    ([(a, am), (b, bm)], b_cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_requiring_identity_refuses_a_certificate_naming_no_router_with_the_reason() {
    let site = Site::new("b");
    let ([(a, _am), (b, bm)], mut b_cfg) =
        strict_pair(server_for(&site, Some("b")), client_for(&site, None)).await;
    let s = wait_status(&a, "to-b refused with the reason and the fix", |s| {
        s.links.get("to-b").is_some_and(|l| {
            l.last_error.as_deref().is_some_and(|e| {
                e.contains("requires link certificates that name a router")
                    && e.contains("meshlink.dev/require-router-identity")
            })
        })
    })
    .await;
    assert_ne!(s.links["to-b"].state, LinkState::Up, "{s:#?}");
    until("the acceptor counts the refusal", || {
        identity(&bm, "refused") >= 1
    })
    .await;
    assert_eq!(identity(&bm, "unbound"), 0, "never accepted as unbound");
    assert!(
        !b.status()
            .borrow()
            .links
            .values()
            .any(|l| l.state == LinkState::Up)
    );
    // Opt-in: without the requirement the same certificate links.
    b_cfg.require_router_identity = false;
    assert!(b.apply(&b_cfg).is_empty());
    wait_status(&a, "to-b up once the requirement is off", |s| {
        s.links
            .get("to-b")
            .is_some_and(|l| l.state == LinkState::Up)
    })
    .await;
    until("counted as unbound", || identity(&bm, "unbound") >= 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_requiring_identity_accepts_a_certificate_naming_the_router() {
    let site = Site::new("b");
    let ([(a, _am), (_b, bm)], _) =
        strict_pair(server_for(&site, Some("b")), client_for(&site, Some("a"))).await;
    wait_status(&a, "to-b up", |s| {
        s.links
            .get("to-b")
            .is_some_and(|l| l.state == LinkState::Up)
    })
    .await;
    until("counted as bound", || identity(&bm, "bound") >= 1).await;
    assert_eq!(identity(&bm, "refused"), 0);
}

//! Strict peer identity with the real binaries: site A labels its Site
//! `meshlink.dev/require-router-identity: "true"`. A credential from
//! `meshlink link generate` (it names no router) applied on site B does not
//! link: A's router refuses it in the handshake and counts it, and B's
//! `meshlink get links` says why and how to fix it. A token redeemed by B's
//! control plane (which sends B's site id, so the certificate names B's
//! router) links. The generated Secret also names A's grant server, so B
//! could renew it, and B's Link shows its expiry condition.

use std::time::Duration;

use meshlink_e2e::site::Site;

const DEADLINE: Duration = Duration::from_secs(60);
const REFUSED: &str = "meshlink_link_peer_identity_total{result=\"refused\"}";

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn a_site_requiring_router_identity_refuses_generated_credentials_and_says_why() {
    let a = Site::start("strict-a", 2);
    let b = Site::start("strict-b", 3);
    a.apply(
        "apiVersion: skupper.io/v2alpha1\nkind: Site\nmetadata: {name: strict-a, labels: {meshlink.dev/require-router-identity: \"true\"}}\nspec: {linkAccess: default}\n",
    );
    // A bad value is refused with the label's path.
    let bad = a.cp.cli_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: skupper.io/v2alpha1\nkind: Site\nmetadata: {name: strict-a, labels: {meshlink.dev/require-router-identity: \"yes\"}}\nspec: {linkAccess: default}\n"),
    );
    assert_ne!(bad.code, 0, "{bad:?}");
    assert!(
        bad.stderr
            .contains("metadata.labels[\"meshlink.dev/require-router-identity\"]"),
        "{bad:?}"
    );

    let generated =
        a.cp.cli(&["link", "generate", "--name", "generated"])
            .success();
    assert!(
        generated.stdout.contains("renew-url"),
        "{}",
        generated.stdout
    );
    b.cp.cli_stdin(&["apply", "-f", "-"], Some(&generated.stdout))
        .success();
    let deadline = std::time::Instant::now() + DEADLINE;
    let shown = loop {
        let out = b.cp.cli(&["get", "links"]).success().stdout;
        if out.contains("requires link certificates that name a router") {
            break out;
        }
        if std::time::Instant::now() > deadline {
            let (_, link) = b.cp.api("GET", "/api/v1/links/generated", None);
            let (_, dump) = b.router().admin_get("/config_dump");
            panic!(
                "B's get links never said why:\n{out}\nLink: {link}\nB's router: {dump}\nA's Site: {}\nA's router log:\n{}",
                a.site()["metadata"],
                a.router().logs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // One word for a link that carries nothing: Down (as `network status`).
    assert!(shown.contains("generated   Down"), "{shown}");
    assert!(
        shown.contains("meshlink.dev/require-router-identity"),
        "{shown}"
    );
    let (_, metrics) = a.router().admin_get("/metrics");
    assert!(metric(&metrics, REFUSED) >= 1.0, "{metrics}");
    let (_, link) = b.cp.api("GET", "/api/v1/links/generated", None);
    let creds = link["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "CredentialsValid").cloned())
        .unwrap_or_default();
    assert_eq!(creds["reason"], "Valid", "renewable at A: {link}");

    // A credential redeemed by B's control plane names B's router: it links.
    let name = b.link_to(&a, None);
    b.wait_link_operational(&name, DEADLINE);
}
